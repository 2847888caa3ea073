# SPDX-License-Identifier: GPL-3.0-or-later
"""Add, remove and select conditions: force arrows, drag handles and velocity arrows.

A new condition sits on the object's surface: at the active vertex in Edit Mode, else at the
point of the (original, unmodified) mesh nearest to the 3D cursor. It is an Empty parented to the
object (so it follows the object), oriented with its Z axis along the outward surface normal.
"""

from __future__ import annotations

import bmesh
import bpy
import numpy as np
from bpy.props import StringProperty
from mathutils import Matrix, Vector
from mathutils.bvhtree import BVHTree

from ..scene_query import KIND_LABELS, frame_range, is_condition, scene_fps, simulated_object

DISPLAY = {"FORCE": "SINGLE_ARROW", "DRAG": "SPHERE", "VELOCITY": "SINGLE_ARROW"}


class PlacementError(Exception):
    """No surface point to attach a condition to; the message says what to do."""


def surface_point(context, obj) -> tuple[Vector, Vector, int]:
    """(local point, local normal, vertex index or -1) where a new condition attaches."""
    if obj.mode == "EDIT":
        bm = bmesh.from_edit_mesh(obj.data)
        active = bm.select_history.active
        if not isinstance(active, bmesh.types.BMVert):
            selected = [v for v in bm.verts if v.select]
            if len(selected) != 1:
                raise PlacementError("select one vertex (or make one active) in Edit Mode")
            active = selected[0]
        return active.co.copy(), active.normal.copy(), active.index
    mesh = obj.data
    if len(mesh.polygons) == 0:
        raise PlacementError(f"'{obj.name}' has no faces to attach to")
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
    mesh.vertices.foreach_get("co", co)
    tree = BVHTree.FromPolygons(
        co.reshape(-1, 3).tolist(), [tuple(p.vertices) for p in mesh.polygons]
    )
    cursor = obj.matrix_world.inverted_safe() @ context.scene.cursor.location
    location, normal, _index, _dist = tree.find_nearest(cursor)
    if location is None:
        raise PlacementError("no surface point found near the 3D cursor")
    return location, normal, -1


def _empty_matrix(obj, local_point: Vector, local_normal: Vector) -> Matrix:
    """World matrix of a condition Empty: at the point, Z along the outward normal."""
    world = obj.matrix_world
    point = world @ local_point
    normal = (world.inverted_safe().transposed().to_3x3() @ local_normal).normalized()
    if normal.length < 0.5:
        normal = Vector((0.0, 0.0, 1.0))
    rotation = normal.to_track_quat("Z", "Y").to_matrix().to_4x4()
    return Matrix.Translation(point) @ rotation


def add_condition(context, obj, kind: str) -> bpy.types.Object:
    """Create the Empty of a ``kind`` condition on ``obj``'s surface; raises PlacementError."""
    point, normal, vertex = surface_point(context, obj)
    empty = bpy.data.objects.new(f"NeuROK {KIND_LABELS[kind]}", None)
    empty.empty_display_type = DISPLAY[kind]
    size = max(obj.dimensions) if max(obj.dimensions) > 0 else 1.0
    empty.empty_display_size = size * (0.08 if kind == "DRAG" else 0.25)
    collection = obj.users_collection[0] if obj.users_collection else context.collection
    collection.objects.link(empty)
    empty.parent = obj
    empty.matrix_parent_inverse = obj.matrix_world.inverted_safe()
    empty.matrix_basis = _empty_matrix(obj, point, normal)
    cond = empty.neurok.condition
    cond.kind = kind
    cond.anchor_vertex = vertex
    cond.anchor_point = point
    first, last = frame_range(context.scene)
    cond.frame_start, cond.frame_end = first, last
    current = context.scene.frame_current
    default = current if first < current <= last else first + round(scene_fps(context.scene))
    cond.frame = min(max(default, first + 1), last)
    if kind == "DRAG":
        empty.show_in_front = True
    return empty


def _make_active(context, empty) -> None:
    for other in context.selected_objects:
        other.select_set(False)
    empty.select_set(True)
    context.view_layer.objects.active = empty


