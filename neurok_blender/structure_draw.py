# SPDX-License-Identifier: GPL-3.0-or-later
"""Drawing the active mesh's structure in the 3D viewport, as Blender draws rigid body
constraints: its vertices as points coloured by part, each hinge's axis as a line through its
point (orange), each slider's direction (green), the other joints' points (fixed white, ball
blue, contact grey). A draw handler only: it reads ``Object.neurok.structure`` and writes
nothing."""

from __future__ import annotations

import bpy
from mathutils import Vector

from .properties.structure import AXIS_TYPES
from .structure_data import has_structure
from .viewport import ViewportDrawing

COLORS = {
    "hinge": (1.0, 0.55, 0.1, 1.0),
    "slider": (0.3, 0.9, 0.3, 1.0),
    "fixed": (1.0, 1.0, 1.0, 1.0),
    "ball": (0.3, 0.6, 1.0, 1.0),
    "contact": (0.6, 0.6, 0.6, 1.0),
}

# the parts' colours, in turn
PALETTE = (
    (0.90, 0.30, 0.30),
    (0.30, 0.70, 0.95),
    (0.95, 0.80, 0.25),
    (0.45, 0.85, 0.45),
    (0.75, 0.45, 0.90),
    (0.95, 0.55, 0.20),
    (0.35, 0.90, 0.85),
    (0.95, 0.45, 0.70),
)
POINT_SIZE = 4.0

_parts_batch: tuple | None = None  # (key, batch) of the vertices coloured by part


def part_colors(labels) -> list[tuple[float, float, float, float]]:
    """An RGBA colour per vertex of the part ``labels`` (N,)."""
    return [(*PALETTE[int(p) % len(PALETTE)], 1.0) for p in labels]


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


def _draw_parts(obj) -> None:
    """The object's vertices as points coloured by part (the batch kept while the mesh and
    the structure stay), in its own frame."""
    global _parts_batch
    import gpu
    import numpy as np
    from gpu_extras.batch import batch_for_shader

    from .structure_data import vertex_labels

    structure = obj.neurok.structure
    mesh = obj.data
    if structure.vertex_count != len(mesh.vertices):
        return
    key = (obj.session_uid, mesh.session_uid, len(mesh.vertices), hash(structure.vertex_parts))
    shader = gpu.shader.from_builtin("POINT_FLAT_COLOR")
    if _parts_batch is None or _parts_batch[0] != key:
        co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertices.foreach_get("co", co)
        colors = part_colors(vertex_labels(structure))
        batch = batch_for_shader(shader, "POINTS", {"pos": co.reshape(-1, 3), "color": colors})
        _parts_batch = (key, batch)
    gpu.state.depth_test_set("LESS_EQUAL")
    shader.uniform_float("size", POINT_SIZE)
    with gpu.matrix.push_pop():
        gpu.matrix.multiply_matrix(obj.matrix_world)
        _parts_batch[1].draw(shader)


def _draw() -> None:
    obj = bpy.context.active_object
    if obj is None or obj.type != "MESH" or not obj.neurok.structure.show:
        return
    segments = joint_segments(obj)
    if not segments:
        return
    import gpu
    from gpu_extras.batch import batch_for_shader

    _draw_parts(obj)
    lines = gpu.shader.from_builtin("UNIFORM_COLOR")
    points = gpu.shader.from_builtin("POINT_UNIFORM_COLOR")
    gpu.state.depth_test_set("NONE")  # joints sit inside the mesh: always seen
    gpu.state.line_width_set(2.0)
    for kind, start, end in segments:
        color = COLORS.get(kind, COLORS["contact"])
        if start != end:
            lines.uniform_float("color", color)
            batch_for_shader(lines, "LINES", {"pos": [start, end]}).draw(lines)
        points.uniform_float("color", color)
        points.uniform_float("size", 10.0)
        ends = [start] if start == end else [start, end]
        batch_for_shader(points, "POINTS", {"pos": ends}).draw(points)
    gpu.state.line_width_set(1.0)
    gpu.state.depth_test_set("NONE")


_drawing = ViewportDrawing(_draw)


def register() -> None:
    _drawing.add()


def unregister() -> None:
    global _parts_batch
    _drawing.remove()
    _parts_batch = None
