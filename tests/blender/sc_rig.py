"""Scenario: bake as a rig (a model with bones) with a real engine process."""

from __future__ import annotations

import bmesh
import bpy
import numpy as np
from bl_helpers import activate, add_grid, call, empty_scene, evaluated_positions, prefs, scenario
from sc_simulate import _force_at_vertex


def _two_part_box():
    """A base and a lid, one object of two loose parts (an articulated mesh)."""
    mesh = bpy.data.meshes.new("Box")
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=1.0, matrix=_scale(0.6, 0.4, 0.1, 0, 0, 0.05))
    bmesh.ops.create_cube(bm, size=1.0, matrix=_scale(0.6, 0.05, 0.4, 0, 0.2, 0.32))
    bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=2, use_grid_fill=True)
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new("Box", mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _scale(sx, sy, sz, x, y, z):
    from mathutils import Matrix

    m = Matrix.Diagonal((sx, sy, sz, 1.0))
    m.translation = (x, y, z)
    return m


def _frames(obj):
    scene = bpy.context.scene
    return np.stack(
        [evaluated_positions(obj, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    )


def _state(obj):
    return {
        "objects": sorted(o.name for o in bpy.data.objects),
        "groups": [g.name for g in obj.vertex_groups],
        "modifiers": [m.name for m in obj.modifiers],
        "actions": sorted(a.name for a in bpy.data.actions),
        "armatures": sorted(a.name for a in bpy.data.armatures),
        "results": obj.neurok.results.mode,
    }


def _compare_with_shape_keys(obj, out, tag):
    """Simulate as a rig and as shape keys; how far apart their playbacks are (object sizes)."""
    obj.neurok.output.bake_mode = "RIG"
    activate(obj)
    out[f"{tag}_rig"] = call(bpy.ops.neurok.simulate, undo=True)
    rig_frames = _frames(obj)
    out[f"{tag}_state_rig"] = _state(obj)
    obj.neurok.output.bake_mode = "SHAPE_KEYS"
    activate(obj)
    out[f"{tag}_keys"] = call(bpy.ops.neurok.simulate, undo=True)
    key_frames = _frames(obj)
    size = float(np.ptp(key_frames[0], axis=0).max())
    out[f"{tag}_motion"] = float(np.abs(key_frames - key_frames[0]).max()) / size
    out[f"{tag}_playback_error"] = float(np.abs(rig_frames - key_frames).max()) / size
    out[f"{tag}_state_keys"] = _state(obj)


def _push_farthest(obj, axis: int) -> None:
    """No gravity and a 40 N force on the vertex farthest along local ``axis``."""
    obj.neurok.physics.use_gravity = False
    bpy.context.view_layer.update()
    far = max(range(len(obj.data.vertices)), key=lambda i: obj.data.vertices[i].co[axis])
    activate(obj)
    _force_at_vertex(obj, far, 40.0)


@scenario
def rig_flow(params) -> dict:
    """Rig bakes of a cloth-like sheet and a two-part box: playback vs shape keys, one undo
    step, re-simulate and Clear leave exactly the user's data, name clashes, an edited key."""
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_end = 5
    out = {}
    # a sheet with the user's own vertex group named like our first bone, a shape key, a
    # modifier (off in the viewport, so playbacks compare vertex for vertex) and a transform
    sheet = add_grid("Sheet", 8, 5, 2.0)
    sheet.location = (0.3, -0.2, 1.0)
    sheet.rotation_euler = (0.2, 0.0, 0.4)
    sheet.scale = (1.5, 1.5, 1.5)
    user_group = sheet.vertex_groups.new(name="NeuROK.000")
    user_group.add([0, 1, 2], 0.25, "REPLACE")
    sheet.shape_key_add(name="Basis")
    sheet.shape_key_add(name="User Key").value = 0.0
    user_mod = sheet.modifiers.new("User Subsurf", "SUBSURF")
    user_mod.show_viewport = False
    sheet.neurok.physics.use_gravity = False
    sheet.neurok.physics.dynamics = "latent"  # the rig of a model with bones (a dual quaternion)
    activate(sheet)
    arrow_name = _force_at_vertex(sheet, 7, 40.0).name
    bpy.context.view_layer.update()
    before = _state(sheet)
    out["before"] = before
    # Rig, then undo: one step takes it all back
    sheet.neurok.output.bake_mode = "RIG"
    activate(sheet)
    bpy.ops.ed.undo_push(message="before simulate")
    out["simulate"] = call(bpy.ops.neurok.simulate, undo=True)
    sheet = bpy.data.objects["Sheet"]
    out["after_rig"] = _state(sheet)
    arm = sheet.neurok.results.rig_object
    out["armature"] = None if arm is None else arm.name
    out["armature_matrix_error"] = float(
        np.abs(np.array(arm.matrix_world) - np.array(sheet.matrix_world)).max()
    )
    out["bones"] = [b.name for b in arm.data.bones]
    out["bone_collections"] = [c.name for c in arm.data.collections]
    out["bones_in_collection"] = len(arm.data.collections[0].bones)
    mod = sheet.modifiers[0]
    out["modifier"] = [mod.type, mod.object == arm, mod.use_deform_preserve_volume]
    action = arm.animation_data.action
    out["action_users"] = action.users
    fcurves = list(action.layers[0].strips[0].channelbags[0].fcurves)
    out["fcurves"] = len(fcurves)
    out["keys_per_fcurve"] = sorted({len(f.keyframe_points) for f in fcurves})
    out["user_group_weights"] = [
        user_group_weight(sheet, "NeuROK.000", i) for i in range(4)
    ]  # untouched: 0.25 on 0-2
    rig_frames = _frames(sheet)
    # a real, editable rig: move one key and the playback at that frame changes
    curve = next(f for f in fcurves if f.data_path.endswith("location") and f.array_index == 2)
    curve.keyframe_points[3].co.y += 0.2
    curve.update()
    edited = evaluated_positions(sheet, scene.frame_start + 3)
    out["edited_key_moves"] = float(np.abs(edited - rig_frames[3]).max())
    curve.keyframe_points[3].co.y -= 0.2
    curve.update()
    bpy.ops.ed.undo()
    sheet = bpy.data.objects["Sheet"]
    out["after_undo"] = _state(sheet)
    # rig vs shape keys (the engine's own vertices) on the sheet and on the two-part box
    _compare_with_shape_keys(sheet, out, "sheet")
    bpy.data.objects.remove(bpy.data.objects[arrow_name])
    box = _two_part_box()
    box.location = (3.0, 0.0, 0.0)
    box.neurok.physics.dynamics = "latent"
    _push_farthest(box, 2)  # the top
    _compare_with_shape_keys(box, out, "box")
    # a sheet pinned along one edge: the rig holds the pins on a still bone of its own
    flag = add_grid("Flag", 8, 5, 2.0)
    flag.location = (0.0, 4.0, 0.0)
    pinned = flag.vertex_groups.new(name="Pole")
    low = min(v.co.x for v in flag.data.vertices)
    pinned.add([v.index for v in flag.data.vertices if v.co.x < low + 1e-6], 1.0, "REPLACE")
    flag.neurok.physics.pin_group = "Pole"
    flag.neurok.physics.dynamics = "latent"
    _push_farthest(flag, 0)  # the free edge
    _compare_with_shape_keys(flag, out, "pinned")
    # "Automatic" (the default) bakes a model with bones as a rig
    flag.neurok.output.bake_mode = "AUTO"
    activate(flag)
    out["auto"] = call(bpy.ops.neurok.simulate, undo=True)
    out["auto_mode"] = bpy.data.objects["Flag"].neurok.results.mode
    activate(bpy.data.objects["Flag"])
    out["auto_clear"] = call(bpy.ops.neurok.clear_results)
    # Clear after a rig bake leaves exactly the user's data
    sheet = bpy.data.objects["Sheet"]
    activate(sheet)
    call(bpy.ops.neurok.clear_results)
    out["after_clear_keys"] = _state(sheet)
    sheet.neurok.output.bake_mode = "RIG"
    activate(sheet)
    _force_at_vertex(sheet, 7, 40.0)
    out["simulate_again"] = call(bpy.ops.neurok.simulate, undo=True)
    out["clear"] = call(bpy.ops.neurok.clear_results, undo=True)
    out["after_clear"] = _state(sheet)
    out["user_group_after_clear"] = [user_group_weight(sheet, "NeuROK.000", i) for i in range(4)]
    # unequal scale: refused before any work, nothing changes
    sheet.scale = (1.0, 2.0, 1.0)
    bpy.context.view_layer.update()
    activate(sheet)
    out["unequal_scale"] = call(bpy.ops.neurok.simulate)
    out["after_refusal"] = _state(sheet)
    return out


def user_group_weight(obj, name: str, index: int) -> float:
    group = obj.vertex_groups[name]
    try:
        return round(group.weight(index), 6)
    except RuntimeError:  # not in the group
        return 0.0
