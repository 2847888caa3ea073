"""Scenarios run inside real Blender (the bpy module), one per fresh process.

    python tests/blender/scenarios.py <name> '<json params>'

Each installs the built extension zip into the temporary user folder of ``BLENDER_USER_RESOURCES``
(set by the harness), runs one scenario and writes what it observed to ``params["result"]``.
Operators are called as scripts call them; in background mode they run synchronously.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
from pathlib import Path

import bpy
import numpy as np

PACKAGE = "bl_ext.user_default.neurok"
SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# -- helpers ------------------------------------------------------------------------------------
def install(zip_path: str) -> None:
    result = bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True
    )
    assert result == {"FINISHED"}, result
    assert PACKAGE in bpy.context.preferences.addons, "the extension was not enabled"


def addon(module: str = ""):
    """A module of the installed add-on, e.g. addon('neurok_blender.gather')."""
    return importlib.import_module(f"{PACKAGE}.{module}" if module else PACKAGE)


def prefs():
    return bpy.context.preferences.addons[PACKAGE].preferences


def call(op, *, undo: bool = False, **kwargs) -> tuple[str, str]:
    """Run an operator as a script does: ('FINISHED'|'CANCELLED'|'ERROR', message).

    undo: push an undo step as the UI does (scripts do not by default).
    """
    try:
        result = op("EXEC_DEFAULT", True, **kwargs) if undo else op(**kwargs)
    except RuntimeError as exc:
        return "ERROR", str(exc)
    return next(iter(result)), ""


def empty_scene() -> None:
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    for mesh in list(bpy.data.meshes):
        bpy.data.meshes.remove(mesh)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)


def activate(obj) -> None:
    for other in bpy.context.view_layer.objects:
        other.select_set(False)
    if obj is not None:
        obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def add_grid(name="Sheet", x=6, y=4, size=1.0):
    bpy.ops.mesh.primitive_grid_add(x_subdivisions=x, y_subdivisions=y, size=size)
    obj = bpy.context.active_object
    obj.name = name
    return obj


def snapshot(obj=None) -> dict:
    """What a failed or cancelled operator must leave as it was."""
    state = {
        "objects": sorted(o.name for o in bpy.data.objects),
        "selected": sorted(o.name for o in bpy.context.selected_objects),
        "active": bpy.context.view_layer.objects.active.name
        if bpy.context.view_layer.objects.active
        else None,
        "actions": sorted(a.name for a in bpy.data.actions),
        "shape_keys": sorted(k.name for k in bpy.data.shape_keys),
    }
    if obj is not None and obj.type == "MESH":
        me = obj.data
        co = np.empty(len(me.vertices) * 3, dtype=np.float32)
        me.vertices.foreach_get("co", co)
        state["mesh"] = {
            "co": float(np.abs(co).sum()),
            "keys": [k.name for k in me.shape_keys.key_blocks] if me.shape_keys else [],
            "modifiers": [m.name for m in obj.modifiers],
            "results": obj.neurok.results.mode,
        }
    return state


def evaluated_positions(obj, frame: int) -> np.ndarray:
    """World-space positions of ``obj`` at ``frame`` after shape keys and modifiers, (N, 3)."""
    bpy.context.scene.frame_set(frame)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    ev = obj.evaluated_get(depsgraph)
    mesh = ev.to_mesh()
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float64)
    mesh.vertices.foreach_get("co", co)
    ev.to_mesh_clear()
    m = np.array(obj.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def write_script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive for our purpose
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except OSError:
        return True


def cancel_when(predicate, kind="simulate", timeout=60.0) -> threading.Thread:
    """From a thread, cancel the running job of ``kind`` once ``predicate(job)`` holds."""
    registry = addon("neurok_blender.engine.registry")
    seen = {}

    def run():
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            job = registry._jobs.get(kind)
            if job is not None and job.process is not None and predicate(job):
                seen["pid"] = job.process.pid
                registry.request_cancel(kind)
                return
            time.sleep(0.02)

    thread = threading.Thread(target=run, daemon=True)
    thread.seen = seen
    thread.start()
    return thread


# -- scenarios ----------------------------------------------------------------------------------
@scenario
def register_cycle(params) -> dict:
    """Disable and enable the installed add-on twice; the package lives under bl_ext."""
    import addon_utils

    out = {"cycles": []}
    for _ in range(2):
        addon_utils.disable(PACKAGE, default_set=True)
        gone = {
            "op": hasattr(bpy.ops.neurok, "simulate") and _op_exists("neurok.simulate"),
            "object_prop": hasattr(bpy.types.Object, "neurok"),
            "panel": hasattr(bpy.types, "NEUROK_PT_main"),
            "gizmo_group": _gizmo_group_registered(),
        }
        addon_utils.enable(PACKAGE, default_set=True)
        back = {
            "op": _op_exists("neurok.simulate"),
            "object_prop": hasattr(bpy.types.Object, "neurok"),
            "scene_prop": hasattr(bpy.types.Scene, "neurok"),
            "panel": hasattr(bpy.types, "NEUROK_PT_main"),
            "gizmo_group": _gizmo_group_registered(),
            "prefs": PACKAGE in bpy.context.preferences.addons
            and prefs() is not None
            and prefs().bl_rna.identifier == "NeuROKPreferences",
        }
        out["cycles"].append({"disabled": gone, "enabled": back})
    mods = sorted(m for m in sys.modules if "neurok" in m and not m.startswith("__editable"))
    out["modules"] = mods
    out["top_level_neurok"] = [m for m in mods if m.split(".")[0] in ("neurok_blender",)]
    out["torch_loaded"] = "torch" in sys.modules
    paths = addon("neurok_blender.paths")
    out["user_dir"] = str(paths.user_dir("deps"))
    out["addon_package"] = paths.ADDON_PACKAGE
    out["extension_root_has_core"] = (
        Path(addon("neurok_blender.engine.command").EXTENSION_ROOT) / "neurok_core" / "worker.py"
    ).is_file()
    return out


@scenario
def conditions(params) -> dict:
    """Add force/drag/velocity at the cursor and at the active vertex; gizmos; select; remove."""
    import bmesh
    from mathutils import Vector

    empty_scene()
    obj = add_grid("Sheet", 4, 4, 2.0)
    obj.rotation_euler = (0.3, 0.0, 0.5)
    obj.location = (1.0, 2.0, 3.0)
    bpy.context.view_layer.update()
    out = {}
    # 3D cursor a bit above the sheet's centre: the force snaps to the surface below it
    bpy.context.scene.cursor.location = obj.matrix_world @ Vector((0.1, 0.2, 0.5))
    out["add_force"] = call(bpy.ops.neurok.add_force)
    force = bpy.context.active_object
    bpy.context.view_layer.update()
    local = obj.matrix_world.inverted() @ force.matrix_world.translation
    normal = (obj.matrix_world.to_3x3() @ Vector((0, 0, 1))).normalized()
    out["force"] = {
        "name": force.name,
        "parent": force.parent.name if force.parent else None,
        "display": force.empty_display_type,
        "kind": force.neurok.condition.kind,
        "local": list(local),
        "z_dot_normal": float(force.matrix_world.to_3x3().col[2].normalized().dot(normal)),
        "anchor_vertex": force.neurok.condition.anchor_vertex,
        "selected": sorted(o.name for o in bpy.context.selected_objects),
    }
    # the panel target stays the sheet while its force is active; the gizmos follow
    gizmos = addon("neurok_blender.gizmos")
    scene_query = addon("neurok_blender.scene_query")
    out["target_with_force_active"] = scene_query.simulated_object(bpy.context).name
    # edit mode: at the active vertex
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(obj.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[5].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[5])
    out["add_drag_edit"] = call(bpy.ops.neurok.add_drag)
    out["add_velocity_edit"] = call(bpy.ops.neurok.add_velocity)
    bpy.ops.object.mode_set(mode="OBJECT")
    conds = scene_query.conditions_of(obj)
    drag = next(c for c in conds if c.neurok.condition.kind == "DRAG")
    vel = next(c for c in conds if c.neurok.condition.kind == "VELOCITY")
    bpy.context.view_layer.update()
    v5 = obj.matrix_world @ obj.data.vertices[5].co
    out["drag"] = {
        "anchor_vertex": drag.neurok.condition.anchor_vertex,
        "at_vertex": float((drag.matrix_world.translation - v5).length),
        "frame": drag.neurok.condition.frame,
        "display": drag.empty_display_type,
    }
    out["velocity"] = {"anchor_vertex": vel.neurok.condition.anchor_vertex}
    out["conditions"] = [c.name for c in conds]
    # gizmos: one per condition, bound to strength / speed / location
    activate(obj)
    group = bpy.types.GizmoGroup.bl_rna_get_subclass_py("NEUROK_GGT_conditions")
    out["gizmo_poll_active"] = bool(group.poll(bpy.context))
    force.neurok.condition.strength = 42.0
    specs = gizmos.gizmo_specs(bpy.context)
    out["gizmos"] = [
        {
            "empty": s.key[0],
            "type": s.gizmo_type,
            "prop": s.prop,
            "value": float(getattr(s.data, s.prop))
            if s.prop != "location"
            else list(getattr(s.data, s.prop)),
            "data_is_condition": s.data == bpy.data.objects[s.key[0]].neurok.condition,
            "origin_error": float(
                (s.matrix.translation - bpy.data.objects[s.key[0]].matrix_world.translation).length
            )
            if s.gizmo_type == "GIZMO_GT_arrow_3d"
            else float(
                (
                    (s.matrix @ bpy.data.objects[s.key[0]].location)
                    - bpy.data.objects[s.key[0]].matrix_world.translation
                ).length
            ),
        }
        for s in specs
    ]
    # moving the empty moves its gizmo
    force.location.x += 0.25
    bpy.context.view_layer.update()
    moved = next(s for s in gizmos.gizmo_specs(bpy.context) if s.key[0] == force.name)
    out["gizmo_follows"] = float((moved.matrix.translation - force.matrix_world.translation).length)
    # another active object: no gizmos
    bpy.ops.mesh.primitive_cube_add(location=(5, 5, 5))
    out["gizmo_poll_other"] = bool(group.poll(bpy.context))
    out["specs_other"] = len(gizmos.gizmo_specs(bpy.context))
    other = bpy.context.active_object
    # select a condition from the list, then remove it
    out["select"] = call(bpy.ops.neurok.select_condition, name=drag.name)
    out["active_after_select"] = bpy.context.view_layer.objects.active.name
    out["remove"] = call(bpy.ops.neurok.remove_condition, name=drag.name)
    out["after_remove"] = [c.name for c in scene_query.conditions_of(obj)]
    out["remove_missing"] = call(bpy.ops.neurok.remove_condition, name="Nope")
    activate(other)
    out["add_force_cube"] = call(bpy.ops.neurok.add_force)
    bpy.ops.object.camera_add()
    out["add_force_camera"] = call(bpy.ops.neurok.add_force)
    return out


def _attempt(obj=None, **prefs_values) -> dict:
    """Simulate with some preferences; the message and whether the scene stayed as it was."""
    p = prefs()
    saved = {k: getattr(p, k) for k in prefs_values}
    for k, v in prefs_values.items():
        setattr(p, k, v)
    before = snapshot(obj)
    start = time.monotonic()
    status, message = call(bpy.ops.neurok.simulate)
    after = snapshot(obj)
    for k, v in saved.items():
        setattr(p, k, v)
    return {
        "status": status,
        "message": message,
        "untouched": before == after,
        "seconds": time.monotonic() - start,
    }


@scenario
def refusals(params) -> dict:
    """What Simulate refuses before any engine starts: each a message, the scene untouched."""
    empty_scene()
    p = prefs()
    # a worker must not even start: point the interpreter at a script that leaves a mark
    mark = Path(params["tmp"]) / "started"
    p.python_path = write_script(Path(params["tmp"]) / "python", f"touch {mark}; exit 1")
    out = {}
    activate(None)
    out["no_active"] = _attempt()
    bpy.ops.object.camera_add()
    out["camera"] = _attempt()
    empty = bpy.data.objects.new("Empty Mesh", bpy.data.meshes.new("Empty Mesh"))
    bpy.context.collection.objects.link(empty)
    activate(empty)
    out["empty_mesh"] = _attempt(empty)
    edges = bpy.data.meshes.new("Edges")
    edges.from_pydata([(0, 0, 0), (1, 0, 0)], [(0, 1)], [])
    wire = bpy.data.objects.new("Wire", edges)
    bpy.context.collection.objects.link(wire)
    activate(wire)
    out["no_faces"] = _attempt(wire)
    sheet = add_grid("Sheet", 6, 4)
    out["over_limit"] = _attempt(sheet, max_vertices=10)
    out["missing_checkpoint"] = _attempt(sheet, checkpoint=str(Path(params["tmp"]) / "nowhere"))
    out["missing_python"] = _attempt(sheet, python_path="/nonexistent/bin/python3")
    bpy.ops.object.mode_set(mode="EDIT")
    out["edit_mode"] = _attempt(sheet)
    bpy.ops.object.mode_set(mode="OBJECT")
    scene = bpy.context.scene
    scene.frame_end = 1
    out["one_frame"] = _attempt(sheet)
    scene.frame_end = 12
    sheet.neurok.physics.pin_group = "Missing"
    out["missing_pin_group"] = _attempt(sheet)
    sheet.neurok.physics.pin_group = ""
    bpy.context.scene.cursor.location = (0, 0, 0)
    bpy.ops.neurok.add_drag()
    drag = bpy.context.active_object
    drag.neurok.condition.frame = 40
    activate(sheet)
    out["drag_out_of_range"] = _attempt(sheet)
    out["worker_started"] = mark.exists()
    return out


@scenario
def worker_failures(params) -> dict:
    """Engines that fail in every way: each a clear message, the scene untouched, no process
    left, the job folder gone."""
    empty_scene()
    tmp = Path(params["tmp"])
    sheet = add_grid("Sheet", 6, 4)
    sheet.shape_key_add(name="Basis")
    sheet.shape_key_add(name="User Key")
    sheet.modifiers.new("User Subsurf", "SUBSURF")
    status = '{"type": "status", "stage": "load", "message": "loading the model"}'
    frame = '{"type": "frame", "index": 0, "count": 12, "energy": 0.0}'
    scripts = {
        "crash": f"echo '{status}'; echo 'Traceback (most recent call last):' >&2;"
        " echo 'RuntimeError: boom in the decoder' >&2; exit 1",
        "killed": f"echo '{status}'; echo '{frame}'; kill -9 $$",
        "engine_error": f'echo \'{status}\'; echo \'{{"type": "error", "kind":'
        ' "CheckpointError", "message": "checkpoint /x has no config.json"}\'; exit 2',
        "silent_exit": "exit 0",
        "isolated": f'exec {params["base_python"]} -I -S "$@"',
    }
    out = {}
    for name, body in scripts.items():
        python = write_script(tmp / f"python_{name}", body)
        out[name] = _attempt(sheet, python_path=python)
    out["bare_venv"] = _attempt(sheet, python_path=params["bare_python"])
    # cancel midway: the engine has started and reported progress, then the user cancels
    python = write_script(tmp / "python_slow", f"echo '{status}'; echo '{frame}'; exec sleep 60")
    watcher = cancel_when(lambda job: getattr(job, "frames_done", 0) >= 1)
    out["cancel"] = _attempt(sheet, python_path=python)
    watcher.join(5)
    out["cancel_pid_alive"] = process_alive(watcher.seen["pid"]) if "pid" in watcher.seen else None
    out["cancel_seen"] = "pid" in watcher.seen
    out["leftover_job_dirs"] = sorted(p.name for p in (tmp / "tmpdir").glob("neurok-*"))
    registry = addon("neurok_blender.engine.registry")
    out["jobs_left"] = list(registry._jobs)
    return out


def _world_rest(obj) -> np.ndarray:
    co = np.empty(len(obj.data.vertices) * 3, dtype=np.float64)
    obj.data.vertices.foreach_get("co", co)
    m = np.array(obj.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def _synthetic_frames(obj, count: int, amplitude: float) -> np.ndarray:
    """World-space frames: the rest shape bent upwards, more with every frame, (T, N, 3)."""
    rest = _world_rest(obj)
    t = np.arange(count, dtype=np.float64)[:, None]  # (T, 1)
    bend = amplitude * t / count * (rest[:, 0] - rest[:, 0].min())[None, :] ** 2  # (T, N)
    frames = np.repeat(rest[None], count, axis=0)  # (T, N, 3)
    frames[..., 2] += bend
    return frames.astype(np.float32)


def _without_modifiers(obj, frame: int) -> np.ndarray:
    shown = [m.show_viewport for m in obj.modifiers]
    for m in obj.modifiers:
        if not m.name.startswith("NeuROK"):
            m.show_viewport = False
    try:
        return evaluated_positions(obj, frame)
    finally:
        for m, s in zip(obj.modifiers, shown, strict=True):
            m.show_viewport = s


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
    frames = _synthetic_frames(user, count, 0.3)
    out["bake1"] = bake.bake(user, frames, scene.frame_start, "SHAPE_KEYS")
    keys = [k.name for k in user.data.shape_keys.key_blocks]
    out["keys_after_bake"] = keys
    errors = []
    for i in range(count):
        got = _without_modifiers(user, scene.frame_start + i)
        errors.append(float(np.abs(got - frames[i]).max()))
    out["shape_key_errors"] = errors
    out["moving"] = float(np.abs(frames[-1] - frames[0]).max())
    out["active_key"] = user.active_shape_key.name
    bag_paths = _fcurve_paths(user.data.shape_keys)
    out["fcurves"] = len(bag_paths)
    out["user_fcurve_kept"] = 'key_blocks["User Key"].value' in bag_paths
    # with the user's key at 0.5 on top, the motion adds to it
    key.value = 0.5
    key.keyframe_insert("value", frame=1)
    got = _without_modifiers(user, scene.frame_start + 5)
    m3 = np.array(user.matrix_world)[:3, :3]
    out["mixed_error"] = float(np.abs(got - (frames[5] + 0.5 * np.array([0, 0, 0.1]) @ m3.T)).max())
    # re-simulating replaces our keys, nothing else
    frames2 = _synthetic_frames(user, count, -0.2)
    bake.bake(user, frames2, scene.frame_start, "SHAPE_KEYS")
    out["keys_after_rebake"] = [k.name for k in user.data.shape_keys.key_blocks]
    got = _without_modifiers(user, scene.frame_start + count - 1)
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
    out["pc2_moves"] = float(
        np.abs(_without_modifiers(user, 12) - _without_modifiers(user, 1)).max()
    )
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
        np.abs(_without_modifiers(user, 12) - _without_modifiers(user, 1)).max()
    )
    scene = bpy.context.scene
    # a plain object: the bake creates the Basis and an action; Clear removes both
    plain = add_grid("Plain", 5, 5, 1.0)
    plain.location = (3, 0, 0)
    plain.rotation_euler = (0, 0.5, 0)
    bpy.context.view_layer.update()
    before = snapshot(plain)
    frames = _synthetic_frames(plain, count, 0.5)
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


def _fcurve_paths(key) -> list[str]:
    from bpy_extras import anim_utils

    anim = key.animation_data
    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)
    return [fc.data_path for fc in bag.fcurves]


@scenario
def gather_world_space(params) -> dict:
    """The request for a parented, rotated, non-uniformly scaled n-gon mesh with every kind of
    condition, a pin group and the scene's gravity and frame range."""
    import bmesh

    empty_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 11, 30
    scene.render.fps, scene.render.fps_base = 30, 1.001
    scene.gravity = (0.0, 0.0, -5.0)
    bpy.ops.object.empty_add(location=(1, 2, 3), rotation=(0.3, 0.2, 0.1))
    parent = bpy.context.active_object
    parent.scale = (2.0, 1.0, 0.5)
    bpy.ops.mesh.primitive_cylinder_add(vertices=8, end_fill_type="NGON")
    obj = bpy.context.active_object
    obj.parent = parent
    obj.rotation_euler = (0.5, 0.0, 1.0)
    obj.scale = (1.0, 3.0, 0.25)
    group = obj.vertex_groups.new(name="Pin")
    group.add([0, 1, 2, 3], 1.0, "REPLACE")
    group.add([4], 0.3, "REPLACE")
    obj.neurok.physics.pin_group = "Pin"
    obj.neurok.physics.mass = 3.0
    obj.neurok.physics.stiffness = 2.0
    obj.neurok.physics.damping = 0.5
    bpy.context.view_layer.update()
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(obj.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[6].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[6])
    bpy.ops.neurok.add_force()
    bpy.ops.object.mode_set(mode="OBJECT")
    scene_query = addon("neurok_blender.scene_query")
    force = scene_query.conditions_of(obj)[0]
    force.neurok.condition.use_frame_range = True
    force.neurok.condition.frame_start, force.neurok.condition.frame_end = 13, 18
    force.neurok.condition.strength = 7.0
    scene.cursor.location = obj.matrix_world @ obj.data.vertices[9].co
    activate(obj)
    bpy.ops.neurok.add_drag()
    drag = bpy.context.active_object
    grabbed = drag.matrix_world.translation.copy()
    drag.location.x += 1.0
    drag.neurok.condition.frame = 16
    activate(obj)
    bpy.ops.neurok.add_velocity()
    vel = bpy.context.active_object
    vel.neurok.condition.whole_object = True
    vel.neurok.condition.speed = 2.0
    activate(obj)
    gather = addon("neurok_blender.gather")
    settings = addon("neurok_blender.preferences").engine_settings(bpy.context)
    got = gather.gather(bpy.context, obj, settings)
    req = got.request
    world = np.array([list(obj.matrix_world @ v.co) for v in obj.data.vertices])
    bpy.context.view_layer.update()
    out = {
        "vertex_error": float(np.abs(req.vertices - world).max()),
        "faces": req.faces.shape,
        "faces_max": int(req.faces.max()),
        "polygons": len(obj.data.polygons),
        "conditions": req.conditions.to_dict(),
        "force_world_z": list(force.matrix_world.to_3x3().col[2].normalized()),
        "drag_target": list(drag.matrix_world.translation),
        "grabbed": list(grabbed),
        "frame_start": got.frame_start,
        "frame_count": got.frame_count,
        "cache_dir": req.cache_dir,
    }
    # the force's Empty moved off its vertex: it then acts at the Empty's point
    force.location.z += 0.3
    bpy.context.view_layer.update()
    moved = gather.gather(bpy.context, obj, settings).request.conditions.forces[0]
    out["moved_force"] = {"vertex": moved.vertex, "point": moved.point}
    out["moved_force_location"] = list(force.matrix_world.translation)
    # no gravity when the scene has it off
    scene.use_gravity = False
    out["gravity_off"] = gather.gather(bpy.context, obj, settings).request.conditions.gravity
    return out


