"""Contact in the rig space: the moving parts' contact points against the world (the ground,
the colliders, the fixed parts) and against each other's rigid parts.

A contact point p sits at ``u_p^T Q`` (its skinning row u_p, package docstring). Its gap to an
obstacle is a signed distance d_p; the penalty is E = 1/2 sum_p k_p max(0, t_p - d_p)^2 with each
point's threshold t_p = min(margin, its distance at rest): a point that touches the obstacle at
rest (a joint's) may not go deeper than it was, and none is pushed at rest.

- **The world** is static: d_p = sdf(x_p), its gradient n_p = grad sdf, so
  dd/dQ = u_p (x) n_p.
- **A rigid part** b moves with its one bone (x = F (X - h) + c): the point's place in b's rest
  frame is X = h + F^-1 (x_p - c), d_p = sdf_b(X), and with g = F^-T grad sdf_b(X)
  dd = g . (dx_p - dF (X - h) - dc), i.e. dd/dQ = (u_p - u_b(X)) (x) g, where u_b(X) is the row
  of the rest point X on bone b: the point of b that coincides with p now. The lid of a laptop
  whose base is free stops on the base this way.

Both give every active contact a row e (4B,) and a normal g (3,), and the same energy: value
from the signed distance, gradient e (x) k (t - d) (-g), Gauss-Newton Hessian
k (e (x) g) (e (x) g)^T.
Friction is lagged at the step's start (``set_step``): E_f = sum mu lambda f0(|P (e^T (Q -
Q_start))|), the smoothed f0 of incremental potential contact (Li et al. 2020: f0' = f1(s) =
2 s / eps - s^2 / eps^2 below the slip eps, 1 beyond, so that f0 is C2 and Newton's model of it
holds where a face turns from sticking to sliding), lambda the normal force and P the tangent
projection at the start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..dynamics.obstacles import MeshDistance, Obstacles

RECENT = 3  # states whose contacts ``Contact._active`` keeps
CLUSTER = 8  # points of a cluster of the broad phase (``PartCull``), at most


@dataclass
class ContactPoints:
    """Points that meet an obstacle: rows (P, 4B) of well-spread vertices, each with its
    penalty stiffness (P,) N/m and its threshold (P,) m (the signed distance below which the
    penalty acts)."""

    rows: np.ndarray
    stiffness: np.ndarray
    threshold: np.ndarray
    owners: np.ndarray | None = None  # (P,) the part of each point (rolling resistance)


class PartObstacle:
    """A moving rigid part as an obstacle: its rest mesh's signed distance, moved by its bone.

    mesh: the part's rest surface (closed); bone: its bone's index; heads: (B, 3) the bones'
    heads; centre (3,), radius (m): a sphere around the rest part (a quick cull)."""

    def __init__(self, mesh: MeshDistance, bone: int, heads: np.ndarray):
        self.mesh = mesh
        self.bone = bone
        self.heads = heads
        v = mesh.vertices
        self.centre = 0.5 * (v.min(0) + v.max(0))
        self.radius = float(np.linalg.norm(v - self.centre, axis=1).max())

    def entries(self, q: np.ndarray, x: np.ndarray, rows: np.ndarray, reach: float):
        """(index (R,), d (R,), g (R, 3), e (R, 4B)) of the points ``x`` (P, 3) with skinning
        rows ``rows`` (P, 4B) closer than ``reach`` to the part (module docstring)."""
        _, idx, d, n, rest, inv = self._near(q[None], x[None], reach)
        g = n @ inv[0]  # (R, 3): F^-T n, each row n^T F^-1
        return idx, d, g, self.relative_rows(rows, idx, rest)

    def relative_rows(self, rows: np.ndarray, idx: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """(R, 4B) u_p - u_b(X) of the points ``idx`` (R,) of ``rows`` whose places in the
        part's rest frame are ``rest`` (R, 3): the rest point's row (X - h_b, 1) on the bone's
        four entries taken from the point's own."""
        b = self.bone
        e = rows[idx]  # (R, 4B) a copy
        e[:, 4 * b : 4 * b + 3] -= rest - self.heads[b]
        e[:, 4 * b + 3] -= 1.0
        return e

    def distances(self, qs: np.ndarray, xs: np.ndarray, reach: float):
        """(state (R,), index (R,), d (R,)) of the points ``xs`` (S, P, 3) at the states ``qs``
        (S, B, 4, 3) closer than ``reach`` to the part: ``entries``' distances for many states
        at once."""
        return self._near(qs, xs, reach)[:3]

    def _near(self, qs: np.ndarray, xs: np.ndarray, reach: float):
        """(state (R,), index (R,), d (R,), rest-frame gradient n (R, 3), rest point X (R, 3),
        F^-1 (S, 3, 3)) of the points ``xs`` (S, P, 3) at the states ``qs`` (S, B, 4, 3)
        closer than ``reach`` to the part (none at a state whose F is singular)."""
        b = self.bone
        f = np.swapaxes(qs[:, b, :3, :], 1, 2)  # (S, 3, 3)
        c, h = qs[:, b, 3, :], self.heads[b]  # (S, 3), (3,)
        centre = f @ (self.centre - h) + c  # (S, 3)
        # the largest stretch (the spectral norm) bounded from above without an SVD a state:
        # F^T F's largest eigenvalue is at most its largest absolute row sum (Gershgorin),
        # exactly 1 for a rotation
        scale = np.sqrt(np.abs(np.swapaxes(f, 1, 2) @ f).sum(2).max(1))  # (S,)
        cull = scale * self.radius + reach + self.mesh.band  # (S,)
        off = xs - centre[:, None]  # (S, P, 3)
        near = np.einsum("spi,spi->sp", off, off) < (cull * cull)[:, None]  # (S, P)
        inv = np.zeros_like(f)
        ok = np.ones(len(f), dtype=bool)
        if near.any():
            try:
                inv = np.linalg.inv(f)
            except np.linalg.LinAlgError:  # rare: each state alone
                for s in range(len(f)):
                    try:
                        inv[s] = np.linalg.inv(f[s])
                    except np.linalg.LinAlgError:
                        ok[s] = False
        state, idx = np.nonzero(near & ok[:, None])
        rest = (h + (xs - c[:, None]) @ np.swapaxes(inv, 1, 2))[state, idx]  # (R, 3)
        inside = self.mesh.near(rest)
        state, idx, rest = state[inside], idx[inside], rest[inside]
        if not len(idx):
            return state, idx, np.zeros(0), np.zeros((0, 3)), rest, inv
        d, n = self.mesh.query(rest)
        close = d < reach
        return state[close], idx[close], d[close], n[close], rest[close], inv

    def rest_distance(self, points: np.ndarray) -> np.ndarray:
        """(P,) exact signed distances of rest points to the part (far ones: +inf)."""
        out = np.full(len(points), np.inf)
        near = np.flatnonzero(self.mesh.near(points))
        if len(near):
            out[near] = self.mesh.exact(points[near])
        return out