class _AddCondition:
    kind = ""

    @classmethod
    def poll(cls, context):
        obj = simulated_object(context)
        if obj is None or obj.type != "MESH":
            cls.poll_message_set("select a mesh object")
            return False
        return True

    def execute(self, context):
        obj = simulated_object(context)
        if obj is None or obj.type != "MESH":
            self.report({"ERROR"}, "select a mesh object to add a condition to")
            return {"CANCELLED"}
        try:
            empty = add_condition(context, obj, self.kind)
        except PlacementError as exc:
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        if obj.mode != "EDIT":
            _make_active(context, empty)
        where = empty.neurok.condition.anchor_vertex
        at = f"vertex {where}" if where >= 0 else "the surface point nearest the 3D cursor"
        self.report({"INFO"}, f"Added {empty.name} on '{obj.name}' at {at}")
        return {"FINISHED"}


class NEUROK_OT_add_force(_AddCondition, bpy.types.Operator):
    """Add a force arrow at the active vertex (Edit Mode) or the surface point nearest the 3D
    cursor; rotate it to aim, drag its gizmo to set the strength"""

    bl_idname = "neurok.add_force"
    bl_label = "Add Force"
    bl_options = {"REGISTER", "UNDO"}
    kind = "FORCE"


class NEUROK_OT_add_drag(_AddCondition, bpy.types.Operator):
    """Add a drag handle at the active vertex or the surface point nearest the 3D cursor; move
    the handle (G) to where that point should go, and set the frame it gets there"""

    bl_idname = "neurok.add_drag"
    bl_label = "Add Drag Handle"
    bl_options = {"REGISTER", "UNDO"}
    kind = "DRAG"


class NEUROK_OT_add_velocity(_AddCondition, bpy.types.Operator):
    """Add an initial velocity arrow at the active vertex or the surface point nearest the 3D
    cursor (the point starts moving along the arrow)"""

    bl_idname = "neurok.add_velocity"
    bl_label = "Add Velocity"
    bl_options = {"REGISTER", "UNDO"}
    kind = "VELOCITY"


def _find_condition(context, name: str):
    if name:
        empty = bpy.data.objects.get(name)
        return empty if is_condition(empty) else None
    active = context.active_object
    return active if is_condition(active) else None


class NEUROK_OT_remove_condition(bpy.types.Operator):
    """Remove a condition (its Empty)"""

    bl_idname = "neurok.remove_condition"
    bl_label = "Remove Condition"
    bl_options = {"REGISTER", "UNDO"}

    name: StringProperty(name="Condition", description="Empty to remove (empty: the active one)")

    def execute(self, context):
        empty = _find_condition(context, self.name)
        if empty is None:
            self.report({"ERROR"}, "no NeuROK condition to remove: select one or name it")
            return {"CANCELLED"}
        owner, label = empty.parent, empty.name
        if context.active_object == empty and owner is not None and owner.mode == "OBJECT":
            context.view_layer.objects.active = owner
            owner.select_set(True)
        bpy.data.objects.remove(empty, do_unlink=True)
        self.report({"INFO"}, f"Removed {label}")
        return {"FINISHED"}


class NEUROK_OT_select_condition(bpy.types.Operator):
    """Select a condition's Empty to move, rotate or edit it"""

    bl_idname = "neurok.select_condition"
    bl_label = "Select Condition"
    bl_options = {"REGISTER", "UNDO"}

    name: StringProperty(name="Condition")

    def execute(self, context):
        empty = _find_condition(context, self.name)
        if empty is None:
            self.report({"ERROR"}, f"'{self.name}' is not a NeuROK condition")
            return {"CANCELLED"}
        if context.mode != "OBJECT":
            self.report({"ERROR"}, "leave Edit Mode to select a condition")
            return {"CANCELLED"}
        if not empty.visible_get():
            self.report({"ERROR"}, f"'{empty.name}' is hidden; unhide it first")
            return {"CANCELLED"}
        _make_active(context, empty)
        return {"FINISHED"}
