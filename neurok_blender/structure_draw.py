# SPDX-License-Identifier: GPL-3.0-or-later
"""Drawing the active mesh's structure in the 3D viewport, as Blender draws rigid body
constraints: each hinge's axis as a line through its point (orange), each slider's direction
(green), the other joints' points (fixed white, ball blue, contact grey). A draw handler only:
it reads ``Object.neurok.structure`` and writes nothing."""

from __future__ import annotations

import bpy
from mathutils import Vector

from .properties.structure import AXIS_TYPES
from .structure_data import has_structure

COLORS = {
    "hinge": (1.0, 0.55, 0.1, 1.0),
    "slider": (0.3, 0.9, 0.3, 1.0),
    "fixed": (1.0, 1.0, 1.0, 1.0),
    "ball": (0.3, 0.6, 1.0, 1.0),
    "contact": (0.6, 0.6, 0.6, 1.0),
}

_handle = None


def joint_segments(obj) -> list[tuple[str, tuple, tuple]]:
    """(type, start, end) world-space segments of ``obj``'s joints: an axis half the object's
    size long either side of its point; a point joint a zero-length segment."""
    structure = obj.neurok.structure
    if not has_structure(structure):
        return []
    matrix = obj.matrix_world
    size = max(obj.dimensions) or 1.0
    out = []
    for joint in structure.joints:
        point = matrix @ Vector(joint.point)
        if joint.type in AXIS_TYPES:
            axis = (matrix.to_3x3() @ Vector(joint.axis)).normalized() * 0.5 * size
            out.append((joint.type, tuple(point - axis), tuple(point + axis)))
        else:
            out.append((joint.type, tuple(point), tuple(point)))
    return out


def _draw() -> None:
    obj = bpy.context.active_object
    if obj is None or obj.type != "MESH" or not obj.neurok.structure.show:
        return
    segments = joint_segments(obj)
    if not segments:
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    shader = gpu.shader.from_builtin("UNIFORM_COLOR")
    gpu.state.depth_test_set("NONE")  # joints sit inside the mesh: always seen
    gpu.state.line_width_set(2.0)
    gpu.state.point_size_set(8.0)
    for kind, start, end in segments:
        shader.uniform_float("color", COLORS.get(kind, COLORS["contact"]))
        if start == end:
            batch_for_shader(shader, "POINTS", {"pos": [start]}).draw(shader)
        else:
            batch_for_shader(shader, "LINES", {"pos": [start, end]}).draw(shader)
            batch_for_shader(shader, "POINTS", {"pos": [start, end]}).draw(shader)
    gpu.state.line_width_set(1.0)
    gpu.state.point_size_set(1.0)


def register() -> None:
    global _handle
    if _handle is None:
        _handle = bpy.types.SpaceView3D.draw_handler_add(_draw, (), "WINDOW", "POST_VIEW")


def unregister() -> None:
    global _handle
    if _handle is not None:
        bpy.types.SpaceView3D.draw_handler_remove(_handle, "WINDOW")
        _handle = None
