"""Open the demo's .blend in a Blender without the NeuROK extension and print what a person who
opens it would see (one ``RESULT {json}`` line): the animation of both examples, their bakes and
their conditions.

    python tests/blender/check_demo_blend.py out/demo/neurok_demo.blend
"""

from __future__ import annotations

import json
import sys

import bpy
import numpy as np

KINDS = {1: "FORCE", 2: "DRAG", 3: "VELOCITY"}  # the numbers of NeuROKConditionSettings.kind


def kind(empty) -> str:
    """Without the add-on its settings are plain stored properties (enums as their numbers)."""
    stored = empty.bl_system_properties_get() or {}
    if "neurok" not in stored:
        return "?"
    return KINDS.get(stored["neurok"]["condition"].get("kind"), "?")


def world(obj, frame: int | None) -> np.ndarray:
    """World positions (N, 3): evaluated at ``frame``, or the mesh itself when None."""
    if frame is None:
        mesh = obj.data
    else:
        bpy.context.scene.frame_set(frame)
        ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        mesh = ev.to_mesh()
    co = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", co)
    if frame is not None:
        ev.to_mesh_clear()
    m = np.array(obj.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def main() -> None:
    bpy.ops.wm.open_mainfile(filepath=sys.argv[1])
    scene = bpy.context.scene
    out = {"frames": [scene.frame_start, scene.frame_end], "camera": scene.camera is not None}
    for name in ("Laptop", "Flag"):
        obj = bpy.data.objects[name]
        rest = world(obj, None)
        keys = obj.data.shape_keys
        out[name] = {
            "motion": [
                float(np.abs(world(obj, f) - rest).max())
                for f in range(scene.frame_start, scene.frame_end + 1)
            ],
            "shape_keys": len(keys.key_blocks) if keys else 0,
            "modifiers": [
                (m.type, m.filepath if m.type == "MESH_CACHE" else "") for m in obj.modifiers
            ],
            "conditions": sorted(kind(c) for c in obj.children if c.type == "EMPTY"),
        }
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
