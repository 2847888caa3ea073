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
animation drift by at most ``tolerance`` relative to E_ref, 0.5% by default). The error of a
frame made of n RK4 steps falls as n^-4, so a rejected frame is redone with the n that brings
its error to 0.3 of the limit (at least one step more, at most twice as many; a multi-frame
step is halved), and after an accepted frame the next one starts from the n that would have
put this one's error there (never more: a growing error is met by a rejection); a frame at
1/32 of the limit or under lets the next one try twice the step. E_ref is the largest energy
met so far but at least ``energy_floor`` times the problem's energy scale. The step never
exceeds what the known frequencies need for RK4 accuracy and stability: w_stiffness * h <= 0.5,
and w * h <= 1.5 for the critically damped drag hands and the damping rate.
Why RK4 and not a variational integrator: the metric G(q) makes the Hamiltonian non-separable, so
symplectic schemes are implicit (several decoder evaluations per Newton iteration); RK4 at one
step per frame already keeps the drift of smooth motions at 24-30 fps far under 1%
(tests/test_dynamics.py measures it), and slow motions take several frames per step.

Budget: a frame may take at most ``max_frame_evaluations`` right-hand sides and
``max_frame_expansions`` re-expansions of the local model (all its attempts together), and never
more than ``max_substeps`` steps; beyond that the run stops with SimulationError, so every run
ends in bounded time (loads too strong to follow are refused before, see ``limits``).

Blow-up: a NaN/inf state, a point farther than ``max_displacement`` object sizes from rest, a
latent far outside the prior, or an energy balance off by more than half the energy scale in one
step is retried with half the step up to ``max_refinements`` times; if it still fails the run
stops with SimulationError. No NaN frame is ever returned.

Local model: given a :class:`~.local.LocalQuadratic`, every right-hand side comes from it
instead of the decoder (see ``local``); it is re-expanded at the start of an RK4 step whose state
left its trusted radius (or at a frame boundary every few frames), the step is limited so that
it moves q by about half that radius, a step retried from an earlier state uses that state's own
expansion. At a re-expansion the state keeps its energy: the new model's energy at (q, q')
differs from the old one's by the models' error (with the Jacobian within 1%, the kinetic energy
within about 2%), and hundreds of such jumps would add up to an energy drift of tens of per
cent in an undamped run; so q' is scaled by sqrt(1 - jump / T) (T the new kinetic energy,
quadratic in q'), which leaves the energy as it was (``local_energy_match``; a change of speed
within the model's own error). What a bounded scale cannot take (a jump near a turning point,
where T is tiny) is booked with the work, as the whole jump is without the match.

Cancelling: ``on_frame(index, q, energy)`` is called for every frame (0 included), in order; when
it returns False the integration stops and the frames so far come back with ``cancelled=True``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch
from torch import Tensor

from ..errors import SimulationError
from .drag import DragHandle, DragPath
from .fastrhs import NumpyDynamics
from .hermite import quintic_hermite
from .lagrangian import Motion, equations_of_motion, state_energies
from .loads import Loads
from .local import LocalQuadratic
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .system import MechanicalSystem, PointKinematics, point_kinematics

OnFrame = Callable[[int, Tensor, float], bool]
_CPU = dict(device="cpu", dtype=torch.float64)
WORK_INTERVAL = 0.25  # seconds between ``on_work`` reports while a frame is integrated
_SPEED_MATCH = (0.8, 1.25)  # bounds of the speed scale that keeps the energy at a re-expansion


