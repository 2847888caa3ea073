# SPDX-License-Identifier: GPL-3.0-or-later
"""What "Automatic" bakes as: a rig whenever the result carries one (the rig space's dynamics,
or a model with bones), except for a cloth (baked as cloth is baked), else shape keys, or a
point cache for a big mesh. The model is known
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


def is_cloth_mesh(mesh) -> bool:
    """Whether every loose part of ``mesh`` (a ``bpy.types.Mesh``) is an open sheet: an edge of
    one of its faces belongs to that face alone (the engine's rule, which simulates such an
    object as a cloth at its own resolution; numpy only, no engine)."""
    import numpy as np

    n_vertices, n_edges = len(mesh.vertices), len(mesh.edges)
    if not len(mesh.polygons) or not n_edges:
        return False
    loop_edges = np.empty(len(mesh.loops), dtype=np.int64)
    mesh.loops.foreach_get("edge_index", loop_edges)
    ends = np.empty(2 * n_edges, dtype=np.int64)
    mesh.edges.foreach_get("vertices", ends)
    ends = ends.reshape(-1, 2)
    counts = np.bincount(loop_edges, minlength=n_edges)  # faces of each edge
    face_edges = ends[counts > 0]
    a, b = face_edges[:, 0], face_edges[:, 1]
    label = np.arange(n_vertices)
    for _ in range(n_vertices):  # connected components: min-label propagation, pointer jumps
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        new = new[new]
        if np.array_equal(new, label):
            break
        label = new
    in_face = np.zeros(n_vertices, dtype=bool)
    in_face[face_edges.ravel()] = True
    if not in_face.all():  # a loose vertex is no cloth's
        return False
    open_parts = np.unique(label[ends[counts == 1].ravel()])
    return bool(np.isin(np.unique(label), open_parts).all())


def resolved_bake_mode(obj, checkpoint: str = "") -> str:
    """The object's bake mode with "AUTO" resolved: "RIG", "SHAPE_KEYS" or "POINT_CACHE". A rig
    when the result has one (the rig space always does; the latent space with a model with
    bones), and only where one can be made (a bone cannot shear: unequal axis scales take the
    other way); not for a cloth in the rig space (:func:`is_cloth_mesh`), whose bones are only
    fitted to its motion."""
    mode = obj.neurok.output.bake_mode
    if mode != "AUTO":
        return mode
    rig_space = obj.neurok.physics.dynamics == "rig"
    if (rig_space and not is_cloth_mesh(obj.data)) or (
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
