# SPDX-License-Identifier: GPL-3.0-or-later
"""Apply Solid Preset: set the active mesh's mass (the preset's density times its volume),
stiffness, friction and bounciness, as a rigid body's Calculate Mass does for its mass."""

from __future__ import annotations

import bpy
from bpy.props import EnumProperty

from ..core import SOLID_MATERIALS, ConditionError, is_closed, solid_fields
from ..gather import GatherError, mesh_arrays, transform, world_matrix
from ..scene_query import simulated_object

ITEMS = tuple(
    (
        name,
        name.title(),
        f"{m.density:g} kg/m³, stiffness {m.stiffness:g} Hz"
        f"{' (rigid)' if m.stiffness == 0 else ''}, friction {m.friction:g},"
        f" bounciness {m.bounciness:g}",
    )
    for name, m in SOLID_MATERIALS.items()
)


class NEUROK_OT_apply_solid_preset(bpy.types.Operator):
    """Set the mass (density x volume), stiffness, friction and bounciness of the active mesh
    from a material preset"""

    bl_idname = "neurok.apply_solid_preset"
    bl_label = "Apply Solid Preset"
    bl_options = {"REGISTER", "UNDO"}

    material: EnumProperty(name="Material", items=ITEMS)

    @classmethod
    def poll(cls, context):
        obj = simulated_object(context)
        return obj is not None and obj.type == "MESH" and obj.mode != "EDIT"

    def execute(self, context):
        obj = simulated_object(context)
        try:
            local, faces = mesh_arrays(obj)
            world = transform(world_matrix(obj), local)
            fields = solid_fields(self.material, world, faces, is_closed(faces))
        except (GatherError, ConditionError) as exc:
            self.report({"ERROR"}, f"Apply Solid Preset: {exc}")
            return {"CANCELLED"}
        physics = obj.neurok.physics
        physics.mass = fields["mass"]
        physics.stiffness = fields["stiffness"]
        physics.friction = fields["friction"]
        physics.bounciness = fields["bounciness"]
        self.report(
            {"INFO"},
            f"'{obj.name}' as {self.material}: {physics.mass:.3g} kg, stiffness"
            f" {physics.stiffness:g} Hz, friction {physics.friction:g}, bounciness"
            f" {physics.bounciness:g}",
        )
        return {"FINISHED"}