@scenario
def engine_setup(params) -> dict:
    """Install Dependencies without a network, Check Engine with engines good and bad."""
    registry = addon("neurok_blender.engine.registry")
    paths = addon("neurok_blender.paths")
    tmp = Path(params["tmp"])
    out = {}
    start = time.monotonic()
    out["install"] = call(bpy.ops.neurok.install_dependencies)
    out["install_seconds"] = time.monotonic() - start
    out["deps_left"] = sorted(p.name for p in paths.deps_root().iterdir())
    out["status_after_install"] = registry.engine_status().state
    p = prefs()
    p.python_path = params["bare_python"]
    out["check_bare"] = call(bpy.ops.neurok.check_engine)
    out["status_bare"] = [registry.engine_status().state, registry.engine_status().text]
    probe = (
        '{"type": "probe", "ok": true, "protocol": 1, "torch": "2.13.0",'
        ' "device": "cpu (2 threads)", "devices": ["cpu"], "checkpoint": {}}'
    )
    p.python_path = write_script(tmp / "python_probe", f"echo '{probe}'")
    out["check_fake"] = call(bpy.ops.neurok.check_engine)
    out["status_fake"] = [registry.engine_status().state, registry.engine_status().text]
    return out


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
    sheet = _sheet_with_user_setup()
    corner = 7
    force = _force_at_vertex(sheet, corner, 40.0)
    force_name = force.name
    sheet.neurok.physics.use_gravity = False
    activate(sheet)
    bpy.data.objects["Bystander"].select_set(True)
    rest = _world_rest(sheet)
    selection = snapshot(sheet)["selected"]
    bpy.ops.ed.undo_push(message="before simulate")
    start = time.monotonic()
    out["simulate"] = call(bpy.ops.neurok.simulate, undo=True)
    out["seconds"] = time.monotonic() - start
    sheet = bpy.data.objects["Sheet"]
    out["keys"] = [k.name for k in sheet.data.shape_keys.key_blocks]
    out["modifiers"] = [m.name for m in sheet.modifiers]
    out["selection_kept"] = snapshot(sheet)["selected"] == selection
    out["location_animated"] = sheet.animation_data.action is not None
    frames = [_without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
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
    start = time.monotonic()
    out["simulate_pc2"] = call(bpy.ops.neurok.simulate, undo=True)
    out["seconds_pc2"] = time.monotonic() - start
    sheet = bpy.data.objects["Sheet"]
    out["modifiers_pc2"] = [m.name for m in sheet.modifiers]
    out["keys_pc2"] = [k.name for k in sheet.data.shape_keys.key_blocks]
    pc2_frames = np.stack(
        [_without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    )
    out["pc2_vs_shape_keys"] = float(np.abs(pc2_frames - shape_key_frames).max())
    # no force, no gravity, no velocity: the object stays exactly at rest
    bpy.data.objects.remove(bpy.data.objects[force_name])
    sheet.neurok.output.bake_mode = "SHAPE_KEYS"
    activate(sheet)
    out["simulate_still"] = call(bpy.ops.neurok.simulate)
    still = [_without_modifiers(sheet, f) for f in range(scene.frame_start, scene.frame_end + 1)]
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
    out["bad_checkpoint"] = _attempt(sheet, checkpoint=str(empty_dir))
    out["jobs_left"] = list(registry._jobs)
    out["leftover_job_dirs"] = sorted(
        p.name for p in (Path(params["tmp"]) / "tmpdir").glob("neurok-*")
    )
    return out


class RecordingLayout:
    """Stands in for UILayout: records what a draw method lays out and checks that every
    property and operator it names exists (a typo would only show in a real UI otherwise)."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.active = True
        self.enabled = True
        self.scale_y = 1.0

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.log)

    row = column = box = split = _child

    def label(self, *, text="", icon="NONE", **kwargs):
        self.log["labels"].append(text)

    def prop(self, data, name, **kwargs):
        if name not in data.bl_rna.properties:
            self.log["errors"].append(f"no property {name!r} on {data.bl_rna.identifier}")
        self.log["props"].append(name)

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        self.prop(data, name)
        if search_name not in search_data.bl_rna.properties:
            self.log["errors"].append(f"no collection {search_name!r}")

    def operator(self, idname, **kwargs):
        if not _op_exists(idname):
            self.log["errors"].append(f"no operator {idname!r}")
        self.log["operators"].append(idname)
        props = bpy.ops
        for part in idname.split("."):
            props = getattr(props, part)
        return _OperatorProps(props.get_rna_type(), self.log)

    def progress(self, *, factor=0.0, type="BAR", text=""):
        self.log["progress"].append((round(factor, 3), text))


class _OperatorProps:
    def __init__(self, rna, log):
        object.__setattr__(self, "_rna", rna)
        object.__setattr__(self, "_log", log)

    def __setattr__(self, name, value):
        if name not in self._rna.properties:
            self._log["errors"].append(f"operator {self._rna.identifier} has no {name!r}")


def _draw_all() -> dict:
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    for cls in (
        bpy.types.NEUROK_PT_main,
        bpy.types.NEUROK_PT_conditions,
        bpy.types.NEUROK_PT_physics,
        bpy.types.NEUROK_PT_output,
    ):
        if hasattr(cls, "poll") and not cls.poll(bpy.context):
            continue
        cls.draw(_PanelStandIn(log), bpy.context)
    return log


class _PanelStandIn:
    def __init__(self, log):
        self.layout = RecordingLayout(log)

    def __getattr__(self, name):  # the panel's own helpers (draw_row, ...) as plain functions
        for cls in (
            bpy.types.NEUROK_PT_main,
            bpy.types.NEUROK_PT_conditions,
            bpy.types.NEUROK_PT_output,
        ):
            if hasattr(cls, name):
                return getattr(cls, name)
        raise AttributeError(name)


@scenario
def panels(params) -> dict:
    """Draw the sidebar and the preferences in each state with a recording layout."""
    empty_scene()
    out = {}
    activate(None)
    out["nothing"] = _draw_all()
    sheet = add_grid("Sheet", 4, 4)
    sheet.vertex_groups.new(name="Pin")
    out["mesh"] = _draw_all()
    for op in (bpy.ops.neurok.add_force, bpy.ops.neurok.add_drag, bpy.ops.neurok.add_velocity):
        activate(sheet)
        op()
        out[f"active_{bpy.context.active_object.neurok.condition.kind}"] = _draw_all()
    bake = addon("neurok_blender.bake")
    frames = _synthetic_frames(sheet, 12, 0.1)
    bake.bake(sheet, frames, 1, "SHAPE_KEYS")
    activate(sheet)
    out["results"] = _draw_all()
    # a running simulation: a progress bar with a cancel button instead of Simulate
    job_module = addon("neurok_blender.engine.job")
    registry = addon("neurok_blender.engine.registry")
    job = job_module.SimulationJob(Path(params["tmp"]) / "job", 12)
    job.fraction, job.status = 0.4, "frame 3 of 12"
    registry.start(registry.SIMULATE, job)
    out["running"] = _draw_all()
    registry.end(registry.SIMULATE, job)
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    ui_prefs = addon("neurok_blender.ui.preferences")
    ui_prefs.draw_preferences(prefs(), RecordingLayout(log), bpy.context)
    out["preferences"] = log
    return out


def _gizmo_group_registered() -> bool:
    return bpy.types.GizmoGroup.bl_rna_get_subclass_py("NEUROK_GGT_conditions") is not None


def _op_exists(idname: str) -> bool:
    module, name = idname.split(".")
    try:
        getattr(getattr(bpy.ops, module), name).get_rna_type()
    except (AttributeError, KeyError):
        return False
    return True


def main() -> int:
    name, params = sys.argv[1], json.loads(sys.argv[2])
    install(params["zip"])
    out = SCENARIOS[name](params)
    Path(params["result"]).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
