"""Scenario: the whole flow with a real engine process."""

from __future__ import annotations

import time
from pathlib import Path

import bpy
import numpy as np
from bl_helpers import (
    activate,
    add_grid,
    addon,
    attempt_simulate,
    call,
    cancel_when,
    empty_scene,
    prefs,
    process_alive,
    scenario,
    snapshot,
    without_modifiers,
    world_rest,
)


def _sheet_with_user_setup():
    """A sheet with the user's own shape key, modifier, object animation and selection."""
    sheet = add_grid("Sheet", 8, 5, 2.0)
    sheet.location = (0.3, -0.2, 1.0)
    sheet.rotation_euler = (0.2, 0.0, 0.4)
    sheet.scale = (1.0, 1.5, 1.0)
    sheet.shape_key_add(name="Basis")
    key = sheet.shape_key_add(name="User Key")
    for d in key.data:
        d.co.z += 0.05
    key.value = 0.0
    key.keyframe_insert("value", frame=1)
    sheet.modifiers.new("User Subsurf", "SUBSURF")
    sheet.keyframe_insert("location", frame=1)
    bpy.ops.mesh.primitive_cube_add(location=(5, 0, 0), size=0.5)
    other = bpy.context.active_object
    other.name = "Bystander"
    # selected with the sheet, a Static Collider far from it: it stays put (a selected mesh
    # whose role is Moves would be simulated with the sheet)
    other.neurok.physics.role = "STATIC"
    activate(sheet)
    other.select_set(True)
    bpy.context.view_layer.update()
    return sheet


def _force_at_vertex(sheet, index: int, strength: float):
    import bmesh

    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(sheet.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[index].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[index])
    bpy.ops.neurok.add_force()
    bpy.ops.object.mode_set(mode="OBJECT")
    force = addon("neurok_blender.scene_query").conditions_of(sheet)[0]
    force.neurok.condition.strength = strength
    return force