_EPS = np.zeros((3, 3, 3))  # the Levi-Civita symbol
_EPS[0, 1, 2] = _EPS[1, 2, 0] = _EPS[2, 0, 1] = 1.0
_EPS[0, 2, 1] = _EPS[2, 1, 0] = _EPS[1, 0, 2] = -1.0


class RollingResistance:
    """Rolling resistance of the parts touching an obstacle: a lagged Coulomb friction on each
    part's turn over the step about the axes across its contact normal (rolling and rocking;
    not spinning about the normal), whose torque is at most ``coefficient`` x the part's
    length x its contact's normal force, as a rolling friction of rigid-body engines
    (Bullet's rolling friction, MuJoCo's condim 6). A ball on a flattened patch, which rocks
    with nothing to stop it but the air, comes to rest; an object does not roll on a slope
    unless its weight's torque about its contact exceeds it.

    The part's turn over the step from ``Q0`` is the mean over its bones of
    theta_b = vee(skew(F_b F0_b^T)), linear in Q (zero at the start): theta = C (Q - Q0)
    flattened, C (3, 12B) set per step; E = c f0(|P theta|) with P the tangent projector of
    the part's mean normal, c = coefficient x length x normal force, and f0 the friction's
    Huber (quadratic below an angle of slip / length). parts: {part: its bones} (the parts
    it acts on: free ones; a part in a joint turns about it freely); lengths: {part: its
    size (m)}."""

    def __init__(self, coefficient: float, parts: dict, lengths: dict):
        self.coefficient = float(coefficient)
        self.parts, self.lengths = parts, lengths

    def lag(self, q: np.ndarray, owners: np.ndarray, normals: np.ndarray, forces: np.ndarray):
        """The step's lag: (its start ``q`` flat, its terms [(C (3, 12B), P (3, 3), c,
        length)] of the parts touching at ``q``: ``owners``, ``normals`` and normal ``forces``
        of its touching points), or None where no part it acts on touches."""
        out = []
        nb = q.shape[0]
        for part in np.unique(owners):
            bones = self.parts.get(int(part))
            if bones is None or not len(bones):
                continue
            mine = owners == part
            load = float(forces[mine].sum())
            normal = (forces[mine, None] * normals[mine]).sum(0)
            if load <= 0 or np.linalg.norm(normal) < 1e-12:
                continue
            normal /= np.linalg.norm(normal)
            c = np.zeros((3, nb, 4, 3))
            for b in bones:
                # theta_m = -1/2 sum_{i,j,k} eps_mij F0_jk F_ik, F_ik = Q[b, k, i]
                c[:, b, :3, :] = -0.5 * np.einsum("mij,kj->mki", _EPS, q[b, :3, :]) / len(bones)
            length = float(self.lengths[int(part)])
            out.append(
                (
                    c.reshape(3, -1),
                    np.eye(3) - np.outer(normal, normal),
                    self.coefficient * length * load,
                    length,
                )
            )
        return (q.reshape(-1).copy(), out) if out else None

    def energy(self, q: np.ndarray, lag, slip: float, hessian: bool):
        """(value, gradient (B, 4, 3), Hessian or None) at ``q`` of the step's ``lag``, the
        Huber's angle ``slip`` / length (``slip``: the friction's slip over the step, m)."""
        nb = q.shape[0]
        start, terms = lag
        flat = q.reshape(-1)
        value, grad = 0.0, np.zeros(flat.shape)
        hess = np.zeros((flat.size, flat.size)) if hessian else None
        for c, proj, scale, length in terms:
            theta = proj @ (c @ (flat - start))
            size = float(np.linalg.norm(theta))
            eps = max(slip / max(length, 1e-12), 1e-9)
            if size < eps:
                value += scale * size * size / (2 * eps)
                force = scale / eps * theta
                middle = (scale / eps) * proj
            else:
                value += scale * (size - eps / 2)
                t = theta / size
                force = scale * t
                middle = (scale / size) * (proj - np.outer(t, t))
            grad += c.T @ (proj @ force)
            if hessian:
                hess += c.T @ middle @ c
        return value, grad.reshape(nb, 4, 3), hess


