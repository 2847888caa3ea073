"""Time integration: classical RK4 with adaptive steps controlled by the energy balance.

Scheme. The state (q, q', W) — W the work done by the non-conservative forces — is advanced by the
classical 4th-order Runge-Kutta method. Each RK4 step costs 4 decoder evaluations (the one at the
end state is reused as the first stage of the next step). A step covers either 1/n of a frame
(n substeps) or k whole frames (k = 2, 4, ...): the frames inside a multi-frame step are filled
in by the quintic Hermite interpolant of (q, q', q'') at its ends (error O(h^6)), and their
energy is evaluated with one Jacobian-only decoder evaluation each. Multi-frame steps are used
only where the loads do not change (no force, wind or drag starts or stops inside).

Error monitor: the energy balance E(t) - E(t0) - (W(t) - W(t0)), exactly zero for the true motion
whatever the forces (conservative parts are in E, the rest in W). A step whose balance error
exceeds k * ``tolerance`` * E_ref / (10 s * fps) is recomputed with a shorter one (so 10 s of
animation drift by at most ``tolerance`` relative to E_ref, 0.5% by default); E_ref is the largest
energy met so far but at least ``energy_floor`` times the problem's energy scale. How long the
steps are, and how a rejected one is shortened: ``steps``. A refinement that does not cut the
error at RK4's rate is not fighting truncation error alone: the local model is re-expanded once
and the step retaken, and a step that still stalls is kept only within ``STALL_MARGIN`` times its
limit. Far above it the cause is more likely a stiff event the steps do not resolve yet (a
bounce off the prior barrier, an impact), whose error also shrinks slowly at first: refined on.
Why RK4 and not a variational integrator: the metric G(q) makes the Hamiltonian non-separable, so
symplectic schemes are implicit (several decoder evaluations per Newton iteration); RK4 at one
step per frame already keeps the drift of smooth motions at 24-30 fps far under 1%
(tests/test_integrator.py measures it), and slow motions take several frames per step.

Budget: a frame may take at most ``max_frame_evaluations`` right-hand sides and
``max_frame_expansions`` re-expansions of the local model (all its attempts together), and never
more than ``max_substeps`` steps; beyond that the run stops with SimulationError, so every run
ends in bounded time (loads too strong to follow are refused before, see ``limits``).

Blow-up: a NaN/inf state, a point farther than ``max_displacement`` object sizes from rest, a
latent far outside the prior, or an energy balance off by more than half the energy scale in one
step is retried with half the step up to ``max_refinements`` times; if it still fails the run
stops with SimulationError. No NaN frame is ever returned.

Right-hand side: ``backends`` (on tensors, or in NumPy from the local quadratic model of the
decoder, re-expanded as the state moves: ``localdrive``); the integrator does not ask which.

Cancelling: ``on_frame(index, q, energy)`` is called for every frame (0 included), in order; when
it returns False the integration stops and the frames so far come back with ``cancelled=True``.
A ``deadline`` (a ``time.monotonic()`` instant) is checked before every RK4 step: once it has
passed, the run stops the same way within one step, with ``timed_out=True`` as well.

Trial steps that overflow are rejected (a non-finite state is a blow-up, above), so NumPy's
overflow and invalid-value warnings are silenced while the integration runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch
from torch import Tensor

from ..errors import SimulationError
from .backends import Blowup, NumpyBackend, TorchBackend
from .drag import DragHandle, DragPath
from .hermite import quintic_hermite, work_polynomial
from .loads import Loads
from .local import LocalQuadratic
from .localdrive import LocalModelDriver
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .steps import State, Step, StepLimits, next_step, refined, shrink
from .system import MechanicalSystem, point_kinematics
from .trajectory import Record, Trajectory, build_trajectory

OnFrame = Callable[[int, Tensor, float], bool]
_CPU = dict(device="cpu", dtype=torch.float64)
WORK_INTERVAL = 0.25  # seconds between ``on_work`` reports while a frame is integrated
STALL_MARGIN = 10.0  # a stalled refinement is kept only within this many times its limit


class _OutOfTime(Exception):
    """The run's deadline passed (caught in ``Integrator.run``, which stops there)."""


