"""The contact of a cloth (``cloth_simulate``) with the ground and colliders: one-sided springs
holding it a collision thickness off, lagged Coulomb friction, and the push out of an obstacle
after a step. They act on the simulation mesh's nodes and, against a collider thin enough for a
triangle to straddle (a pole), on points of the triangles and on the rim a coarser mesh cuts
off, each a fixed blend of its triangle's corners (design section 14;
``docs/experiments/cloth.md``)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..geometry import edge_keys
from .cloth import SimMesh, plane_coordinates

MAX_LATTICE = 6  # a triangle's contact points: its barycentric lattice of this level, at most
MAX_RIM_WEIGHT = 4.0  # a rim vertex's barycentric weights on its triangle, at most (in size)


def face_samples(nodes: np.ndarray, faces: np.ndarray, spacing: float):
    """(triangle (S,), barycentric (S, 3)): points on the simulation mesh (``faces`` over
    ``nodes``) about ``spacing`` m apart, its nodes left out: each edge's points once (t / L
    of the way, L = ceil(its length / spacing), 2 to ``MAX_LATTICE``; as a point of one of its
    triangles), and each triangle's inner lattice points ((i, j, k) / L, i, j, k >= 1,
    i + j + k = L, L from its longest edge)."""
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if not len(faces):
        return np.zeros(0, np.int64), np.zeros((0, 3))
    keys, _ = edge_keys(faces)  # (3F,) each face's edges (0, 1), (1, 2), (2, 0)
    _, first = np.unique(keys, return_index=True)  # each edge's first face and slot
    face, slot = np.divmod(first, 3)
    a, b = slot, (slot + 1) % 3  # the edge's corners in that face
    ends = nodes[faces[face, a]] - nodes[faces[face, b]]
    level = _lattice_level(np.linalg.norm(ends, axis=1), spacing)  # (E,)
    tris, barys = [], []
    for lv in np.unique(level):
        mine = np.flatnonzero(level == lv)
        t = np.arange(1, lv) / lv  # (lv - 1,)
        bary = np.zeros((len(mine), len(t), 3))
        rows = np.arange(len(mine))[:, None]
        bary[rows, :, a[mine][:, None]] = 1.0 - t
        bary[rows, :, b[mine][:, None]] = t
        tris.append(np.repeat(face[mine], len(t)))
        barys.append(bary.reshape(-1, 3))
    corners = nodes[faces]  # (F, 3, 3)
    longest = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).max(1)  # (F,)
    level = _lattice_level(longest, spacing)
    for lv in np.unique(level[level >= 3]):  # (level 2 has no inner point)
        i, j = np.meshgrid(np.arange(1, lv), np.arange(1, lv), indexing="ij")
        i, j = i.ravel(), j.ravel()
        keep = i + j <= lv - 1
        inner = np.stack([i[keep], j[keep], lv - i[keep] - j[keep]], 1) / lv  # (P, 3)
        mine = np.flatnonzero(level == lv)
        tris.append(np.repeat(mine, len(inner)))
        barys.append(np.tile(inner, (len(mine), 1)))
    return np.concatenate(tris), np.concatenate(barys)


def _lattice_level(length: np.ndarray, spacing: float) -> np.ndarray:
    """(K,) int: the points' level along ``length`` (m): about ``spacing`` m apart."""
    level = np.ceil(np.asarray(length) / max(spacing, 1e-300))
    return np.clip(np.nan_to_num(level, nan=2.0), 2, MAX_LATTICE).astype(np.int64)


def rim_samples(mesh: SimMesh, vertices: np.ndarray):
    """(triangle (R,), barycentric (R, 3)): the sheet's vertices that lie outside their
    triangle (the rim a coarser mesh cuts off: a barycentric coordinate of their point of the
    triangle's plane below 0), as those points (the coordinates not clamped: a blend of the
    corners that reaches past an edge; an offset along the normal, a curved sheet's, left
    out). Vertices of a nearly flat triangle, or as far out as to need a weight over
    ``MAX_RIM_WEIGHT``, are left out: their weights would make them stiff levers."""
    rim = np.flatnonzero(mesh.offset)
    tri = mesh.tri[rim]
    a, b, c = (mesh.nodes[mesh.faces[tri, k]] for k in range(3))
    e0, e1 = b - a, c - a
    metric = np.stack([(e0 * e0).sum(1), (e0 * e1).sum(1), (e1 * e1).sum(1)], 1)
    v, w, den = plane_coordinates(vertices[rim] - a, e0, e1, metric)
    ok = den > 1e-12 * metric[:, 0] * metric[:, 2]
    bary = np.stack([1.0 - (v + w) / np.where(ok, den, 1.0), v, w], 1)
    bary[:, 1:] /= np.where(ok, den, 1.0)[:, None]
    outside = ok & (bary.min(1) < 0.0) & (np.abs(bary).max(1) <= MAX_RIM_WEIGHT)
    return tri[outside], bary[outside]


