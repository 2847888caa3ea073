"""Helpers shared by the Blender scenarios: install the zip, call operators as scripts do,
build small scenes, snapshot what must stay untouched.
"""

from __future__ import annotations

import importlib
import os
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


def engine_scene(params, last_frame: int):
    """An empty scene of frames 1 to ``last_frame`` whose engine runs on the CPU with the
    checkpoint folder ``params["checkpoint"]`` (a folder without a model: the rig space needs
    none); returns the scene."""
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, last_frame
    return scene


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


def world_rest(obj) -> np.ndarray:
    co = np.empty(len(obj.data.vertices) * 3, dtype=np.float64)
    obj.data.vertices.foreach_get("co", co)
    m = np.array(obj.matrix_world)
    return co.reshape(-1, 3) @ m[:3, :3].T + m[:3, 3]


def synthetic_frames(obj, count: int, amplitude: float) -> np.ndarray:
    """World-space frames: the rest shape bent upwards, more with every frame, (T, N, 3)."""
    rest = world_rest(obj)
    t = np.arange(count, dtype=np.float64)[:, None]  # (T, 1)
    bend = amplitude * t / count * (rest[:, 0] - rest[:, 0].min())[None, :] ** 2  # (T, N)
    frames = np.repeat(rest[None], count, axis=0)  # (T, N, 3)
    frames[..., 2] += bend
    return frames.astype(np.float32)


def without_modifiers(obj, frame: int) -> np.ndarray:
    shown = [m.show_viewport for m in obj.modifiers]
    for m in obj.modifiers:
        if not m.name.startswith("NeuROK"):
            m.show_viewport = False
    try:
        return evaluated_positions(obj, frame)
    finally:
        for m, s in zip(obj.modifiers, shown, strict=True):
            m.show_viewport = s


def fcurve_paths(key) -> list[str]:
    from bpy_extras import anim_utils

    anim = key.animation_data
    bag = anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)
    return [fc.data_path for fc in bag.fcurves]


def attempt_simulate(obj=None, **prefs_values) -> dict:
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


def gizmo_group_registered() -> bool:
    return bpy.types.GizmoGroup.bl_rna_get_subclass_py("NEUROK_GGT_conditions") is not None


def op_exists(idname: str) -> bool:
    module, name = idname.split(".")
    try:
        getattr(getattr(bpy.ops, module), name).get_rna_type()
    except (AttributeError, KeyError):
        return False
    return True
