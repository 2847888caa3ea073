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
never tested; the others are found by k-d trees of the nodes and the triangles' centres, or
the edges' middles, kept while no node has moved ``skin`` from where they were found (less
the rigid motion nearest the nodes': it changes no distance), and found again when one has;
kept sorted by distance, so that an evaluation measures only the pairs whose own nodes' motion
may have brought them near.

Friction between the layers is IPC's lagged friction: each pair nearer than ``dhat`` at a
step's start pushes with -b'(d), and its tangential relative motion over the step costs
mu -b'(d) f0(|u_T|) (the rig space's C2 mollifier, ``contact.py``).

Shapes: nodes (n, 3) float64 metres; faces (F, 3) int64; a state x (n, 3).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

from ..dynamics.obstacles import closest_on_triangles
from ..geometry import unique_edges
from ..metrics import best_rotations
from ..sheets import components

ETA = 0.1  # a line search's step keeps every pair at least this share of its distance apart
REACH = 1.0  # skins: a step's nodes move at most this far relative to each other
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


def point_triangle(p, a, b, c):
    """(d (P,), n (P, 3), beta (P, 3)): each point's distance to its triangle, the unit
    direction from the closest point to the point, and the closest point's barycentric
    coordinates (all arguments (P, 3))."""
    closest = closest_on_triangles(p, a, b, c)[0]
    e0, e1, off = b - a, c - a, closest - a
    d00, d01, d11 = (e0 * e0).sum(1), (e0 * e1).sum(1), (e1 * e1).sum(1)
    d20, d21 = (off * e0).sum(1), (off * e1).sum(1)
    den = np.maximum(d00 * d11 - d01 * d01, 1e-300)
    v = np.clip((d11 * d20 - d01 * d21) / den, 0.0, 1.0)
    w = np.clip((d00 * d21 - d01 * d20) / den, 0.0, 1.0 - v)
    beta = np.stack([1.0 - v - w, v, w], 1)
    gap = p - closest
    d = np.sqrt((gap * gap).sum(1))
    return d, gap / np.maximum(d, 1e-300)[:, None], beta


