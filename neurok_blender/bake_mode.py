# SPDX-License-Identifier: GPL-3.0-or-later
"""What "Automatic" bakes as: a rig whenever the result carries one (the rig space's dynamics,
or a model with bones), except for a mesh with cloth (baked as cloth is baked), else shape
keys, or a point cache for a big mesh. The model is known
from its checkpoint's ``config.json`` (read here, in Blender, without the engine: no torch)."""

from __future__ import annotations

import json
from pathlib import Path

BIG_MESH = 50_000  # vertices above which a point cache is faster and smaller than shape keys
_BUNDLED = Path(__file__).resolve().parent.parent / "neurok_core" / "weights" / "default"
_seen: dict[tuple[str, float], bool] = {}
_cloth_seen: dict[tuple, tuple] = {}  # (mesh, counts) -> (its shape's sums, whether cloth)


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


def has_cloth_mesh(mesh) -> bool:
    """Whether ``mesh`` (a ``bpy.types.Mesh``) has cloth by the engine's own rule
    (``neurok_core.sheets.has_cloth``: a loose part that is an open, nearly flat sheet: a
    cloth, or a flag modelled on its pole), on its
    vertices and loop triangles; remembered per mesh and shape (the panel asks at every
    redraw, the rule costs about 0.2 s at 100k vertices)."""
    import numpy as np

    from .core import has_cloth

    co = np.empty(3 * len(mesh.vertices))
    mesh.vertices.foreach_get("co", co)
    key = (mesh.as_pointer(), len(mesh.vertices), len(mesh.polygons), len(mesh.loops))
    shape = (float(co.sum()), float(np.abs(co).sum()))
    seen = _cloth_seen.get(key)
    if seen is not None and seen[0] == shape:
        return seen[1]
    mesh.calc_loop_triangles()
    tris = np.empty(3 * len(mesh.loop_triangles), dtype=np.int64)
    mesh.loop_triangles.foreach_get("vertices", tris)
    answer = has_cloth(co.reshape(-1, 3), tris.reshape(-1, 3))
    if len(_cloth_seen) > 64:
        _cloth_seen.clear()
    _cloth_seen[key] = (shape, answer)
    return answer


def resolved_bake_mode(obj, checkpoint: str = "") -> str:
    """The object's bake mode with "AUTO" resolved: "RIG", "SHAPE_KEYS" or "POINT_CACHE". A rig
    when the result has one (the rig space always does; the latent space with a model with
    bones), and only where one can be made (a bone cannot shear: unequal axis scales take the
    other way); not for a mesh with cloth in the rig space (:func:`has_cloth_mesh`), whose cloth's
    bones are only fitted to its motion."""
    mode = obj.neurok.output.bake_mode
    if mode != "AUTO":
        return mode
    rig_space = obj.neurok.physics.dynamics == "rig"
    if (rig_space and not has_cloth_mesh(obj.data)) or (
        not rig_space and model_has_bones(checkpoint)
    ):
        import numpy as np

        from .rig_bake import RigError, check_rig_transform

        try:
            check_rig_transform(obj, np.array(obj.matrix_world))
            return "RIG"
        except RigError:
            pass
    return "POINT_CACHE" if len(obj.data.vertices) > BIG_MESH else "SHAPE_KEYS"
