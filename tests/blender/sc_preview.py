"""Scenario: the live preview in real Blender with a real preview engine: started on a cube,
updated when a force arrow's strength is dragged, an older preview cancelled by a newer drag,
stopped; the object and the scene stay as they were throughout."""

from __future__ import annotations

import time
from pathlib import Path

import bpy
import numpy as np
from bl_helpers import (
    activate,
    addon,
    call,
    empty_scene,
    prefs,
    process_alive,
    scenario,
    write_script,
)
from mathutils import Vector
from sc_objects import _cube


def _state(obj) -> dict:
    """What the preview must never change: the mesh, its keys, modifiers, and the frame."""
    co = np.empty(len(obj.data.vertices) * 3, dtype=np.float32)
    obj.data.vertices.foreach_get("co", co)
    return {
        "co": co.tolist(),
        "keys": obj.data.shape_keys is not None,
        "modifiers": [m.type for m in obj.modifiers],
        "frame": bpy.context.scene.frame_current,
        "animation": obj.animation_data is not None,
    }


def _tick_until(preview, done, timeout=180.0) -> float:
    """Tick as the operator's timer does until ``done()``; the seconds it took."""
    start = time.monotonic()
    while not done():
        assert time.monotonic() - start < timeout, preview.status()
        preview.tick(bpy.context)
        time.sleep(preview.POLL)
    return time.monotonic() - start


def _travel(preview) -> float:
    """How far the shown preview's last frame has moved the cube's centre (m)."""
    shown = preview.shown()
    return float(np.linalg.norm(shown.frames[-1].mean(0) - shown.frames[0].mean(0)))


@scenario
def live_preview(params) -> dict:
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]  # the rig space needs no model
    p.device = "CPU"
    scene = bpy.context.scene
    scene.neurok.preview_frames = 10
    scene.frame_end = 400
    cube = _cube("Cube", (0.0, 0.0, 0.1005))
    cube.neurok.physics.use_ground = False  # free in space: the push alone moves it
    cube.neurok.physics.use_gravity = False
    activate(cube)
    scene.cursor.location = Vector((-0.1, 0.0, 0.1005))
    out = {"add_force": call(bpy.ops.neurok.add_force)}
    arrow = cube.children[0]
    cond = arrow.neurok.condition
    cond.strength = 2.0
    cond.end_frame = scene.frame_start + 4
    activate(cube)
    before = _state(cube)
    undo_steps = len(bpy.context.window_manager.operators)
    preview = addon("neurok_blender.live_preview")
    out["start"] = call(bpy.ops.neurok.live_preview)
    out["active"] = preview.active()
    _tick_until(preview, lambda: preview.shown() is not None and preview.shown().run.finished)
    first = preview.shown()
    out["first"] = {"frames": len(first.frames), "state": first.run.state}
    out["travel_weak"] = _travel(preview)
    out["status"] = preview.status()
    from sc_panels import _draw_all

    out["labels"] = _draw_all()["labels"]
    # a drag of the arrow's gizmo sets the strength: the preview follows
    cond.strength = 8.0
    _tick_until(preview, lambda: preview.shown().run not in (first.run,) and first.run.finished)
    _tick_until(preview, lambda: preview.shown().run.finished)
    out["travel_strong"] = _travel(preview)
    out["runs_after_drag"] = len(preview.runs())
    # two changes in quick succession: the newer one cancels the older preview (a long one,
    # so that it is surely still running when the newer one arrives)
    scene.neurok.preview_frames = 400
    cond.strength = 4.0
    preview.tick(bpy.context)
    older = preview.runs()[-1]
    scene.neurok.preview_frames = 10
    cond.strength = 6.0
    preview.tick(bpy.context)
    newer = preview.runs()[-1]
    _tick_until(preview, lambda: older.finished and newer.finished)
    _tick_until(preview, lambda: preview.shown().run is newer)
    out["older"] = older.state
    out["newer"] = newer.state
    out["travel_last"] = _travel(preview)
    # nothing of the scene changed while previewing; an unchanged tick sends nothing
    count = len(preview.runs())
    for _ in range(5):
        preview.tick(bpy.context)
    out["runs_unchanged"] = len(preview.runs()) - count
    out["during"] = _state(cube) == before
    # a setting that cannot be previewed says so, and the message goes once it is put back
    cube.neurok.physics.pin_group = "nope"
    preview.tick(bpy.context)
    out["bad_setting"] = preview.status()
    cube.neurok.physics.pin_group = ""
    preview.tick(bpy.context)
    out["setting_back"] = preview.status()
    # a pin group read once while the mesh is unchanged, and again once its weights change
    group = cube.vertex_groups.new(name="Pin")
    group.add([0], 1.0, "REPLACE")
    cube.neurok.physics.pin_group = "Pin"
    bpy.context.view_layer.update()
    preview.tick(bpy.context)
    out["pins_first"] = list(preview.session().request.conditions.pins)
    group.add([1], 1.0, "REPLACE")
    bpy.context.view_layer.update()  # (the depsgraph's update: an edit of the mesh)
    preview.tick(bpy.context)
    out["pins_edited"] = list(preview.session().request.conditions.pins)
    cube.neurok.physics.pin_group = ""
    preview.tick(bpy.context)
    pid = preview._state.engine.server.process.pid
    out["stop"] = call(bpy.ops.neurok.live_preview)
    out["active_after"] = preview.active()
    deadline = time.monotonic() + 10
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    out["engine_alive_after"] = process_alive(pid)
    out["after"] = _state(cube) == before
    out["operators_added"] = len(bpy.context.window_manager.operators) - undo_steps
    # an engine that crashes is not started again and again: the next change starts one
    p.python_path = write_script(Path(params["tmp"]) / "python_crash", "echo boom >&2; exit 1")
    activate(cube)
    call(bpy.ops.neurok.live_preview)
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        preview.tick(bpy.context)
        time.sleep(preview.POLL)
    out["crash_status"] = preview.status()
    out["crash_runs"] = len(preview.runs())
    out["crash_engine"] = preview.session().engine is not None
    call(bpy.ops.neurok.live_preview)
    return out