class Integrator:
    """Integrates one system under resolved loads; see the module docstring for the scheme."""

    def __init__(
        self,
        system: MechanicalSystem,
        loads: Loads,
        fps: float,
        *,
        drags: list[DragHandle] = (),
        tolerance: float = 5e-3,
        min_substeps: int | None = None,
        settings: DynamicsSettings = DEFAULT_SETTINGS,
        local: LocalQuadratic | None = None,
        on_work: Callable[[int, float], None] | None = None,
        deadline: float | None = None,
    ):
        """on_work(frame, covered): called while a frame is being integrated, at most every
        ``WORK_INTERVAL`` seconds, with how far (in frames, from ``frame``) its current attempt
        has come: progress within a slow frame. deadline: a ``time.monotonic()`` instant at
        which the run stops (module docstring), None for none."""
        if local is not None:  # every right-hand side from the local model (see ``local``)
            system = replace(system, kinematics=local, dtype=torch.float64, device="cpu")
            self.backend = NumpyBackend(local, loads, settings)
            self.local = LocalModelDriver(local, self.backend, settings)
        else:
            self.backend = TorchBackend(system, loads, settings)
            self.local = None
        self.system, self.loads, self.fps = system, loads, float(fps)
        self.drags = list(drags)
        self.settings = settings
        self.on_work = on_work
        self.deadline = math.inf if deadline is None else float(deadline)
        self._last_work = time.monotonic()
        self.dt = 1.0 / self.fps
        self.frame_tolerance = tolerance / (10.0 * self.fps)
        self.limits = StepLimits(
            loads,
            self.drags,
            settings,
            self.dt,
            min_substeps or 1,
            None if self.local is None else (lambda: self.local.radius),
        )
        self.paths: dict[int, DragPath] = {}
        self._contact_need = 0.0  # the largest steps per frame the contact needed in a step
        self.energy_evaluations = 0
        self.frames = 0  # of the current run
        self._budget_start = (0, 0)  # evaluations and expansions when the frame began
        eps = torch.finfo(system.dtype).eps
        reach = 1.0 + float(loads.rest_points.abs().max()) / loads.size
        self.noise = 4.0 * eps * loads.energy_scale * reach
        self.energy_floor = settings.steps.energy_floor * loads.energy_scale

    @property
    def evaluations(self) -> int:
        """Right-hand sides evaluated so far (with J and the nested JVP)."""
        return self.backend.evaluations

    # -- right-hand side ---------------------------------------------------------------------
    def _hands(self, frame: int) -> list[tuple[DragHandle, DragPath]]:
        return [
            (h, self.paths[i])
            for i, h in enumerate(self.drags)
            if h.active(frame) and i in self.paths
        ]

    def _evaluate(self, q: Tensor, qdot: Tensor, frame: int, t: float) -> tuple:
        return self.backend.evaluate(q, qdot, frame, t, self._hands(frame))

    def _check(self, kin, q: Tensor) -> None:
        reason = self.backend.check(kin, q)
        if reason is not None:
            raise Blowup(reason)

    def _refresh(self, s: State, frame: int, t: float, force: bool = False) -> State:
        """The local model re-expanded at s when due (``localdrive``); s as is without one."""
        if self.local is None:
            return s
        return self.local.refresh(s, frame, t, self._evaluate, self._check, force=force)

    # -- one RK4 step ------------------------------------------------------------------------
    def _rk4(self, s: State, frame: int, t: float, h: float) -> State:
        """One classical RK4 step; the inner stages in the backend's own arrays."""
        backend, hands = self.backend, self._hands(frame)
        q, v, a1 = backend.native(s.q), backend.native(s.qdot), backend.native(s.motion.qddot)
        half = 0.5 * h
        q2, v2 = q + half * v, v + half * a1
        a2, p2, c2 = backend.stage(q2, v2, frame, t + half, hands)
        q3, v3 = q + half * v2, v + half * a2
        a3, p3, c3 = backend.stage(q3, v3, frame, t + half, hands)
        q4, v4 = q + h * v3, v + h * a3
        a4, p4, c4 = backend.stage(q4, v4, frame, t + h, hands)
        sixth = h / 6.0
        qn = backend.tensor(q + sixth * (v + 2.0 * v2 + 2.0 * v3 + v4))
        vn = backend.tensor(v + sixth * (a1 + 2.0 * a2 + 2.0 * a3 + a4))
        wn = s.work + sixth * (s.motion.power + 2.0 * p2 + 2.0 * p3 + p4)
        # the contact's share of that work, by the same weights (``Trajectory.contact_work``)
        cn = s.contact_work + sixth * (s.motion.contact_power + 2.0 * c2 + 2.0 * c3 + c4)
        kin, motion = self._evaluate(qn, vn, frame, t + h)
        self._check(kin, qn)
        if self.loads.contact is not None:  # what the contact met on the way (``_advance``)
            self._contact_need = max(self._contact_need, self.limits.contact_need(kin, vn))
        return State(q=qn, qdot=vn, work=wn, kin=kin, motion=motion, model=s.model, contact_work=cn)

    def _steps(self, s: State, frame: int, k: int, n: int) -> State:
        """Advance k frames with n equal RK4 steps (loads are those of ``frame`` throughout)."""
        h = k * self.dt / n
        t0 = frame * self.dt
        for i in range(n):
            self._within_budget(frame)
            if time.monotonic() > self.deadline:
                raise _OutOfTime
            s = self._refresh(s, frame, t0 + i * h)
            s = self._rk4(s, frame, t0 + i * h, h)
            if self.on_work is not None and time.monotonic() - self._last_work > WORK_INTERVAL:
                self._last_work = time.monotonic()
                self.on_work(frame, k * (i + 1) / n)
        return s

    def _start_budget(self) -> None:
        """A frame's budget of work starts now (``max_frame_evaluations`` / ``_expansions``)."""
        self._budget_start = (self.evaluations, self._expansions())

    def _expansions(self) -> int:
        return 0 if self.local is None else self.local.expansions

    def _within_budget(self, frame: int) -> None:
        """Stop the run (SimulationError) once the frame from ``frame`` has used its budget."""
        st = self.settings
        evaluations = self.evaluations - self._budget_start[0]
        expansions = self._expansions() - self._budget_start[1]
        if (
            evaluations <= st.limits.max_frame_evaluations
            and expansions <= st.limits.max_frame_expansions
        ):
            return
        spent = (
            f"more than {st.limits.max_frame_evaluations} evaluations of the motion"
            if evaluations > st.limits.max_frame_evaluations
            else f"more than {st.limits.max_frame_expansions} re-expansions of the learned shapes"
        )
        raise SimulationError(
            f"the simulation stopped at frame {frame} of {self.frames - 1}: that frame needed "
            f"{spent} (the limit of work per frame), so the motion is too fast or too stiff for "
            "the object's learned space, as when strong loads press it against the limits of "
            "its learned shapes. Lower the forces or the stiffness, raise the mass, the damping "
            "or the frame rate."
        )

    # -- the run -----------------------------------------------------------------------------
    def run(
        self, q0: Tensor, qdot0: Tensor, frames: int, on_frame: OnFrame | None = None
    ) -> Trajectory:
        """Integrate from (q0, qdot0) (kq,) for ``frames`` output frames (frame 0 included)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return self._run(q0, qdot0, frames, on_frame)

    def _run(self, q0: Tensor, qdot0: Tensor, frames: int, on_frame: OnFrame | None) -> Trajectory:
        q0, qdot0 = q0.detach().to(**_CPU), qdot0.detach().to(**_CPU)
        self.frames = frames
        self._start_budget()
        if self.local is not None:
            self.local.start(q0)
        try:
            kin, motion = self._evaluate(q0, qdot0, 0, 0.0)
            self._check(kin, q0)
        except Blowup as fail:
            raise SimulationError(
                f"the initial state is invalid ({fail.reason}): the decoder gives NaN/inf or "
                "the initial velocities are not finite"
            ) from None
        state = State(
            q=q0,
            qdot=qdot0,
            work=0.0,
            kin=kin,
            motion=motion,
            model=None if self.local is None else self.local.current,
        )
        record = Record()
        record.add(q0, qdot0, motion.kinetic, motion.potential, 0.0, 0.0, 0.0)
        drag_errors = [math.nan] * len(self.drags)
        content = abs(motion.kinetic) + abs(motion.potential)
        cancelled = on_frame is not None and on_frame(0, q0.clone(), self._energy(state)) is False
        timed_out = False
        last, frame, k, n = frames - 1, 0, 1, 1
        while frame < last and not cancelled:
            try:
                if self.local is not None:
                    state = self.local.at_frame(
                        state, frame, frame * self.dt, self._evaluate, self._check
                    )
                state = self._start_frame(state, frame)
            except Blowup as fail:
                raise SimulationError(self._blow_up_message(fail.reason, frame, n)) from None
            k, n = self.limits.clamp(frame, last, k, n, state.qdot, state.motion.qddot, state.kin)
            self._start_budget()
            try:
                step = self._advance(state, frame, k, n, content)
            except _OutOfTime:
                cancelled = timed_out = True
                break
            end = step.state
            content = max(content, abs(end.motion.kinetic) + abs(end.motion.potential))
            for j, (q, qd, kinetic, potential, work) in enumerate(step.rows, 1):
                record.add(
                    q, qd, kinetic, potential, work, step.substeps / step.frames, step.residual
                )
                for i, h in enumerate(self.drags):
                    if h.frame == frame + j:
                        pos = end.kin.x[h.row].to(**_CPU)  # drag frames end a step
                        drag_errors[i] = float((pos - h.target).norm())
                if (
                    on_frame is not None
                    and on_frame(frame + j, q.clone(), kinetic + potential) is False
                ):
                    cancelled = True
                    break
            frame, state, k, n = frame + step.frames, end, step.frames, step.substeps
            if self.local is not None:
                self.local.frames_done(step.frames)
            k, n = next_step(step)
        return build_trajectory(
            record,
            drag_errors,
            cancelled,
            timed_out=timed_out,
            dt=self.dt,
            evaluations=self.evaluations,
            energy_evaluations=self.energy_evaluations,
            stats=None if self.local is None else self.local.stats,
            contact_work=state.contact_work,
        )

    def _start_frame(self, s: State, frame: int) -> State:
        """Plan drags that start now and re-assemble the forces of this frame."""
        for i, h in enumerate(self.drags):
            if h.start_frame == frame and i not in self.paths:
                pos = s.kin.x[h.row].to(**_CPU)
                vel = s.kin.velocity(s.qdot)[h.row].to(**_CPU)
                self.paths[i] = h.plan(pos, vel, self.fps, self.settings.drag.arrival)
        motion = self.backend.motion(s.kin, s.q, s.qdot, frame, frame * self.dt, self._hands(frame))
        return replace(s, motion=motion)

    def _advance(self, s: State, frame: int, k: int, n: int, content: float) -> Step:
        """One accepted step from ``frame``, shortening the step (``steps.refined``; a multi-frame
        step is halved) until the energy balance holds."""
        st = self.settings
        best, prev, reason = None, None, "nonfinite"
        e0 = self._energy(s)
        refreshed = self.local is None  # the local model may be re-expanded once (below)
        # the local model's re-expansion (below) retakes the step without counting an attempt,
        # so that a re-expansion on the last attempt is not the end of the frame
        attempt = -1
        # contact adds refinements: an impact first needs steps short enough to resolve it
        limit = st.steps.max_refinements + (4 if self.loads.contact is not None else 0)
        while attempt < limit:
            attempt += 1
            try:
                self._contact_need = 0.0
                new = self._steps(s, frame, k, n)
                e1 = self._energy(new)
                ref = max(content, abs(e1), abs(new.work), self.energy_floor)
                res = abs((e1 - e0) - (new.work - s.work)) / ref
                if not math.isfinite(res):
                    raise Blowup("nonfinite")
                need = self._contact_need * k
                if need > n and n < st.steps.max_substeps and attempt < limit:
                    # a step that ran into an obstacle must resolve the contact it met (its
                    # error need not shrink as h^4 before it does): take it again, fine enough
                    # (at most 8x finer at once: a coarse step's deep penetration overstates it)
                    n = min(max(math.ceil(need), 2 * n // k), 8 * n // k, st.steps.max_substeps)
                    k, best, prev = 1, None, None
                    continue
                if res > 0.5:
                    raise Blowup("energy")
                step = Step(new, k, n, res, k * self.frame_tolerance + self.noise / ref)
                last = attempt == limit or (k == 1 and n >= st.steps.max_substeps)
                # a refinement that did not cut the error to within 4x of what RK4 should
                # ((h'/h)^4) is not fighting truncation error alone (e.g. the local model's)
                slow = prev is not None and res > 4.0 * prev.residual * shrink(prev, k, n) ** 4
                # kept only near the limit: far above it, a stiff event the steps do not
                # resolve yet (an impact, a bounce off the prior barrier) cuts its error slowly
                # at first too, and such a step is refined on (``STALL_MARGIN``)
                stalled = slow and res <= STALL_MARGIN * step.limit
                # (with contact, a re-expansion only there too: an impact is the likelier cause)
                expand = stalled if self.loads.contact is not None else slow
                if expand and not refreshed and res > step.limit:
                    # not truncation error: the local model's own. Re-expand it here (its
                    # energy jump is booked as work) and take the step again, once.
                    refreshed = True
                    s = self._refresh(s, frame, frame * self.dt, force=True)
                    e0, best, prev = self._energy(s), None, None
                    attempt -= 1
                    continue
                if res <= step.limit or stalled or last:
                    return replace(step, rows=self._fill(s, step, frame))
                best, prev = step, step
            except Blowup as fail:
                reason = fail.reason
                if best is not None:
                    try:
                        return replace(best, rows=self._fill(s, best, frame))
                    except Blowup:
                        best = None
            if k == 1 and n >= st.steps.max_substeps:
                break
            if k > 1:
                k, n = k // 2, 1
            else:  # the step the error asks for (twice as many after a failure)
                wanted = 2 * n if best is None else refined(best)
                n = min(wanted, st.steps.max_substeps)
        raise SimulationError(self._blow_up_message(reason, frame, n))

    def _fill(self, s: State, step: Step, frame: int) -> tuple:
        """(q, q', kinetic, potential, work) of the frames a step produced, the last one its end.

        Inner frames: q, q' from the quintic Hermite interpolant of (q, q', q'') at the step's
        ends; their energies and power from one Jacobian-only evaluation each; the work from the
        polynomial W(t) of degree k + 2 that matches W at both ends and the power at every frame.
        """
        end, k = step.state, step.frames
        last = (end.q, end.qdot, end.motion.kinetic, end.motion.potential, end.work)
        if k == 1:
            return (last,)
        span = k * self.dt
        zero = torch.zeros_like(s.q)
        inner, power = [], [s.motion.power]
        for j in range(1, k):
            q, qd, _ = quintic_hermite(
                s.q, s.qdot, s.motion.qddot, end.q, end.qdot, end.motion.qddot, span, j / k
            )
            kin = point_kinematics(self.system, q, zero)  # Jacobian only: q' = 0 skips the JVP
            self.energy_evaluations += 1
            self._check(kin, q)
            kinetic, potential, p = self.backend.energies(kin, q, qd, frame)
            inner.append((q, qd, kinetic, potential))
            power.append(p)
        power.append(end.motion.power)
        work = work_polynomial(s.work, end.work, power, span)
        rows = tuple((*row, work[j]) for j, row in enumerate(inner)) + (last,)
        if not all(math.isfinite(r[2] + r[3] + r[4]) for r in rows):
            raise Blowup("nonfinite")
        return rows

    def _blow_up_message(self, reason: str, frame: int, n: int) -> str:
        what = {
            "nonfinite": "the state became NaN or infinite",
            "bounds": (
                f"a point moved more than {self.settings.limits.max_displacement:g} object sizes"
                " from its rest position"
            ),
            "energy": "the energy balance broke down (energy appeared from nowhere)",
            "latent": "the state ran far outside the object's space of plausible shapes",
        }[reason]
        return (
            f"the simulation blew up between frames {frame} and {frame + 1}: {what}, even with "
            f"{n} integration steps per frame. Lower the forces or the stiffness, raise the mass "
            "or the damping, or check the object's kinematic space."
        )

    @staticmethod
    def _energy(s: State) -> float:
        return s.energy
