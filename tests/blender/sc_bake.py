"""Scenario: baking frames as shape keys and as a point cache, re-baking, Clear, undo."""

from __future__ import annotations

import os

import bpy
import numpy as np
from bl_helpers import (
    activate,
    add_grid,
    addon,
    call,
    empty_scene,
    evaluated_positions,
    fcurve_paths,
    scenario,
    snapshot,
    synthetic_frames,
    without_modifiers,
)


@scenario
def bake_roundtrip(params) -> dict:
    """Bake frames as shape keys and as a point cache, re-bake, clear, undo: the user's shape
    keys, modifiers and animation survive; only what the bake added goes."""
    empty_scene()
    bake = addon("neurok_blender.bake")
    scene = bpy.context.scene
    count = scene.frame_end - scene.frame_start + 1
    # a transformed, parented object with the user's own shape key, modifier and animation
    bpy.ops.object.empty_add(location=(0.5, -1.0, 0.2), rotation=(0.2, 0.1, 0.7))
    parent = bpy.context.active_object
    parent.scale = (1.0, 2.0, 0.5)
    user = add_grid("User", 6, 4, 2.0)
    user.parent = parent
    user.rotation_euler = (0.4, -0.2, 0.3)
    user.scale = (1.5, 0.7, 1.2)
    user.shape_key_add(name="Basis")
    key = user.shape_key_add(name="User Key")
    for d in key.data:
        d.co.z += 0.1
    key.value = 0.0
    key.keyframe_insert("value", frame=1)
    user.modifiers.new("User Subsurf", "SUBSURF")
    user.keyframe_insert("location", frame=1)
    user.active_shape_key_index = 1
    bpy.context.view_layer.update()
    user_action = user.data.shape_keys.animation_data.action.name
    out = {"user_action": user_action}
    frames = synthetic_frames(user, count, 0.3)
    out["bake1"] = bake.bake(user, frames, scene.frame_start, "SHAPE_KEYS")
    keys = [k.name for k in user.data.shape_keys.key_blocks]
    out["keys_after_bake"] = keys
    errors = []
    for i in range(count):
        got = without_modifiers(user, scene.frame_start + i)
        errors.append(float(np.abs(got - frames[i]).max()))
    out["shape_key_errors"] = errors
    out["moving"] = float(np.abs(frames[-1] - frames[0]).max())
    out["active_key"] = user.active_shape_key.name
    bag_paths = fcurve_paths(user.data.shape_keys)
    out["fcurves"] = len(bag_paths)
    out["user_fcurve_kept"] = 'key_blocks["User Key"].value' in bag_paths
    # with the user's key at 0.5 on top, the motion adds to it
    key.value = 0.5
    key.keyframe_insert("value", frame=1)
    got = without_modifiers(user, scene.frame_start + 5)
    m3 = np.array(user.matrix_world)[:3, :3]
    out["mixed_error"] = float(np.abs(got - (frames[5] + 0.5 * np.array([0, 0, 0.1]) @ m3.T)).max())
    # re-simulating replaces our keys, nothing else
    frames2 = synthetic_frames(user, count, -0.2)
    bake.bake(user, frames2, scene.frame_start, "SHAPE_KEYS")
    out["keys_after_rebake"] = [k.name for k in user.data.shape_keys.key_blocks]
    got = without_modifiers(user, scene.frame_start + count - 1)
    out["rebake_error"] = float(
        np.abs(got - (frames2[-1] + 0.5 * np.array([0, 0, 0.1]) @ m3.T)).max()
    )
    # as a point cache instead: our keys go, a Mesh Cache modifier first in the stack
    out["bake_pc2"] = bake.bake(user, frames, scene.frame_start, "POINT_CACHE")
    out["keys_after_pc2"] = [k.name for k in user.data.shape_keys.key_blocks]
    out["modifiers_after_pc2"] = [m.name for m in user.modifiers]
    cache = bpy.path.abspath(user.modifiers[0].filepath)
    out["cache_exists"] = os.path.isfile(cache)
    out["cache_in_user_folder"] = "extensions" in cache
    out["pc2_moves"] = float(np.abs(without_modifiers(user, 12) - without_modifiers(user, 1)).max())
    # Clear (the operator, undoable): exactly what we added goes
    activate(user)
    bpy.ops.ed.undo_push(message="before clear")
    out["clear"] = call(bpy.ops.neurok.clear_results, undo=True)
    out["after_clear"] = snapshot(user)
    out["cache_exists_after_clear"] = os.path.isfile(cache)
    out["location_animated"] = (
        user.animation_data is not None and user.animation_data.action is not None
    )
    bpy.ops.ed.undo()
    user = bpy.data.objects["User"]
    out["after_undo_clear"] = [m.name for m in user.modifiers]
    out["pc2_moves_after_undo"] = float(
        np.abs(without_modifiers(user, 12) - without_modifiers(user, 1)).max()
    )
    scene = bpy.context.scene
    # a plain object: the bake creates the Basis and an action; Clear removes both
    plain = add_grid("Plain", 5, 5, 1.0)
    plain.location = (3, 0, 0)
    plain.rotation_euler = (0, 0.5, 0)
    bpy.context.view_layer.update()
    before = snapshot(plain)
    frames = synthetic_frames(plain, count, 0.5)
    bake.bake(plain, frames, scene.frame_start, "SHAPE_KEYS")
    out["plain_keys"] = len(plain.data.shape_keys.key_blocks)
    out["plain_errors"] = max(
        float(np.abs(evaluated_positions(plain, scene.frame_start + i) - frames[i]).max())
        for i in range(count)
    )
    out["plain_after_end"] = float(
        np.abs(evaluated_positions(plain, scene.frame_end + 10) - frames[-1]).max()
    )
    bake.clear_results(plain)
    out["plain_restored"] = snapshot(plain) == before
    out["plain_has_key"] = plain.data.shape_keys is not None
    # point cache on the plain object plays back exactly (overwrite mode)
    bake.bake(plain, frames, scene.frame_start, "POINT_CACHE")
    out["plain_pc2_errors"] = max(
        float(np.abs(evaluated_positions(plain, scene.frame_start + i) - frames[i]).max())
        for i in range(count)
    )
    bake.clear_results(plain)
    out["plain_pc2_restored"] = snapshot(plain) == before
    return out


