"""Contact with the ground and static colliders: penalty forces on the tracked points.

Each mass point i (mass m_i) at signed distance d_i from an obstacle (``obstacles``; positive
outside, n_i = grad d_i) is pushed out once it comes closer than the contact margin delta
(its penetration p_i = delta - d_i > 0), by a one-sided penalty (design section 11):

    V_c = sum_i k_i (p_i^2 / 2 + p_i^4 / (4 h^2)),   k_i = m_i w_c^2   (conservative, in V)
    elastic force e_i = k_i (p_i + p_i^3 / h^2)   (stiffening: twice as stiff at p = h)
    normal force  f_n,i = max(0, e_i - c_i v_n,i),  c_i = 2 zeta_n k'_i / w   (never pulls)
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

Damping and bounciness. The points in contact act on the object as one spring of stiffness
K = sum_i k'_i (k'_i = de_i/dp_i = k_i (1 + 3 p_i^2 / h^2), their tangent stiffnesses) on its
mass M, frequency w = sqrt(K / M); each point's dashpot is its share of the one that damps
that spring at the ratio zeta_n, c_i = 2 zeta_n k'_i / w (sum_i c_i = 2 zeta_n sqrt(K M)): the
damping force is (2 zeta_n / w) de_i/dt, and the object's normal motion in contact is damped
at zeta_n however many points carry it. The ratio comes from the conditions' bounciness, the
coefficient of restitution e. A linear spring-dashpot whose contact ends when its force, not
its depth, reaches zero (the dashpot never pulls) has the restitution (Schwager and Poeschel,
"Coefficient of restitution and linear-dashpot model revisited", Granular Matter 9, 465-469,
2007, arXiv:cond-mat/0701278)

    e(zeta) = exp(-2 zeta arccos(zeta) / sqrt(1 - zeta^2))
            = exp(-2 zeta arccosh(zeta) / sqrt(zeta^2 - 1))   for zeta > 1

(``restitution``; e(1) = exp(-2), e ~ 1 / (4 zeta^2) for large zeta: it never reaches 0), and
``restitution_damping`` inverts it, at most ``ContactSettings.damping`` (what bounciness 0 gets:
e(5) = 0.009); the depth-ending relation zeta = -ln e / sqrt(pi^2 + ln^2 e) would ask for a
dashpot that pulls the object back as it leaves. The penalty stiffens with depth and, under a
curved bottom, more points join as it sinks: the contact's force grows like a power of the
depth, F = a P^n, of exponent n = P K / F (>= 1; P the deepest point's depth, F = sum_i e_i).
Damped at zeta_n = zeta sqrt((n + 1) / (2 n)), such a contact has exactly the restitution
e(zeta): in u = sqrt(2 / (n + 1)) P^((n+1)/2) its normal speed v obeys
v dv/du = -W^2 u - 2 zeta W v (W^2 = a / M), the linear spring-dashpot's equation, which ends
at zero force and at u = 0 where the original does. zeta_n, taken at each evaluation (between
zeta / sqrt(2) and zeta), so keeps the bounciness at every impact speed, shallow or deep in the
stiffening, and under flat and curved bottoms alike. The friction's viscous rate gamma
(sticking) is w_c times ``ContactSettings.sticking``.
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
    feel no contact; their sum is the object's mass M); omega: w_c (rad/s); zeta: the damping
    ratio of the object's normal motion in contact (``restitution_damping``); sticking:
    gamma / w_c; friction: mu; margin: delta (m); hard: h (m), the depth at which the penalty is
    twice as stiff.
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
        self.total_mass = float(self.masses.sum())
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
        k, p2, elastic, tangent = self._springs(c)
        vel = v[c.rows]
        vn = (vel * c.normals).sum(1)
        fn = np.maximum(elastic - self._dashpot_rate(c.depth, elastic, tangent) * tangent * vn, 0.0)
        vt = vel - vn[:, None] * c.normals
        speed = np.sqrt((vt * vt).sum(1))
        ft = np.minimum(self.gamma * self.masses[c.rows] * speed, self.friction * fn)
        unit = vt / np.maximum(speed, 1e-300)[:, None]
        force = fn[:, None] * c.normals - ft[:, None] * unit
        out = np.zeros_like(x)
        np.add.at(out, c.rows, force)
        power = float(((fn - elastic) * vn).sum() - (ft * speed).sum())
        return self._energy(k, c.depth, p2), out, power

    def energy(self, x: np.ndarray) -> float:
        """V_c at positions x (S, 3)."""
        c = self.state(x)
        k, p2, _, _ = self._springs(c)
        return self._energy(k, c.depth, p2)

    def _springs(self, c: ContactState) -> tuple[np.ndarray, ...]:
        """(k_i, p_i^2 / h^2, e_i, k'_i = de_i/dp_i), each (R,), of the rows in contact."""
        k = self.masses[c.rows] * self.omega**2
        p2 = c.depth * c.depth / (self.hard * self.hard)
        return k, p2, k * c.depth * (1.0 + p2), k * (1.0 + 3.0 * p2)

    def _dashpot_rate(self, depth: np.ndarray, elastic: np.ndarray, tangent: np.ndarray) -> float:
        """beta (s) of the rows in contact, c_i = beta k'_i (module docstring): 2 zeta_n / w,
        w = sqrt(K / M), zeta_n = zeta sqrt((n + 1) / (2 n)), n = P K / F."""
        if self.zeta == 0.0:
            return 0.0
        stiffness = float(tangent.sum())  # K
        exponent = max(float(depth.max()) * stiffness / max(float(elastic.sum()), 1e-300), 1.0)
        zeta = self.zeta * math.sqrt((exponent + 1.0) / (2.0 * exponent))
        return 2.0 * zeta * math.sqrt(self.total_mass / stiffness)

    @staticmethod
    def _energy(k: np.ndarray, p: np.ndarray, p2: np.ndarray) -> float:
        return float((k * p * p * (0.5 + 0.25 * p2)).sum())

    def stiffness_rate(self, x: np.ndarray, jac: np.ndarray, metric) -> float:
        """The highest frequency (rad/s) the contact gives the reduced coordinates at x: the
        largest generalized eigenvalue of (J_c^T K' J_c, G), with the damping's rate beside it
        (0 without contact). jac (S, 3, kq); metric: () -> G (kq, kq), only made when some
        point is in contact (this runs after every integration step)."""
        c = self.state(x)
        if len(c.rows) == 0:
            return 0.0
        _, _, elastic, tangent = self._springs(c)
        jn = np.einsum("ra,rak->rk", c.normals, jac[c.rows])  # (R, kq) normal rows
        lam = max(_largest_generalized(jn.T @ (tangent[:, None] * jn), metric()), 0.0)
        # the dashpots are beta times the springs, so the same mode's damping rate is beta lam
        return max(math.sqrt(lam), self._dashpot_rate(c.depth, elastic, tangent) * lam)


def _largest_generalized(a: np.ndarray, g: np.ndarray) -> float:
    """Largest lambda of a v = lambda g v (g positive definite)."""
    try:
        chol = np.linalg.cholesky(g)
    except np.linalg.LinAlgError:
        return 0.0
    inv = np.linalg.inv(chol)
    return float(np.linalg.eigvalsh(inv @ a @ inv.T).max())


def restitution(zeta: float) -> float:
    """e of a linear spring-dashpot of damping ratio zeta >= 0 whose contact ends at zero force
    (the module docstring's e(zeta))."""
    if abs(zeta - 1.0) < 1e-6:
        return math.exp(-2.0)
    if zeta < 1.0:
        return math.exp(-2.0 * zeta * math.acos(zeta) / math.sqrt(1.0 - zeta * zeta))
    return math.exp(-2.0 * zeta * math.acosh(zeta) / math.sqrt(zeta * zeta - 1.0))


def restitution_damping(bounciness: float, most: float) -> float:
    """The damping ratio zeta in [0, most] whose restitution e(zeta) is ``bounciness`` (0..1):
    the inverse of ``restitution`` by bisection (e falls with zeta); ``most`` where e(most) is
    still above the bounciness (bounciness 0)."""
    if bounciness >= 1.0:
        return 0.0
    if restitution(most) >= bounciness:
        return float(most)
    low, high = 0.0, float(most)
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if restitution(mid) > bounciness else (low, mid)
    return 0.5 * (low + high)


def contact_omega(accel: float, size: float, share: float, depth: float) -> float:
    """w_c (rad/s) whose sag under ``accel`` on ``share`` of the mass is ``depth`` sizes."""
    return math.sqrt(max(accel, 1e-9) / (share * depth * size))