def edge_edge(p0, p1, q0, q1):
    """(d (P,), n (P, 3), s (P,), t (P,)): the distance between segments p0-p1 and q0-q1
    (all (P, 3)), the unit direction from q's closest point to p's, and the closest points'
    parameters (p0 + s (p1 - p0), q0 + t (q1 - q0)); parallel segments take s at p's end
    nearest q0's projection (clamped) as Ericson's segment test does."""
    u, v, w0 = p1 - p0, q1 - q0, p0 - q0
    a, b, c = (u * u).sum(1), (u * v).sum(1), (v * v).sum(1)
    d, e = (u * w0).sum(1), (v * w0).sum(1)
    den = a * c - b * b
    tiny = 1e-12 * np.maximum(a * c, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(den > tiny, (b * e - c * d) / np.where(den > tiny, den, 1.0), 0.0)
        s = np.clip(s, 0.0, 1.0)
        t = np.where(c > 0, (b * s + e) / np.where(c > 0, c, 1.0), 0.0)
        # t outside [0, 1]: clamp it and take s again for the clamped t
        t = np.clip(t, 0.0, 1.0)
        s = np.where(a > 0, np.clip((b * t - d) / np.where(a > 0, a, 1.0), 0.0, 1.0), 0.0)
    gap = (p0 + s[:, None] * u) - (q0 + t[:, None] * v)
    dist = np.sqrt((gap * gap).sum(1))
    return dist, gap / np.maximum(dist, 1e-300)[:, None], s, t


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
        self.lists = []  # per kind: (pairs (P, 2), their distances (P,) at ``found``, sorted)
        # the pairs never tested: close at rest in one part (sorted keys; none while they are
        # found, by :meth:`_near`, which leaves these out)
        self._apart = [np.zeros(0, dtype=np.int64)] * 2
        self._apart = [
            self._keys(kind, *self._near(kind, self.rest, self.exclude)) for kind in range(2)
        ]

    # -- the candidates --------------------------------------------------------------------
    def _keys(self, kind: int, pairs: np.ndarray, d: np.ndarray) -> np.ndarray:
        """Sorted keys of the pairs ``pairs`` (P, 2) in one part whose distance ``d`` (P,) at
        rest is under ``exclude`` (``kind`` 0: node-triangle, 1: edge-edge)."""
        nodes = self._nodes(kind, pairs)
        same = self.part[nodes[:, 0]] == self.part[nodes[:, 1 + kind]]
        return np.sort(self._key(kind, pairs[same & (d < self.exclude)]))

    def _key(self, kind: int, pairs: np.ndarray) -> np.ndarray:
        return pairs[:, 0] * (len(self.faces) if kind == 0 else len(self.edges)) + pairs[:, 1]

    def _near(self, kind: int, x: np.ndarray, within: float):
        """((P, 2) pairs, (P,) distances) of the node-triangle (``kind`` 0) or edge-edge pairs
        (kind 1) closer than ``within`` at ``x``: no incident ones, none of :attr:`_apart`.
        From k-d trees of the nodes and the triangles' centres, or the edges' middles."""
        # a pair is kept where its bounding spheres (each triangle's about its centre, each
        # edge's about its middle) come within ``within``: the k-d trees' radius is the
        # largest element's, so most of what they give is farther
        if kind == 0:
            corners = x[self.faces]  # (F, 3, 3)
            centre = corners.mean(1)
            radii = np.sqrt(((corners - centre[:, None]) ** 2).sum(2)).max(1)  # (F,)
            found = cKDTree(x).sparse_distance_matrix(
                cKDTree(centre), within + float(radii.max()), output_type="ndarray"
            )
            keep = found["v"] <= within + radii[found["j"]]
            pairs = np.stack([found["i"][keep], found["j"][keep]], 1).astype(np.int64)
            pairs = pairs[(self.faces[pairs[:, 1]] != pairs[:, :1]).all(1)]
        else:
            ends = x[self.edges]  # (E, 2, 3)
            middle = ends.mean(1)
            halves = 0.5 * np.sqrt(((ends[:, 1] - ends[:, 0]) ** 2).sum(1))  # (E,)
            pairs = (
                cKDTree(middle)
                .query_pairs(within + 2.0 * float(halves.max()), output_type="ndarray")
                .astype(np.int64)
            )
            gap = middle[pairs[:, 0]] - middle[pairs[:, 1]]
            reach = within + halves[pairs[:, 0]] + halves[pairs[:, 1]]
            pairs = np.sort(pairs[(gap * gap).sum(1) <= reach * reach], 1)
            e = self.edges[pairs]  # (P, 2, 2)
            pairs = pairs[(e[:, 0, :, None] != e[:, 1, None, :]).all((1, 2))]
        apart = self._apart[kind]
        if len(apart) and len(pairs):
            key = self._key(kind, pairs)
            at = np.minimum(np.searchsorted(apart, key), len(apart) - 1)
            pairs = pairs[apart[at] != key]
        d = self._distance(kind, self._nodes(kind, pairs), x)
        return pairs[d < within], d[d < within]

    def _find(self, x: np.ndarray, valid: float) -> None:
        """Find the candidate pairs at ``x`` for states whose nodes lie within ``valid`` of
        theirs, up to a common shift: those closer than the thickness plus twice that (no
        other pair comes within the thickness), sorted by their distance at ``x``."""
        self.found, self.valid = x.copy(), float(valid)
        within = self.dhat + 2.0 * self.valid
        self.lists = []
        for kind in range(2):
            pairs, d = self._near(kind, x, within)
            order = np.argsort(d)
            self.lists.append((pairs[order], d[order]))

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
        """The candidates whose distance may be under ``below`` at ``x``: (node-triangle: d, n,
        nodes (P, 4), weights (P, 4)), (edge-edge: the same), weights such that the distance's
        gradient on node ``nodes[:, k]`` is ``weights[:, k] n``."""
        off = self._reach(x)
        shift = x - self.aligned  # (n, 3) each node's motion since the pairs were found
        out = []
        for kind, (pairs, found) in enumerate(self.lists):
            count = int(np.searchsorted(found, below + 2.0 * off))
            if not count:
                continue
            nodes = self._nodes(kind, pairs[:count])
            # a pair's distance changes by at most its own nodes' relative motion
            near = found[:count] - _apart_motion(kind, shift[nodes]) < below
            nodes = nodes[near]
            if not len(nodes):
                continue
            if kind == 0:
                d, n, beta = point_triangle(*(x[nodes[:, k]] for k in range(4)))
                out.append((d, n, nodes, np.column_stack([np.ones(len(d)), -beta])))
            else:
                d, n, s, t = edge_edge(*(x[nodes[:, k]] for k in range(4)))
                out.append((d, n, nodes, np.stack([1.0 - s, s, t - 1.0, -t], 1)))
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
        if off < self.valid:  # and the segment (a ball about one state is convex)
            lists = self.lists
        else:  # the segment's own pairs, found at its middle (not kept)
            middle = x + 0.5 * dx
            off = _off(end, middle)
            lists = []
            for kind in range(2):
                pairs, d = self._near(kind, middle, self.dhat + 2.0 * off)
                order = np.argsort(d)
                lists.append((pairs[order], d[order]))
        # a pair found d apart is at least d - 2 off apart on the segment, and its floor is
        # at most ETA (d + 2 off): the farther ones cannot reach their floor
        far = 2.0 * off * (1.0 + ETA) / (1.0 - ETA)
        ref = self.aligned if lists is self.lists else middle
        for kind, (pairs, found) in enumerate(lists):
            count = int(np.searchsorted(found, far))
            if not count:
                continue
            nodes = self._nodes(kind, pairs[:count])
            rel = np.maximum(_apart_motion(kind, dx[nodes]), 1e-300)  # (P,) along the segment
            # the distance at x is within the pair's own motion since it was found of the
            # distance then: the pairs that cannot reach their floor need no exact distance
            moved = _apart_motion(kind, (x - ref)[nodes])
            maybe = found[:count] - moved - rel * t_max < ETA * (found[:count] + moved)
            nodes, rel = nodes[maybe], rel[maybe]
            if not len(nodes):
                continue
            d = self._distance(kind, nodes, x)
            floor = ETA * d
            live = np.flatnonzero(d - rel * t_max < floor)  # those that may reach their floor
            t, d, floor, rel, nodes = (
                np.zeros(len(live)),
                d[live],
                floor[live],
                rel[live],
                nodes[live],
            )
            for _ in range(ACCD_ROUNDS):
                grow = 0.9 * np.maximum(d - floor, 0.0) / rel
                safe = t + grow >= t_max  # no closer than its floor up to t_max
                stuck = ~safe & (grow <= 1e-6 * t_max)  # at its floor: the step ends there
                if stuck.any():
                    t_max = min(t_max, float(t[stuck].min()))
                t = t + grow
                keep = ~safe & ~stuck & (t < t_max)
                t, floor, rel, nodes = t[keep], floor[keep], rel[keep], nodes[keep]
                if not len(t):
                    break
                d = self._distance(kind, nodes, x, dx, t)
                keep = d - rel * (t_max - t) < floor  # may still reach its floor
                t, d, floor, rel, nodes = t[keep], d[keep], floor[keep], rel[keep], nodes[keep]
                if not len(t):
                    break
            else:
                t_max = min(t_max, float(t.min()))
        return scale * t_max

    def _nodes(self, kind: int, pairs: np.ndarray) -> np.ndarray:
        """(P, 4) the nodes of node-triangle (``kind`` 0: the node, the corners) or edge-edge
        pairs (the ends of one edge, then the other's)."""
        if kind == 0:
            return np.column_stack([pairs[:, 0], self.faces[pairs[:, 1]]])
        return self.edges[pairs].reshape(-1, 4)

    def _distance(self, kind: int, nodes, x, dx=None, t=None) -> np.ndarray:
        """The distances (P,) of pairs of ``nodes`` (P, 4) (as :meth:`_nodes`) at ``x``, or
        each at x + t dx (``t`` (P,))."""
        pts = x[nodes]  # (P, 4, 3)
        if dx is not None:
            pts = pts + t[:, None, None] * dx[nodes]
        if kind == 0:
            return point_triangle(pts[:, 0], pts[:, 1], pts[:, 2], pts[:, 3])[0]
        return edge_edge(pts[:, 0], pts[:, 1], pts[:, 2], pts[:, 3])[0]


def _apart_motion(kind: int, delta: np.ndarray) -> np.ndarray:
    """(P,) how much the distance of each pair may change when its nodes (as
    :meth:`SelfContact._nodes`) move by ``delta`` (P, 4, 3): the largest relative motion of a
    point of one element and a point of the other (convex combinations of their nodes): of
    the node and a corner (``kind`` 0), of an end of one edge and an end of the other (1)."""
    if kind == 0:
        rel = delta[:, 1:] - delta[:, :1]  # (P, 3, 3)
    else:
        rel = delta[:, 2:, None] - delta[:, None, :2]  # (P, 2, 2, 3)
    return np.sqrt((rel * rel).sum(-1)).reshape(len(delta), -1).max(1)


def _off(state: np.ndarray, ref: np.ndarray) -> float:
    """The largest distance of a node of ``state`` (n, 3) from its place in ``ref``, less the
    nodes' mean shift."""
    shift = state - ref
    shift -= shift.mean(0)
    return math.sqrt(float((shift * shift).sum(1).max()))


def _fit(ref: np.ndarray, state: np.ndarray) -> np.ndarray:
    """``ref`` (n, 3) moved rigidly as near ``state`` (n, 3) as it goes (least squares: the
    Kabsch rotation about the centroids, :func:`~neurok_core.metrics.best_rotations`)."""
    rot = best_rotations(ref, state[None])[0]
    return (ref - ref.mean(0)) @ rot.T + state.mean(0)
