"""The Euler-Lagrange right-hand side of ``lagrangian.equations_of_motion`` in NumPy.

With the local model (``local``) the tracked points' x, J and D^2x[q', q'] are a few hundred
float64 numbers on the CPU, and a right-hand side is about thirty small array operations. In
PyTorch each of those costs several microseconds of dispatch, more than its arithmetic;
NumPy's per-call cost is a fraction of that. The equations are the same, term by term (see
``lagrangian``); ``tests/test_fastrhs.py`` checks them against the PyTorch version to 1e-10 with
every load switched on (gravity, stiffness, damping, forces, wind, the shape-keeping springs,
the prior barrier, drag hands).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg.lapack import dpotrf, dpotrs

from .barrier import stop_damping
from .drag import DragHandle, DragPath, hand_acceleration
from .loads import Loads
from .shapekeep import numpy_energy_and_forces


def as_float64(t: torch.Tensor) -> np.ndarray:
    """A tensor as a float64 NumPy array on the CPU (no copy when it already is one)."""
    return t.detach().to("cpu", torch.float64).numpy()


class NumpyDynamics:
    """The loads as float64 NumPy arrays and the right-hand side over them.

    ``motion(x, jac, bias, q, qdot, frame, t, hands)`` returns (q'' (kq,), power, kinetic,
    potential, contact power) exactly as ``equations_of_motion`` does; arrays: x, bias (S, 3),
    jac (S, 3, kq).
    """

    def __init__(self, loads: Loads):
        self.loads = loads
        self.m = as_float64(loads.masses)  # (S,)
        self.sqrt_m3 = np.sqrt(np.repeat(self.m, 3))[:, None]  # (3S, 1)
        self.rest = as_float64(loads.rest_points)  # (S, 3)
        self.gravity = as_float64(loads.gravity)  # (3,)
        self.ws2 = float(loads.stiffness_omega) ** 2
        self.damping, self.ridge = float(loads.damping), float(loads.ridge)
        b = loads.barrier
        self.barrier = None
        if b is not None:
            self.barrier = (
                as_float64(b.rest),
                as_float64(b.basis),
                as_float64(b.mean),
                b.radius,
                b.strength,
                b.damping_ratio,
            )
        self.springs = None if loads.springs is None else loads.springs.as_numpy()
        self.contact = loads.contact
        self.translation = None if loads.translation is None else as_float64(loads.translation)
        self._applied: dict[int, np.ndarray] = {}
        self._ridge = None  # ridge * I, made at the first call (kq)

    def applied(self, frame: int) -> np.ndarray:
        """(S, 3) applied point forces on step ``frame`` (cached per frame)."""
        f = self._applied.get(frame)
        if f is None:
            if len(self._applied) > 64:
                self._applied.clear()
            f = self._applied[frame] = as_float64(self.loads.applied_forces(frame))
        return f

    def _latent_offset(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """z(q) - mu (k,) and its length."""
        rest, basis, mean = self.barrier[:3]
        d = rest + basis @ q - mean
        return d, float(np.sqrt(d @ d))

    def barrier_terms(self, q: np.ndarray) -> tuple[float, np.ndarray | None]:
        """(V_b, dV_b/dq or None inside the ball) of ``barrier.PriorBarrier``."""
        _, basis, _, radius, strength, _ = self.barrier
        d, r = self._latent_offset(q)
        s = r - radius
        if s <= 0.0:
            return 0.0, None
        return strength * s**3, (3.0 * strength * s * s / r) * (basis.T @ d)

    def barrier_contact(self, q: np.ndarray) -> tuple[float, np.ndarray] | None:
        """``PriorBarrier.contact``: (s, n = ds/dq) beyond the ball of a damping barrier."""
        if self.barrier is None or self.barrier[5] <= 0.0:
            return None
        d, r = self._latent_offset(q)
        s = r - self.barrier[3]
        if s <= 0.0:
            return None
        return s, (self.barrier[1].T @ d) / r

    def stop_damping(self, s: float, n: np.ndarray, gn: np.ndarray) -> float:
        """``PriorBarrier.damping``: c at penetration s from n and G^-1 n."""
        return stop_damping(self.barrier[5], self.barrier[4], s, float(n @ gn))

    def excess(self, q: np.ndarray) -> float:
        """How far z(q) lies outside the prior ball (``PriorBarrier.excess``); 0 without one."""
        if self.barrier is None:
            return 0.0
        return max(0.0, self._latent_offset(q)[1] - self.barrier[3])

    def metric(self, jac: np.ndarray) -> np.ndarray:
        """G = J^T M J + ridge I (kq, kq)."""
        kq = jac.shape[-1]
        if self._ridge is None or self._ridge.shape[0] != kq:
            self._ridge = self.ridge * np.eye(kq)
        a = self.sqrt_m3 * jac.reshape(-1, kq)  # M^1/2 J, G = A^T A
        return a.T @ a + self._ridge

    def potential(
        self,
        x: np.ndarray,
        q: np.ndarray,
        barrier_energy: float | None = None,
        spring_energy: float | None = None,
        contact_energy: float | None = None,
    ):
        """V(q) in joules (``lagrangian.potential_energy``); the barrier's, the springs' and the
        contact's energies when already known."""
        dx = x - self.rest
        m = self.m
        v = -float(m @ (dx @ self.gravity))
        if self.ws2:
            ds = self.shape_offsets(dx, q)
            v += 0.5 * self.ws2 * float(m @ (ds * ds).sum(1))
        if self.contact is not None:
            v += self.contact.energy(x) if contact_energy is None else contact_energy
        if self.springs is not None:
            if spring_energy is None:
                spring_energy = numpy_energy_and_forces(self.springs, x)[0]
            v += spring_energy
        if barrier_energy is None and self.barrier is not None:
            barrier_energy = self.barrier_terms(q)[0]
        return v + (barrier_energy or 0.0)

    def shape_offsets(self, dx: np.ndarray, q: np.ndarray) -> np.ndarray:
        """(S, 3) what the stiffness pulls back: dx less the free translation if any."""
        return dx if self.translation is None else dx - self.translation @ q

    def _passive_power(
        self, applied: np.ndarray, vel: np.ndarray, qdot: np.ndarray, gq: np.ndarray
    ) -> float:
        """Power (W) of the applied forces and the damping (not the hands); vel (S, 3) point
        velocities, gq = G q'."""
        return float((applied * vel).sum()) - self.damping * float(qdot @ gq)

    def energies(
        self, x: np.ndarray, jac: np.ndarray, q: np.ndarray, qdot: np.ndarray, frame: int
    ) -> tuple[float, float, float]:
        """(kinetic, potential, power of the forces other than drag hands) as
        ``lagrangian.state_energies``, from x (S, 3) and J (S, 3, kq) alone."""
        kq = q.shape[0]
        metric = self.metric(jac)
        gq = metric @ qdot
        vel = (jac.reshape(-1, kq) @ qdot).reshape(-1, 3)
        power = self._passive_power(self.applied(frame), vel, qdot, gq)
        contact = self.barrier_contact(q)
        if contact is not None:
            s, n = contact
            c = self.stop_damping(s, n, np.linalg.solve(metric, n))
            power -= c * float(n @ qdot) ** 2
        contact_energy = None
        if self.contact is not None:
            contact_energy, _, contact_power = self.contact.evaluate(x, vel)
            power += contact_power
        return 0.5 * float(qdot @ gq), self.potential(x, q, None, None, contact_energy), power

    def motion(
        self,
        x: np.ndarray,
        jac: np.ndarray,
        bias: np.ndarray,
        q: np.ndarray,
        qdot: np.ndarray,
        frame: int,
        t: float,
        hands: list[tuple[DragHandle, DragPath]] = (),
    ) -> tuple[np.ndarray, float, float, float, float]:
        kq = q.shape[0]
        jf = jac.reshape(-1, kq)  # (3S, kq)
        metric = self.metric(jac)
        vel = (jf @ qdot).reshape(-1, 3)  # (S, 3)
        dx = x - self.rest
        applied = self.applied(frame)
        m = self.m[:, None]
        # gravity, stiffness, applied forces and the Coriolis term -J^T M D^2x[q', q'], one product
        point = m * (self.gravity - bias) + applied
        stiffness = None
        if self.ws2:
            stiffness = -(self.ws2 * m) * self.shape_offsets(dx, q)
            point = point + stiffness
        spring_energy = None
        if self.springs is not None:
            spring_energy, spring_forces = numpy_energy_and_forces(self.springs, x)
            point = point + spring_forces
        contact_energy, contact_power = None, 0.0
        if self.contact is not None:
            contact_energy, contact_forces, contact_power = self.contact.evaluate(x, vel)
            if contact_forces is not None:
                point = point + contact_forces
        gq = metric @ qdot
        q_track = jf.T @ point.reshape(-1) - self.damping * gq
        if stiffness is not None and self.translation is not None:
            q_track = q_track - self.translation.T @ stiffness.sum(0)
        power = self._passive_power(applied, vel, qdot, gq) + contact_power
        q_hold = np.zeros(kq)
        barrier_energy, contact = None, None
        if self.barrier is not None:
            barrier_energy, grad = self.barrier_terms(q)
            if grad is not None:  # beyond the ball: the barrier pushes back (and may damp)
                q_hold -= grad
                contact = self.barrier_contact(q)
        columns = [q_track, q_hold] if contact is None else [q_track, q_hold, contact[1]]
        chol, info = dpotrf(metric, lower=1, clean=0)
        both = None
        if info == 0:
            both, _ = dpotrs(chol, np.stack(columns, 1), lower=1)  # (kq, 2 | 3)
        # not positive definite, or NaN (which the factorisation lets through): a failed step,
        # retried smaller by the integrator
        if both is None or not math.isfinite(float(both.sum())):
            nan = np.full(kq, np.nan)
            return nan, float("nan"), float("nan"), float("nan"), float("nan")
        qddot = both[:, 0] + both[:, 1]
        if contact is not None:  # the barrier's contact damping -c s' n
            s, n = contact
            gn = both[:, 2]
            c = self.stop_damping(s, n, gn)
            rate = float(n @ qdot)
            qddot = qddot - (c * rate) * gn
            power -= c * rate * rate
        if hands:
            rows = [h.row for h, _ in hands]
            extra = hand_acceleration(
                hands,
                t,
                positions=torch.from_numpy(x[rows]),
                velocities=torch.from_numpy(vel[rows]),
                jac=torch.from_numpy(jac[rows]),
                bias=torch.from_numpy(bias[rows]),
                metric=torch.from_numpy(metric),
                qddot_free=torch.from_numpy(both[:, 0]),
            ).numpy()
            qddot = qddot + extra
            power += float(qdot @ (metric @ extra))
        kinetic = 0.5 * float(qdot @ gq)
        potential = self.potential(x, q, barrier_energy, spring_energy, contact_energy)
        return qddot, power, kinetic, potential, contact_power