class ClothContact:
    """One-sided springs keeping the cloth ``margin`` m out of the ``obstacles`` (the ground
    and colliders: :class:`~neurok_core.dynamics.obstacles.Obstacles`), with lagged Coulomb
    friction ``mu`` (the normal force of the step's start, smoothed over a slip of ``slip``
    m). They act on the nodes (stiffness ``k`` (n,) N/m each) and on points of the triangles
    between them (``samples``: (triangle (S,), barycentric (S, 3), stiffness (S,)), each a
    blend of its triangle's corners), so that a triangle cannot straddle a thin obstacle (a
    pole narrower than an edge) while its corners stay clear of it. A step's points are the
    nodes and the samples of the triangles that come near an obstacle (``begin``); a point's
    index is its node's, or n + its sample's. ``free`` (n,) bool: the nodes that may move."""

    def __init__(
        self,
        obstacles,
        k: np.ndarray,
        margin: float,
        mu: float,
        slip: float,
        faces,
        samples=None,
        thin=None,
    ):
        self.obstacles, self.margin = obstacles, float(margin)
        self.thin = thin  # the obstacles the samples meet (those a triangle may straddle)
        self.mu, self.slip = float(mu), max(float(slip), 1e-12)
        self.reach = 2.0 * self.margin
        n = len(k)
        faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
        if samples is None:
            samples = (np.zeros(0, np.int64), np.zeros((0, 3)), np.zeros(0))
        tri, bary, ks = samples
        self.k = np.concatenate([np.asarray(k, dtype=np.float64), ks])  # (n + S,)
        self.nodes_only = not len(tri)  # (no blends to take: the nodes' own arrays)
        rows = np.concatenate([np.arange(n), n + np.repeat(np.arange(len(tri)), 3)])
        cols = np.concatenate([np.arange(n), faces[tri].ravel()])
        vals = np.concatenate([np.ones(n), np.asarray(bary, dtype=np.float64).ravel()])
        # every point's weights on the nodes (n + S, n)
        self.blend = sparse.csr_matrix((vals, (rows, cols)), shape=(n + len(tri), n))
        self.ahead = 0.0  # m: how much farther than ``reach`` a step's samples are taken
        self.n = n
        self.lagged = None  # (points, normals (m, 3), normal forces (m,), anchors) of the step
        self._lag_blend = None  # the lagged points' weights on the nodes
        self._held = np.full((len(self.k), 3), np.nan)  # where friction holds each point
        self._asked = None  # (the state, the holds before) of the last ``begin``
        self._step_points = np.arange(n)  # the step's points (``begin``)
        self._step_blend = self.blend[:n]

    def set_ahead(self, distance: float) -> None:
        """How much farther (m) than ``reach`` from an obstacle a triangle's point is taken into
        a step (``_choose``): about how far a point moves in a step near one."""
        self.ahead = float(distance)

    def meet(self, points: np.ndarray, at: np.ndarray, reach: float):
        """(rows, d, normals) of the points ``points`` (global indices, sorted) at ``at``
        (P, 3) within ``reach`` of the obstacles each meets (rows index ``points``): a node
        every obstacle, a sample the thin ones."""
        cut = int(np.searchsorted(points, self.n))
        rows, dist, normal = self.obstacles.entries(at[:cut], reach)
        if cut == len(points) or self.thin is None:
            return rows, dist, normal
        more, d2, n2 = self.thin.entries(at[cut:], reach)
        return (
            np.concatenate([rows, cut + more]),
            np.concatenate([dist, d2]),
            np.concatenate([normal, n2]),
        )

    def _points(self, x: np.ndarray) -> np.ndarray:
        """The step's points (P, 3) when the nodes are at ``x`` (n, 3)."""
        return x if self.nodes_only else self._step_blend @ x

    def every(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(indices, places (n + S, 3)) of every point when the nodes are at ``x``."""
        return np.arange(self.blend.shape[0]), (x if self.nodes_only else self.blend @ x)

    def _entries(self, x: np.ndarray, reach: float):
        """(points (global indices), signed distances, normals) of the step's points within
        ``reach`` of an obstacle, the nodes at ``x``."""
        rows, dist, normal = self.meet(self._step_points, self._points(x), reach)
        return self._step_points[rows], dist, normal, rows

    def _anchors(self, points: np.ndarray, x: np.ndarray, normal: np.ndarray) -> np.ndarray:
        """Where friction holds each touching point (m, 3): where it stuck, kept from step to
        step while it stays within the slip of it (a node at rest under a sideways load does
        not creep a slip a step), else the point a slip behind it (it slides)."""
        held = self._held[points]  # (m, 3), NaN where the point did not touch last step
        u = x - held
        u -= (u * normal).sum(1, keepdims=True) * normal  # its slip across the normal
        size = np.linalg.norm(u, axis=1)
        out = x - u * np.minimum(1.0, self.slip / np.maximum(size, 1e-300))[:, None]
        out = np.where(np.isnan(held), x, out)
        if self.obstacles.moving:  # a moving obstacle carries where its friction holds
            out = out + self.obstacles.carried(out, self.reach + self.ahead)
        self._held[:] = np.nan
        self._held[points] = out
        return out

    def _choose(self, x: np.ndarray, ahead: np.ndarray) -> None:
        """The step's points: every node, and the triangles' points within ``reach`` +
        ``ahead`` of an obstacle at ``x`` or at ``ahead`` (the step's prediction)."""
        n = self.n
        samples = self.blend[n:]
        live = np.zeros(samples.shape[0], dtype=bool)
        every = np.arange(n, n + len(live))
        if len(live):
            for at in (x, ahead):
                live[self.meet(every, samples @ at, self.reach + self.ahead)[0]] = True
        self._step_points = np.concatenate([np.arange(n), n + np.flatnonzero(live)])
        self._step_blend = self.blend[self._step_points]

    def begin(self, x: np.ndarray, ahead: np.ndarray):
        """Start a step at ``x``: its points (``_choose``), the friction's normal forces;
        returns (points, normals, sticking stiffness) of the points near an obstacle (within
        twice the margin) at ``x`` or at ``ahead`` (where the step's prediction takes them),
        whose springs join the step's matrix (``blocks``; None: none near)."""
        # a step that begins again from the same ``x`` (its plan changed) starts from the
        # same holds (a moving obstacle would carry them twice)
        if self._asked is not None and self._asked[0] is x:
            self._held = self._asked[1].copy()
        else:
            self._asked = (x, self._held.copy())
        self._choose(x, ahead)
        points, dist, normal, local = self._entries(x, self.reach)
        press = np.maximum(self.margin - dist, 0.0) * self.k[points]
        on = press > 0
        # friction acts across the obstacle's unit normal (a distance grid's gradient is not of
        # unit length near an edge or a corner, nor at all on a ridge)
        length = np.linalg.norm(normal, axis=1)
        on &= length > 1e-6
        self.lagged = self._lag_blend = None
        if on.any():
            at = self._points(x)[local[on]]
            unit = normal[on] / length[on, None]
            self.lagged = (points[on], unit, press[on], self._anchors(points[on], at, unit))
            self._lag_blend = self.blend[points[on]]
        later, _, later_normal, _ = self._entries(ahead, self.reach)
        new = ~np.isin(later, points)
        points = np.concatenate([points, later[new]])
        if not len(points):
            return None
        normal = np.concatenate([normal, later_normal[new]])
        stick = np.concatenate([self.mu * press / self.slip, np.zeros(int(new.sum()))])
        return points, normal, stick

    def blocks(self, touch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, cols, values) over the nodes' coordinates (3 n) of the springs of ``touch``
        (``begin``'s): each point's k n n^T + stick (I - n n^T), spread over its nodes by
        their weights (w_a w_b at nodes a, b)."""
        points, normal, stick = touch
        eye = np.eye(3)
        nn = normal[:, :, None] * normal[:, None, :]
        block = self.k[points][:, None, None] * nn + stick[:, None, None] * (eye - nn)
        r3, c3 = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        if self.nodes_only:  # each point a node: its block on its own diagonal
            at = 3 * points[:, None, None]
            return (at + r3).ravel(), (at + c3).ravel(), block.ravel()
        # sum_p (w_p w_p^T) (x) K_p: one product B^T diag(K_ij) B per entry ij of the blocks
        weights = self.blend[points]  # (m, n) each point's weights on the nodes
        rows, cols, vals = [], [], []
        for i in range(3):
            for j in range(3):
                part = (weights.T @ sparse.diags(block[:, i, j]) @ weights).tocoo()
                rows.append(3 * part.row + i)
                cols.append(3 * part.col + j)
                vals.append(part.data)
        return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)

    def near(self, x: np.ndarray, ahead: np.ndarray) -> bool:
        """Whether a point of the cloth is near an obstacle (within twice the margin) at ``x``
        or at ``ahead``: where :meth:`begin` would give springs."""
        return any(len(self.meet(*self.every(at), self.reach)[0]) for at in (x, ahead))

    def push_out(self, x: np.ndarray, v: np.ndarray, free: np.ndarray | None = None) -> int:
        """Move the cloth where a step left a point inside an obstacle onto its surface and
        take its velocity into it away (in place; as a cloth solver's collision response after
        its step): a node itself; a triangle's point by its free corners, each moved by its
        weight over the sum of their squared weights (the least motion of them that moves
        the point; a rim point's negative weight moves its corner the other way), several
        points' moves of a node averaged. Every point is looked at (a step that did not
        choose its points, the preview's projective one, is checked too). Returns how many
        were moved."""
        n = self.n
        free = np.ones(n, dtype=bool) if free is None else np.asarray(free, dtype=bool)
        moved = 0
        for _ in range(3):
            every, at = self.every(x)
            rows, dist, normal = self.meet(every, at, 0.0)
            inside = (dist < 0) & ((normal * normal).sum(1) > 1e-12)
            if not inside.any():
                break
            points, dist, normal = every[rows[inside]], dist[inside], normal[inside]
            shift = -(dist / (normal * normal).sum(1))[:, None] * normal  # (m, 3) of the point
            unit = normal / np.linalg.norm(normal, axis=1, keepdims=True)
            weights = self.blend[points].tocoo()
            w = weights.data * free[weights.col]
            norm2 = np.bincount(weights.row, w * w, minlength=len(points))  # (m,)
            ok = norm2[weights.row] > 0
            share = np.where(ok, w / np.where(ok, norm2[weights.row], 1.0), 0.0)
            acts = share != 0
            total = np.zeros((n, 3))
            hits = np.zeros(n)
            np.add.at(total, weights.col, share[:, None] * shift[weights.row])
            np.add.at(hits, weights.col, acts.astype(float))
            touched = np.flatnonzero(hits > 0)
            if not len(touched):
                break
            x[touched] += total[touched] / hits[touched, None]
            # the velocity into the obstacle, of each node a point moved (along the way the
            # node moved for it)
            dirs = np.zeros((n, 3))
            np.add.at(dirs, weights.col, np.sign(share)[:, None] * unit[weights.row])
            d = dirs[touched]
            d /= np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-300)
            rel = v[touched]
            if self.obstacles.moving:  # into the obstacle as it moves
                rel = rel - self.obstacles.carried(x[touched], self.reach, velocity=True)
            into = np.minimum((rel * d).sum(1), 0.0)
            v[touched] -= into[:, None] * d
            moved += len(points)
        return moved

    def __call__(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        at = self._points(x)  # (P, 3)
        grad = np.zeros_like(at)
        rows, dist, normal = self.meet(self._step_points, at, self.margin)
        value = 0.0
        if len(rows):
            depth = self.margin - dist
            k = self.k[self._step_points[rows]]
            value += 0.5 * float((k * depth * depth).sum())
            np.add.at(grad, rows, -(k * depth)[:, None] * normal)
        out = grad if self.nodes_only else self._step_blend.T @ grad
        if self.lagged is not None and self.mu > 0:
            _, n, press, start = self.lagged
            blend = self._lag_blend
            u = (x[self.lagged[0]] if self.nodes_only else blend @ x) - start
            u -= (u * n).sum(1, keepdims=True) * n  # tangential displacement over the step
            size = np.linalg.norm(u, axis=1)
            eps = self.slip
            # Huber: mu N (|u|^2 / (2 eps)) below the slip, mu N (|u| - eps / 2) above
            value += float(
                (self.mu * press * np.where(size < eps, size**2 / (2 * eps), size - eps / 2)).sum()
            )
            scale = self.mu * press / np.maximum(size, eps)
            if self.nodes_only:
                np.add.at(out, self.lagged[0], scale[:, None] * u)
            else:
                out += blend.T @ (scale[:, None] * u)
        return value, out
