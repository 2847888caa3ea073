"""A cloth's contact with itself: its layers kept apart by a barrier, its steps by CCD.

A fold of a cloth must not pass through the cloth. Each pair of a node and a triangle it is
no corner of, and each pair of edges with no node in common, closer than the thickness
``dhat`` adds IPC's barrier (Li et al. 2020, "Incremental Potential Contact")

    b(d) = -kappa (d - dhat)^2 ln(d / dhat),   0 < d < dhat,

to the step's incremental potential: it grows without bound as the pair closes, so a
minimiser of the potential never brings a layer through another, provided that every
iterate of the minimisation keeps the pairs apart. The line search does that: each step
along a direction is cut to the fraction that provably keeps every pair at least ``ETA`` of
its distance apart (conservative advancement, as additive CCD does: Li et al. 2021, "Codimensional
incremental potential contact"), so no state the step visits, and none it ends in, has a layer
through another.

Distances and their gradients are exact: a point's distance to a triangle has gradient n on
the point and -beta_i n on the corners (n the unit direction from the closest point, beta its
barycentric coordinates), two edges' distance (1 - s) n, s n on one edge's ends and -(1 - t)
n, -t n on the other's (s, t the closest points' parameters).

Which pairs: two elements of one loose part that were close at rest (within ``exclude`` of
each other: neighbours on the surface, which bending keeps from folding onto each other) are
never tested; the others are found by a uniform grid of the triangles' centres, or the
edges' middles, kept while no node has moved ``skin`` from where they were found (less the
rigid motion nearest the nodes': it changes no distance), and found again when one has; an
evaluation measures only the pairs whose own nodes' motion may have brought them near. The
loops over pairs are compiled (:mod:`~neurok_core.contact_kernels`).

Friction between the layers is IPC's lagged friction: each pair nearer than ``dhat`` at a
step's start pushes with -b'(d), and its tangential relative motion over the step costs
mu -b'(d) f0(|u_T|) (the rig space's C2 mollifier, ``contact.py``).

Shapes: nodes (n, 3) float64 metres; faces (F, 3) int64; a state x (n, 3).
"""

from __future__ import annotations

import numpy as np

from .. import contact_kernels as kernels
from ..geometry import unique_edges
from ..sheets import components

ETA = 0.1  # a line search's step keeps every pair at least this share of its distance apart
REACH = 1.0  # skins: a step's nodes move at most this far relative to each other (<= 1: the
# candidates found at its start serve the whole step, ``max_step``)
ACCD_ROUNDS = 12  # conservative advancement's rounds, at most, before a step is cut short


def barrier(d: np.ndarray, dhat: float, kappa: float):
    """(b, b', b'') of IPC's barrier at distances ``d`` (P,) (0 < d; zero at d >= dhat)."""
    near = d < dhat
    dd = np.where(near, d, dhat)
    r = dd - dhat  # (P,) <= 0
    log = np.log(dd / dhat)
    b = -kappa * r * r * log
    b1 = -kappa * (2.0 * r * log + r * r / dd)
    b2 = -kappa * (2.0 * log + 4.0 * r / dd - r * r / (dd * dd))
    return np.where(near, b, 0.0), np.where(near, b1, 0.0), np.where(near, b2, 0.0)


