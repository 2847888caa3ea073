"""Mesh geometry of the engine: validation, triangulation, normalisation, surface sampling, kNN.

Positions are float64 (N, 3) and indices int64 unless stated. ``Normalization`` and ``locate``
also take torch tensors (duck typed: this module imports torch only when it is handed a tensor), so
the same code serves the numpy data pipeline and the differentiable engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from .errors import MeshError

# A face is degenerate when twice its area is below this fraction of its longest squared edge
# (its corners are collinear or coincide to within ~1e-12 of its size).
DEGENERATE_RTOL = 1e-12


def _is_tensor(x: Any) -> bool:
    """True for a torch tensor, without importing torch."""
    return hasattr(x, "new_tensor") and hasattr(x, "detach")


# --------------------------------------------------------------------------------------------
# Validation


def _as_vertices(vertices: Any) -> np.ndarray:
    try:
        v = np.array(vertices, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise MeshError(f"vertices must be numbers of shape (N, 3): {exc}") from exc
    if v.size == 0:
        raise MeshError("the mesh has no vertices; select a mesh object with geometry")
    if v.ndim != 2 or v.shape[1] != 3:
        raise MeshError(f"vertices must have shape (N, 3), got {v.shape}")
    bad = ~np.isfinite(v).all(axis=1)
    if bad.any():
        raise MeshError(
            f"{int(bad.sum())} vertices have NaN or infinite coordinates (first: vertex"
            f" {int(np.argmax(bad))}); fix or delete them before simulating"
        )
    return v


def _as_faces(faces: Any, num_vertices: int) -> np.ndarray:
    try:
        f = np.asarray(faces)
    except (TypeError, ValueError) as exc:
        raise MeshError(
            "faces must be an (F, 3) array of vertex indices; triangulate n-gons first"
            f" (geometry.triangulate_polygons): {exc}"
        ) from exc
    if f.size == 0:
        raise MeshError("the mesh has no faces; a point cloud or edges-only mesh cannot be used")
    if f.ndim != 2 or f.shape[1] != 3:
        raise MeshError(
            f"faces must be triangles of shape (F, 3), got {f.shape}; triangulate quads and"
            " n-gons first (geometry.triangulate_polygons)"
        )
    if f.dtype.kind == "f":
        if not (np.isfinite(f).all() and (f == np.round(f)).all()):
            raise MeshError("face indices must be whole numbers, got non-integer values")
    elif f.dtype.kind not in "iu":
        raise MeshError(f"face indices must be integers, got dtype {f.dtype}")
    f = f.astype(np.int64)
    if f.min() < 0 or f.max() >= num_vertices:
        raise MeshError(
            f"face indices must lie in [0, {num_vertices}) for {num_vertices} vertices, got"
            f" values in [{int(f.min())}, {int(f.max())}]"
        )
    return f


def degenerate_faces(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Mask of faces that repeat a vertex or have (numerically) zero area.

    vertices: (N, 3) float; faces: (F, 3) int. Returns (F,) bool.
    Zero area: |(b - a) x (c - a)| <= DEGENERATE_RTOL * (longest edge)^2.
    """
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    repeated = (f[:, 0] == f[:, 1]) | (f[:, 1] == f[:, 2]) | (f[:, 0] == f[:, 2])
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]  # (F, 3) each
    twice_area = np.linalg.norm(np.cross(b - a, c - a), axis=1)  # (F,)
    longest_sq = np.maximum.reduce(
        [((b - a) ** 2).sum(1), ((c - b) ** 2).sum(1), ((a - c) ** 2).sum(1)]
    )  # (F,)
    return repeated | (twice_area <= DEGENERATE_RTOL * longest_sq)


def validate_mesh(vertices: Any, faces: Any) -> tuple[np.ndarray, np.ndarray]:
    """Check a triangle mesh and return it as (vertices float64 (N, 3), faces int64 (F', 3)).

    Degenerate faces (repeated index or zero area, see ``degenerate_faces``) are dropped; vertices
    are never removed or reordered, so results map 1:1 onto the caller's vertices. Loose parts and
    unreferenced vertices are allowed. Raises ``MeshError`` for: no vertices, no faces, wrong
    shapes, NaN/inf coordinates, non-integer or out-of-range indices, a zero-size object, or a
    mesh whose faces are all degenerate.
    """
    v = _as_vertices(vertices)
    f = _as_faces(faces, len(v))
    referenced = np.zeros(len(v), dtype=bool)
    referenced[f.reshape(-1)] = True
    used = v[referenced]  # (U, 3)
    extent = float((used.max(0) - used.min(0)).max())
    if not extent > 0.0:
        raise MeshError(
            "the object has zero size (all face corners lie at one point); check its scale"
        )
    keep = ~degenerate_faces(v, f)
    if not keep.any():
        raise MeshError(
            f"all {len(f)} faces are degenerate (zero area or a repeated vertex); the mesh has"
            " no surface: merge by distance or rebuild it"
        )
    return v, f[keep]


