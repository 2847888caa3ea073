# SPDX-License-Identifier: GPL-3.0-or-later
"""The scripting API (background mode, render farms): simulate an object, follow and cancel it,
read its reports and figures.

    from bl_ext.user_default import neurok
    run = neurok.api.simulate(bpy.data.objects["Sheet"], on_progress=print)
    run.report, run.figures["seconds"], run.error

It runs the Simulate operator's own steps (``operators.simulate.SimulateFlow``) with the add-on's
preferences, the object's NeuROK settings and the scene's frame range. The engine works in its
own process; this process reads its messages, and applies the result, only while the script
calls ``poll`` or ``wait`` (Blender runs nothing meanwhile in background mode), so a run started
with ``wait=False`` must be polled, waited for or cancelled before another can start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import bpy

from .operators.simulate import SimulateFlow
from .preferences import engine_settings

POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Progress:
    """fraction: 0..1 of the whole run; status: what the engine does now ('frame 3 of 24')."""

    fraction: float
    status: str


class _ScriptSimulate(SimulateFlow):
    """The operator's steps on a given object, its reports collected instead of shown."""

    def __init__(self, obj):
        self.obj = obj
        self.reports: list[tuple[str, str]] = []

    def target(self, context):
        return self.obj

    def report(self, kinds, message: str) -> None:
        self.reports.append((next(iter(kinds)), message))


class SimulationRun:
    """One simulation started by :func:`simulate`.

    done: over (baked, failed or cancelled); result: 'FINISHED' | 'CANCELLED' once done;
    progress: the latest :class:`Progress`; report: the operator's messages as (level, text),
    level 'INFO' | 'WARNING' | 'ERROR'; figures: the engine's numbers of a baked run (its info:
    device, dynamics, frames_on_barrier, ...; plus seconds, frames and baked, the bake's summary),
    empty otherwise; error: the message of a failure (an ERROR report), else None; cancelled.
    """

    def __init__(self, obj, on_progress: Callable[[Progress], None] | None = None):
        self._context = bpy.context
        self._flow = _ScriptSimulate(obj)
        self._on_progress = on_progress
        self.result: str | None = None
        self.progress = Progress(0.0, "starting")
        limit = engine_settings(self._context).time_limit
        self._deadline = time.monotonic() + limit if limit > 0 else None
        self._limit = limit
        self._job = self._flow._begin(self._context)
        if self._job is None:
            self.result = "CANCELLED"  # refused before it started: the reason is in ``report``

    # -- state -------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def cancelled(self) -> bool:
        return self._job is not None and self._job.cancelled

    @property
    def report(self) -> list[tuple[str, str]]:
        return list(self._flow.reports)

    @property
    def figures(self) -> dict:
        return dict(self._flow.figures or {})

    @property
    def error(self) -> str | None:
        return next((text for level, text in self._flow.reports if level == "ERROR"), None)

    # -- driving it --------------------------------------------------------------------------
    def poll(self) -> bool:
        """Read what the engine sent, apply the result once it is over; True when done."""
        if self.done:
            return True
        job = self._job
        if self._deadline is not None and job.timed_out is None:
            if time.monotonic() > self._deadline:
                job.timed_out = self._limit  # the operator's time limit, reported as its
                job.request_cancel()
        over = job.poll()
        self._notify(Progress(job.fraction, job.status))
        if over:
            self.result = next(iter(self._flow._conclude(self._context, job)))
        return self.done

    def wait(self, timeout: float | None = None) -> bool:
        """Poll until done, or for at most ``timeout`` seconds (the run goes on); True if done.
        The preferences' Time Limit still stops the run, as it stops the operator."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self.poll():
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def cancel(self) -> None:
        """Stop the engine now; the object stays as it was (``cancelled``, a WARNING report)."""
        if not self.done:
            self._job.request_cancel()
            self.poll()

    def _notify(self, progress: Progress) -> None:
        if progress != self.progress:
            self.progress = progress
            if self._on_progress is not None:
                self._on_progress(progress)


def simulate(
    obj: bpy.types.Object,
    *,
    wait: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
) -> SimulationRun:
    """Simulate ``obj`` and bake the motion as its NeuROK settings ask, as the Simulate button
    does; with ``wait`` return once done, else at once (then ``poll`` or ``wait`` on the run).

    on_progress(Progress) is called from ``poll`` whenever the progress changed. A run refused
    before it started (an invalid object, another simulation running) is returned done, with
    the reason as its ``error``.
    """
    run = SimulationRun(obj, on_progress)
    if wait:
        run.wait()
    return run