class PartCull:
    """The points that meet a moving part (a :class:`PartObstacle`), found by one compiled
    pass a query (``contact_kernels.part_nearby``). Its broad phase: the points of each other
    part carried by one bone (a rigid part) are split into small clusters (``CLUSTER`` points
    at most, by halving along the longest side), each with its rest centre and radius; at a
    state, a cluster is carried by its bone into the obstacle's rest frame, and one whose
    sphere (its radius scaled by both bones' largest stretches) stays farther than ``reach``
    from the obstacle's grid box is left out. So the work of a query grows with the points
    near the part's surface, not with every point of the parts around it (a box resting on
    another queries its bottom face's points). Points of parts that bend (several bones) are
    always queried. Its narrow phase is :meth:`PartObstacle.entries`' (the same points, the
    same distances).

    points: (P, 3) rest positions; rows: (P, 4B) their skinning rows; owners: (P,) part of
    each; bones: {part: its one bone} (a point whose row holds another bone is always queried)."""

    def __init__(self, obstacle: PartObstacle, points, rows, owners, bones: dict[int, int]):
        self.obstacle = obstacle
        carried = np.zeros(len(points), dtype=bool)  # moved by its part's one bone alone
        for part, bone in bones.items():
            own = np.flatnonzero(owners == part)
            other = rows[own].copy()
            other[:, 4 * bone : 4 * bone + 4] = 0.0
            carried[own[~other.any(axis=1)]] = True
        members, centres, radii, cluster_bones = [], [], [], []
        for part, bone in bones.items():
            own = np.flatnonzero((owners == part) & carried)
            for group in _clusters(points, own):
                centre = points[group].mean(0)
                members.append(group)
                centres.append(centre)
                radii.append(float(np.linalg.norm(points[group] - centre, axis=1).max()))
                cluster_bones.append(bone)
        self.members = members  # each cluster's point indices
        # each point's cluster, the always-queried ones a last, always-near one
        self.cluster_of = np.full(len(points), len(members), dtype=np.int64)  # (P,)
        for c, group in enumerate(members):
            self.cluster_of[group] = c
        self.centres = np.array(centres, dtype=np.float64).reshape(-1, 3)  # (C, 3) rest centres
        self.radii = np.array(radii, dtype=np.float64)  # (C,)
        self.bones = np.array(cluster_bones, dtype=np.int64)  # (C,) each cluster's bone
        # the rows' entries, compressed (a point's place is a few of them: its bone's four)
        point, col = np.nonzero(rows)
        self._ptr = np.searchsorted(point, np.arange(len(points) + 1)).astype(np.int64)
        self._cols, self._vals = col.astype(np.int64), np.ascontiguousarray(rows[point, col])

    def nearby(self, qs: np.ndarray, reach: float):
        """(state (R,), index (R,), d (R,), g (R, 3), rest point X (R, 3)) of the points
        closer than ``reach`` to the part at the states ``qs`` (S, B, 4, 3), by state then
        index: ``PartObstacle.entries``' answer (g = F^-T grad sdf) for many states at once."""
        from ..contact_kernels import part_nearby  # here: numba loads in about 1 s

        o = self.obstacle
        mesh = o.mesh
        qs = np.ascontiguousarray(qs, dtype=np.float64)
        state, idx, d, g, rest, known, inv = part_nearby(
            qs,
            o.bone,
            o.heads,
            o.centre,
            o.radius,
            mesh.band,
            float(reach),
            self._ptr,
            self._cols,
            self._vals,
            self.cluster_of,
            self.bones,
            self.centres,
            self.radii,
            mesh.hi,
            *mesh.table(),  # lo, cell, shape, block, slot_of, store
        )
        if not known.all():  # grid nodes not filled yet: the grid computes them
            miss = np.flatnonzero(~known)
            d[miss], n = mesh.query(rest[miss])
            g[miss] = np.einsum("ri,rij->rj", n, inv[state[miss]])  # the kernel's F^-1
            keep = known | (d < reach)
            state, idx, d, g, rest = state[keep], idx[keep], d[keep], g[keep], rest[keep]
        return state, idx, d, g, rest


