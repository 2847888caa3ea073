"""Time integration: classical RK4 with per-frame substeps set by the energy balance.

Scheme. The state (q, q', W) — W the work done by the non-conservative forces — is advanced by the
classical 4th-order Runge-Kutta method with n equal substeps per frame (4 decoder evaluations per
substep: the last one, at the end state, is reused as the first stage of the next substep).
The error monitor is the energy balance E(t) - E(t0) - (W(t) - W(t0)), which is exactly zero for
the true motion whatever the forces (conservative parts are in E, the rest in W): a frame whose
balance error exceeds ``tolerance`` * E_ref / (10 s * fps) is recomputed with twice the substeps
(so 10 s of animation drift by at most ``tolerance`` relative, 0.5% by default); a frame well
under it lets the next frame try half the substeps. The number of substeps never drops below
what the known frequencies need for RK4 accuracy and stability: w_stiffness * h <= 0.5, and
w * h <= 1.5 for the critically damped pin springs, drag hands and the damping rate.
Why RK4 and not a variational integrator: the metric G(q) makes the Hamiltonian non-separable, so
symplectic schemes are implicit (several decoder evaluations per Newton iteration); RK4 with one
substep per frame already keeps the drift of smooth motions at 24-30 fps orders of magnitude under
1% (tests/test_dynamics.py measures it), at 4 evaluations per frame.

Blow-up: a NaN/inf state, a point farther than ``max_displacement`` object sizes from rest, or an
energy balance off by more than half the energy scale in one frame is retried with twice the
substeps up to ``max_refinements`` times; if it still fails the run stops with SimulationError.
No NaN frame is ever returned.

Cancelling: ``on_frame(index, q, energy)`` is called for every frame (0 included); when it returns
False the integration stops and the frames so far come back with ``cancelled=True``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import Tensor

from ..errors import SimulationError
from .drag import DragHandle, DragPath
from .lagrangian import Motion, equations_of_motion
from .loads import Loads
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .system import MechanicalSystem, PointKinematics, point_kinematics

OnFrame = Callable[[int, Tensor, float], bool]
_CPU = dict(device="cpu", dtype=torch.float64)


@dataclass(frozen=True)
class Trajectory:
    """The simulated motion in reduced coordinates, one row per output frame (frame 0 = start).

    q, qdot: (T, kq) float64; times: (T,) seconds; energy = kinetic + potential (T,) joules;
    work: (T,) work of the non-conservative forces since frame 0 (so energy - work is constant
    for the exact motion); substeps: (T,) RK4 steps used to reach each frame (0 for frame 0);
    residual: (T,) energy-balance error of each frame's step relative to the energy scale;
    drag_errors: per drag, distance (m) from the grabbed point to its target at its frame (NaN
    if the run stopped earlier); evaluations: decoder evaluations (jacfwd + nested JVP) in all;
    cancelled: whether ``on_frame`` stopped the run.
    """

    q: Tensor
    qdot: Tensor
    times: Tensor
    energy: Tensor
    kinetic: Tensor
    potential: Tensor
    work: Tensor
    substeps: Tensor
    residual: Tensor
    drag_errors: tuple[float, ...] = ()
    evaluations: int = 0
    cancelled: bool = False

    @property
    def num_frames(self) -> int:
        return int(self.q.shape[0])

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


@dataclass
class _Record:
    q: list[Tensor] = field(default_factory=list)
    qdot: list[Tensor] = field(default_factory=list)
    kinetic: list[float] = field(default_factory=list)
    potential: list[float] = field(default_factory=list)
    work: list[float] = field(default_factory=list)
    substeps: list[int] = field(default_factory=list)
    residual: list[float] = field(default_factory=list)

    def add(self, s: _State, substeps: int, residual: float) -> None:
        self.q.append(s.q)
        self.qdot.append(s.qdot)
        self.kinetic.append(s.motion.kinetic)
        self.potential.append(s.motion.potential)
        self.work.append(s.work)
        self.substeps.append(substeps)
        self.residual.append(residual)


class _Failure(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


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
    ):
        self.system, self.loads, self.fps = system, loads, float(fps)
        self.drags = list(drags)
        self.settings = settings
        self.dt = 1.0 / self.fps
        self.frame_tolerance = tolerance / (10.0 * self.fps)
        self.min_substeps = min_substeps or 1
        self.paths: dict[int, DragPath] = {}
        self.evaluations = 0
        self._last: tuple[Tensor, Tensor, PointKinematics] | None = None
        eps = torch.finfo(system.dtype).eps
        reach = 1.0 + float(loads.rest_points.abs().max()) / loads.size
        self.noise = 4.0 * eps * loads.energy_scale * reach
        self.bound = settings.max_displacement * loads.size
        self.energy_floor = settings.energy_floor * loads.energy_scale

    # -- right-hand side ---------------------------------------------------------------------
    def _hands(self, frame: int) -> list[tuple[DragHandle, DragPath]]:
        return [
            (h, self.paths[i])
            for i, h in enumerate(self.drags)
            if h.active(frame) and i in self.paths
        ]

    def _evaluate(self, q: Tensor, qdot: Tensor, frame: int, t: float) -> tuple:
        if not (bool(torch.isfinite(q).all()) and bool(torch.isfinite(qdot).all())):
            raise _Failure("nonfinite")
        cached = self._last
        if cached is not None and torch.equal(cached[0], q) and torch.equal(cached[1], qdot):
            kin = cached[2]  # same state (e.g. every stage of a step at rest): same kinematics
        else:
            kin = point_kinematics(self.system, q, qdot)
            self.evaluations += 1
            self._last = (q, qdot, kin)
        return kin, self._assemble(kin, q, qdot, frame, t)

    def _assemble(self, kin: PointKinematics, q, qdot, frame: int, t: float) -> Motion:
        motion = equations_of_motion(kin, self.loads, q, qdot, frame, t, self._hands(frame))
        if not (bool(torch.isfinite(motion.qddot).all()) and math.isfinite(motion.power)):
            raise _Failure("nonfinite")
        return motion

    def _check(self, kin: PointKinematics, q: Tensor) -> None:
        if not bool(torch.isfinite(kin.x).all()):
            raise _Failure("nonfinite")
        if float((kin.x - self.loads.rest_points).norm(dim=1).max()) > self.bound:
            raise _Failure("bounds")
        barrier = self.loads.barrier
        if barrier is not None and barrier.excess(q) > self.settings.max_latent_excess:
            raise _Failure("latent")
        if float(q.abs().max()) > self.settings.max_coordinate:
            raise _Failure("latent")

    # -- one frame ---------------------------------------------------------------------------
    def _substep(self, s: _State, frame: int, t: float, h: float) -> _State:
        q, v, a1, p1 = s.q, s.qdot, s.motion.qddot, s.motion.power
        q2, v2 = q + 0.5 * h * v, v + 0.5 * h * a1
        _, m2 = self._evaluate(q2, v2, frame, t + 0.5 * h)
        q3, v3 = q + 0.5 * h * v2, v + 0.5 * h * m2.qddot
        _, m3 = self._evaluate(q3, v3, frame, t + 0.5 * h)
        q4, v4 = q + h * v3, v + h * m3.qddot
        _, m4 = self._evaluate(q4, v4, frame, t + h)
        qn = q + (h / 6.0) * (v + 2.0 * v2 + 2.0 * v3 + v4)
        vn = v + (h / 6.0) * (a1 + 2.0 * m2.qddot + 2.0 * m3.qddot + m4.qddot)
        wn = s.work + (h / 6.0) * (p1 + 2.0 * m2.power + 2.0 * m3.power + m4.power)
        kin, motion = self._evaluate(qn, vn, frame, t + h)
        self._check(kin, qn)
        return _State(q=qn, qdot=vn, work=wn, kin=kin, motion=motion)

    def _frame(self, s: _State, frame: int, n: int) -> _State:
        h = self.dt / n
        t0 = frame * self.dt
        for i in range(n):
            s = self._substep(s, frame, t0 + i * h, h)
        return s

    def _min_substeps(self, frame: int) -> int:
        st, loads = self.settings, self.loads
        damped = [loads.damping]
        if loads.pins is not None:
            damped.append(loads.pins.omega)
        damped += [h.omega for h in self.drags if h.active(frame)]
        need = max(
            self.dt * loads.stiffness_omega / st.oscillation_step,
            self.dt * max(damped) / st.damped_step,
        )
        return max(self.min_substeps, math.ceil(need - 1e-9), 1)

    # -- the run -----------------------------------------------------------------------------
    def run(
        self, q0: Tensor, qdot0: Tensor, frames: int, on_frame: OnFrame | None = None
    ) -> Trajectory:
        """Integrate from (q0, qdot0) (kq,) for ``frames`` output frames (frame 0 included)."""
        q0, qdot0 = q0.to(**_CPU), qdot0.to(**_CPU)
        try:
            kin, motion = self._evaluate(q0, qdot0, 0, 0.0)
            self._check(kin, q0)
        except _Failure as fail:
            raise SimulationError(
                f"the initial state is invalid ({fail.reason}): the decoder gives NaN/inf or "
                "the initial velocities are not finite"
            ) from None
        state = _State(q=q0, qdot=qdot0, work=0.0, kin=kin, motion=motion)
        record = _Record()
        record.add(state, 0, 0.0)
        drag_errors = [math.nan] * len(self.drags)
        content = abs(motion.kinetic) + abs(motion.potential)
        cancelled = on_frame is not None and on_frame(0, q0.clone(), self._energy(state)) is False
        n_next = 1
        for frame in range(frames - 1):
            if cancelled:
                break
            state = self._start_frame(state, frame)
            n = max(n_next, self._min_substeps(frame))
            new, n, res, limit, content = self._advance(state, frame, n, content)
            n_next = n
            if res < limit / 32 and n > self._min_substeps(frame + 1):
                n_next = n // 2  # RK4: half the steps, about 16 times the error
            state = new
            record.add(state, n, res)
            for i, h in enumerate(self.drags):
                if h.frame == frame + 1:
                    pos = state.kin.x[h.row].to(**_CPU)
                    drag_errors[i] = float((pos - h.target).norm())
            if (
                on_frame is not None
                and on_frame(frame + 1, state.q.clone(), self._energy(state)) is False
            ):
                cancelled = True
        return self._trajectory(record, drag_errors, cancelled)

    def _start_frame(self, s: _State, frame: int) -> _State:
        """Plan drags that start now and re-assemble the forces of this step."""
        for i, h in enumerate(self.drags):
            if h.start_frame == frame and i not in self.paths:
                pos = s.kin.x[h.row].to(**_CPU)
                vel = s.kin.velocity(s.qdot)[h.row].to(**_CPU)
                self.paths[i] = h.plan(pos, vel, self.fps, self.settings.drag_arrival)
        motion = self._assemble(s.kin, s.q, s.qdot, frame, frame * self.dt)
        return _State(q=s.q, qdot=s.qdot, work=s.work, kin=s.kin, motion=motion)

    def _advance(self, s: _State, frame: int, n: int, content: float) -> tuple:
        st = self.settings
        best, best_res, best_limit, prev_res, reason = None, math.inf, 0.0, None, "nonfinite"
        e0 = self._energy(s)
        for attempt in range(st.max_refinements + 1):
            try:
                new = self._frame(s, frame, n)
                e1 = self._energy(new)
                ref = max(content, abs(e1), abs(new.work), self.energy_floor)
                res = abs((e1 - e0) - (new.work - s.work)) / ref
                if res > 0.5:
                    raise _Failure("energy")
                limit = self.frame_tolerance + self.noise / ref
                last = attempt == st.max_refinements or 2 * n > st.max_substeps
                stalled = prev_res is not None and res > prev_res / 4
                if res <= limit or stalled or last:
                    held = abs(new.motion.kinetic) + abs(new.motion.potential)
                    return new, n, res, limit, max(content, held)
                best, best_res, best_limit, prev_res = new, res, limit, res
            except _Failure as fail:
                reason = fail.reason
                if best is not None:
                    break
            if 2 * n > st.max_substeps:
                break
            n *= 2
        if best is not None:
            return best, n // 2, best_res, best_limit, content
        raise SimulationError(self._blow_up_message(reason, frame, n))

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
        return s.motion.kinetic + s.motion.potential

    def _trajectory(self, r: _Record, drag_errors: list[float], cancelled: bool) -> Trajectory:
        f64 = dict(dtype=torch.float64)
        kinetic = torch.tensor(r.kinetic, **f64)
        potential = torch.tensor(r.potential, **f64)
        return Trajectory(
            q=torch.stack(r.q),
            qdot=torch.stack(r.qdot),
            times=torch.arange(len(r.q), **f64) * self.dt,
            energy=kinetic + potential,
            kinetic=kinetic,
            potential=potential,
            work=torch.tensor(r.work, **f64),
            substeps=torch.tensor(r.substeps, dtype=torch.long),
            residual=torch.tensor(r.residual, **f64),
            drag_errors=tuple(drag_errors),
            evaluations=self.evaluations,
            cancelled=cancelled,
        )