@dataclass(frozen=True)
class Trajectory:
    """The simulated motion in reduced coordinates, one row per output frame (frame 0 = start).

    q, qdot: (T, kq) float64; times: (T,) seconds; energy = kinetic + potential (T,) joules;
    work: (T,) work of the non-conservative forces since frame 0 (so energy - work is constant
    for the exact motion); steps_per_frame: (T,) RK4 steps per frame of the step that produced
    each frame (0.25 for a step spanning 4 frames; 0 for frame 0); residual: (T,) energy-balance
    error of that step relative to the energy scale; drag_errors: per drag, distance (m) from the
    grabbed point to its target at its frame (NaN if the run stopped earlier); evaluations:
    evaluations of the kinematics with J and the nested JVP (of the local model when there is
    one); energy_evaluations: Jacobian-only ones for the frames inside multi-frame steps;
    cancelled: whether ``on_frame`` stopped the run. With a local model: expansions (decoder
    passes with the Hessian), reuses (kept expansions gone back to instead), model_errors (its
    position error measured at each re-expansion, object sizes) and model_energy_jumps (sum of
    |energy change| at re-expansions left after the energy match, J: booked in ``work``, so it
    is not part of the energy balance; about 0 unless ``local_energy_match`` is off).
    """

    q: Tensor
    qdot: Tensor
    times: Tensor
    energy: Tensor
    kinetic: Tensor
    potential: Tensor
    work: Tensor
    steps_per_frame: Tensor
    residual: Tensor
    drag_errors: tuple[float, ...] = ()
    evaluations: int = 0
    energy_evaluations: int = 0
    cancelled: bool = False
    expansions: int = 0
    reuses: int = 0
    model_errors: tuple[float, ...] = ()
    model_energy_jumps: float = 0.0

    @property
    def num_frames(self) -> int:
        return int(self.q.shape[0])

    @property
    def substeps(self) -> Tensor:
        """(T,) RK4 steps attributed to each frame (``steps_per_frame``); ``.sum()`` is the total
        number of RK4 steps taken."""
        return self.steps_per_frame

    def relative_drift(self) -> Tensor:
        """(T,) |E_t - E_0| / |E_0|: the drift metric of design section 6 (undamped, no forces)."""
        e0 = self.energy[0]
        return (self.energy - e0).abs() / e0.abs().clamp_min(1e-300)


@dataclass
class _State:
    q: Tensor
    qdot: Tensor
    work: float
    kin: PointKinematics
    motion: Motion
    model: object = None  # the local model's expansion the kinematics come from


@dataclass
class _Record:
    rows: list[tuple[Tensor, Tensor, float, float, float, float, float]] = field(
        default_factory=list
    )

    def add(self, q, qdot, kinetic, potential, work, steps, residual) -> None:
        self.rows.append((q, qdot, kinetic, potential, work, steps, residual))


@dataclass(frozen=True)
class _Step:
    """One step: end state, frames k, substeps n, energy-balance error and its limit."""

    state: _State
    frames: int
    substeps: int
    residual: float
    limit: float
    rows: tuple = ()  # (q, q', kinetic, potential, work) of each frame it produced


# Step control. The energy-balance error of an RK4 step over a frame falls as n^-4 with n
# substeps; a step aims at _AIM of its limit, so that the next frame, whose error differs
# somewhat, mostly passes the first time.
_AIM = 0.3


def _aimed(step: _Step) -> int:
    """Substeps per frame that would have put ``step``'s error (~ n^-4) at _AIM of its limit."""
    return math.ceil(step.substeps * (step.residual / (_AIM * step.limit)) ** 0.25)


def _refined(step: _Step) -> int:
    """Substeps per frame (k = 1) that bring a rejected step's error to _AIM of its limit: at
    least one more than it had, at most twice as many."""
    n = step.substeps
    return min(max(_aimed(step), n + 1), 2 * n)


def _shrink(step: _Step, k: int, n: int) -> float:
    """The step length k / n frames over that of ``step``."""
    return (k / n) / (step.frames / step.substeps)


