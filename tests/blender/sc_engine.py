"""Scenarios: engines that fail, dependency install without a network, engine check."""

from __future__ import annotations

from pathlib import Path

import bpy
from bl_helpers import (
    add_grid,
    addon,
    attempt_simulate,
    call,
    cancel_when,
    empty_scene,
    prefs,
    process_alive,
    scenario,
    write_script,
)


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
        out[name] = attempt_simulate(sheet, python_path=python)
    out["bare_venv"] = attempt_simulate(sheet, python_path=params["bare_python"])
    out["not_python"] = attempt_simulate(sheet, python_path="/bin/false")
    # cancel midway: the engine has started and reported progress, then the user cancels
    python = write_script(tmp / "python_slow", f"echo '{status}'; echo '{frame}'; exec sleep 60")
    watcher = cancel_when(lambda job: getattr(job, "frames_done", 0) >= 1)
    out["cancel"] = attempt_simulate(sheet, python_path=python)
    watcher.join(5)
    out["cancel_pid_alive"] = process_alive(watcher.seen["pid"]) if "pid" in watcher.seen else None
    out["cancel_seen"] = "pid" in watcher.seen
    # a background run that outlasts the preferences' time limit stops with a message
    out["time_limit"] = attempt_simulate(sheet, python_path=python, time_limit=2)
    out["leftover_job_dirs"] = sorted(p.name for p in (tmp / "tmpdir").glob("neurok-*"))
    registry = addon("neurok_blender.engine.registry")
    out["jobs_left"] = list(registry._jobs)
    return out


@scenario
def engine_setup(params) -> dict:
    """Install Dependencies without a network, Check Engine with engines good and bad."""
    registry = addon("neurok_blender.engine.registry")
    paths = addon("neurok_blender.paths")
    tmp = Path(params["tmp"])
    out = {}
    out["install"] = call(bpy.ops.neurok.install_dependencies)
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