class SelfContact:
    """The barrier between a cloth's layers (module docstring) over ``nodes`` (n, 3) (the
    rest state) and ``faces`` (F, 3): thickness ``dhat`` (m), stiffness ``kappa`` (J/m^2),
    pairs closer than ``exclude`` (m) at rest in one loose part never tested, candidates kept
    while no node moves ``skin`` (m) from where they were found; Coulomb's ``friction`` between
    the layers, lagged at a step's start (:meth:`begin`), sticking below a slip of ``slip`` m
    a step."""

    def __init__(
        self,
        nodes,
        faces,
        dhat: float,
        kappa: float,
        exclude: float,
        skin: float,
        friction: float = 0.0,
        slip: float = 1e-4,
    ):
        self.mu, self.slip = float(friction), max(float(slip), 1e-12)
        self.lagged = None  # (nodes (L, 4), weights (L, 4), normals (L, 3), mu lambda (L,), x)
        self.faces = np.asarray(faces, dtype=np.int64)
        self.edges = unique_edges(self.faces)
        self.rest = np.asarray(nodes, dtype=np.float64)
        self.dhat, self.kappa = float(dhat), float(kappa)
        self.exclude, self.skin = float(exclude), float(skin)
        self.part = components(len(self.rest), self.edges)  # (n,) each node's loose part
        self.found = None  # (n, 3) where the candidates were found, or None
        self.aligned = None  # ``found`` moved rigidly as near the last state asked as it goes
        self.valid = 0.0  # they serve states whose nodes lie this near ``found``
        self.lists = []  # per kind: (the pairs' distances (P,) at ``found``, their nodes (P, 4))
        # the pairs never tested: close at rest in one part (sorted keys; none while they are
        # found, by :meth:`_near`, which leaves these out)
        self._apart = [np.zeros(0, dtype=np.int64)] * 2
        self._apart = [
            self._keys(kind, *self._near(kind, self.rest, self.exclude)) for kind in range(2)
        ]

    # -- the candidates --------------------------------------------------------------------
    def _keys(self, kind: int, pairs: np.ndarray, nodes: np.ndarray, d: np.ndarray):
        """Sorted keys of the pairs ``pairs`` (P, 2) (their ``nodes`` (P, 4)) in one part whose
        distance ``d`` (P,) at rest is under ``exclude`` (``kind`` 0: node-triangle, 1:
        edge-edge)."""
        same = self.part[nodes[:, 0]] == self.part[nodes[:, 1 + kind]]
        return np.sort(self._key(kind, pairs[same & (d < self.exclude)]))

    def _key(self, kind: int, pairs: np.ndarray) -> np.ndarray:
        return pairs[:, 0] * (len(self.faces) if kind == 0 else len(self.edges)) + pairs[:, 1]

    def _near(self, kind: int, x: np.ndarray, within: float):
        """(pairs (P, 2), nodes (P, 4), distances (P,)) of the node-triangle (``kind`` 0) or
        edge-edge pairs (kind 1) closer than ``within`` at ``x``: no incident ones, none of
        :attr:`_apart` (``contact_kernels.candidates``: a grid of the elements' centres)."""
        elems = self.faces if kind == 0 else self.edges
        return kernels.candidates(kind, x, elems, float(within), self._apart[kind])

    def _find(self, x: np.ndarray, valid: float) -> None:
        """Find the candidate pairs at ``x`` for states whose nodes lie within ``valid`` of
        theirs, up to a common shift: those closer than the thickness plus twice that (no
        other pair comes within the thickness), with their distances at ``x``."""
        self.found, self.valid = x.copy(), float(valid)
        self.lists = []
        for kind in range(2):
            _, nodes, d = self._near(kind, x, self.dhat + 2.0 * self.valid)
            self.lists.append((d, nodes))

    def _reach(self, x: np.ndarray) -> float:
        """How far the nodes of ``x`` lie from where the candidates were found (moved rigidly
        as near ``x`` as they go: :attr:`aligned`, a rigid motion changes no distance), after
        finding them again at ``x`` where that is :attr:`valid` or farther."""
        if self.found is not None:
            self.aligned = _fit(self.found, x)
            off = _off(x, self.aligned)
            if off < self.valid:
                return off
        self._find(x, self.skin)
        self.aligned = self.found
        return 0.0

    def _pairs(self, x: np.ndarray, below: float):
        """The candidates under ``below`` apart at ``x``: (node-triangle: d, n, nodes (P, 4),
        weights (P, 4)), (edge-edge: the same), weights such that the distance's gradient on
        node ``nodes[:, k]`` is ``weights[:, k] n``."""
        off = self._reach(x)
        shift = x - self.aligned  # (n, 3) each node's motion since the pairs were found
        out = []
        for kind, (found, nodes) in enumerate(self.lists):
            # a pair's distance changes by at most its own nodes' relative motion (at most
            # 2 off): those found farther than below + 2 off are not near
            idx, d, n, w = kernels.near(kind, nodes, found, x, shift, below, below + 2.0 * off)
            if len(idx):
                out.append((d, n, nodes[idx], w))
        return out

    def begin(self, x: np.ndarray) -> None:
        """Start a step at ``x``: the friction's lag, each pair nearer than the thickness with
        its normal and its normal force -b'(d) (IPC's lagged friction, Li et al. 2020)."""
        self.lagged = None
        if self.mu <= 0:
            return
        parts = []
        for d, n, nodes, w in self._pairs(x, self.dhat):
            near = d < self.dhat
            if near.any():
                press = -barrier(d[near], self.dhat, self.kappa)[1]  # (L,) >= 0
                parts.append((nodes[near], w[near], n[near], self.mu * press))
        if parts:
            nodes, w, n, c = (np.concatenate(p) for p in zip(*parts, strict=True))
            self.lagged = (nodes, w, n, c, x.copy())

    def _friction(self, x: np.ndarray, grad: np.ndarray) -> float:
        """The lagged friction's energy at ``x`` (its gradient added into ``grad``): c f0(|u_T|)
        of each pair's tangential relative motion u_T since the step's start, f0 the C2
        mollifier of the rig space's contact (``contact.py``)."""
        nodes, w, n, c, start = self.lagged
        u = np.einsum("lk,lki->li", w, x[nodes] - start[nodes])  # (L, 3)
        u -= (u * n).sum(1, keepdims=True) * n
        s = np.sqrt((u * u).sum(1))
        eps = self.slip
        inner = s < eps
        r = np.minimum(s / eps, 1.0)
        value = float(np.where(inner, c * eps * (r * r - r**3 / 3.0), c * (s - eps / 3.0)).sum())
        scale = np.where(inner, c * (2.0 - r) / eps, c / np.maximum(s, 1e-300))  # f1(s) / s
        g = (w[:, :, None] * (scale[:, None] * u)[:, None, :]).reshape(-1, 3)
        np.add.at(grad, nodes.ravel(), g)
        return value

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        """The barrier's energy (J) at ``x`` and its gradient (n, 3), with the layers'
        friction where a step began (:meth:`begin`)."""
        grad = np.zeros_like(x)
        value = 0.0 if self.lagged is None else self._friction(x, grad)
        for d, n, nodes, w in self._pairs(x, self.dhat):
            near = d < self.dhat
            if not near.any():
                continue
            b, b1, _ = barrier(d[near], self.dhat, self.kappa)
            value += float(b.sum())
            g = (w[near, :, None] * (b1[:, None] * n[near])[:, None, :]).reshape(-1, 3)
            np.add.at(grad, nodes[near].ravel(), g)
        return value, grad

    def blocks(self, x: np.ndarray):
        """(rows, cols, values) of per-node 3 x 3 blocks that bound the barrier's Gauss-Newton
        Hessian at ``x`` from above (b'' (w n)(w n)^T <= sum_k 2 |w_k| b'' n n^T on node k, as
        sum |w| = 2): the step's initial Hessian; none where no pair is that near."""
        rows, cols, vals = [], [], []
        r3, c3 = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        for d, n, nodes, w in self._pairs(x, self.dhat):
            near = d < self.dhat
            if not near.any():
                continue
            b2 = barrier(d[near], self.dhat, self.kappa)[2]  # (P,)
            nn = n[near][:, :, None] * n[near][:, None, :]  # (P, 3, 3)
            block = (2.0 * np.abs(w[near]) * b2[:, None])[:, :, None, None] * nn[:, None]
            k = nodes[near]  # (P, 4)
            rows.append((3 * k[:, :, None, None] + r3).ravel())
            cols.append((3 * k[:, :, None, None] + c3).ravel())
            vals.append(block.ravel())
        if self.lagged is not None:  # the friction's sticking, c / eps across each normal,
            # bounded per node as the barrier's (2 |w_k| on node k)
            nodes, w, n, c, _ = self.lagged
            across = np.eye(3)[None] - n[:, :, None] * n[:, None, :]  # (L, 3, 3)
            block = (2.0 * np.abs(w) * (c / self.slip)[:, None])[:, :, None, None] * across[:, None]
            rows.append((3 * nodes[:, :, None, None] + r3).ravel())
            cols.append((3 * nodes[:, :, None, None] + c3).ravel())
            vals.append(block.ravel())
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, np.zeros(0)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)

    def max_step(self, x: np.ndarray, dx: np.ndarray) -> float:
        """The largest t in [0, 1] such that along x + s dx, 0 <= s <= t, every pair stays at
        least ``ETA`` of its distance at x apart (conservative advancement: a pair closes by
        at most L ds, L its nodes' largest relative displacement, so s may grow by nine tenths
        of the distance left over L; repeated from there for the pairs that may still close).
        Only the kept candidates that may come that near are followed."""
        scale = 1.0
        reach = _off(x + dx, x)
        if reach > REACH * self.skin:  # a long step (an overshoot): its first stretch only
            scale = REACH * self.skin / reach
            dx = dx * scale
        end = x + dx
        t_max = 1.0
        self._reach(x)  # the kept candidates serve x
        off = max(_off(x, self.aligned), _off(end, self.aligned))
        if off >= self.valid:  # and the segment (a ball about one state is convex), or they
            # are found again at x: the segment moves no node more than ``skin`` from it
            self._find(x, self.skin)
            self.aligned = self.found
            off = _off(end, x)
        # a pair found d apart is at least d - 2 off apart on the segment, and its floor is
        # at most ETA (d + 2 off): the farther ones cannot reach their floor
        far = 2.0 * off * (1.0 + ETA) / (1.0 - ETA)
        moved = x - self.aligned  # each node's motion since they were found
        for kind, (found, nodes) in enumerate(self.lists):
            t_max = kernels.advance(kind, nodes, found, x, dx, moved, t_max, ETA, ACCD_ROUNDS, far)
        return scale * t_max


def _off(state: np.ndarray, ref: np.ndarray) -> float:
    """The largest distance of a node of ``state`` (n, 3) from its place in ``ref``, less the
    nodes' mean shift."""
    return kernels.spread(state, ref)


def _fit(ref: np.ndarray, state: np.ndarray) -> np.ndarray:
    """``ref`` (n, 3) moved rigidly as near ``state`` (n, 3) as it goes (least squares: the
    Kabsch rotation about the centroids)."""
    return kernels.rigid_fit(ref, state)