@scenario
def simulate_flow(params) -> dict:
    """The whole flow with a real engine: force, simulate, bake both ways, undo, cancel,
    engine errors; the user's shape keys, modifiers, animation and selection survive."""
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_end = 4  # a short animation keeps the engine's work small
    out = {}
    out["check"] = call(bpy.ops.neurok.check_engine)
    registry = addon("neurok_blender.engine.registry")
    out["status"] = [registry.engine_status().state, registry.engine_status().text]

    def warm_pid():
        server = registry.warm_server()
        return None if server is None else server.process.pid

    # the engine warms up ahead of Simulate (what the NeuROK tab does when it is shown)
    out["start_engine"] = call(bpy.ops.neurok.start_engine)
    out["warm_pids"] = [warm_pid()]
    sheet = _sheet_with_user_setup()
    # the learned space: its model's kinematic space, kept by the warm engine, and the errors
    # of a checkpoint without a model (the rig space cannot integrate this free sheet pushed at
    # a corner: "the implicit step did not converge")
    sheet.neurok.physics.dynamics = "latent"
    corner = 7
    force = _force_at_vertex(sheet, corner, 40.0)
    force_name = force.name
    sheet.neurok.physics.use_gravity = False
    activate(sheet)
    bpy.data.objects["Bystander"].select_set(True)
    rest = world_rest(sheet)
    selection = snapshot(sheet)["selected"]
    bpy.ops.ed.undo_push(message="before simulate")
    start = time.monotonic()
    out["simulate"] = call(bpy.ops.neurok.simulate, undo=True)
    out["seconds"] = time.monotonic() - start
    out["warm_pids"].append(warm_pid())
    sheet = bpy.data.objects["Sheet"]
    out["keys"] = [k.name for k in sheet.data.shape_keys.key_blocks]
    out["modifiers"] = [m.name for m in sheet.modifiers]
    out["selection_kept"] = snapshot(sheet)["selected"] == selection
    out["location_animated"] = sheet.animation_data.action is not None
    frames = [without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    out["rest_error_first"] = float(np.abs(frames[0] - rest).max())
    out["motion"] = [float(np.abs(f - rest).max()) for f in frames]
    direction = np.array(force.matrix_world.to_3x3().col[2].normalized())
    out["forced_point_along_force"] = [
        float((f[corner] - rest[corner]) @ direction) for f in frames
    ]
    shape_key_frames = np.stack(frames)
    # undo: back to the state before Simulate
    bpy.ops.ed.undo()
    sheet = bpy.data.objects["Sheet"]
    scene = bpy.context.scene
    out["keys_after_undo"] = [k.name for k in sheet.data.shape_keys.key_blocks]
    out["results_after_undo"] = sheet.neurok.results.mode
    # bake as a point cache: the same motion through a Mesh Cache modifier
    sheet.neurok.output.bake_mode = "POINT_CACHE"
    activate(sheet)
    bpy.data.objects["Bystander"].select_set(True)  # the same colliders as the first run
    start = time.monotonic()
    out["simulate_pc2"] = call(bpy.ops.neurok.simulate, undo=True)
    out["seconds_pc2"] = time.monotonic() - start
    out["warm_pids"].append(warm_pid())
    sheet = bpy.data.objects["Sheet"]
    out["modifiers_pc2"] = [m.name for m in sheet.modifiers]
    out["keys_pc2"] = [k.name for k in sheet.data.shape_keys.key_blocks]
    pc2_frames = np.stack(
        [without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    )
    out["pc2_vs_shape_keys"] = float(np.abs(pc2_frames - shape_key_frames).max())
    # no force, no gravity, no velocity: the object stays exactly at rest
    bpy.data.objects.remove(bpy.data.objects[force_name])
    sheet.neurok.output.bake_mode = "SHAPE_KEYS"
    activate(sheet)
    out["simulate_still"] = call(bpy.ops.neurok.simulate)
    still = [without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    out["still_error"] = max(float(np.abs(f - rest).max()) for f in still)
    out["modifiers_still"] = [m.name for m in sheet.modifiers]
    # cancel midway: once the engine reports its first stage
    _force_at_vertex(sheet, corner, 40.0)
    activate(sheet)
    before = snapshot(sheet)
    watcher = cancel_when(lambda job: job.stage != "load" or job.fraction > 0.05)
    start = time.monotonic()
    out["cancel"] = call(bpy.ops.neurok.simulate)
    out["cancel_seconds"] = time.monotonic() - start
    watcher.join(5)
    out["cancel_untouched"] = snapshot(sheet) == before
    out["cancel_pid_alive"] = process_alive(watcher.seen["pid"]) if "pid" in watcher.seen else None
    # a checkpoint folder without a model in it: the engine says so, nothing changes
    empty_dir = Path(params["tmp"]) / "empty_checkpoint"
    empty_dir.mkdir()
    out["bad_checkpoint"] = attempt_simulate(sheet, checkpoint=str(empty_dir))
    out["jobs_left"] = list(registry._jobs)
    out["leftover_job_dirs"] = sorted(
        p.name for p in (Path(params["tmp"]) / "tmpdir").glob("neurok-*")
    )
    out["warm_after_failure"] = warm_pid()
    out["warm_after_failure_alive"] = out["warm_after_failure"] is not None and process_alive(
        out["warm_after_failure"]
    )
    # the NeuROK tab's warm-up: drawn with no engine running, it schedules one start (a timer),
    # once per interpreter setting; the timer starts the engine
    engine_ops = addon("neurok_blender.operators.engine")
    registry.stop_server()
    engine_ops._warmed.clear()
    engine_ops.warm_up_once()
    timer = engine_ops._timer
    out["warm_timer_registered"] = timer is not None and bpy.app.timers.is_registered(timer)
    engine_ops.warm_up_once()
    out["warm_timer_once"] = engine_ops._timer is timer
    if bpy.app.timers.is_registered(timer):
        bpy.app.timers.unregister(timer)
    timer()  # what the timer does when it fires
    out["warm_after_timer"] = warm_pid() is not None
    engine_ops.warm_up_once()  # tried already for this setting: nothing scheduled
    out["warm_timer_after"] = engine_ops._timer
    return out