@scenario
def linked_duplicates(params) -> dict:
    """Objects sharing one mesh: a shape-key bake is refused naming the others, a point cache
    bakes this object only, and results baked before the mesh was shared clear from any user."""
    empty_scene()
    bake = addon("neurok_blender.bake")
    scene = bpy.context.scene
    count = scene.frame_end - scene.frame_start + 1
    a = add_grid("A", 6, 4, 2.0)
    b = bpy.data.objects.new("B", a.data)
    scene.collection.objects.link(b)
    b.location.x = 3.0
    activate(a)
    a.neurok.output.bake_mode = "SHAPE_KEYS"
    before = snapshot(a)
    out = {"simulate_shared": call(bpy.ops.neurok.simulate), "untouched": before == snapshot(a)}
    try:
        bake.check_bake(a, "POINT_CACHE")
        out["point_cache_allowed"] = True
    except bake.BakeError:
        out["point_cache_allowed"] = False
    frames = synthetic_frames(a, count, 0.3)
    bake.bake(a, frames, scene.frame_start, "POINT_CACHE")
    rest_b = evaluated_positions(b, scene.frame_start)
    out["a_moves"] = float(np.abs(evaluated_positions(a, scene.frame_end) - frames[0]).max())
    out["b_moves"] = float(np.abs(evaluated_positions(b, scene.frame_end) - rest_b).max())
    # baked as shape keys while single, then linked: the other user shows and clears them
    c = add_grid("C", 6, 4, 2.0)
    bake.bake(c, synthetic_frames(c, count, 0.3), scene.frame_start, "SHAPE_KEYS")
    d = bpy.data.objects.new("D", c.data)
    scene.collection.objects.link(d)
    d.neurok.output.bake_mode = "SHAPE_KEYS"  # (Automatic bakes the rig space as a rig)
    activate(d)
    out["d_has_results"] = bake.has_results(d)
    out["d_simulate"] = call(bpy.ops.neurok.simulate)
    out["d_clear"] = call(bpy.ops.neurok.clear_results)
    keys = c.data.shape_keys
    out["keys_after_clear"] = [k.name for k in keys.key_blocks] if keys else []
    out["c_results"] = c.neurok.results.mode
    return out
