"""The Euler-Lagrange right-hand side in the reduced coordinates (design section 7).

With x(q) the tracked points, J = dx/dq (3S, kq), M = diag(m_i) (each mass on 3 rows):

    T = 1/2 q'^T G(q) q',   G = J^T M J + ridge I          (kinetic energy, the metric)
    V = V_gravity + V_stiffness + V_springs + V_barrier    (potential energy)
    G q'' = -c(q, q') - dV/dq + J^T f(t) - damping G q' + tau_hands,
    c = J^T M D^2x(q)[q', q'].

The Coriolis/centrifugal term: the Euler-Lagrange equations of L = T - V are
G q'' + (dG/dt) q' - 1/2 d/dq (q'^T G q') + dV/dq = Q, whose velocity terms equal the Christoffel
contraction c_i = Gamma_ijk q'_j q'_k, Gamma_ijk = 1/2 (d_k G_ij + d_j G_ik - d_i G_jk). For
G = J^T M J this is J^T M (D^2x[q', q']) (the normal-component terms cancel; see e.g. Murray, Li,
Sastry, "A Mathematical Introduction to Robotic Manipulation", 1994, ch. 4), so one nested
forward-mode JVP of the decoder replaces the (kq, kq, kq) tensor (NeuROK, method.md).

Potentials, with dx_i = x_i(q) - x_i(0):
    V_gravity   = -sum_i m_i g . dx_i                      (zero at rest)
    V_stiffness = 1/2 w_s^2 sum_i m_i |dx_i|^2,  w_s = 2 pi stiffness_hz: every small motion
                  about rest oscillates at stiffness_hz whatever the mass or coordinates
    V_springs   = the shape-keeping springs' energy (``shapekeep``; off by default)
    V_barrier   = strength * max(0, |z(q) - mu| - r)^3      (``barrier.PriorBarrier``)
    V_contact   = the contact penalty's energy (``contact``; with a ground or colliders)
With a free translation t(q) of the whole object (``Loads.translation``) the stiffness acts on
dx_i - t(q): it restores the shape, not the place. V_gravity, V_stiffness, V_springs and
V_barrier have zero gradient at q = 0, so with no loads and q' = 0 the rest state is an equilibrium.
Non-conservative: applied point forces and wind J^T f(t), damping -damping G q', the barrier's
contact damping -c s' n beyond the ball (``barrier.PriorBarrier``; on only in damped scenes) and
the drag hands (``drag``), the contact's damping and friction. Their power P = q'^T Q_nc feeds
the energy balance E(t) - E(0) = int P dt that the integrator uses as its error monitor.

Pins are not a term here: pinned points are held by clamping the kinematics x(q) around them
(``neurok_core.pinclamp``), so they are still for every q.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from .drag import DragHandle, DragPath, hand_acceleration
from .linalg import metric_solve
from .loads import Loads
from .system import PointKinematics

_CPU = dict(device="cpu", dtype=torch.float64)


@dataclass(frozen=True)
class Motion:
    """The right-hand side at one state: qddot (kq,) float64 CPU; power of the non-conservative
    forces (W); kinetic and potential energy (J); the contact's share of that power (W, <= 0:
    its damping and friction)."""

    qddot: Tensor
    power: float
    kinetic: float
    potential: float
    contact_power: float = 0.0


def mass_metric(kin: PointKinematics, masses: Tensor, ridge: float = 0.0) -> Tensor:
    """G = J^T M J + ridge I, (kq, kq) float64 CPU. masses: (S,)."""
    jac = kin.jac.reshape(-1, kin.jac.shape[-1])  # (3S, kq)
    m3 = masses.repeat_interleave(3).unsqueeze(1)  # (3S, 1)
    g = (jac.T @ (m3 * jac)).to(**_CPU)
    return 0.5 * (g + g.T) + ridge * torch.eye(g.shape[0], **_CPU)


def coriolis(kin: PointKinematics, masses: Tensor) -> Tensor:
    """c = J^T M D^2x[q', q'] (kq,) float64 CPU; equals Gamma_ijk q'_j q'_k for G = J^T M J."""
    jac = kin.jac.reshape(-1, kin.jac.shape[-1])  # (3S, kq)
    mb = (masses.unsqueeze(1) * kin.bias).reshape(-1)  # (3S,)
    return (jac.T @ mb).to(**_CPU)


def shape_offsets(kin: PointKinematics, loads: Loads, q: Tensor) -> Tensor:
    """(S, 3) what the stiffness pulls back: x - x_rest, less the free translation if any."""
    dx = kin.x - loads.rest_points
    shift = loads.shift(q)
    return dx if shift is None else dx - shift


def _contact(loads: Loads, x: Tensor, vel: Tensor):
    """(V_c, point forces (S, 3) tensor or None, power) of the contact (``contact``)."""
    if loads.contact is None:
        return 0.0, None, 0.0
    energy, force, power = loads.contact.evaluate(
        x.detach().to("cpu", torch.float64).numpy(), vel.detach().to("cpu", torch.float64).numpy()
    )
    return energy, None if force is None else torch.from_numpy(force).to(x), power


def potential_energy(
    kin: PointKinematics,
    loads: Loads,
    q: Tensor,
    barrier_energy: float | None = None,
    spring_energy: float | None = None,
    contact_energy: float | None = None,
) -> float:
    """V(q) in joules (zero at rest without contact); the barrier's, the springs' and the
    contact's energies when known."""
    dx = kin.x - loads.rest_points  # (S, 3)
    m = loads.masses
    v = -float((m * (dx @ loads.gravity)).sum())
    ds = shape_offsets(kin, loads, q)
    v += 0.5 * loads.stiffness_omega**2 * float((m * (ds * ds).sum(1)).sum())
    if loads.contact is not None:
        if contact_energy is None:
            contact_energy = loads.contact.energy(kin.x.detach().to("cpu", torch.float64).numpy())
        v += contact_energy
    if loads.springs is not None:
        if spring_energy is None:
            spring_energy = loads.springs.energy_and_forces(kin.x)[0]
        v += spring_energy
    if barrier_energy is not None:
        v += barrier_energy
    elif loads.barrier is not None:
        v += loads.barrier.energy_and_gradient(q.to(**_CPU))[0]
    return v


