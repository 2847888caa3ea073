"""Scenario: the Collision section gathers the ground and static colliders in world space."""

from __future__ import annotations

import bpy
import numpy as np
from bl_helpers import activate, add_grid, addon, attempt_simulate, empty_scene, scenario


@scenario
def collision_gather(params) -> dict:
    """Colliders: Blender's Collision physics by default, a collection on request, in world
    space; the ground at the lowest point or a height; a moving collider refused."""
    empty_scene()
    gather = addon("neurok_blender.gather")
    settings = addon("neurok_blender.preferences").engine_settings()
    sheet = add_grid("Sheet", 6, 4, 1.0)
    sheet.location = (0.0, 0.0, 1.0)
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.2, 0.0, 0.3))
    table = bpy.context.active_object
    table.name = "Table"
    table.scale = (2.0, 1.0, 0.5)
    table.modifiers.new("Collision", "COLLISION")
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(3.0, 0.0, 0.0))
    bystander = bpy.context.active_object
    bystander.name = "Bystander"
    activate(sheet)
    bpy.context.view_layer.update()
    out = {}
    physics = sheet.neurok.physics
    cond = gather.gather(bpy.context, sheet, settings).request.conditions
    out["default"] = {
        "ground": cond.ground,
        "names": [c.name for c in cond.colliders],
        "bounds": np.ptp(np.array(cond.colliders[0].vertices), axis=0).tolist()
        if cond.colliders
        else None,
        "centre": np.array(cond.colliders[0].vertices).mean(0).tolist() if cond.colliders else None,
        "faces": len(cond.colliders[0].faces) if cond.colliders else 0,
        "friction": cond.friction,
    }
    physics.use_ground = True
    cond = gather.gather(bpy.context, sheet, settings).request.conditions
    out["ground_lowest"] = cond.ground
    physics.ground_at_lowest = False
    physics.ground_height = -0.25
    physics.friction = 0.9
    cond = gather.gather(bpy.context, sheet, settings).request.conditions
    out["ground_height"], out["friction"] = cond.ground, cond.friction
    physics.collider_source = "COLLECTION"
    out["no_collection"] = attempt_simulate(sheet)
    crates = bpy.data.collections.new("Crates")
    bpy.context.scene.collection.children.link(crates)
    crates.objects.link(bystander)
    physics.collider_source = "COLLECTION"
    physics.collider_collection = crates
    cond = gather.gather(bpy.context, sheet, settings).request.conditions
    out["collection_names"] = [c.name for c in cond.colliders]
    physics.collider_source = "PHYSICS"
    table.keyframe_insert("location", frame=1)
    out["moving"] = attempt_simulate(sheet)
    return out
