# SPDX-License-Identifier: GPL-3.0-or-later
"""The scripting API (background mode, render farms): simulate an object or fit it to a target,
follow and cancel the run, read its reports and figures.

    from bl_ext.user_default import neurok
    run = neurok.api.simulate(bpy.data.objects["Sheet"], on_progress=print)
    run.report, run.figures["seconds"], run.error
    fit = neurok.api.fit(bpy.data.objects["Lid"], bpy.data.objects["Open lid"], key_as="RIG")
    fit.figures["chamfer"], fit.figures["keyed"]

They run the operators' own steps (``operators.simulate.SimulateFlow``,
``operators.fit.FitFlow``) with the add-on's preferences, the object's NeuROK settings and the
scene's frame range (a fit: its current frame). The engine works in its own process; this
process reads its messages, and applies the result, only while the script calls ``poll`` or
``wait`` (Blender runs nothing meanwhile in background mode), so a run started with
``wait=False`` must be polled, waited for or cancelled before another can start.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import bpy

from .operators.fit import FitFlow
from .operators.simulate import SimulateFlow
from .preferences import engine_settings

KEY_AS = ("RIG", "SHAPE_KEY")  # Fit to Target's Key As: a rig pose or a shape key

POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Progress:
    """fraction: 0..1 of the whole run; status: what the engine does now ('frame 3 of 24')."""

    fraction: float
    status: str


class _Collected:
    """An operator's reports collected instead of shown."""

    reports: list[tuple[str, str]]

    def report(self, kinds, message: str) -> None:
        self.reports.append((next(iter(kinds)), message))


class _ScriptSimulate(_Collected, SimulateFlow):
    """The Simulate operator's steps on a given object."""

    def __init__(self, obj, others=()):
        self.obj, self.others = obj, tuple(others)
        self.reports = []

    def target(self, context):
        return self.obj

    def together(self, context, obj) -> list:
        return [obj, *(o for o in self.others if o != obj)]


class _ScriptFit(_Collected, FitFlow):
    """The Fit to Target operator's steps on a given object, target and Key As (None: the
    object's NeuROK settings)."""

    def __init__(self, obj, target, key_as: str | None):
        self.obj, self._target, self._key_as = obj, target, key_as
        self.reports = []

    def subject(self, context):
        return self.obj

    def fit_target(self, obj):
        return self._target if self._target is not None else super().fit_target(obj)

    def key_as(self, obj) -> str:
        return self._key_as or super().key_as(obj)


class Run:
    """One run of an operator's steps (``flow``), driven by the script: ``poll``, ``wait``,
    ``cancel``; done, result, progress, report, figures and error as :class:`SimulationRun`
    says."""

    def __init__(self, flow, on_progress: Callable[[Progress], None] | None = None):
        self._context = bpy.context
        self._flow = flow
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


class SimulationRun(Run):
    """One simulation started by :func:`simulate`.

    done: over (baked, failed or cancelled); result: 'FINISHED' | 'CANCELLED' once done;
    progress: the latest :class:`Progress`; report: the operator's messages as (level, text),
    level 'INFO' | 'WARNING' | 'ERROR'; figures: the engine's numbers of a baked run (its info:
    device, dynamics, frames_on_barrier, ...; plus seconds, frames and baked, the bake's summary),
    empty otherwise; error: the message of a failure (an ERROR report), else None; cancelled.
    """

    def __init__(self, obj, on_progress: Callable[[Progress], None] | None = None, together=()):
        super().__init__(_ScriptSimulate(obj, together), on_progress)


class FitRun(Run):
    """One fit started by :func:`fit`: as :class:`SimulationRun`, but figures are the engine's
    numbers of a keyed fit (its info: chamfer, the normalised frame's squared distance; bones;
    start; seconds, the fit's parts) plus total_seconds (the engine's), frame (where it was
    keyed) and keyed (what was keyed, as the report words it)."""

    def __init__(
        self,
        obj,
        target=None,
        key_as: str | None = None,
        on_progress: Callable[[Progress], None] | None = None,
    ):
        super().__init__(_ScriptFit(obj, target, key_as), on_progress)


def simulate(
    obj: bpy.types.Object,
    *,
    together: Sequence[bpy.types.Object] = (),
    wait: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
) -> SimulationRun:
    """Simulate ``obj`` and bake the motion as its NeuROK settings ask, as the Simulate button
    does; with ``wait`` return once done, else at once (then ``poll`` or ``wait`` on the run).
    ``together``: other meshes that move with it, meeting it and each other, each baked onto
    itself (the button simulates the selected meshes whose role is Moves); the scene's
    settings (frames, gravity, ground, colliders, contact) are ``obj``'s.

    on_progress(Progress) is called from ``poll`` whenever the progress changed. A run refused
    before it started (an invalid object, another simulation running) is returned done, with
    the reason as its ``error``.
    """
    run = SimulationRun(obj, on_progress, together)
    if wait:
        run.wait()
    return run


def fit(
    obj: bpy.types.Object,
    target: bpy.types.Object | None = None,
    *,
    key_as: str | None = None,
    wait: bool = True,
    on_progress: Callable[[Progress], None] | None = None,
) -> FitRun:
    """Fit ``obj`` to the shape of the mesh ``target`` and key it at the scene's current frame,
    as the Fit to Target button does; ``target`` and ``key_as`` ("RIG": the pose of its NeuROK
    rig, "SHAPE_KEY": the shape key "NeuROK Fit") default to the object's NeuROK settings. With
    ``wait`` return once done, else at once (then ``poll`` or ``wait`` on the run).

    A fit refused before it started (no target, the object itself, a target without faces,
    the engine busy) is returned done, with the reason as its ``error``.
    """
    if key_as is not None and key_as not in KEY_AS:
        raise ValueError(f"key_as must be one of {', '.join(KEY_AS)}, got {key_as!r}")
    run = FitRun(obj, target, key_as, on_progress)
    if wait:
        run.wait()
    return run
