# SPDX-License-Identifier: GPL-3.0-or-later
"""Run an engine job from an operator without freezing Blender.

Interactive: ``invoke`` starts the child and returns ``RUNNING_MODAL``; a window timer polls it,
the cursor progress, the status bar and the panels show how far it got, Esc cancels (the child is
terminated and nothing in the scene changes). Background mode (``bpy.app.background``) and
``execute`` (scripts) run the same job to completion synchronously. The result is applied on the
main thread in ``job_done``; with ``UNDO`` in ``bl_options`` that is one undo step.
"""

from __future__ import annotations

import bpy

from ..engine import registry
from ..engine.job import Job
from ..paths import engine_dir
from ..viewport import tag_redraw

TIMER_SECONDS = 0.1


class JobFlow:
    """A job from start to its reports, without Blender's operator machinery (``api`` drives it
    from scripts): subclasses set ``job_kind`` and ``bl_label``, write ``start_job``/``job_done``,
    and have a ``report(kinds, message)`` (the Operator's, or one that collects)."""

    job_kind = ""
    bl_label = ""

    def start_job(self, context) -> Job | None:
        """Validate, start the child; report and return None when it cannot start."""
        raise NotImplementedError

    def job_done(self, context, job: Job) -> set[str]:
        """Apply a successful job's result (main thread); return the operator's result."""
        raise NotImplementedError

    def job_failed(self, context, job: Job) -> None:
        """Hook for an error or a cancel (after it was reported)."""

    def _begin(self, context) -> Job | None:
        if registry.get(self.job_kind) is not None:
            self.report({"ERROR"}, f"{self.bl_label}: already running; wait or cancel it")
            return None
        other = registry.engine_job() if self.job_kind in registry.ENGINE_JOBS else None
        if other is not None:  # the warm engine answers one request at a time
            self.report(
                {"ERROR"}, f"{self.bl_label}: the engine is busy ({other.title}); wait or cancel it"
            )
            return None
        job = self.start_job(context)
        if job is None:
            return None
        registry.start(self.job_kind, job)
        return job  # possibly finished already: the child could not even start

    def _conclude(self, context, job: Job):
        registry.end(self.job_kind, job)
        try:
            if job.cancelled and job.timed_out is not None:
                self.report(
                    {"ERROR"},
                    f"{self.bl_label}: stopped at the time limit of {job.timed_out:g} s"
                    " (Preferences > Add-ons > NeuROK > Time Limit); nothing was changed."
                    " Raise the limit (0: none), or ask for fewer frames or a smaller mesh",
                )
                self.job_failed(context, job)
                return {"CANCELLED"}
            if job.cancelled:
                self.report({"WARNING"}, f"{self.bl_label}: cancelled; nothing was changed")
                self.job_failed(context, job)
                return {"CANCELLED"}
            if job.error:
                self.report({"ERROR"}, f"{self.bl_label}: {job.error}")
                self.job_failed(context, job)
                return {"CANCELLED"}
            return self.job_done(context, job)
        finally:
            job.cleanup()
            _redraw(context)


class EngineJobFlow(JobFlow):
    """A flow whose job is one request of the warm engine (Simulate, Fit to Target)."""

    def run_on_engine(self, job, command, request_path) -> Job:
        """Send the request to the warm engine (``engine.server``), started now if none can
        take it; a failed start ends ``job`` with its reason. Returns ``job``."""
        try:
            server = registry.engine_server(command, engine_dir())
        except OSError as exc:
            job.start_failed(f"cannot start {command.python!r}: {exc.strerror or exc}")
            return job
        job.attach(server, request_path)
        return job

    def live_mesh(self, name: str, uid: int, nothing: str):
        """The mesh object a finished job was started for, or None once reported why not (it
        is gone, or in Edit Mode); ``nothing``: what was then not done ("nothing baked")."""
        obj = bpy.data.objects.get(name)
        if obj is None or obj.session_uid != uid or obj.type != "MESH":
            self.report({"ERROR"}, f"{self.bl_label}: '{name}' is gone; {nothing}")
            return None
        if obj.mode == "EDIT":
            self.report({"ERROR"}, f"{self.bl_label}: '{obj.name}' is in Edit Mode; {nothing}")
            return None
        return obj

    def job_failed(self, context, job):
        if job.error and getattr(job, "error_kind", None) == "MissingDependency":
            registry.set_engine_status("error", job.error)


class JobOperator(JobFlow):
    """Mixin for an Operator: invoked, a modal timer polls the job; executed, it runs to its end."""

    # -- entry points ------------------------------------------------------------------------
    def execute(self, context):
        job = self._begin(context)
        if job is None:
            return {"CANCELLED"}
        return self._run_to_end(context, job)

    def invoke(self, context, event):
        job = self._begin(context)
        if job is None:
            return {"CANCELLED"}
        if bpy.app.background or context.window is None:
            return self._run_to_end(context, job)
        wm = context.window_manager
        self._job = job
        self._timer = wm.event_timer_add(TIMER_SECONDS, window=context.window)
        wm.modal_handler_add(self)
        wm.progress_begin(0, 100)
        self._show(context, job)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        job = self._job
        if event.type == "ESC" and event.value == "PRESS":
            job.request_cancel()
        elif event.type != "TIMER":
            return {"PASS_THROUGH"}  # the rest of Blender stays usable meanwhile
        if job.poll():
            self._stop_ui(context)
            return self._conclude(context, job)
        self._show(context, job)
        return {"RUNNING_MODAL"}

    def cancel(self, context):
        """Blender ends the modal operator (a file is loaded, the window closes)."""
        job = getattr(self, "_job", None)
        if job is not None and not job.finished:
            job.request_cancel()
            job.poll()
        self._stop_ui(context)
        if job is not None:
            registry.end(self.job_kind, job)
            job.cleanup()

    # -- internals ---------------------------------------------------------------------------
    def _run_to_end(self, context, job: Job):
        from ..preferences import engine_settings

        limit = engine_settings(context).time_limit
        job.wait(timeout=limit if limit > 0 else None)
        return self._conclude(context, job)

    def _show(self, context, job: Job) -> None:
        percent = int(round(job.fraction * 100))
        context.window_manager.progress_update(percent)
        if context.workspace is not None:
            context.workspace.status_text_set(
                f"{job.title}: {job.status} ({percent}%)   Esc: cancel"
            )
        _redraw(context)

    def _stop_ui(self, context) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            context.window_manager.event_timer_remove(timer)
            self._timer = None
            context.window_manager.progress_end()
            if context.workspace is not None:
                context.workspace.status_text_set(None)


def _redraw(context) -> None:
    """Redraw the sidebars and preferences that show a job's progress."""
    tag_redraw(context, {"VIEW_3D", "PREFERENCES"})