def _next_step(step: _Step) -> tuple[int, int]:
    """(k, n) to try after an accepted step: with substeps, the n that puts the error at _AIM
    of the limit (from half to the same n: a growing error is met by a rejection); a frame
    that would need under one substep doubles the frames per step instead."""
    k, n = step.frames, step.substeps
    if step.residual >= step.limit / 32:  # RK4: twice the step, about 16x the error
        if n == 1:
            return k, 1
        return 1, min(max(_aimed(step), (n + 1) // 2), n)
    return (k, n // 2) if n > 1 else (2 * k, 1)


def _finite(t: Tensor) -> bool:
    """Whether every entry is finite: NaN and inf survive a sum (one sync instead of two; the
    magnitudes here are far below float64 overflow)."""
    return math.isfinite(float(t.sum()))


def _energy_of(m: Motion) -> float:
    return m.kinetic + m.potential


class _Failure(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _work_polynomial(w0: float, w1: float, power: list[float], span: float) -> list[float]:
    """W at the inner frames of a k-frame step: W0 plus the integral of the degree-k polynomial
    through the power at the k + 1 frames (Newton-Cotes), with the small mismatch to the RK4 end
    value W1 spread linearly over the step."""
    k = len(power) - 1
    deg = torch.arange(k + 1, dtype=torch.float64)  # exponents 0..k
    nodes = torch.arange(k + 1, dtype=torch.float64) / k  # (k+1,) fractions of the step
    coef = torch.linalg.solve(nodes[:, None] ** deg, torch.tensor(power, dtype=torch.float64))

    def integral(s: float) -> float:  # span * int_0^s p
        return span * float((coef * s ** (deg + 1) / (deg + 1)).sum())

    gap = w1 - w0 - integral(1.0)
    return [w0 + integral(j / k) + (j / k) * gap for j in range(1, k)]


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
    ):
        """on_work(frame, covered): called while a frame is being integrated, at most every
        ``WORK_INTERVAL`` seconds, with how far (in frames, from ``frame``) its current attempt
        has come: progress within a slow frame."""
        self.local = local
        self.on_work = on_work
        self._last_work = time.monotonic()
        if local is not None:  # every right-hand side from the local model (see ``local``)
            system = replace(system, kinematics=local, dtype=torch.float64, device="cpu")
        self.system, self.loads, self.fps = system, loads, float(fps)
        self.drags = list(drags)
        self.settings = settings
        self.dt = 1.0 / self.fps
        self.frame_tolerance = tolerance / (10.0 * self.fps)
        self.min_substeps = min_substeps or 1
        self.paths: dict[int, DragPath] = {}
        self.evaluations = 0
        self.energy_evaluations = 0
        self.frames = 0  # of the current run
        self._budget_start = (0, 0)  # evaluations and expansions when the frame began
        self._last: tuple[Tensor, Tensor, PointKinematics] | None = None
        eps = torch.finfo(system.dtype).eps
        reach = 1.0 + float(loads.rest_points.abs().max()) / loads.size
        self.noise = 4.0 * eps * loads.energy_scale * reach
        self.bound = settings.max_displacement * loads.size
        self.energy_floor = settings.energy_floor * loads.energy_scale
        self.changes = self._change_frames()
        # with the local model the kinematics are float64 NumPy underneath: the right-hand
        # side and the checks run in NumPy too (``fastrhs``), far cheaper per call
        self.numpy_dynamics = NumpyDynamics(loads) if local is not None else None

    # -- right-hand side ---------------------------------------------------------------------
    def _hands(self, frame: int) -> list[tuple[DragHandle, DragPath]]:
        return [
            (h, self.paths[i])
            for i, h in enumerate(self.drags)
            if h.active(frame) and i in self.paths
        ]

    def _evaluate(self, q: Tensor, qdot: Tensor, frame: int, t: float) -> tuple:
        if not (_finite(q) and _finite(qdot)):
            raise _Failure("nonfinite")
        cached = self._last
        if cached is not None and torch.equal(cached[0], q) and torch.equal(cached[1], qdot):
            kin = cached[2]  # same state (e.g. every stage of a step at rest): same kinematics
        else:
            if self.numpy_dynamics is not None:  # the local model, in NumPy
                x, jac, bias = self.local.model(q.numpy(), qdot.numpy())
                kin = PointKinematics(*(torch.from_numpy(a) for a in (x, jac, bias)))
            else:
                kin = point_kinematics(self.system, q, qdot)
            self.evaluations += 1
            self._last = (q, qdot, kin)
        return kin, self._assemble(kin, q, qdot, frame, t)

    def _assemble(self, kin: PointKinematics, q, qdot, frame: int, t: float) -> Motion:
        if self.numpy_dynamics is not None:
            qddot, power, kinetic, potential = self.numpy_dynamics.motion(
                kin.x.numpy(),
                kin.jac.numpy(),
                kin.bias.numpy(),
                q.numpy(),
                qdot.numpy(),
                frame,
                t,
                self._hands(frame),
            )
            if not (math.isfinite(float(qddot.sum())) and math.isfinite(power)):
                raise _Failure("nonfinite")
            return Motion(torch.from_numpy(qddot), power, kinetic, potential)
        motion = equations_of_motion(kin, self.loads, q, qdot, frame, t, self._hands(frame))
        if not (_finite(motion.qddot) and math.isfinite(motion.power)):
            raise _Failure("nonfinite")
        return motion

    def _check(self, kin: PointKinematics, q: Tensor) -> None:
        if self.numpy_dynamics is not None:
            x = kin.x.numpy()
            if not math.isfinite(float(x.sum())):
                raise _Failure("nonfinite")
            dx = x - self.numpy_dynamics.rest
            if float((dx * dx).sum(1).max()) > self.bound * self.bound:
                raise _Failure("bounds")
            qn = q.numpy()
            if self.numpy_dynamics.excess(qn) > self.settings.max_latent_excess:
                raise _Failure("latent")
            if float(np.abs(qn).max()) > self.settings.max_coordinate:
                raise _Failure("latent")
            return
        if not _finite(kin.x):
            raise _Failure("nonfinite")
        if float((kin.x - self.loads.rest_points).norm(dim=1).max()) > self.bound:
            raise _Failure("bounds")
        barrier = self.loads.barrier
        if barrier is not None and barrier.excess(q) > self.settings.max_latent_excess:
            raise _Failure("latent")
        if float(q.abs().max()) > self.settings.max_coordinate:
            raise _Failure("latent")

    def _acceleration(self, q: np.ndarray, v: np.ndarray, frame: int, t: float):
        """(q'', power) of an inner RK4 stage from the local model, all in NumPy (the stages'
        kinematics are not kept, so no tensors are made)."""
        if not math.isfinite(float(q.sum() + v.sum())):
            raise _Failure("nonfinite")
        x, jac, bias = self.local.model(q, v)
        self.evaluations += 1
        qddot, power, _, _ = self.numpy_dynamics.motion(
            x, jac, bias, q, v, frame, t, self._hands(frame)
        )
        if not math.isfinite(float(qddot.sum()) + power):
            raise _Failure("nonfinite")
        return qddot, power

    # -- one RK4 step ------------------------------------------------------------------------
    def _rk4(self, s: _State, frame: int, t: float, h: float) -> _State:
        """One classical RK4 step. With the local model the inner stages run on NumPy arrays
        (:meth:`_acceleration`: a few microseconds of arithmetic each, which tensors would
        cost more than); otherwise on tensors through :meth:`_evaluate`."""
        if self.numpy_dynamics is not None:
            q, v, a1 = s.q.numpy(), s.qdot.numpy(), s.motion.qddot.numpy()
            stage = self._acceleration
        else:
            q, v, a1 = s.q, s.qdot, s.motion.qddot

            def stage(q, v, frame, t):
                motion = self._evaluate(q, v, frame, t)[1]
                return motion.qddot, motion.power

        half = 0.5 * h
        q2, v2 = q + half * v, v + half * a1
        a2, p2 = stage(q2, v2, frame, t + half)
        q3, v3 = q + half * v2, v + half * a2
        a3, p3 = stage(q3, v3, frame, t + half)
        q4, v4 = q + h * v3, v + h * a3
        a4, p4 = stage(q4, v4, frame, t + h)
        sixth = h / 6.0
        qn = torch.as_tensor(q + sixth * (v + 2.0 * v2 + 2.0 * v3 + v4))
        vn = torch.as_tensor(v + sixth * (a1 + 2.0 * a2 + 2.0 * a3 + a4))
        wn = s.work + sixth * (s.motion.power + 2.0 * p2 + 2.0 * p3 + p4)
        kin, motion = self._evaluate(qn, vn, frame, t + h)
        self._check(kin, qn)
        return _State(q=qn, qdot=vn, work=wn, kin=kin, motion=motion, model=s.model)

    def _steps(self, s: _State, frame: int, k: int, n: int) -> _State:
        """Advance k frames with n equal RK4 steps (loads are those of ``frame`` throughout)."""
        h = k * self.dt / n
        t0 = frame * self.dt
        for i in range(n):
            self._within_budget(frame)
            s = self._local_model(s, frame, t0 + i * h)
            s = self._rk4(s, frame, t0 + i * h, h)
            if self.on_work is not None and time.monotonic() - self._last_work > WORK_INTERVAL:
                self._last_work = time.monotonic()
                self.on_work(frame, k * (i + 1) / n)
        return s

    def _start_budget(self) -> None:
        """A frame's budget of work starts now (``max_frame_evaluations`` / ``_expansions``)."""
        self._budget_start = (self.evaluations, self._expansions())

    def _expansions(self) -> int:
        return 0 if self.local is None else self.local.stats.expansions

    def _within_budget(self, frame: int) -> None:
        """Stop the run (SimulationError) once the frame from ``frame`` has used its budget."""
        st = self.settings
        evaluations = self.evaluations - self._budget_start[0]
        expansions = self._expansions() - self._budget_start[1]
        if evaluations <= st.max_frame_evaluations and expansions <= st.max_frame_expansions:
            return
        raise SimulationError(
            f"the simulation stopped at frame {frame} of {self.frames - 1}: that frame needed "
            f"more than {evaluations} evaluations of the motion and {expansions} of the learned "
            "shapes (the limit of work per frame), so the motion is too fast or too stiff for "
            "the object's learned space, as when strong loads press it against the limits of "
            "its learned shapes. Lower the forces or the stiffness, raise the mass, the damping "
            "or the frame rate."
        )

    def _local_model(self, s: _State, frame: int, t: float, force: bool = False) -> _State:
        """With the local model: re-expand it at s when s is beyond its trusted radius (or
        ``force``), and give s the kinematics of the current expansion. The model's energy at s
        changes by its (small) error when it is re-expanded; that jump is booked in the work
        so that the energy balance keeps measuring the integration alone (and reported)."""
        local = self.local
        if local is None:
            return s
        if s.model is not None and s.model is not local.current:
            local.restore(s.model)  # a step retried from s (or the best of failed attempts)
            self._last = None
        far = local.needs_expansion(s.q, within_frame=True)
        if force or far:
            try:  # a kept expansion near s may serve, except for the periodic fresh one
                local.expand(s.q, fresh=not far)
            except FloatingPointError:
                raise _Failure("nonfinite") from None
        version = local.current
        if s.model is version:
            return s
        self._last = None
        kin, motion = self._evaluate(s.q, s.qdot, frame, t)
        self._check(kin, s.q)
        before = self._energy(s)
        jump = _energy_of(motion) - before
        qdot = s.qdot
        if self.settings.local_energy_match and jump != 0.0 and motion.kinetic > 0.0:
            # the same energy in the new model: scale q' (T is quadratic in q'), at most by
            # the bounds, which a model within its tolerances never needs
            low, high = _SPEED_MATCH
            scale = math.sqrt(min(max(1.0 - jump / motion.kinetic, low * low), high * high))
            qdot = s.qdot * scale
            kin, motion = self._evaluate(s.q, qdot, frame, t)
            jump = _energy_of(motion) - before
        local.stats.energy_jumps.append(jump)
        return _State(q=s.q, qdot=qdot, work=s.work + jump, kin=kin, motion=motion, model=version)

    # -- step-size limits --------------------------------------------------------------------
    def _change_frames(self) -> list[int]:
        """Frames where the loads switch (a multi-frame step never straddles one)."""
        loads = self.loads
        marks = set()
        for timed in (loads.forces, loads.winds):
            marks.update(int(f) for f in timed.start.tolist())
            marks.update(int(f) for f in timed.end.tolist())
        for h in self.drags:
            marks.update((h.start_frame, h.frame))
        return sorted(marks)

    def _need(self, frame: int) -> float:
        """RK4 steps per frame that the known frequencies require (may be < 1)."""
        st, loads = self.settings, self.loads
        damped = [loads.damping, *(h.omega for h in self.drags if h.active(frame))]
        springs = 0.0 if loads.springs is None else loads.springs.omega
        return max(
            self.dt * max(loads.stiffness_omega, springs) / st.oscillation_step,
            self.dt * max(damped) / st.damped_step,
        )

    def _clamp(
        self,
        frame: int,
        last: int,
        k: int,
        n: int,
        qdot: Tensor | None = None,
        qddot: Tensor | None = None,
    ) -> tuple[int, int]:
        """Fit a wanted step (k frames, n substeps) to the frequencies, loads and user minimum,
        and with the local model to its trusted radius (a step moves q by at most about it)."""
        need = self._need(frame)
        if self.local is not None and qdot is not None and math.isfinite(self.local.radius):
            move = float(qdot.norm()) * self.dt  # per frame, with the acceleration's part
            if qddot is not None:
                move += 0.5 * float(qddot.norm()) * self.dt * self.dt
            need = max(need, 2.0 * move / self.local.radius)
        n_min = min(max(self.min_substeps, math.ceil(need - 1e-9), 1), self.settings.max_substeps)
        if n_min > 1 or n > 1:
            return 1, min(max(n, n_min), self.settings.max_substeps)
        span = min((c for c in self.changes if c > frame), default=last) - frame
        k_stab = math.floor(1.0 / need + 1e-9) if need > 0 else k
        k_max = max(1, min(k, span, last - frame, k_stab, self.settings.max_frames_per_step))
        return 1 << (k_max.bit_length() - 1), 1  # a power of two

    # -- the run -----------------------------------------------------------------------------
    def run(
        self, q0: Tensor, qdot0: Tensor, frames: int, on_frame: OnFrame | None = None
    ) -> Trajectory:
        """Integrate from (q0, qdot0) (kq,) for ``frames`` output frames (frame 0 included)."""
        q0, qdot0 = q0.detach().to(**_CPU), qdot0.detach().to(**_CPU)
        self.frames = frames
        self._start_budget()
        if self.local is not None:
            self.local.expand(q0)
        try:
            kin, motion = self._evaluate(q0, qdot0, 0, 0.0)
            self._check(kin, q0)
        except _Failure as fail:
            raise SimulationError(
                f"the initial state is invalid ({fail.reason}): the decoder gives NaN/inf or "
                "the initial velocities are not finite"
            ) from None
        state = _State(
            q=q0,
            qdot=qdot0,
            work=0.0,
            kin=kin,
            motion=motion,
            model=None if self.local is None else self.local.current,
        )
        record = _Record()
        record.add(q0, qdot0, motion.kinetic, motion.potential, 0.0, 0.0, 0.0)
        drag_errors = [math.nan] * len(self.drags)
        content = abs(motion.kinetic) + abs(motion.potential)
        cancelled = on_frame is not None and on_frame(0, q0.clone(), self._energy(state)) is False
        last, frame, k, n = frames - 1, 0, 1, 1
        while frame < last and not cancelled:
            try:
                state = self._expand(state, frame)
                state = self._start_frame(state, frame)
            except _Failure as fail:
                raise SimulationError(self._blow_up_message(fail.reason, frame, n)) from None
            k, n = self._clamp(frame, last, k, n, state.qdot, state.motion.qddot)
            self._start_budget()
            step = self._advance(state, frame, k, n, content)
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
                self.local.advance_frames(step.frames)
            k, n = _next_step(step)
        return self._trajectory(record, drag_errors, cancelled)

    def _expand(self, s: _State, frame: int) -> _State:
        """At a frame boundary: re-expand the local model when due (radius or frame count)."""
        if self.local is None or not self.local.needs_expansion(s.q):
            return s
        return self._local_model(s, frame, frame * self.dt, force=True)

    def _start_frame(self, s: _State, frame: int) -> _State:
        """Plan drags that start now and re-assemble the forces of this frame."""
        for i, h in enumerate(self.drags):
            if h.start_frame == frame and i not in self.paths:
                pos = s.kin.x[h.row].to(**_CPU)
                vel = s.kin.velocity(s.qdot)[h.row].to(**_CPU)
                self.paths[i] = h.plan(pos, vel, self.fps, self.settings.drag_arrival)
        motion = self._assemble(s.kin, s.q, s.qdot, frame, frame * self.dt)
        return _State(q=s.q, qdot=s.qdot, work=s.work, kin=s.kin, motion=motion, model=s.model)

    def _advance(self, s: _State, frame: int, k: int, n: int, content: float) -> _Step:
        """One accepted step from ``frame``, shortening the step (``_refined``; a multi-frame
        step is halved) until the energy balance holds."""
        st = self.settings
        best, prev, reason = None, None, "nonfinite"
        e0 = self._energy(s)
        refreshed = self.local is None  # the local model may be re-expanded once (below)
        for attempt in range(st.max_refinements + 1):
            try:
                new = self._steps(s, frame, k, n)
                e1 = self._energy(new)
                ref = max(content, abs(e1), abs(new.work), self.energy_floor)
                res = abs((e1 - e0) - (new.work - s.work)) / ref
                if not math.isfinite(res):
                    raise _Failure("nonfinite")
                if res > 0.5:
                    raise _Failure("energy")
                step = _Step(new, k, n, res, k * self.frame_tolerance + self.noise / ref)
                last = attempt == st.max_refinements or (k == 1 and n >= st.max_substeps)
                # a refinement that did not cut the error to within 4x of what RK4 should
                # ((h'/h)^4) is not fighting truncation error (e.g. the local model's): keep it
                stalled = prev is not None and res > 4.0 * prev.residual * _shrink(prev, k, n) ** 4
                if stalled and not refreshed and res > step.limit:
                    # not truncation error: the local model's own. Re-expand it here (its
                    # energy jump is booked as work) and take the step again, once.
                    refreshed = True
                    s = self._local_model(s, frame, frame * self.dt, force=True)
                    e0, best, prev = self._energy(s), None, None
                    continue
                if res <= step.limit or stalled or last:
                    return replace(step, rows=self._fill(s, step, frame))
                best, prev = step, step
            except _Failure as fail:
                reason = fail.reason
                if best is not None:
                    try:
                        return replace(best, rows=self._fill(s, best, frame))
                    except _Failure:
                        best = None
            if k == 1 and n >= st.max_substeps:
                break
            if k > 1:
                k, n = k // 2, 1
            else:  # the step the error asks for (twice as many after a failure)
                wanted = 2 * n if best is None else _refined(best)
                n = min(wanted, st.max_substeps)
        raise SimulationError(self._blow_up_message(reason, frame, n))

    def _fill(self, s: _State, step: _Step, frame: int) -> tuple:
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
            if self.numpy_dynamics is not None:
                kinetic, potential, p = self.numpy_dynamics.energies(
                    kin.x.numpy(), kin.jac.numpy(), q.numpy(), qd.numpy(), frame
                )
            else:
                kinetic, potential, p = state_energies(kin, self.loads, q, qd, frame)
            inner.append((q, qd, kinetic, potential))
            power.append(p)
        power.append(end.motion.power)
        work = _work_polynomial(s.work, end.work, power, span)
        rows = tuple((*row, work[j]) for j, row in enumerate(inner)) + (last,)
        if not all(math.isfinite(r[2] + r[3] + r[4]) for r in rows):
            raise _Failure("nonfinite")
        return rows

    def _blow_up_message(self, reason: str, frame: int, n: int) -> str:
        what = {
            "nonfinite": "the state became NaN or infinite",
            "bounds": (
                f"a point moved more than {self.settings.max_displacement:g} object sizes from "
                "its rest position"
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
    def _energy(s: _State) -> float:
        return _energy_of(s.motion)

    def _trajectory(self, r: _Record, drag_errors: list[float], cancelled: bool) -> Trajectory:
        f64 = dict(dtype=torch.float64)
        q, qdot, kinetic, potential, work, steps, residual = zip(*r.rows, strict=True)
        kinetic_t = torch.tensor(kinetic, **f64)
        potential_t = torch.tensor(potential, **f64)
        return Trajectory(
            q=torch.stack(q),
            qdot=torch.stack(qdot),
            times=torch.arange(len(q), **f64) * self.dt,
            energy=kinetic_t + potential_t,
            kinetic=kinetic_t,
            potential=potential_t,
            work=torch.tensor(work, **f64),
            steps_per_frame=torch.tensor(steps, **f64),
            residual=torch.tensor(residual, **f64),
            drag_errors=tuple(drag_errors),
            evaluations=self.evaluations,
            energy_evaluations=self.energy_evaluations,
            cancelled=cancelled,
            expansions=0 if self.local is None else self.local.stats.expansions,
            reuses=0 if self.local is None else self.local.stats.reuses,
            model_errors=() if self.local is None else tuple(self.local.stats.errors),
            model_energy_jumps=(
                0.0
                if self.local is None
                else float(sum(abs(j) for j in self.local.stats.energy_jumps))
            ),
        )
