"""Contact with the ground and static colliders: penalty forces on the tracked points.

Each mass point i (mass m_i) at signed distance d_i from an obstacle (``obstacles``; positive
outside, n_i = grad d_i) is pushed out once it comes closer than the contact margin delta
(its penetration p_i = delta - d_i > 0), by a one-sided penalty (design section 11):

    V_c = sum_i k_i (p_i^2 / 2 + p_i^4 / (4 h^2)),   k_i = m_i w_c^2   (conservative, in V)
    elastic force e_i = k_i (p_i + p_i^3 / h^2)   (stiffening: twice as stiff at p = h)
    normal force  f_n,i = max(0, e_i - c_i v_n,i),  c_i = 2 zeta m_i w_c   (never pulls)
    friction      f_t,i = -min(gamma m_i |v_t,i|, mu f_n,i) v_t,i / |v_t,i|     (Coulomb-like)

with v_n = v . n and v_t = v - v_n n the point's velocity. The cubic term keeps the depth near
h even where a few points carry the whole object (a corner, the bottom of a ball), where the
linear penalty alone would let them sink far. The elastic part is conservative (its
energy is part of V); the damping part f_n - k p and the friction are non-conservative: their
power P_c = sum_i ((f_n,i - e_i) v_n,i + f_t,i . v_t,i) <= 0 is booked with the work of the
other non-conservative forces, so the integrator's energy balance still holds and what contact
removes is reported (``Trajectory.contact_work``, the info's ``contact_work``). All of it
enters the dynamics as J^T f.

Stiffness. The weight of an object resting on a share phi of its mass points sinks them by
g / (phi w_c^2); ``ContactSettings.depth`` and ``share`` choose w_c so that this sag stays at
``depth`` object sizes when ``share`` of the mass carries the load, w_c^2 = a / (share depth L),
with a the problem's acceleration scale (gravity, pushes, initial speeds: ``loads``). The
reduced coordinates see w_c times about sqrt(phi) (the contact acts on phi of the mass), which
the step control measures as the motion meets an obstacle (``stiffness_rate``).

Damping. Likewise the reduced system sees the points' damping ratio zeta times about sqrt(phi),
so zeta is well above critical for one point (``ContactSettings.damping``): a landing object
loses most of its normal speed in one bounce and comes to rest on the obstacle instead of
bouncing forever; the friction's viscous rate gamma (sticking) is w_c times
``ContactSettings.sticking``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .obstacles import Obstacles


@dataclass
class ContactState:
    """What one evaluation found: rows (R,) of the points in contact, their penetration p (R,)
    and normals n (R, 3) (one row per point and obstacle)."""

    rows: np.ndarray
    depth: np.ndarray
    normals: np.ndarray


class ContactForces:
    """The penalty, damping and friction of the module docstring over the tracked points.

    obstacles: the scene's ground and meshes; masses (S,) kg (zero for tracked-only rows, which
    feel no contact); omega: w_c (rad/s); zeta: damping ratio; sticking: gamma / w_c; friction:
    mu; margin: delta (m); hard: h (m), the depth at which the penalty is twice as stiff.
    """

    def __init__(
        self,
        obstacles: Obstacles,
        masses: np.ndarray,
        *,
        omega: float,
        zeta: float,
        sticking: float,
        friction: float,
        margin: float,
        hard: float,
    ) -> None:
        self.obstacles = obstacles
        self.masses = np.asarray(masses, dtype=np.float64)
        self.heavy = np.flatnonzero(self.masses > 0)
        self.omega, self.zeta, self.friction = float(omega), float(zeta), float(friction)
        self.gamma = float(sticking) * self.omega
        self.margin, self.hard = float(margin), float(hard)

    def state(self, x: np.ndarray) -> ContactState:
        """The mass points closer than the margin to an obstacle at positions x (S, 3)."""
        rows, depth, normals = [], [], []
        xh = x[self.heavy]
        for r, d, n in self.obstacles.distances(xh, self.margin):
            rows.append(self.heavy[r])
            depth.append(self.margin - d)
            normals.append(n)
        if not rows:
            return ContactState(np.zeros(0, np.int64), np.zeros(0), np.zeros((0, 3)))
        return ContactState(np.concatenate(rows), np.concatenate(depth), np.concatenate(normals))

    def evaluate(self, x: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray | None, float]:
        """(V_c, the point forces (S, 3) or None without contact, power of the damping and
        friction) at positions x and velocities v (S, 3)."""
        c = self.state(x)
        if len(c.rows) == 0:
            return 0.0, None, 0.0
        m = self.masses[c.rows]
        k = m * self.omega**2
        p2 = c.depth * c.depth / (self.hard * self.hard)
        elastic = k * c.depth * (1.0 + p2)  # (R,)
        vel = v[c.rows]
        vn = (vel * c.normals).sum(1)
        fn = np.maximum(elastic - 2.0 * self.zeta * self.omega * m * vn, 0.0)
        vt = vel - vn[:, None] * c.normals
        speed = np.sqrt((vt * vt).sum(1))
        ft = np.minimum(self.gamma * m * speed, self.friction * fn)
        unit = vt / np.maximum(speed, 1e-300)[:, None]
        force = fn[:, None] * c.normals - ft[:, None] * unit
        out = np.zeros_like(x)
        np.add.at(out, c.rows, force)
        power = float(((fn - elastic) * vn).sum() - (ft * speed).sum())
        return self._energy(k, c.depth, p2), out, power

    def energy(self, x: np.ndarray) -> float:
        """V_c at positions x (S, 3)."""
        c = self.state(x)
        k = self.masses[c.rows] * self.omega**2
        return self._energy(k, c.depth, c.depth * c.depth / (self.hard * self.hard))

    @staticmethod
    def _energy(k: np.ndarray, p: np.ndarray, p2: np.ndarray) -> float:
        return float((k * p * p * (0.5 + 0.25 * p2)).sum())

    def stiffness_rate(self, x: np.ndarray, jac: np.ndarray, metric) -> float:
        """The highest frequency (rad/s) the contact gives the reduced coordinates at x: the
        largest generalized eigenvalue of (J_c^T K J_c, G), with the damping's rate beside it
        (0 without contact). jac (S, 3, kq); metric: () -> G (kq, kq), only made when some
        point is in contact (this runs after every integration step)."""
        c = self.state(x)
        if len(c.rows) == 0:
            return 0.0
        m = self.masses[c.rows]
        jn = np.einsum("ra,rak->rk", c.normals, jac[c.rows])  # (R, kq) normal rows
        hardening = 1.0 + 3.0 * c.depth * c.depth / (self.hard * self.hard)  # de/dp / k
        stiff = jn.T @ ((m * self.omega**2 * hardening)[:, None] * jn)
        lam = _largest_generalized(stiff, metric())
        w = math.sqrt(max(lam, 0.0))
        # the damping rate c_eff / M_eff of the same mode: 2 zeta w^2 / w_c
        return max(w, 2.0 * self.zeta * w * w / self.omega)


def _largest_generalized(a: np.ndarray, g: np.ndarray) -> float:
    """Largest lambda of a v = lambda g v (g positive definite)."""
    try:
        chol = np.linalg.cholesky(g)
    except np.linalg.LinAlgError:
        return 0.0
    inv = np.linalg.inv(chol)
    return float(np.linalg.eigvalsh(inv @ a @ inv.T).max())


def contact_omega(accel: float, size: float, share: float, depth: float) -> float:
    """w_c (rad/s) whose sag under ``accel`` on ``share`` of the mass is ``depth`` sizes."""
    return math.sqrt(max(accel, 1e-9) / (share * depth * size))