def _passive_power(loads: Loads, applied: Tensor, vel: Tensor, qdot: Tensor, metric) -> float:
    """Power (W) of the applied forces and the damping (not the hands)."""
    return float((applied * vel).sum()) - loads.damping * float(qdot @ metric @ qdot)


def barrier_damping(loads: Loads, q: Tensor, qdot: Tensor, metric: Tensor):
    """(q'' (kq,), power) of the barrier's contact damping at (q, q'), or None when it does
    not act (inside the ball, or an elastic barrier)."""
    contact = None if loads.barrier is None else loads.barrier.contact(q)
    if contact is None:
        return None
    s, n = contact
    gn = metric_solve(metric, n.unsqueeze(1))[:, 0]  # G^-1 n
    c = loads.barrier.damping(s, n, gn)
    rate = float(n @ qdot)  # s'
    return -c * rate * gn, -c * rate * rate


def state_energies(
    kin: PointKinematics, loads: Loads, q: Tensor, qdot: Tensor, frame: int
) -> tuple[float, float, float]:
    """(kinetic, potential, power of the forces other than drag hands) at a state on the step
    starting at ``frame``; needs only x and J (``kin.bias`` is not used)."""
    q, qdot = q.to(**_CPU), qdot.to(**_CPU)
    metric = mass_metric(kin, loads.masses, loads.ridge)
    vel = kin.velocity(qdot)  # (S, 3)
    power = _passive_power(loads, loads.applied_forces(frame), vel, qdot, metric)
    stop = barrier_damping(loads, q, qdot, metric)
    if stop is not None:
        power += stop[1]
    contact_energy, _, contact_power = _contact(loads, kin.x, vel)
    power += contact_power
    potential = potential_energy(kin, loads, q, contact_energy=contact_energy)
    return 0.5 * float(qdot @ metric @ qdot), potential, power


def equations_of_motion(
    kin: PointKinematics,
    loads: Loads,
    q: Tensor,
    qdot: Tensor,
    frame: int,
    t: float,
    hands: list[tuple[DragHandle, DragPath]] = (),
) -> Motion:
    """Solve G q'' = Q at state (q, q') on the step that starts at ``frame`` (time t, seconds).

    q, qdot: (kq,) float64 CPU; hands: the drag handles active on this step with their paths.
    """
    kq = q.shape[0]
    q, qdot = q.to(**_CPU), qdot.to(**_CPU)
    m = loads.masses
    jac = kin.jac.reshape(-1, kq)  # (3S, kq)
    metric = mass_metric(kin, m, loads.ridge)
    vel = kin.velocity(qdot)  # (S, 3)
    ds = shape_offsets(kin, loads, q)  # (S, 3)

    applied = loads.applied_forces(frame)  # (S, 3)
    stiffness = -(loads.stiffness_omega**2) * m.unsqueeze(1) * ds  # (S, 3)
    conservative = m.unsqueeze(1) * loads.gravity + stiffness  # (S, 3)
    spring_energy = None
    if loads.springs is not None:
        spring_energy, spring_forces = loads.springs.energy_and_forces(kin.x)
        conservative = conservative + spring_forces
    contact_energy, contact_forces, contact_power = _contact(loads, kin.x, vel)
    if contact_forces is not None:
        conservative = conservative + contact_forces  # (its non-conservative part: power)
    q_track = (jac.T @ (conservative + applied).reshape(-1)).to(**_CPU)  # (kq,)
    if loads.translation is not None:  # the stiffness does not act on the translation
        q_track = q_track - loads.translation.T @ stiffness.sum(0).to(**_CPU)
    q_track = q_track - coriolis(kin, m) - loads.damping * (metric @ qdot)
    power = _passive_power(loads, applied, vel, qdot, metric) + contact_power

    q_hold = torch.zeros(kq, **_CPU)
    barrier_energy = None
    if loads.barrier is not None:
        barrier_energy, barrier_grad = loads.barrier.energy_and_gradient(q)
        q_hold -= barrier_grad

    both = metric_solve(metric, torch.stack([q_track, q_hold], 1))  # (kq, 2)
    qddot = both[:, 0] + both[:, 1]
    stop = barrier_damping(loads, q, qdot, metric)
    if stop is not None:
        qddot = qddot + stop[0]
        power += stop[1]
    if hands:
        rows = torch.tensor([h.row for h, _ in hands], device=kin.x.device)
        extra = hand_acceleration(
            hands,
            t,
            positions=kin.x[rows].to(**_CPU),
            velocities=vel[rows].to(**_CPU),
            jac=kin.jac[rows].to(**_CPU),
            bias=kin.bias[rows].to(**_CPU),
            metric=metric,
            qddot_free=both[:, 0],
        )
        qddot = qddot + extra
        power += float(qdot @ (metric @ extra))

    kinetic = 0.5 * float(qdot @ metric @ qdot)
    return Motion(
        qddot=qddot,
        power=power,
        kinetic=kinetic,
        potential=potential_energy(kin, loads, q, barrier_energy, spring_energy, contact_energy),
        contact_power=contact_power,
    )