def _clusters(points: np.ndarray, idx: np.ndarray) -> list[np.ndarray]:
    """``idx`` split into clusters of at most ``CLUSTER`` nearby points: halved at the median
    along the longest side of each cluster's box until small enough."""
    out, todo = [], [idx] if len(idx) else []
    while todo:
        part = todo.pop()
        if len(part) <= CLUSTER:
            out.append(part)
            continue
        p = points[part]
        axis = int(np.argmax(p.max(0) - p.min(0)))
        order = part[np.argsort(p[:, axis], kind="stable")]
        half = len(order) // 2
        todo += [order[:half], order[half:]]
    return out


class WorldObstacle:
    """The static obstacles (:class:`~neurok_core.dynamics.obstacles.Obstacles`) in the same
    interface as :class:`PartObstacle`."""

    def __init__(self, obstacles: Obstacles):
        self.obstacles = obstacles

    def entries(self, q: np.ndarray, x: np.ndarray, rows: np.ndarray, reach: float):
        idx, dist, grad = self.obstacles.entries(x, reach)
        return idx, dist, grad, rows[idx]

    def distances(self, qs: np.ndarray, xs: np.ndarray, reach: float):
        """(state (R,), index (R,), d (R,)) of the points ``xs`` (S, P, 3) closer than
        ``reach`` to the obstacles (``PartObstacle.distances``)."""
        flat, dist, _ = self.obstacles.entries(xs.reshape(-1, 3), reach)
        state, idx = np.divmod(flat, xs.shape[1])
        return state, idx, dist

    def rest_distance(self, points: np.ndarray) -> np.ndarray:
        return self.obstacles.clearance(points)


