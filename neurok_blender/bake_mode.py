# SPDX-License-Identifier: GPL-3.0-or-later
"""What "Automatic" bakes as: a rig whenever the result carries one (the rig space's dynamics,
or a model with bones), else shape keys, or a point cache for a big mesh. The model is known
from its checkpoint's ``config.json`` (read here, in Blender, without the engine: no torch)."""

from __future__ import annotations

import json
from pathlib import Path

BIG_MESH = 50_000  # vertices above which a point cache is faster and smaller than shape keys
_BUNDLED = Path(__file__).resolve().parent.parent / "neurok_core" / "weights" / "default"
_seen: dict[tuple[str, float], bool] = {}


def model_has_bones(checkpoint: str = "") -> bool:
    """Whether the checkpoint folder ``checkpoint`` ('' for the bundled model) holds a model
    with bones (deformation "skinned"). False when its config cannot be read: the engine
    reports a broken checkpoint when it loads it."""
    path = (Path(checkpoint) if checkpoint else _BUNDLED) / "config.json"
    try:
        key = (str(path), path.stat().st_mtime)
    except OSError:
        return False
    if key not in _seen:
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
            _seen[key] = config.get("model", {}).get("deformation") == "skinned"
        except (OSError, ValueError, AttributeError):
            _seen[key] = False
    return _seen[key]


def resolved_bake_mode(obj, checkpoint: str = "") -> str:
    """The object's bake mode with "AUTO" resolved: "RIG", "SHAPE_KEYS" or "POINT_CACHE". A rig
    when the result has one (the rig space always does; the latent space with a model with
    bones), and only where one can be made (a bone cannot shear: unequal axis scales take the
    other way)."""
    mode = obj.neurok.output.bake_mode
    if mode != "AUTO":
        return mode
    if obj.neurok.physics.dynamics == "rig" or model_has_bones(checkpoint):
        import numpy as np

        from .rig_bake import RigError, check_rig_transform

        try:
            check_rig_transform(obj, np.array(obj.matrix_world))
            return "RIG"
        except RigError:
            pass
    return "POINT_CACHE" if len(obj.data.vertices) > BIG_MESH else "SHAPE_KEYS"
