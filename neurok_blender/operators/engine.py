# SPDX-License-Identifier: GPL-3.0-or-later
"""Check the engine (``--probe``) and install its dependencies, both as non-blocking jobs; warm
the engine up ahead of a Simulate."""

from __future__ import annotations

import bpy

from ..engine import registry
from ..engine.command import EngineSetupError, engine_command, python_tag, resolve_python
from ..engine.install import InstallJob, has_nvidia_gpu
from ..engine.job import ProbeJob
from ..paths import deps_root, engine_dir, new_job_dir
from ..preferences import engine_settings
from .job_runner import JobOperator


class NEUROK_OT_check_engine(JobOperator, bpy.types.Operator):
    """Start the engine once to check its Python, torch, the device and the checkpoint"""

    bl_idname = "neurok.check_engine"
    bl_label = "Check Engine"
    job_kind = registry.PROBE

    def start_job(self, context):
        settings = engine_settings(context)
        try:
            command = engine_command(settings.python, deps_root())
        except EngineSetupError as exc:
            registry.set_engine_status("error", str(exc))
            self.report({"ERROR"}, f"Check Engine: {exc}")
            return None
        args = ["--probe", "--device", settings.device]
        if settings.checkpoint:
            args += ["--checkpoint", settings.checkpoint]
        job = ProbeJob(new_job_dir())
        registry.set_engine_status("checking", "checking the engine...")
        job.start(command.argv(*args), env=command.env())
        return job

    def job_done(self, context, job):
        registry.set_engine_status("ready", job.summary())
        self.report({"INFO"}, f"NeuROK engine ready: {job.summary()}")
        return {"FINISHED"}

    def job_failed(self, context, job):
        text = "check cancelled" if job.cancelled else (job.error or "failed")
        registry.set_engine_status("unknown" if job.cancelled else "error", text)


def warm_up(context=None) -> str | None:
    """Start the warm engine (``engine.server``) for the current preferences unless one is
    running or a simulation or a fit is; returns why it could not, or None. The engine imports
    torch in the background; nothing waits for it."""
    if registry.warm_server() is not None or registry.engine_job() is not None:
        return None
    try:
        command = engine_command(engine_settings(context).python, deps_root())
        registry.engine_server(command, engine_dir())
    except (EngineSetupError, OSError) as exc:
        return str(exc)
    return None


_warmed: set[str] = set()  # engine interpreters (as set in the preferences) warmed by the panel
_timer = None  # the pending warm-up, if any


def warm_up_once() -> None:
    """The panel's warm-up, from a timer (never start a process while a panel draws): at most
    once per interpreter setting per session, so an engine that cannot start is reported by
    Simulate and Check Engine rather than retried at every redraw. Cheap when nothing is due."""
    global _timer
    if registry.warm_server() is not None or registry.engine_job() is not None:
        return
    key = engine_settings().python
    if key in _warmed:
        return
    _warmed.add(key)

    def start() -> None:
        global _timer
        _timer = None
        warm_up()

    _timer = start
    bpy.app.timers.register(start, first_interval=0.0)


def cancel_warm_up() -> None:
    """Drop a warm-up that has not run yet (the add-on is being disabled)."""
    global _timer
    if _timer is not None and bpy.app.timers.is_registered(_timer):
        bpy.app.timers.unregister(_timer)
    _timer = None


class NEUROK_OT_start_engine(bpy.types.Operator):
    """Start the engine now so that the next Simulate need not wait for it (the NeuROK tab does
    this by itself when it is first shown)"""

    bl_idname = "neurok.start_engine"
    bl_label = "Start Engine"

    def execute(self, context):
        problem = warm_up(context)
        if problem:
            self.report({"ERROR"}, f"Start Engine: {problem}")
            return {"CANCELLED"}
        return {"FINISHED"}


class NEUROK_OT_install_dependencies(JobOperator, bpy.types.Operator):
    """Download and install torch and the engine's other packages for the engine's Python
    (into the add-on's user folder; needs the internet, about 1 GB)"""

    bl_idname = "neurok.install_dependencies"
    bl_label = "Install Dependencies"
    job_kind = registry.INSTALL

    def start_job(self, context):
        settings = engine_settings(context)
        try:
            python = resolve_python(settings.python)
            target = deps_root() / python_tag(python)
        except EngineSetupError as exc:
            self.report({"ERROR"}, f"Install Dependencies: {exc}")
            return None
        job = InstallJob(new_job_dir(), target)
        env = engine_command(settings.python, None).env()
        job.start_pip(python, cpu_only=not has_nvidia_gpu(), env=env)
        return job

    def job_done(self, context, job):
        registry.set_engine_status("unknown", "dependencies installed; press Check Engine")
        self.report({"INFO"}, f"Installed the engine's dependencies into {job.result['target']}")
        return {"FINISHED"}

    def job_failed(self, context, job):
        if job.error:
            registry.set_engine_status("error", job.error)