class Contact:
    """The one-sided penalty of ``points`` against one obstacle (module docstring), its
    stiffnesses set for the frequency ``omega``, with lagged friction ``friction`` (Coulomb's
    mu) that sticks below ``slip`` m/s and its compression damped at the ratio ``zeta``
    (``dissipation``; impacts bounce by the integrator's impulses, not by the penalty).

    ``gonzalez``: the integrator's midpoint step gives it its energy-conserving discrete
    gradient."""

    gonzalez = True

    def __init__(
        self,
        points: ContactPoints,
        obstacle,
        friction: float,
        slip: float,
        omega: float,
        zeta: float = 1.0,
    ):
        self.points = points
        self.obstacle = obstacle
        self.reach = float(points.threshold.max(initial=0.0))
        self.mu = friction
        self.slip = slip
        self.stiff, self.omega, self.name = True, omega, "contact"
        self.zeta = zeta  # the damping ratio of its modes (resting contact settles)
        self.lagged = None  # (rows (L, 4B), unit normals (L, 3), normal forces (L,))
        self.start_active = np.zeros(0, int)  # the points touching at the step's start
        self.start = None  # (B, 4, 3) the state at the step's start
        self._recent = []  # (state, its points within ``wide``, ``_active`` there), newest first
        self.wide = self.reach  # the reach of its queries (an integrator widens it: impacts)
        self.cull = None  # a PartCull: the points each query needs (a moving part's contact)
        self.rolling = None  # a RollingResistance, or None
        self.rolling_lag = None  # its lag of the step

    def positions(self, q: np.ndarray) -> np.ndarray:
        return self.points.rows @ q.reshape(-1, 3)

    def _active(self, q: np.ndarray):
        """(index, depth t - d > 0, gradient g, row e) of the contacts that act at ``q``
        (the last few states' answers kept: a step asks for the same state several times,
        from its potential, its viscous terms, its sweeps, its impacts and the next step's
        start; callers do not change them)."""
        return self._at(q)[1]

    def within(self, q: np.ndarray, reach: float):
        """(index (R,), d (R,), g (R, 3), e (R, 4B)) of the points closer than ``reach`` (m)
        to the obstacle at ``q``: the obstacle's ``entries`` of the points its broad phase
        keeps (from the recent states' queries where ``reach`` is within ``wide``)."""
        if reach > self.wide:
            return self._query(q, reach)
        idx, d, g, e = self._at(q)[0]
        keep = d < reach
        return idx[keep], d[keep], g[keep], e[keep]

    def _query(self, q: np.ndarray, reach: float):
        rows = self.points.rows
        if self.cull is not None:
            _, idx, d, g, rest = self.cull.nearby(q[None], reach)
            return idx, d, g, self.obstacle.relative_rows(rows, idx, rest)
        return self.obstacle.entries(q, rows @ q.reshape(-1, 3), rows, reach)

    def _at(self, q: np.ndarray):
        """(the points within ``wide`` at ``q``, ``_active``'s answer there), queried once
        for each of the last ``RECENT`` states."""
        kept = self._kept(q)
        if kept is not None:
            return kept
        near = self._query(q, self.wide)
        idx, d, g, e = near
        depth = self.points.threshold[idx] - d
        keep = depth > 0
        active = idx[keep], depth[keep], g[keep], e[keep]
        self._recent = [(q.copy(), near, active), *self._recent[: RECENT - 1]]
        return near, active

    def _kept(self, q: np.ndarray):
        """``_at``'s answer at ``q`` where it is one of the recent states, else None."""
        for state, near, active in self._recent:
            if state.shape == q.shape and np.array_equal(state, q):
                return near, active
        return None

    def entering(self, states: np.ndarray, known: np.ndarray) -> int | None:
        """The first of ``states`` (S, B, 4, 3) at which a point not among ``known`` (indices)
        is in contact (``_active``), None where none is: all the states' points in one query
        of the obstacle (a step's sweep asks for many states, none of them again; a sweep of
        one state already asked for, a step's end, is answered from ``_active``)."""
        kept = self._kept(states[0]) if len(states) == 1 else None
        if kept is not None:
            return 0 if (~np.isin(kept[1][0], known)).any() else None
        if self.cull is not None:
            state, idx, d = self.cull.nearby(states, self.reach)[:3]
        else:
            xs = self.points.rows @ states.reshape(len(states), -1, 3)  # (S, P, 3)
            state, idx, d = self.obstacle.distances(states, xs, self.reach)
        new = (self.points.threshold[idx] - d > 0) & ~np.isin(idx, known)
        return int(state[new].min()) if new.any() else None

    def touching(self, q: np.ndarray, v: np.ndarray | None = None, leaving: float = 0.0) -> bool:
        """Whether a point is in contact at ``q``; with velocities ``v``, one that does not
        leave its contact faster than ``leaving`` m/s."""
        idx, _, g, e = self._active(q)
        if v is None or not len(idx):
            return len(idx) > 0
        n = g / np.maximum(np.linalg.norm(g, axis=1), 1e-12)[:, None]
        return bool((((e @ v.reshape(-1, 3)) * n).sum(1) < leaving).any())

    def speed(self, v: np.ndarray) -> float:
        """The fastest contact point's speed (m/s) at bone velocities ``v``."""
        return float(np.linalg.norm(self.positions(v), axis=1).max(initial=0.0))

    def travel(self, q0: np.ndarray, q1: np.ndarray) -> float:
        """How far (m) the contact point that moves most goes from state ``q0`` to ``q1``."""
        return float(np.linalg.norm(self.positions(q1 - q0), axis=1).max(initial=0.0))

    def set_step(self, q: np.ndarray, h: float) -> None:
        """At the step's start: the points in contact, and the friction's lag (rows, normals,
        normal forces)."""
        self.start = q.copy()
        self.h = h
        idx, depth, g, e = self._active(q)
        unit = g / np.maximum(np.linalg.norm(g, axis=1), 1e-12)[:, None]
        self.lagged = (e, unit, self.points.stiffness[idx] * depth)
        self.start_active = idx
        self.rolling_lag = None
        if self.rolling is not None and len(idx) and self.points.owners is not None:
            self.rolling_lag = self.rolling.lag(q, self.points.owners[idx], unit, self.lagged[2])

    def dissipation(self, q: np.ndarray, dscale: float, zeta: float) -> _ContactDamping:
        """The step's viscous term: factor k / 2 max(0, depth - depth_start)^2 per point,
        factor = 2 zeta / omega dscale (``dscale`` the step's 1 / dt): the rate at which a point
        goes deeper is damped, never its way out."""
        idx, depth, _, _ = self._active(q)
        start = np.zeros(len(self.points.rows))
        start[idx] = depth
        return _ContactDamping(self, start, dscale * 2.0 * zeta / self.omega)

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        idx, depth, g, e = self._active(q)
        k = self.points.stiffness[idx]
        value = 0.5 * float((k * depth**2).sum())
        force = -(k * depth)[:, None] * g  # dE/d(e^T Q) (R, 3)
        grad = (e.T @ force).reshape(nb, 4, 3)
        h = _normal_hessian(e, g, k) if hessian and len(idx) else None
        if self.mu > 0 and self.start is not None:
            fv, fg, fh = self._friction(q, hessian)
            value += fv
            grad += fg
            if fh is not None:
                h = fh if h is None else h + fh
        if self.rolling_lag is not None:
            rv, rg, rh = self.rolling.energy(q, self.rolling_lag, self.slip * self.h, hessian)
            value += rv
            grad += rg
            if rh is not None:
                h = rh if h is None else h + rh
        if hessian and h is None:
            h = np.zeros((12 * nb, 12 * nb))
        return value, grad, h

    def _friction(self, q: np.ndarray, hessian: bool):
        e, n, lam = self.lagged
        nb = q.shape[0]
        if not len(lam):
            return 0.0, np.zeros_like(q), None
        dx = e @ (q - self.start).reshape(-1, 3)  # (L, 3) slip since the step's start
        tangential = dx - (dx * n).sum(1, keepdims=True) * n
        s = np.linalg.norm(tangential, axis=1)
        eps = self.slip * self.h
        c = self.mu * lam
        inner = s < eps
        r = np.minimum(s / eps, 1.0)
        # f1(s) = 2 s / eps - s^2 / eps^2 inside, 1 beyond (IPC's mollifier: f0 is C2)
        # f0(s) = s^2 / eps - s^3 / (3 eps^2) inside, s - eps / 3 beyond
        value = float(np.where(inner, c * eps * (r**2 - r**3 / 3.0), c * (s - eps / 3.0)).sum())
        scale = np.where(inner, c * (2.0 - r) / eps, c / np.maximum(s, 1e-300))  # f1(s) / s
        grad = (e.T @ (scale[:, None] * tangential)).reshape(nb, 4, 3)
        if not hessian:
            return value, grad, None
        proj = np.eye(3)[None] - n[:, :, None] * n[:, None, :]  # (L, 3, 3)
        # f1/s P + (f1' - f1/s) t t^T; f1' - f1/s = -s / eps^2 inside, -1/s beyond
        t = tangential / np.maximum(s, 1e-300)[:, None]
        across = np.where(inner, c * r / eps, scale)  # (L,) -(f1' - f1/s)
        hk = scale[:, None, None] * proj - across[:, None, None] * t[:, :, None] * t[:, None, :]
        # sum_l (e_l e_l^T) (x) hk_l as one product: (4B, L) @ (L, 4B 9)
        wide = (e[:, :, None, None] * hk[:, None]).reshape(len(e), -1)  # (L, 4B 9)
        big = (e.T @ wide).reshape(4 * nb, 4 * nb, 3, 3).transpose(0, 2, 1, 3)
        return value, grad, big.reshape(12 * nb, 12 * nb)


