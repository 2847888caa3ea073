# SPDX-License-Identifier: GPL-3.0-or-later
"""Viewport gizmos for the active object's conditions, as Blender's force-field strength gizmo.

Each force arrow gets a ``GIZMO_GT_arrow_3d`` along its Empty's Z axis whose ``offset`` target is
the force's ``strength`` property (dragging it changes the strength; the soft range 0..100 N maps
onto one arrow length, as the constrained arrow does for a wind field); a velocity arrow the same
for its speed; a drag handle a ``GIZMO_GT_move_3d`` bound to the Empty's location. The gizmos
follow the Empties as they move and vanish when neither the object nor one of its conditions is
active. ``gizmo_specs`` decides what to show (testable without a viewport); the group applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import bpy
from mathutils import Matrix

from .scene_query import conditions_of, simulated_object

COLORS = {"FORCE": (1.0, 0.45, 0.1), "VELOCITY": (0.2, 0.7, 1.0), "DRAG": (0.95, 0.85, 0.2)}
TARGETS = {"FORCE": "strength", "VELOCITY": "speed"}


@dataclass(frozen=True, eq=False)
class GizmoSpec:
    """One gizmo: its type, the (struct, property) its "offset" drives and where it is drawn."""

    key: tuple[str, int]
    gizmo_type: str
    data: Any
    prop: str
    matrix: Matrix
    color: tuple[float, float, float]


def _arrow_matrix(empty) -> Matrix:
    """At the Empty, Z along its (normalised) Z axis, uniformly scaled by its display size."""
    world = empty.matrix_world
    z = world.to_3x3().col[2].normalized()
    rotation = z.to_track_quat("Z", "Y").to_matrix().to_4x4()
    return (
        Matrix.Translation(world.translation) @ rotation @ Matrix.Scale(empty.empty_display_size, 4)
    )


def _location_space(empty) -> Matrix:
    """The space ``empty.location`` lives in: parent world @ parent inverse."""
    if empty.parent is None:
        return Matrix.Identity(4)
    return empty.parent.matrix_world @ empty.matrix_parent_inverse


def gizmo_specs(context) -> list[GizmoSpec]:
    """The gizmos to show now: one per visible condition of the active object."""
    if not context.scene.neurok.show_gizmos:
        return []
    obj = simulated_object(context)
    if obj is None or obj.type != "MESH":
        return []
    specs = []
    for empty in conditions_of(obj):
        if not empty.visible_get():
            continue
        cond = empty.neurok.condition
        key = (empty.name, empty.session_uid)
        if cond.kind in TARGETS:
            matrix, gizmo_type = _arrow_matrix(empty), "GIZMO_GT_arrow_3d"
            data, prop = cond, TARGETS[cond.kind]
        else:
            matrix, gizmo_type = _location_space(empty), "GIZMO_GT_move_3d"
            data, prop = empty, "location"
        specs.append(GizmoSpec(key, gizmo_type, data, prop, matrix, COLORS[cond.kind]))
    return specs


class NEUROK_GGT_conditions(bpy.types.GizmoGroup):
    bl_idname = "NEUROK_GGT_conditions"
    bl_label = "NeuROK Conditions"
    bl_space_type = "VIEW_3D"
    bl_region_type = "WINDOW"
    bl_options = {"3D", "PERSISTENT"}

    @classmethod
    def poll(cls, context):
        return bool(gizmo_specs(context))

    def setup(self, context):
        self.by_key = {}
        self._sync(context)

    def refresh(self, context):
        self._sync(context)

    def draw_prepare(self, context):
        for spec in gizmo_specs(context):
            gizmo = self.by_key.get(spec.key)
            if gizmo is not None:
                gizmo.matrix_basis = spec.matrix

    def _sync(self, context) -> None:
        specs = gizmo_specs(context)
        wanted = {spec.key for spec in specs}
        for key in [k for k in self.by_key if k not in wanted]:
            self.gizmos.remove(self.by_key.pop(key))
        for spec in specs:
            gizmo = self.by_key.get(spec.key)
            if gizmo is None or gizmo.bl_idname != spec.gizmo_type:
                if gizmo is not None:
                    self.gizmos.remove(gizmo)
                gizmo = self.by_key[spec.key] = self._new_gizmo(spec)
            # Bind again on every refresh (as Blender's own object gizmos do): the struct behind
            # the property may have been reallocated (undo, rename).
            gizmo.target_set_prop("offset", spec.data, spec.prop)
            gizmo.matrix_basis = spec.matrix

    def _new_gizmo(self, spec: GizmoSpec):
        gizmo = self.gizmos.new(spec.gizmo_type)
        if spec.gizmo_type == "GIZMO_GT_arrow_3d":
            gizmo.draw_style = "BOX"
            gizmo.transform = {"CONSTRAIN"}
        else:
            gizmo.draw_style = "RING_2D"
            gizmo.draw_options = {"ALIGN_VIEW"}
            gizmo.scale_basis = 0.15
        gizmo.color = spec.color
        gizmo.alpha = 0.6
        gizmo.color_highlight = tuple(min(c + 0.3, 1.0) for c in spec.color)
        gizmo.alpha_highlight = 1.0
        return gizmo