# --------------------------------------------------------------------------------------------
# Triangulation


def triangulate_polygons(polygons: Any, vertices: Any) -> np.ndarray:
    """Triangulate polygons given as a sequence of vertex-index sequences.

    polygons: P index sequences (triangles, quads, n-gons; non-convex, non-planar allowed).
    vertices: (N, 3). Returns (sum(len - 2), 3) int64 triangles, those of polygon 0 first, each
    wound like its polygon. See ``triangulate_loops`` for the rules.
    """
    if isinstance(polygons, np.ndarray) and polygons.ndim == 2:
        totals = np.full(len(polygons), polygons.shape[1], dtype=np.int64)
        flat = polygons.reshape(-1)
    else:
        totals = np.array([len(p) for p in polygons], dtype=np.int64)
        flat = np.array(list(chain.from_iterable(polygons)))
    if len(totals) == 0:
        raise MeshError("no polygons to triangulate")
    if flat.dtype.kind not in "iu":
        raise MeshError(f"polygon vertex indices must be integers, got dtype {flat.dtype}")
    starts = np.cumsum(totals) - totals  # (P,)
    return triangulate_loops(flat, starts, totals, vertices)


def triangulate_loops(
    loop_vertex_indices: Any, loop_starts: Any, loop_totals: Any, vertices: Any
) -> np.ndarray:
    """Triangulate polygons stored as Blender stores them (flat loops).

    loop_vertex_indices: (L,) int, ``mesh.loops[i].vertex_index``.
    loop_starts, loop_totals: (P,) int, ``mesh.polygons[p].loop_start`` / ``.loop_total``.
    vertices: (N, 3).
    Returns (sum(loop_totals - 2), 3) int64; polygon p's triangles occupy rows
    ``cumsum(totals - 2)[p] - (totals[p] - 2)`` onward (``np.repeat(arange(P), totals - 2)`` maps
    rows to polygons). Triangles pass through; quads split along the shorter diagonal; n-gons are
    ear-clipped in their best-fit plane (Newell normal), with a fan for what ear clipping cannot
    resolve. Tris and quads are vectorised; only n-gons are looped over.
    """
    v = _as_vertices(vertices)
    loops = np.asarray(loop_vertex_indices).astype(np.int64, copy=False).reshape(-1)
    starts = np.asarray(loop_starts).astype(np.int64, copy=False).reshape(-1)
    totals = np.asarray(loop_totals).astype(np.int64, copy=False).reshape(-1)
    if len(starts) != len(totals):
        raise MeshError(f"{len(starts)} loop starts but {len(totals)} loop totals")
    if len(totals) == 0:
        raise MeshError("no polygons to triangulate")
    if totals.min() < 3:
        raise MeshError(
            f"polygon {int(np.argmin(totals))} has {int(totals.min())} corners; every face needs"
            " at least 3 (delete loose edges)"
        )
    if starts.min() < 0 or (starts + totals).max() > len(loops):
        raise MeshError(f"polygon loops run outside the {len(loops)} loop indices")
    if len(loops) and (loops.min() < 0 or loops.max() >= len(v)):
        raise MeshError(f"polygon vertex indices must lie in [0, {len(v)})")

    counts = totals - 2  # (P,) triangles per polygon
    offsets = np.cumsum(counts) - counts  # (P,) first output row of each polygon
    out = np.empty((int(counts.sum()), 3), dtype=np.int64)

    tri = totals == 3
    out[offsets[tri]] = loops[starts[tri, None] + np.arange(3)]

    quad = totals == 4
    q = loops[starts[quad, None] + np.arange(4)]  # (Q, 4)
    p = v[q]  # (Q, 4, 3)
    use_02 = ((p[:, 0] - p[:, 2]) ** 2).sum(1) <= ((p[:, 1] - p[:, 3]) ** 2).sum(1)  # (Q,)
    out[offsets[quad]] = np.where(use_02[:, None], q[:, [0, 1, 2]], q[:, [0, 1, 3]])
    out[offsets[quad] + 1] = np.where(use_02[:, None], q[:, [0, 2, 3]], q[:, [1, 2, 3]])

    for i in np.flatnonzero(totals > 4):
        poly = loops[starts[i] : starts[i] + totals[i]]  # (n,)
        out[offsets[i] : offsets[i] + counts[i]] = poly[_ear_clip(v[poly])]
    return out


