"""Signed distance to the obstacles of a scene: a ground plane and static triangle meshes.

Contact (``contact``) needs, at every right-hand side of the dynamics, the signed distance d of
each tracked point to every obstacle (positive outside) and its gradient n = grad d. For the
ground (the plane z = height, Z up) both are exact and trivial. For a mesh they come from a
**lazy grid**: the exact signed distance at the nodes of a regular grid (spacing ``cell``),
each node computed the first time a query needs it (stored in blocks of 8 x 8 x 8 cells, so
that a run pays for the nodes its points visit, not for the volume around them), and
interpolated trilinearly in between. d is then a continuous, piecewise-trilinear function of
the position whose gradient is exact for it, so the contact force -dV/dx of a penalty V(d) is
conservative and the integrator's energy balance holds. On a flat face the signed distance is
linear, so the interpolation is exact there; near edges and corners it is off by at most about
one cell.

Exact distances at the nodes: the closest point on each candidate triangle (the regions of the
triangle's Voronoi diagram, as in Ericson, "Real-Time Collision Detection", 2004, 5.1.5), the
nearest one kept; its sign from the angle-weighted pseudo-normal of the closest feature (face,
edge or vertex; Baerentzen and Aanaes, "Signed distance computation using the angle weighted
pseudonormal", 2005), which is correct for closed meshes and, for an open one (a floor made of
a plane), says "outside" on the side its faces' normals point to. Candidates of a node are the
triangles whose bounding box lies within ``band`` of its block; nodes farther than ``band`` from
the mesh get +-band, so the grid is only meaningful (and only used) within ``band`` of the
surface.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial import cKDTree

from ..errors import ConditionError
from ..geometry import edge_keys

BLOCK = 8  # cells per block side
MAX_TABLE = 4_000_000  # blocks a grid indexes with an array (32 MB), at most
_PAIRS = 400_000  # point-triangle pairs a grid fill lists at once (memory bounded)
FINE_FACES = 4000  # a mesh of more faces fills its grid by a k-d tree of its triangles
FINE_NEAREST = 32  # centroids a node of a fine mesh's grid finds in one search
FINE_PAIRS = 32  # node-triangle pairs a node of a fine mesh's grid tries, about (chunking)
FAR_BATCH = 64  # nodes farther than the band searched at once (their search is wider)
_POINTS = 256  # points whose candidate triangles ``exact`` lists at once (memory bounded)
# a grid node's 8 corners' offsets in a block's flat node index ((BLOCK + 1)^3 per block)
_CORNERS = np.ravel_multi_index(np.indices((2, 2, 2)), (BLOCK + 1,) * 3)  # (2, 2, 2)


def closest_on_triangles(
    p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Closest point of each triangle (a, b, c) to p, all (N, 3), and its feature (N,) int:
    0 the face, 1-3 the vertices a, b, c, 4-6 the edges ab, bc, ca."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = _dot(ab, ap), _dot(ac, ap)
    bp = p - b
    d3, d4 = _dot(ab, bp), _dot(ac, bp)
    cp = p - c
    d5, d6 = _dot(ab, cp), _dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = va + vb + vc
        v_face = np.where(denom != 0, vb / denom, 1 / 3)
        w_face = np.where(denom != 0, vc / denom, 1 / 3)
        t_ab = np.where(d1 - d3 != 0, d1 / (d1 - d3), 0.0)
        t_ca = np.where(d2 - d6 != 0, d2 / (d2 - d6), 0.0)
        t_bc = np.where((d4 - d3) + (d5 - d6) != 0, (d4 - d3) / ((d4 - d3) + (d5 - d6)), 0.0)
    out = a + v_face[:, None] * ab + w_face[:, None] * ac
    feature = np.zeros(len(p), dtype=np.int64)
    # the regions, the first that holds wins (assigned in reverse order)
    regions = [
        (va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),  # edge bc
        (vb <= 0) & (d2 >= 0) & (d6 <= 0),  # edge ca
        (d6 >= 0) & (d5 <= d6),  # vertex c
        (vc <= 0) & (d1 >= 0) & (d3 <= 0),  # edge ab
        (d3 >= 0) & (d4 <= d3),  # vertex b
        (d1 <= 0) & (d2 <= 0),  # vertex a
    ]
    points = [
        b + t_bc[:, None] * (c - b),
        a + t_ca[:, None] * ac,
        c,
        a + t_ab[:, None] * ab,
        b,
        a,
    ]
    for code, mask, point in zip((5, 6, 3, 4, 2, 1), regions, points, strict=True):
        out = np.where(mask[:, None], point, out)
        feature = np.where(mask, code, feature)
    return out, feature


def _dot(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", u, v)


def _summed(index: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """(count, 3): the rows of ``values`` (K, 3) summed by ``index`` (K,), in their order."""
    return np.stack([np.bincount(index, values[:, a], count) for a in range(3)], 1)


class MeshDistance:
    """Signed distance to one static triangle mesh (module docstring).

    vertices (V, 3), faces (F, 3) in the simulation's frame (metres); cell: grid spacing (m);
    band: how far from the surface distances are needed (m). Faces of zero area are dropped; a
    mesh without any face of positive area is a ValueError.
    """

    def __init__(self, vertices, faces, cell: float, band: float, name: str = "collider"):
        v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
        f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
        if not np.isfinite(v).all():
            raise ValueError(f"{name}: its vertices are not all finite")
        if len(f) and (f.min() < 0 or f.max() >= len(v)):
            raise ValueError(f"{name}: a face refers to a vertex that does not exist")
        if not (cell > 0 and band >= cell):
            raise ValueError(f"{name}: cell must be > 0 and band >= cell")
        normal = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]) if len(f) else v[:0]
        area2 = np.linalg.norm(normal, axis=1)
        scale = float(np.ptp(v, axis=0).max()) if len(v) else 0.0
        keep = area2 > 1e-12 * max(scale, 1e-9) ** 2
        if not keep.any():
            raise ValueError(f"{name}: it has no face of positive area")
        self.name = name
        self.vertices, self.faces = v, f[keep]
        self.face_normals = normal[keep] / area2[keep, None]  # (F, 3)
        self._pseudo_normals()
        tri = v[self.faces]  # (F, 3, 3)
        self.tri_lo, self.tri_hi = tri.min(1), tri.max(1)  # (F, 3)
        self.cell, self.band = float(cell), float(band)
        self.lo = v.min(0) - band  # the grid's origin: farther than band from it, d >= band
        self.hi = v.max(0) + band
        self.shape = np.maximum(np.ceil((self.hi - self.lo) / (cell * BLOCK)).astype(np.int64), 1)
        self._slots: dict[int, int] = {}
        # the slot of every block, -1 until computed, where the grid has few enough blocks (a
        # collider far larger than the object at its cell size keeps the dictionary alone)
        count = int(np.prod(self.shape.astype(np.float64)))
        self._slot_of = np.full(count, -1, dtype=np.int64) if count <= MAX_TABLE else None
        self._store = np.empty((16, BLOCK + 1, BLOCK + 1, BLOCK + 1))
        self._origins = np.empty((16, 3))  # each slot's block's lowest corner
        self._candidates: list[np.ndarray] = []  # each slot's candidate triangles
        self._counts = np.zeros(16, dtype=np.int64)  # and how many
        self._centroids, self._reach = None, 0.0  # a fine mesh's triangles (``_fill_fine``)
        self._by_octave = None  # ``within``'s k-d trees of the triangles

    def _pseudo_normals(self) -> None:
        v, f, fn = self.vertices, self.faces, self.face_normals
        corners = v[f]  # (F, 3, 3)
        angled = []  # each corner's angle times its face's normal, corner by corner
        for k in range(3):
            e1 = corners[:, (k + 1) % 3] - corners[:, k]
            e2 = corners[:, (k + 2) % 3] - corners[:, k]
            cos = _dot(e1, e2) / np.maximum(
                np.linalg.norm(e1, axis=1) * np.linalg.norm(e2, axis=1), 1e-300
            )
            angled.append(np.arccos(np.clip(cos, -1, 1))[:, None] * fn)
        # sums in the order of the corners (0 of every face, then 1, then 2), as np.add.at
        # adds: bincount's are the same bits, several times faster
        vn = _summed(f.T.ravel(), np.concatenate(angled), len(v))
        self.vertex_normals = vn / np.maximum(np.linalg.norm(vn, axis=1, keepdims=True), 1e-300)
        keys, _ = edge_keys(f)  # (3F,) each face's ab, bc, ca
        _, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        en = _summed(inverse, np.repeat(fn, 3, axis=0), int(inverse.max()) + 1)
        self.edge_normals = en / np.maximum(np.linalg.norm(en, axis=1, keepdims=True), 1e-300)
        self.face_edges = inverse.reshape(-1, 3)  # (F, 3)

    # -- exact distances ---------------------------------------------------------------------
    def exact(self, points: np.ndarray, triangles: np.ndarray | None = None) -> np.ndarray:
        """Signed distances (P,) of ``points`` (P, 3) to the triangles ``triangles`` (indices;
        None: all), exact (no grid). A point's nearest triangle is no farther than its nearest
        vertex of them, so only the triangles whose centres lie within that distance plus the
        largest triangle's radius are tried (k-d trees of the vertices and the centres): the
        same answer as trying every triangle, at a cost that grows with the triangles near
        each point (a rest mesh's every vertex against a fixed part's: 0.5 s -> 0.05 s)."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        tris = np.arange(len(self.faces)) if triangles is None else np.asarray(triangles)
        out = np.full(len(p), np.inf)
        if not len(p) or not len(tris):
            return out
        vertices = cKDTree(self.vertices[np.unique(self.faces[tris])])
        lo, hi = self.tri_lo[tris], self.tri_hi[tris]  # (T, 3)
        centres = cKDTree(0.5 * (lo + hi))
        widest = float(0.5 * np.linalg.norm(hi - lo, axis=1).max())  # the largest radius
        for s in range(0, len(p), _POINTS):
            chunk = p[s : s + _POINTS]
            reach = vertices.query(chunk)[0]  # (n,) the nearest triangle is no farther
            lists = centres.query_ball_point(chunk, (1.0 + 1e-9) * (reach + widest) + 1e-12)
            counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
            rows = np.repeat(np.arange(len(chunk)), counts)  # (K,) every candidate pair
            # each point's candidates in the order of ``tris``: ties go to the first
            cand = np.concatenate([np.sort(np.asarray(x, dtype=np.int64)) for x in lists])
            _, best, tri, feat = self._nearest_pairs(chunk, rows, tris[cand])
            out[s : s + _POINTS] = self._signed(chunk, best, tri, feat)
        return out

    def _signed(self, p, closest, tri, feat) -> np.ndarray:
        """Signed distances (n,) of points p (n, 3) whose closest point ``closest`` lies on
        triangle ``tri`` (n,) at feature ``feat`` (n,) (``closest_on_triangles``)."""
        normal = self.face_normals[tri].copy()
        for k in range(3):
            on_vertex = feat == k + 1
            normal[on_vertex] = self.vertex_normals[self.faces[tri[on_vertex], k]]
            on_edge = feat == k + 4
            normal[on_edge] = self.edge_normals[self.face_edges[tri[on_edge], k]]
        side = _dot(p - closest, normal)
        return np.where(side < 0, -1.0, 1.0) * np.sqrt(((p - closest) ** 2).sum(1))

    def within(self, points: np.ndarray, band: float) -> np.ndarray:
        """Signed distances (P,) of ``points`` (P, 3) that lie within ``band`` (m) of the mesh,
        exact; +inf for the others. Only the triangles whose boxes come within ``band`` of a
        point are tried (a k-d tree of the points), so the cost grows with the pairs near each
        other rather than with points x triangles, as ``exact``'s does."""
        p = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        out = np.full(len(p), np.inf)
        if not len(p):
            return out
        tree, rows, tris = cKDTree(p), [], []
        for mine, centres, half in self._octaves():
            found = centres.sparse_distance_matrix(
                tree, float(half.max()) + band, output_type="ndarray"
            )
            keep = found["v"] <= half[found["i"]] + band
            rows.append(found["j"][keep].astype(np.int64))
            tris.append(mine[found["i"][keep]])
        rows, tris = np.concatenate(rows), np.concatenate(tris)  # (K,)
        if not len(rows):
            return out
        # a tie to the lowest triangle, as ``exact``'s
        best_d2, best, best_tri, best_feat = self._nearest_pairs(p, rows, tris, by_index=True)
        hit = np.flatnonzero(best_d2 <= band * band)
        out[hit] = self._signed(p[hit], best[hit], best_tri[hit], best_feat[hit])
        return out

    def _octaves(self):
        """[(triangles (T,), a k-d tree of their boxes' centres, their half diagonals (T,))]
        per octave of the half diagonal (built once): ``within`` searches each at its own
        largest radius, not the mesh's."""
        if self._by_octave is None:
            centre = 0.5 * (self.tri_lo + self.tri_hi)  # (F, 3)
            half = 0.5 * np.linalg.norm(self.tri_hi - self.tri_lo, axis=1)  # (F,)
            octave = np.floor(np.log2(half / half.min())).astype(np.int64)
            self._by_octave = [
                (mine, cKDTree(centre[mine]), half[mine])
                for mine in (np.flatnonzero(octave == k) for k in np.unique(octave))
            ]
        return self._by_octave

    def _nearest_pairs(self, p: np.ndarray, rows: np.ndarray, tris: np.ndarray, by_index=False):
        """For each point of ``p`` (P, 3), its nearest among the candidate pairs (point
        ``rows`` (K,), triangle ``tris`` (K,)), ties to the first (``by_index``: to the lowest
        triangle): (squared distance (P,), inf without a pair; closest point (P, 3); its
        triangle (P,); its feature (P,)). Compiled (``contact_kernels.nearest_pairs``: in
        numpy the pairs' regions were most of a structure's and a grid's cost)."""
        from ..contact_kernels import nearest_pairs  # here: numba loads in about 1 s

        return nearest_pairs(
            np.ascontiguousarray(p, dtype=np.float64),
            np.ascontiguousarray(rows, dtype=np.int64),
            np.ascontiguousarray(tris, dtype=np.int64),
            self.vertices,
            self.faces,
            by_index,
        )

    # -- the lazy grid -----------------------------------------------------------------------
    def _block(self, key: int) -> int:
        """The store slot of block ``key``, made now if it is new: its nodes unknown (NaN,
        computed when a query first needs them: ``_fill``) and its candidate triangles (those
        whose boxes come within ``band`` of it)."""
        slot = self._slots.get(key)
        if slot is not None:
            return slot
        ny, nz = self.shape[1], self.shape[2]
        idx = np.array([key // (ny * nz), (key // nz) % ny, key % nz])
        lo = self.lo + idx * BLOCK * self.cell
        hi = lo + BLOCK * self.cell
        fine = self._fine()
        if fine:  # its nodes search a k-d tree, not the block's list: no scan of all
            near = np.zeros(0, dtype=np.int64)
        else:
            near = np.flatnonzero(
                ((self.tri_lo <= hi + self.band) & (self.tri_hi >= lo - self.band)).all(1)
            )
        slot = len(self._slots)
        if slot == len(self._store):
            self._store = np.concatenate([self._store, np.empty_like(self._store)])
            self._origins = np.concatenate([self._origins, np.empty_like(self._origins)])
            self._counts = np.concatenate([self._counts, np.zeros_like(self._counts)])
        self._store[slot] = np.nan
        self._origins[slot] = lo
        self._candidates.append(near)
        # the pairs a node of it tries (a fine mesh's: about its few nearest triangles)
        self._counts[slot] = FINE_PAIRS if fine else len(near)
        self._slots[key] = slot
        if self._slot_of is not None:
            self._slot_of[key] = slot
        return slot

    def _fill(self, nodes: np.ndarray) -> None:
        """Compute the store's nodes ``nodes`` (flat indices into it, unique): each node's
        exact signed distance to its block's candidate triangles, clipped to +-band (+band
        without a candidate). A node's nearest triangle within ``band`` is one whose box comes
        within ``band`` of the node, so those are tried first; a node with none that near
        (farther than ``band`` from the mesh) takes its sign from all of its block's. In
        chunks of about ``_PAIRS`` node-triangle pairs (memory bounded)."""
        ends = np.cumsum(np.maximum(self._counts[nodes // (BLOCK + 1) ** 3], 1))
        cuts = np.searchsorted(ends, np.arange(_PAIRS, ends[-1], _PAIRS), side="right")
        for chunk in np.split(nodes, cuts):
            if len(chunk):
                self._fill_chunk(chunk)

    def _fill_chunk(self, nodes: np.ndarray) -> None:
        """``_fill`` for nodes whose candidate pairs fit in memory at once."""
        per = (BLOCK + 1) ** 3
        slot, local = np.divmod(nodes, per)
        ijk = np.stack(np.unravel_index(local, (BLOCK + 1,) * 3), 1)  # (M, 3)
        points = self._origins[slot] + ijk * self.cell  # (M, 3)
        if self._fine():
            self._store.reshape(-1)[nodes] = self._fill_fine(points)
            return
        values = np.full(len(nodes), self.band)
        order = np.argsort(slot, kind="stable")
        bounds = np.flatnonzero(np.r_[True, slot[order][1:] != slot[order][:-1], True])
        rows, tris = [], []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            mine, cand = order[a:b], self._candidates[slot[order[a]]]
            if len(cand):
                rows.append(np.repeat(mine, len(cand)))
                tris.append(np.tile(cand, len(mine)))
        if not rows:
            self._store.reshape(-1)[nodes] = values
            return
        rows, tris = np.concatenate(rows), np.concatenate(tris)  # (K,) every candidate pair
        p = points[rows]
        gap = np.maximum(self.tri_lo[tris] - p, 0.0) + np.maximum(p - self.tri_hi[tris], 0.0)
        near = (gap * gap).sum(1) <= self.band**2  # (K,) the box within band of the node
        d2, closest, tri, feat = self._nearest_pairs(points, rows[near], tris[near])
        far = np.flatnonzero(~(d2 <= self.band**2) & np.isin(np.arange(len(nodes)), rows))
        if len(far):  # no triangle within band: the sign from the block's nearest
            again = np.isin(rows, far)
            redo = self._nearest_pairs(points, rows[again], tris[again])
            for mine, theirs in zip((d2, closest, tri, feat), redo, strict=True):
                mine[far] = theirs[far]
        hit = np.flatnonzero(np.isfinite(d2))
        signed = self._signed(points[hit], closest[hit], tri[hit], feat[hit])
        values[hit] = np.clip(signed, -self.band, self.band)
        self._store.reshape(-1)[nodes] = values

    def _fine(self) -> bool:
        """Whether the grid is filled by a k-d tree of the triangles (``_fill_fine``): a mesh
        of more than ``FINE_FACES`` faces, none reaching farther than the band from its
        centroid (a large triangle, a floor's quad or a cap's fan, would make every node's
        search take most of the mesh: the blocks' candidates serve those)."""
        if len(self.faces) <= FINE_FACES:
            return False
        if self._centroids is None:
            tri = self.vertices[self.faces]  # (F, 3, 3)
            centre = tri.mean(1)
            self._reach = float(np.linalg.norm(tri - centre[:, None], axis=2).max())
            self._centroids = cKDTree(centre)
        return self._reach <= self.band

    def _candidates_within(self, points: np.ndarray, radius: np.ndarray):
        """(rows, triangles): the pairs of each point with the triangles whose centroids lie
        within its ``radius``."""
        lists = self._centroids.query_ball_point(points, radius)
        counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        rows = np.repeat(np.arange(len(points)), counts)
        tris = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists if x] or [rows[:0]])
        return rows, tris

    def _candidates_nearest(self, points: np.ndarray):
        """(rows, triangles, d_near): ``_candidates_within`` at each point's radius
        min(d_near, band) + r (d_near: its nearest centroid's distance, r: the largest
        centroid-to-corner distance), from one search of each point's ``FINE_NEAREST``
        nearest centroids (arrays, no Python lists); a point whose every one of them lies
        within its radius may have more, and searches its ball."""
        tree = self._centroids
        k = min(FINE_NEAREST, tree.n)
        dist, near = tree.query(points, k=k)  # (M, k) each, nearest first
        dist, near = dist.reshape(len(points), k), near.reshape(len(points), k)
        d_near = dist[:, 0]
        radius = np.minimum(d_near, self.band) + self._reach  # (M,)
        within = dist <= radius[:, None]  # (M, k)
        more = within[:, -1] if k < tree.n else np.zeros(len(points), dtype=bool)
        rows, cols = np.nonzero(within & ~more[:, None])
        tris = near[rows, cols]
        some = np.flatnonzero(more)
        if len(some):
            extra_rows, extra_tris = self._candidates_within(points[some], radius[some])
            rows = np.concatenate([rows, some[extra_rows]])
            tris = np.concatenate([tris, extra_tris])
        return rows, np.asarray(tris, dtype=np.int64), d_near

    def _fill_fine(self, points: np.ndarray) -> np.ndarray:
        """Signed distances (M,) of ``points`` clipped to +-band, for a mesh of many small
        triangles (``_fine``: a block's candidates would be thousands): each point tries only the
        triangles whose centroids lie within d + r of it (d: its nearest centroid's distance,
        r: the largest centroid-to-corner distance; the nearest triangle's centroid is within
        that), capped at band + r (a triangle beyond cannot be within band); a point with none
        within band (only its sign counts) searches again uncapped, a few points at a time."""
        reach = self._reach
        rows, tris, d_near = self._candidates_nearest(points)
        d2, closest, tri, feat = self._nearest_pairs(points, rows, tris)
        far = np.flatnonzero(~(d2 <= self.band**2))
        for start in range(0, len(far), FAR_BATCH):  # the exact nearest, for its sign
            some = far[start : start + FAR_BATCH]
            rows, tris = self._candidates_within(points[some], d_near[some] + reach)
            redo = self._nearest_pairs(points[some], rows, tris)
            for mine, theirs in zip((d2, closest, tri, feat), redo, strict=True):
                mine[some] = theirs
        signed = self._signed(points, closest, tri, feat)
        return np.clip(signed, -self.band, self.band)

    @property
    def blocks(self) -> int:
        """Blocks computed so far."""
        return len(self._slots)

    def near(self, x: np.ndarray, pad=0.0) -> np.ndarray:
        """(P,) bool: the points within the grid's box (the others are farther than band from
        the mesh), or within ``pad`` (m, scalar or (P,)) of it."""
        pad = np.asarray(pad, dtype=np.float64).reshape(-1, 1)
        return ((x > self.lo - pad) & (x < self.hi + pad)).all(1)

    def gap(self, x: np.ndarray) -> np.ndarray:
        """(P,) each point's distance to the box of the mesh's vertices (a lower bound of its
        distance to the mesh)."""
        lo, hi = self.lo + self.band, self.hi - self.band
        out = np.maximum(np.maximum(lo - x, x - hi), 0.0)  # (P, 3)
        return np.sqrt((out * out).sum(1))

    def query(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(d (P,), grad d (P, 3)) of points ``x`` (P, 3) inside the grid's box (``near``):
        trilinear in the grid's nodes, a compiled loop (``contact_kernels.grid_sample``: a
        step asks for a few hundred points at a time, thousands of times a run); the points
        whose blocks or nodes are not computed yet take ``_interpolate``, which computes
        them."""
        if not len(x):
            return self._interpolate(x)
        from ..contact_kernels import grid_sample  # here: numba loads in about 1 s

        x = np.ascontiguousarray(x, dtype=np.float64)
        d, grad, known = grid_sample(x, *self.table())
        if not known.all():
            miss = np.flatnonzero(~known)
            d[miss], grad[miss] = self._interpolate(x[miss])
        return d, grad

    def table(self) -> tuple:
        """The grid as ``contact_kernels.grid_sample`` reads it: (lo, cell, shape, block,
        slot_of, store); slot_of empty where the blocks have no table (every sample then
        reads as unknown)."""
        slots = self._slot_of if self._slot_of is not None else np.zeros(0, dtype=np.int64)
        return self.lo, self.cell, self.shape, BLOCK, slots, self._store.reshape(-1)

    def _interpolate(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``query`` in numpy, computing the blocks and nodes its points need first."""
        g = (x - self.lo) / self.cell
        cell = np.clip(np.floor(g).astype(np.int64), 0, self.shape * BLOCK - 1)
        block = cell // BLOCK
        local = cell - block * BLOCK
        frac = g - cell  # in [0, 1] (a point on the box's far face: 1)
        keys = (block[:, 0] * self.shape[1] + block[:, 1]) * self.shape[2] + block[:, 2]
        if self._slot_of is not None:
            slots = self._slot_of[keys]
            missing = slots < 0
            if missing.any():  # blocks not computed yet: each once
                for key in np.unique(keys[missing]):
                    self._block(int(key))
                slots = self._slot_of[keys]
        else:
            unique, inverse = np.unique(keys, return_inverse=True)
            slots = np.array([self._block(int(k)) for k in unique])[inverse.reshape(-1)]
        # the 8 corners' flat indices into the store (P, 2, 2, 2)
        side = BLOCK + 1
        base = ((slots * side + local[:, 0]) * side + local[:, 1]) * side + local[:, 2]
        corners = base[:, None, None, None] + _CORNERS
        c = self._store.reshape(-1)[corners]
        unknown = np.isnan(c)
        if unknown.any():  # nodes no query needed before: each once
            self._fill(np.unique(corners[unknown]))
            c = self._store.reshape(-1)[corners]
        fx, fy, fz = frac[:, 0], frac[:, 1], frac[:, 2]
        cx = c[:, 0] + fx[:, None, None] * (c[:, 1] - c[:, 0])  # (P, 2, 2)
        cxy = cx[:, 0] + fy[:, None] * (cx[:, 1] - cx[:, 0])  # (P, 2)
        d = cxy[:, 0] + fz * (cxy[:, 1] - cxy[:, 0])
        grad = np.empty((len(x), 3))
        grad[:, 2] = cxy[:, 1] - cxy[:, 0]
        grad[:, 1] = (1 - fz) * (cx[:, 1, 0] - cx[:, 0, 0]) + fz * (cx[:, 1, 1] - cx[:, 0, 1])
        dx = c[:, 1] - c[:, 0]  # (P, 2, 2)
        dxy = dx[:, 0] + fy[:, None] * (dx[:, 1] - dx[:, 0])
        grad[:, 0] = dxy[:, 0] + fz * (dxy[:, 1] - dxy[:, 0])
        return d, grad / self.cell


class Obstacles:
    """The ground plane (z = ``ground``, None: none) and the static meshes of a scene; the
    distances of points to each (``distances``)."""

    def __init__(self, ground: float | None, meshes: list[MeshDistance] = ()):
        self.ground = None if ground is None else float(ground)
        self.meshes = list(meshes)

    def __bool__(self) -> bool:
        return self.ground is not None or bool(self.meshes)

    @property
    def moving(self) -> list:
        """The meshes that move on a path (:class:`~neurok_core.dynamics.moving.MovingMesh`)."""
        return [m for m in self.meshes if hasattr(m, "motion")]

    def at(self, t: float) -> None:
        """Put every moving mesh at its pose of time ``t`` (s)."""
        for mesh in self.moving:
            mesh.at(t)

    def carried(self, x: np.ndarray, reach: float, velocity: bool = False) -> np.ndarray:
        """(P, 3) how far the moving mesh nearest each point of ``x`` (P, 3), within ``reach``
        (m), carried it over its last move (``velocity``: at what speed, m/s); 0 for a point
        near none."""
        out = np.zeros_like(x)
        best = np.full(len(x), np.inf)
        for mesh in self.moving:
            rows = np.flatnonzero(mesh.near(x))
            if not len(rows):
                continue
            d = mesh.query(x[rows])[0]
            closer = (d < reach) & (np.abs(d) < best[rows])
            rows = rows[closer]
            best[rows] = np.abs(d[closer])
            out[rows] = (mesh.velocity if velocity else mesh.motion)(x[rows])
        return out

    def speed(self, t0: float, t1: float) -> float:
        """m/s: the fastest point of any moving mesh over [t0, t1] (0 without one)."""
        return max((mesh.speed(t0, t1) for mesh in self.moving), default=0.0)

    def distances(self, x: np.ndarray, reach: float):
        """For each obstacle, (rows, d, n) of the points of ``x`` (P, 3) closer than ``reach``
        to it: rows (R,) int, d (R,) signed distances, n (R, 3) their gradients."""
        out = []
        if self.ground is not None:
            d = x[:, 2] - self.ground
            rows = np.flatnonzero(d < reach)
            n = np.zeros((len(rows), 3))
            n[:, 2] = 1.0
            out.append((rows, d[rows], n))
        for mesh in self.meshes:
            rows = np.flatnonzero(mesh.near(x))
            if len(rows) == 0:
                continue
            d, n = mesh.query(x[rows])
            close = d < reach
            out.append((rows[close], d[close], n[close]))
        return out

    def entries(self, x: np.ndarray, reach: float):
        """(rows (R,), d (R,), n (R, 3)): ``distances`` of every obstacle, concatenated (a point
        near two obstacles is in twice)."""
        found = self.distances(x, reach)
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros((0, 3))
        rows, dist, normal = zip(*found, strict=True)
        return np.concatenate(rows), np.concatenate(dist), np.concatenate(normal)

    def farther_than(self, x: np.ndarray) -> np.ndarray:
        """(P,) a lower bound of each point's distance to every obstacle (its height over the
        ground, its distance to each mesh's bounding box): cheap, for step control; inf
        without obstacles."""
        out = np.full(len(x), np.inf)
        if self.ground is not None:
            out = np.minimum(out, x[:, 2] - self.ground)
        for mesh in self.meshes:
            out = np.minimum(out, mesh.gap(x))
        return out

    def clearance(self, x: np.ndarray) -> np.ndarray:
        """(P,) each point's signed distance to the nearest obstacle, exact (no grid): negative
        inside one; inf without obstacles; points farther than a mesh's band from it count as
        at its band."""
        out = np.full(len(x), np.inf)
        if self.ground is not None:
            out = np.minimum(out, x[:, 2] - self.ground)
        for mesh in self.meshes:
            near = mesh.near(x)
            rows = np.flatnonzero(near)
            if len(rows):
                out[rows] = np.minimum(out[rows], mesh.exact(x[rows]))
            out[~near] = np.minimum(out[~near], mesh.band)
        return out

    def exact_depth(self, x: np.ndarray) -> np.ndarray:
        """(P,) how deep each point lies inside any obstacle (0 outside), exact (no grid)."""
        return np.maximum(-self.clearance(x), 0.0)


def grid_cell(size: float, cells_per_size: float) -> float:
    """The grid spacing for an object of ``size`` (m)."""
    return size / cells_per_size if size > 0 and math.isfinite(size) else 1e-3


def scene_obstacles(ground: float | None, colliders, size: float, contact) -> Obstacles:
    """The ground and the colliders (``Collider``: vertices, faces, name) met by an object of
    ``size`` m, with the grid spacing and band of the ``contact`` settings (``ContactSettings``);
    a collider without a face of positive area is a ConditionError."""
    cell = grid_cell(size, contact.cells)
    band = max(contact.band * size, 4.0 * cell)
    meshes = []
    for c in colliders:
        try:
            meshes.append(MeshDistance(c.vertices, c.faces, cell, band, name=c.name))
        except ValueError as err:
            raise ConditionError(f"collider {err}") from None
    return Obstacles(ground, meshes)
