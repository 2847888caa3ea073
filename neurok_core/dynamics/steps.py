"""Step-size control of the integrator: how many frames a step covers and in how many RK4 steps.

The energy-balance error of an RK4 step over a frame falls as n^-4 with n substeps; a step aims at
``AIM`` of its limit, so that the next frame, whose error differs somewhat, mostly passes the
first time. A rejected frame is redone with the n that brings its error to ``AIM`` of the limit
(at least one step more, at most twice as many; a multi-frame step is halved), and after an
accepted frame the next one starts from the n that would have put this one's error there (never
more: a growing error is met by a rejection); a frame at 1/32 of the limit or under lets the next
one try twice the step. :class:`StepLimits` fits a wanted step to what the known frequencies need
for RK4 accuracy and stability (w_stiffness * h <= ``oscillation_step``, w * h <= ``damped_step``
for critically damped drag hands and the damping rate), to the frames where the loads change
(a multi-frame step never straddles one), to the user's minimum and, with the local model, to its
trusted radius.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .lagrangian import Motion, mass_metric
from .loads import Loads
from .settings import DynamicsSettings
from .system import PointKinematics

AIM = 0.3


@dataclass
class State:
    """The integrator's state: q, q' (kq,), the work W of the non-conservative forces so far,
    the points' kinematics and the motion there, the local model's expansion they come from
    (None without one) and the contact's share of W (its damping and friction, J)."""

    q: Tensor
    qdot: Tensor
    work: float
    kin: PointKinematics
    motion: Motion
    model: object = None
    contact_work: float = 0.0

    @property
    def energy(self) -> float:
        return self.motion.kinetic + self.motion.potential


@dataclass(frozen=True)
class Step:
    """One step: end state, frames k, substeps n, energy-balance error and its limit."""

    state: State
    frames: int
    substeps: int
    residual: float
    limit: float
    rows: tuple = ()  # (q, q', kinetic, potential, work) of each frame it produced


def aimed(step: Step) -> int:
    """Substeps per frame that would have put ``step``'s error (~ n^-4) at AIM of its limit."""
    return math.ceil(step.substeps * (step.residual / (AIM * step.limit)) ** 0.25)


def refined(step: Step) -> int:
    """Substeps per frame (k = 1) that bring a rejected step's error to AIM of its limit: at
    least one more than it had, at most twice as many."""
    n = step.substeps
    return min(max(aimed(step), n + 1), 2 * n)


def shrink(step: Step, k: int, n: int) -> float:
    """The step length k / n frames over that of ``step``."""
    return (k / n) / (step.frames / step.substeps)


def next_step(step: Step) -> tuple[int, int]:
    """(k, n) to try after an accepted step: with substeps, the n that puts the error at AIM
    of the limit (from half to the same n: a growing error is met by a rejection); a frame
    that would need under one substep doubles the frames per step instead."""
    k, n = step.frames, step.substeps
    if step.residual >= step.limit / 32:  # RK4: twice the step, about 16x the error
        if n == 1:
            return k, 1
        return 1, min(max(aimed(step), (n + 1) // 2), n)
    return (k, n // 2) if n > 1 else (2 * k, 1)


class StepLimits:
    """The largest steps the frequencies, the loads' changes, the user's minimum and the local
    model's trusted radius allow (module docstring). dt: seconds per frame; drags: the drag
    hands (``drag.DragHandle``); radius: a callable giving the local model's trusted radius in
    q (inf without one)."""

    def __init__(
        self,
        loads: Loads,
        drags: list,
        settings: DynamicsSettings,
        dt: float,
        min_substeps: int,
        radius=None,
    ) -> None:
        self.loads, self.drags, self.settings = loads, drags, settings
        self.dt, self.min_substeps = dt, min_substeps
        self.radius = radius
        self.changes = self._change_frames()

    def _change_frames(self) -> list[int]:
        """Frames where the loads switch (a multi-frame step never straddles one)."""
        marks = set()
        for timed in (self.loads.forces, self.loads.winds):
            marks.update(int(f) for f in timed.start.tolist())
            marks.update(int(f) for f in timed.end.tolist())
        for h in self.drags:
            marks.update((h.start_frame, h.frame))
        return sorted(marks)

    def need(self, frame: int) -> float:
        """RK4 steps per frame that the known frequencies require (may be < 1)."""
        st, loads = self.settings, self.loads
        damped = [loads.damping, *(h.omega for h in self.drags if h.active(frame))]
        springs = 0.0 if loads.springs is None else loads.springs.omega
        return max(
            self.dt * max(loads.stiffness_omega, springs) / st.steps.oscillation_step,
            self.dt * max(damped) / st.steps.damped_step,
        )

    def contact_need(self, kin: PointKinematics, qdot: Tensor) -> float:
        """RK4 steps per frame the contact requires at a state (0 without contact): its
        frequency in the reduced coordinates (``contact.ContactForces.stiffness_rate``) and,
        near a collider mesh, at most half the grid's band travelled per step by any point
        within reach of it (so that no point passes through a thin collider within one step;
        the ground is a half-space, which nothing passes through)."""
        contact = self.loads.contact
        if contact is None:
            return 0.0
        x = kin.x.detach().to("cpu", torch.float64).numpy()
        jac = kin.jac.detach().to("cpu", torch.float64).numpy()
        w = contact.stiffness_rate(
            x, jac, lambda: mass_metric(kin, self.loads.masses, self.loads.ridge).numpy()
        )
        need = self.dt * w / self.settings.contact.step
        meshes = contact.obstacles.meshes
        if meshes:
            vel = (jac @ qdot.to(torch.float64).numpy())[contact.heavy]  # (H, 3)
            speed = np.sqrt((vel * vel).sum(1))  # (H,)
            xh = x[contact.heavy]
            # the points that one step (at most max_frames_per_step frames) can take there
            reach = speed * self.dt * self.settings.steps.max_frames_per_step
            for mesh in meshes:
                near = mesh.near(xh, reach)
                if near.any():
                    need = max(need, self.dt * float(speed[near].max()) / (0.5 * mesh.band))
        return need

    def clamp(
        self,
        frame: int,
        last: int,
        k: int,
        n: int,
        qdot: Tensor | None = None,
        qddot: Tensor | None = None,
        kin: PointKinematics | None = None,
    ) -> tuple[int, int]:
        """Fit a wanted step (k frames, n substeps) to the frequencies, loads and user minimum,
        with the local model to its trusted radius (a step moves q by at most about it), and
        with contact to what the contact at state ``kin`` needs (``contact_need``)."""
        need = self.need(frame)
        if kin is not None and qdot is not None:
            need = max(need, self.contact_need(kin, qdot))
        radius = math.inf if self.radius is None else self.radius()
        if qdot is not None and math.isfinite(radius):
            move = float(qdot.norm()) * self.dt  # per frame, with the acceleration's part
            if qddot is not None:
                move += 0.5 * float(qddot.norm()) * self.dt * self.dt
            need = max(need, 2.0 * move / radius)
        limit = self.settings.steps.max_substeps
        n_min = min(max(self.min_substeps, math.ceil(need - 1e-9), 1), limit)
        if n_min > 1 or n > 1:
            return 1, min(max(n, n_min), limit)
        span = min((c for c in self.changes if c > frame), default=last) - frame
        k_stab = math.floor(1.0 / need + 1e-9) if need > 0 else k
        k_max = max(1, min(k, span, last - frame, k_stab, self.settings.steps.max_frames_per_step))
        return 1 << (k_max.bit_length() - 1), 1  # a power of two