def newell_normal(points: np.ndarray) -> np.ndarray:
    """Vector area of a closed polygon, (n, 3) -> (3,): 1/2 sum_i (p_i - c) x (p_{i+1} - c).

    Its direction is the polygon's best-fit plane normal (Newell's method; Sutherland et al.,
    "A characterization of ten hidden-surface algorithms", 1974), wound like the polygon.
    """
    d = points - points.mean(0)  # (n, 3)
    return 0.5 * np.cross(d, np.roll(d, -1, axis=0)).sum(0)


def _cross2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _fan(order: list[int]) -> list[tuple[int, int, int]]:
    return [(order[0], order[i], order[i + 1]) for i in range(1, len(order) - 1)]


def _ear_clip(points: np.ndarray) -> np.ndarray:
    """Ear-clip one polygon, (n, 3) -> (n - 2, 3) local corner indices wound like the polygon.

    Projects onto the plane of the Newell normal (where the polygon winds counter-clockwise),
    repeatedly clips the best-shaped ear (a strictly convex corner whose triangle contains no
    other non-convex corner), and fans whatever remains when no ear is left (self-intersecting
    or collinear leftovers).
    """
    n = len(points)
    normal = newell_normal(points)
    extent_sq = float(((points.max(0) - points.min(0)) ** 2).sum())
    eps = 1e-12 * extent_sq
    norm = float(np.linalg.norm(normal))
    if not norm > eps:
        return np.array(_fan(list(range(n))), dtype=np.int64)
    normal = normal / norm
    helper = np.eye(3)[int(np.argmin(np.abs(normal)))]
    u = np.cross(normal, helper)
    u /= np.linalg.norm(u)
    w = np.cross(normal, u)  # u x w = normal, so the polygon is counter-clockwise in (u, w)
    xy = (points - points.mean(0)) @ np.stack([u, w], axis=1)  # (n, 2)

    remaining = list(range(n))
    triangles: list[tuple[int, int, int]] = []
    while len(remaining) > 3:
        r = np.asarray(remaining)
        m = len(r)
        cur = xy[r]  # (m, 2)
        prev, nxt = np.roll(cur, 1, axis=0), np.roll(cur, -1, axis=0)  # (m, 2)
        turn = _cross2(cur - prev, nxt - cur)  # (m,) twice the ear's signed area
        convex = turn > eps
        cand = np.flatnonzero(convex)  # (C,)
        blockers = np.flatnonzero(~convex)  # (B,)
        if len(cand) == 0:
            break
        if len(blockers):
            a, b, c = prev[cand, None], cur[cand, None], nxt[cand, None]  # (C, 1, 2)
            q = cur[None, blockers]  # (1, B, 2)
            inside = (
                (_cross2(b - a, q - a) >= -eps)
                & (_cross2(c - b, q - b) >= -eps)
                & (_cross2(a - c, q - c) >= -eps)
            )  # (C, B)
            corner = (
                (blockers[None] == cand[:, None])
                | (blockers[None] == (cand[:, None] - 1) % m)
                | (blockers[None] == (cand[:, None] + 1) % m)
            )  # (C, B) a triangle's own corners do not block it
            cand = cand[~(inside & ~corner).any(axis=1)]
            if len(cand) == 0:
                break
        edges_sq = (
            ((cur[cand] - prev[cand]) ** 2).sum(1)
            + ((nxt[cand] - cur[cand]) ** 2).sum(1)
            + ((prev[cand] - nxt[cand]) ** 2).sum(1)
        )  # (C,)
        k = int(cand[np.argmax(turn[cand] / edges_sq)])
        triangles.append((int(r[k - 1]), int(r[k]), int(r[(k + 1) % m])))
        del remaining[k]
    triangles.extend(_fan(remaining))
    return np.array(triangles, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# Normalisation


@dataclass(frozen=True, eq=False)
class Normalization:
    """The frame of design section 6: x' = (x - center) * scale.

    center: (3,) float64, the bounding-box centre of the rest mesh.
    scale: float, 1 / (longest side of that box), so the normalised box's longest side is 1.
    """

    center: np.ndarray
    scale: float

    def __post_init__(self) -> None:
        center = np.array(self.center, dtype=np.float64)
        if center.shape != (3,) or not np.isfinite(center).all():
            raise MeshError(f"normalization center must be 3 finite numbers, got {self.center!r}")
        scale = float(self.scale)
        if not (np.isfinite(scale) and scale > 0.0):
            raise MeshError(f"normalization scale must be finite and positive, got {self.scale!r}")
        center.flags.writeable = False
        object.__setattr__(self, "center", center)
        object.__setattr__(self, "scale", scale)

    @classmethod
    def from_vertices(cls, vertices: Any) -> Normalization:
        """Centre of the bounding box of ``vertices`` (..., 3); scale 1 / its longest side."""
        v = np.asarray(_numpy(vertices), dtype=np.float64).reshape(-1, 3)  # (N, 3)
        if len(v) == 0 or not np.isfinite(v).all():
            raise MeshError("cannot normalise: the vertices are empty or not finite")
        lo, hi = v.min(0), v.max(0)
        size = float((hi - lo).max())
        if not size > 0.0:
            raise MeshError("cannot normalise a zero-size object (all vertices at one point)")
        return cls(center=0.5 * (lo + hi), scale=1.0 / size)

    @property
    def size(self) -> float:
        """Longest side of the original bounding box (the unit of the normalised frame)."""
        return 1.0 / self.scale

    def apply(self, points: Any) -> Any:
        """(..., 3) original -> normalised, numpy (float64 result) or torch (same dtype/device)."""
        if _is_tensor(points):
            return (points - points.new_tensor(self.center.tolist())) * self.scale
        return (np.asarray(points, dtype=np.float64) - self.center) * self.scale

    def invert(self, points: Any) -> Any:
        """(..., 3) normalised -> original; the inverse of ``apply``."""
        if _is_tensor(points):
            return points / self.scale + points.new_tensor(self.center.tolist())
        return np.asarray(points, dtype=np.float64) / self.scale + self.center

    def to_dict(self) -> dict[str, Any]:
        return {"center": [float(c) for c in self.center], "scale": self.scale}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Normalization:
        try:
            return cls(center=data["center"], scale=data["scale"])
        except (KeyError, TypeError) as exc:
            raise MeshError(f"a normalization needs 'center' and 'scale', got {data!r}") from exc


# --------------------------------------------------------------------------------------------
# Areas and normals


def _numpy(x: Any) -> Any:
    """A torch tensor as a numpy array (detached, on the CPU); anything else unchanged."""
    return x.detach().cpu().numpy() if _is_tensor(x) else x


def face_cross(vertices: Any, faces: Any) -> np.ndarray:
    """(N, 3), (F, 3) -> (F, 3) (b - a) x (c - a): twice each triangle's area along its normal."""
    v = np.asarray(_numpy(vertices), dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    a = v[f[:, 0]]
    return cross3(v[f[:, 1]] - a, v[f[:, 2]] - a)  # (F, 3)


def cross3(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cross products of (..., 3) arrays: ``np.cross``'s values, without its generic
    axis handling (about 14x faster on a million rows)."""
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]
    out[..., 1] = a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2]
    out[..., 2] = a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]
    return out


def face_areas(vertices: Any, faces: Any) -> np.ndarray:
    """(N, 3), (F, 3) -> (F,) triangle areas 1/2 |(b - a) x (c - a)|."""
    return 0.5 * np.linalg.norm(face_cross(vertices, faces), axis=1)


def face_normals(vertices: Any, faces: Any) -> np.ndarray:
    """(N, 3), (F, 3) -> (F, 3) unit normals (right-hand rule on a, b, c); zero if degenerate."""
    cross = face_cross(vertices, faces)
    norm = np.linalg.norm(cross, axis=1, keepdims=True)  # (F, 1)
    return np.divide(cross, norm, out=np.zeros_like(cross), where=norm > 0)


def vertex_areas(vertices: Any, faces: Any) -> np.ndarray:
    """(N, 3), (F, 3) -> (N,): one third of the area of each adjacent triangle (lumped mass)."""
    f = np.asarray(faces, dtype=np.int64)
    third = np.repeat(face_areas(vertices, f) / 3.0, 3)  # (3F,)
    return np.bincount(f.reshape(-1), weights=third, minlength=len(vertices))


# --------------------------------------------------------------------------------------------
# Surface sampling


@dataclass(frozen=True, eq=False)
class SurfaceSamples:
    """Material points on a triangle mesh, valid on every frame of a shared-topology sequence.

    face_ids: (P,) int64 triangle of each point; barycentrics: (P, 3) float64 weights of its
    corners (non-negative, summing to 1).
    """

    face_ids: np.ndarray
    barycentrics: np.ndarray

    def __len__(self) -> int:
        return len(self.face_ids)


def sample_surface(
    vertices: Any,
    faces: Any,
    count: int,
    rng: np.random.Generator,
    *,
    areas: np.ndarray | None = None,
) -> SurfaceSamples:
    """Draw ``count`` points uniformly by area on the surface of (vertices (N, 3), faces (F, 3)).

    A face is chosen with probability area / total area; inside it, with r1, r2 ~ U(0, 1) and
    s = sqrt(r1), the barycentrics (1 - s, s (1 - r2), s r2) are uniform over the triangle
    (Osada et al., "Shape distributions", ACM TOG 2002, eq. 1). ``areas``: the faces' areas
    (F,) when the caller has them (``face_areas``).
    """
    count = int(count)
    if count < 1:
        raise MeshError(f"sample count must be at least 1, got {count}")
    if areas is None:
        areas = face_areas(vertices, faces)  # (F,)
    cdf = np.cumsum(areas)  # (F,)
    if len(cdf) == 0 or not (np.isfinite(cdf[-1]) and cdf[-1] > 0.0):
        raise MeshError("cannot sample a surface with zero or non-finite total area")
    face_ids = np.searchsorted(cdf, rng.random(count) * cdf[-1], side="right")  # (P,)
    face_ids = np.minimum(face_ids, len(cdf) - 1).astype(np.int64)
    s = np.sqrt(rng.random(count))  # (P,)
    r2 = rng.random(count)  # (P,)
    bary = np.stack([1.0 - s, s * (1.0 - r2), s * r2], axis=1)  # (P, 3)
    return SurfaceSamples(face_ids=face_ids, barycentrics=bary)


def locate(vertices: Any, faces: Any, samples: SurfaceSamples) -> Any:
    """Positions of ``samples`` on a frame: sum_c bary[:, c] * vertices[faces[face_ids, c]].

    vertices: (N, 3) or (T, N, 3), numpy or torch (differentiable, same dtype/device).
    faces: (F, 3) the topology the samples were drawn on. Returns (P, 3) or (T, P, 3).
    """
    corners = np.asarray(_numpy(faces), dtype=np.int64)[samples.face_ids]  # (P, 3)
    bary = samples.barycentrics  # (P, 3)
    if _is_tensor(vertices):
        import torch  # the caller already uses torch; keeps the module import torch-free

        corners = torch.as_tensor(corners, device=vertices.device)
        bary = vertices.new_tensor(bary)
    else:
        vertices = np.asarray(vertices, dtype=np.float64)
    return (
        bary[:, 0:1] * vertices[..., corners[:, 0], :]
        + bary[:, 1:2] * vertices[..., corners[:, 1], :]
        + bary[:, 2:3] * vertices[..., corners[:, 2], :]
    )  # (..., P, 3)


def sample_surface_points(
    vertices: Any, faces: Any, count: int, rng: np.random.Generator
) -> np.ndarray:
    """``count`` area-uniform surface points, (P, 3) (``sample_surface`` + ``locate``).

    float64 numpy for numpy vertices; for a torch tensor, a differentiable tensor like it.
    """
    return locate(vertices, faces, sample_surface(vertices, faces, count, rng))


# --------------------------------------------------------------------------------------------
# Point sets


def as_points(points: Any, what: str = "points") -> np.ndarray:
    """A non-empty, finite (M, 3) float64 point set, or ``MeshError`` naming it ``what``."""
    p = np.asarray(_numpy(points), dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3 or len(p) == 0:
        raise MeshError(f"{what} must be a non-empty (M, 3) array, got shape {p.shape}")
    if not np.isfinite(p).all():
        raise MeshError(f"{what} contain NaN or infinite coordinates")
    return p


def nearest_neighbors(points: Any, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest ``points`` (M, 3) of each query (Q, 3), closest first.

    Returns (distances (Q, k) float64 Euclidean, indices (Q, k) int64 into ``points``), also for
    k = 1. Uses a k-d tree (scipy cKDTree) on all cores.
    """
    p = as_points(points, "points")
    qs = np.asarray(queries, dtype=np.float64)
    if qs.ndim != 2 or qs.shape[1] != 3:
        raise MeshError(f"queries must have shape (Q, 3), got {qs.shape}")
    k = int(k)
    if not 1 <= k <= len(p):
        raise MeshError(f"k must lie in [1, {len(p)}] for {len(p)} points, got {k}")
    dist, idx = cKDTree(p).query(qs, k=k, workers=-1)
    return dist.reshape(len(qs), k), idx.reshape(len(qs), k).astype(np.int64)


def vertex_islands(vertices: Any, faces: Any, *, weld: float = 1e-6) -> np.ndarray:
    """Labels (N,) int64 of the mesh's islands: the connected components of its faces, with
    vertices at most ``weld`` x the longest side of the faces' bounding box apart counted as one
    (so a mesh whose faces do not share vertices, as many exported files are, is not split into
    triangles, nor one whose seams carry float noise). A vertex in no face is an island of its
    own unless it lies on another vertex. Parts that share coincident seam vertices (a lid whose
    hinge edge duplicates the base's) are one island."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    v = np.asarray(_numpy(vertices), dtype=np.float64)
    f = np.asarray(_numpy(faces), dtype=np.int64).reshape(-1, 3)
    n = len(v)
    edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]]])  # (E, 2): a face's third edge adds nothing
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    if count == 1 or not n:  # one piece: nothing to weld
        return labels.astype(np.int64)
    referenced = np.zeros(n, dtype=bool)
    referenced[f.reshape(-1)] = True
    used = v[referenced] if referenced.any() else v  # a stray vertex does not widen the tolerance
    extent = float(np.ptp(used, axis=0).max()) if len(used) else 0.0
    close = cKDTree(v).query_pairs(weld * extent, output_type="ndarray").astype(np.int64)
    if not len(close):
        return labels.astype(np.int64)
    edges = np.concatenate([edges, close])  # (E', 2): vertices to weld too
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    return connected_components(graph, directed=False)[1].astype(np.int64)


def farthest_point_subsample(points: Any, count: int, rng: np.random.Generator) -> np.ndarray:
    """Indices (count,) int64 of well-spread ``points`` (M, 3) by greedy farthest-point sampling.

    Starts at a random point, then repeatedly adds the point farthest from those chosen
    (O(count * M): a compiled loop, ``contact_kernels.farthest_points``; in numpy each of the
    count passes was a few array operations, 0.2 s for a 20k-vertex object's contact points).
    """
    p = as_points(points, "points")
    count = int(count)
    if not 1 <= count <= len(p):
        raise MeshError(f"count must lie in [1, {len(p)}] for {len(p)} points, got {count}")
    from .contact_kernels import farthest_points  # here: numba loads in about 1 s

    first = int(rng.integers(len(p)))
    return farthest_points(np.ascontiguousarray(p, dtype=np.float64), first, count)


def edge_keys(faces: Any) -> tuple[np.ndarray, int]:
    """(keys (3F,) int64, n): one integer a n + b (a < b) per edge of each triangle (F, 3),
    face by face in the order (0, 1), (1, 2), (2, 0); n is one more than the largest index.
    Edges keyed so are sorted and counted with a 1-D np.unique (along rows, np.unique sorts
    structured records, 10x slower)."""
    f = np.asarray(faces, dtype=np.int64)
    e = np.sort(np.stack([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]], 1).reshape(-1, 2), 1)
    n = int(e.max()) + 1 if len(e) else 1
    return e[:, 0] * n + e[:, 1], n


def unique_edges(faces: Any) -> np.ndarray:
    """Undirected edges of triangles (F, 3) -> (E, 2) int64, each once, smaller index first,
    sorted by the first index, then the second."""
    keys, n = edge_keys(faces)
    key = np.unique(keys)
    return np.stack([key // n, key % n], 1)
