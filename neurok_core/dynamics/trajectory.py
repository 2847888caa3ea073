"""The integrator's output: the simulated motion in reduced coordinates, frame by frame."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor


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
    cancelled: whether ``on_frame`` or the deadline stopped the run (timed_out: the deadline,
    ``integrator``). With a local model: expansions (decoder passes with the Hessian), reuses
    (kept expansions gone back to instead), model_errors (its position error measured at each
    re-expansion, object sizes) and model_energy_jumps (sum of |energy change| at re-expansions
    left after the energy match, J: booked in ``work``, so it is not part of the energy balance;
    about 0 unless ``local_energy_match`` is off).
    contact_work: the contact's share of the work at the end (J, <= 0: what its damping and
    friction removed; integrated with the work's own RK4 weights, 0 without contact).
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
    timed_out: bool = False
    expansions: int = 0
    reuses: int = 0
    model_errors: tuple[float, ...] = ()
    model_energy_jumps: float = 0.0
    contact_work: float = 0.0

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
class Record:
    """One row per output frame: (q, q', kinetic, potential, work, steps, residual)."""

    rows: list[tuple[Tensor, Tensor, float, float, float, float, float]] = field(
        default_factory=list
    )

    def add(self, q, qdot, kinetic, potential, work, steps, residual) -> None:
        self.rows.append((q, qdot, kinetic, potential, work, steps, residual))


def build_trajectory(
    r: Record,
    drag_errors: list[float],
    cancelled: bool,
    *,
    timed_out: bool = False,
    dt: float,
    evaluations: int,
    energy_evaluations: int,
    stats=None,
    contact_work: float = 0.0,
) -> Trajectory:
    """The trajectory of a run's records (one per output frame); ``stats``: the local model's
    ``LocalStats`` (None without one)."""
    f64 = dict(dtype=torch.float64)
    q, qdot, kinetic, potential, work, steps, residual = zip(*r.rows, strict=True)
    kinetic_t = torch.tensor(kinetic, **f64)
    potential_t = torch.tensor(potential, **f64)
    return Trajectory(
        q=torch.stack(q),
        qdot=torch.stack(qdot),
        times=torch.arange(len(q), **f64) * dt,
        energy=kinetic_t + potential_t,
        kinetic=kinetic_t,
        potential=potential_t,
        work=torch.tensor(work, **f64),
        steps_per_frame=torch.tensor(steps, **f64),
        residual=torch.tensor(residual, **f64),
        drag_errors=tuple(drag_errors),
        evaluations=evaluations,
        energy_evaluations=energy_evaluations,
        cancelled=cancelled,
        timed_out=timed_out,
        expansions=0 if stats is None else stats.expansions,
        reuses=0 if stats is None else stats.reuses,
        model_errors=() if stats is None else tuple(stats.errors),
        model_energy_jumps=(
            0.0 if stats is None else float(sum(abs(j) for j in stats.energy_jumps))
        ),
        contact_work=contact_work,
    )