class _ContactDamping:
    """The viscous term of :meth:`Contact.dissipation` (an energy of the step)."""

    def __init__(self, contact: Contact, start: np.ndarray, factor: float):
        self.contact, self.start, self.factor = contact, start, factor
        self.stiff = False

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        idx, depth, g, e = self.contact._active(q)
        excess = depth - self.start[idx]
        keep = excess > 0
        idx, excess, g, e = idx[keep], excess[keep], g[keep], e[keep]
        k = self.factor * self.contact.points.stiffness[idx]
        value = 0.5 * float((k * excess**2).sum())
        grad = (e.T @ (-(k * excess)[:, None] * g)).reshape(nb, 4, 3)
        if not hessian:
            return value, grad, None
        return value, grad, _normal_hessian(e, g, k)


def _normal_hessian(e: np.ndarray, g: np.ndarray, k: np.ndarray) -> np.ndarray:
    """sum_j k_j (e_j (x) g_j)(e_j (x) g_j)^T (12B, 12B): the Gauss-Newton Hessian of
    penalties on the gaps g_j . (e_j^T Q), rows e (R, 4B), normals g (R, 3), k (R,)."""
    gg = (e[:, :, None] * g[:, None, :]).reshape(len(e), 3 * e.shape[1])
    return (gg * k[:, None]).T @ gg
