"""Bones of an object from its geometry (design section 12, "Choosing bones").

Every loose part gets at least one bone, and bones never blend across parts:

- a **closed solid** is rigid (one bone at its centre of area) unless it is slender (its longest
  side at least ``ROPE_SLENDERNESS`` times its second: a rope, a cable: a chain of bones along
  it) or the user asked for an elastic object (stiffness > 0 on an object of one part: bones
  spread through it, so that it can bend and squash; in an object of several parts the
  stiffness acts on its joints and the parts stay rigid);
- an **open sheet** (cloth: edges with one face, nearly flat: ``neurok_core.sheets.flatness``)
  gets a grid of bones over its area; an open shell with bulk is a solid's surface, as above;
- a closed part that **bends at a boundary** (:func:`bend_segments`: two wide solid pieces
  joined along a seam of shared vertices, a laptop welded at its hinge, or along a sharp
  concave crease) is split there into segments, each a part of its own with its own bones;
  the vertices on the boundary blend the bones of the segments around them (``BoneLayout.seams``
  names them, for the joints).

Weights within a part are normalised Gaussians of the distance to the part's bone heads
(sigma = ``SIGMA_SHARE`` x the heads' spacing), each vertex keeping its ``MAX_INFLUENCES``
heaviest bones. Pinned vertices are handled by :mod:`~neurok_core.rigspace.pins`.

Shapes: vertices (N, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh
from scipy.sparse import coo_matrix, diags
from scipy.sparse.csgraph import breadth_first_order, connected_components, dijkstra, maximum_flow
from scipy.sparse.linalg import eigsh
from scipy.spatial import cKDTree

from ..geometry import cross3, edge_keys, face_cross, farthest_point_subsample
from ..sheets import FLAT, flatness

ROPE_SLENDERNESS = 15.0  # longest / second side of a closed part from which it bends like a rope
MAX_CHAIN_BONES = 16  # bones along a rope or an elastic beam
SHEET_BONES_PER_SIDE = 5  # bones along a sheet's longest side (fewer along the other)
MAX_SHEET_BONES = 36
ELASTIC_BONES = 8  # bones spread through a compact elastic solid
MAX_INFLUENCES = 4  # bones per vertex
MIN_BONE_VERTICES = 6  # a bending part gets at most one bone per this many of its vertices
SIGMA_SHARE = 0.6  # Gaussian width of the weights, a share of the bones' spacing
SOUP_SHARE = 0.5  # face-components sharing this share of their vertices are one part
# bend boundaries (bend_segments)
CREASE_BEND = (20.0, 50.0)  # degrees: a concave edge bent this much starts / fully is a crease
CREASE_GATE = 0.1  # creases shorter than this x sqrt(area) in all: the part is not searched
MIN_SHARE = 0.2  # each side of a boundary has at least this share of the two sides' area
MIN_VOLUME_SHARE = 0.1  # ... and of their volume (a piece of the solid, not a patch of it)
THIN = 0.8  # the solid's section at a boundary at most this x (smaller side's volume)^(2/3)
CUT_RATIO = 2.0  # the cut's length off creases at most this x sqrt(the smaller side's area)
CREASE_SHARE = 0.3  # share of the cut's length that runs along creases, at least
FAR_SHARE = 0.05  # an edge this x sqrt(area) from the creases weighs twice its length in a cut
MAX_SEGMENTS = 8  # segments per part
COARSE_FACES = 3000  # above this, the spectral cut is computed on about COARSE_CLUSTERS patches
COARSE_CLUSTERS = 1000


@dataclass(frozen=True)
class PartInfo:
    """One loose part: its vertex indices, kind ("rigid", "chain", "sheet", "elastic"),
    whether it is watertight, its extents along its principal axes (descending, metres) and
    those axes (3, 3) (rows), its area-weighted centre."""

    vertices: np.ndarray
    kind: str
    closed: bool
    extents: np.ndarray
    axes: np.ndarray
    centre: np.ndarray


@dataclass(frozen=True)
class Seam:
    """The boundary between two segments ``part_a`` < ``part_b`` of one loose part: the
    ``vertices`` (S,) int64 shared by faces of both."""

    part_a: int
    part_b: int
    vertices: np.ndarray


@dataclass(frozen=True)
class BoneLayout:
    """heads: (B, 3) metres; bone_parts: (B,) the part of each bone; vertex_bones / weights:
    (N, K) int64 / float64, rows summing to one over bones of the vertex's own part (or, on a
    seam, of the segments around it); parts: (N,) int64 part labels (loose parts, or their
    segments where they bend: a seam vertex takes the segment with most of its faces' area);
    part_info: one :class:`PartInfo` per part; face_parts: (F,) int64 the part of each face;
    seams: the boundaries between segments of one loose part."""

    heads: np.ndarray
    bone_parts: np.ndarray
    vertex_bones: np.ndarray
    vertex_weights: np.ndarray
    parts: np.ndarray
    part_info: tuple[PartInfo, ...]
    face_parts: np.ndarray | None = None
    seams: tuple[Seam, ...] = ()

    def part_of_faces(self, faces: np.ndarray) -> np.ndarray:
        """(F,) int64 the part of each face: ``face_parts``, or where the layout has none,
        the part of each face's first vertex (no seams: a face's vertices share a part)."""
        if self.face_parts is not None:
            return self.face_parts
        return self.parts[faces[:, 0]] if len(faces) else np.zeros(0, dtype=np.int64)


def loose_parts(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Part labels (N,) int64: components connected by faces; components that share most of
    their vertices' positions (a triangle soup, a mesh exported with split normals) are one;
    components touching only along a seam (a lid's hinge edge coinciding with the base's) stay
    apart. A vertex in no face joins the part of the nearest referenced vertex."""
    n = len(vertices)
    edges = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]]])
    graph = coo_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    extent = float(np.ptp(vertices, axis=0).max()) if n else 0.0
    pairs = cKDTree(vertices).query_pairs(1e-7 * max(extent, 1e-12), output_type="ndarray")
    if len(pairs):
        a, b = labels[pairs[:, 0]], labels[pairs[:, 1]]
        cross = a != b
        if cross.any():
            sizes = np.bincount(labels, minlength=count)
            # shared vertices per pair of components, against the smaller one's size
            key = np.minimum(a[cross], b[cross]) * count + np.maximum(a[cross], b[cross])
            uniq, shared = np.unique(key, return_counts=True)
            ca, cb = uniq // count, uniq % count
            merge = shared >= SOUP_SHARE * np.minimum(sizes[ca], sizes[cb])
            if merge.any():
                g = coo_matrix(
                    (np.ones(int(merge.sum())), (ca[merge], cb[merge])), shape=(count, count)
                )
                _, relabel = connected_components(g, directed=False)
                labels = relabel[labels]
    referenced = np.zeros(n, dtype=bool)
    referenced[faces.reshape(-1)] = True
    if not referenced.all() and referenced.any():
        stray = np.flatnonzero(~referenced)
        _, near = cKDTree(vertices[referenced]).query(vertices[stray])
        labels[stray] = labels[np.flatnonzero(referenced)[near]]
    _, labels = np.unique(labels, return_inverse=True)
    return labels.astype(np.int64)


def _edge_counts(faces: np.ndarray) -> np.ndarray:
    """How many of ``faces`` (F, 3) share each of their edges (E,)."""
    return np.unique(edge_keys(faces)[0], return_counts=True)[1]


def _is_closed(faces: np.ndarray, counts: np.ndarray | None = None) -> bool:
    """Whether every edge of ``faces`` is shared by exactly two faces (watertight); ``counts``:
    their :func:`_edge_counts`, when known."""
    counts = _edge_counts(faces) if counts is None else counts
    return bool(len(faces)) and bool((counts == 2).all())


def _principal(points: np.ndarray, weights: np.ndarray) -> tuple:
    """(centre (3,), axes (3, 3) rows by descending extent, extents (3,))."""
    w = weights / max(weights.sum(), 1e-300)
    centre = w @ points
    d = points - centre
    cov = (d * w[:, None]).T @ d
    _, vecs = np.linalg.eigh(cov)
    axes = vecs[:, ::-1].T  # (3, 3) rows
    proj = d @ axes.T  # (P, 3)
    extents = np.ptp(proj, axis=0) if len(points) else np.zeros(3)
    order = np.argsort(-extents)
    return centre, axes[order], extents[order]


def classify_part(
    vertices: np.ndarray,
    faces: np.ndarray,
    index: np.ndarray,
    elastic: bool,
    closed: bool | None = None,
) -> PartInfo:
    """The :class:`PartInfo` of the part with vertices ``index`` and its ``faces`` (global);
    ``closed`` (None: whether ``faces`` are watertight) says whether it is a solid's surface
    (a segment of a closed part is, though its faces are not closed)."""
    pts = vertices[index]
    areas = _part_areas(vertices, faces, index) if len(faces) else np.ones(len(index))
    areas = np.where(areas > 0, areas, areas.max() * 1e-6 + 1e-300)
    centre, axes, extents = _principal(pts, areas)
    closed = _is_closed(faces) if closed is None else closed
    # an open part is a sheet only when nearly flat (a cloth); an open shell with bulk (a
    # robot's link, a scan missing a face, a bottle without its cap's face) is a solid's
    if not closed and len(faces) and flatness(vertices, faces) >= FLAT:
        kind = "sheet"
    elif extents[0] >= ROPE_SLENDERNESS * max(extents[1], 1e-12):
        kind = "chain"
    elif elastic:
        kind = "chain" if extents[0] >= 3.0 * max(extents[1], 1e-12) else "elastic"
    else:
        kind = "rigid"
    if len(index) < 4:
        kind = "rigid"
    return PartInfo(index, kind, closed, extents, axes, centre)


def _part_areas(vertices: np.ndarray, faces: np.ndarray, index: np.ndarray) -> np.ndarray:
    """(len(index),) ``vertex_areas(vertices, faces)[index]`` (``index`` sorted), in the time
    of the part's own faces rather than of the whole mesh's vertices."""
    third = np.repeat(np.linalg.norm(face_cross(vertices, faces), axis=1) / 6.0, 3)  # (3F,)
    corners = faces.reshape(-1)
    at = np.minimum(np.searchsorted(index, corners), len(index) - 1)
    mine = index[at] == corners  # a face's corner of another part (a seam) is not counted
    return np.bincount(at[mine], weights=third[mine], minlength=len(index))


def _heads_of(info: PartInfo, vertices: np.ndarray, density: float = 1.0) -> np.ndarray:
    """Bone heads (n, 3) of one part by its kind; ``density`` multiplies the bones along each
    side of a part that bends (still at most one per ``MIN_BONE_VERTICES`` vertices)."""
    pts = vertices[info.vertices]
    e = info.extents
    if info.kind == "rigid":
        return info.centre[None]
    # a bone is an affine map fitted by its vertices: one with fewer vertices than a few in
    # each direction it spans is barely held by them (a coarse sheet of a bone per vertex
    # could not be integrated)
    most = max(1, len(pts) // MIN_BONE_VERTICES)
    if info.kind == "chain":
        ratio = e[0] / max(e[1], 1e-12)
        n = int(np.clip(round(ratio * density), 2, round(MAX_CHAIN_BONES * density)))
        n = min(n, most)
        s = (pts - info.centre) @ info.axes[0]
        lo, hi = s.min(), s.max()
        ts = lo + (np.arange(n) + 0.5) * (hi - lo) / n
        return info.centre + ts[:, None] * info.axes[0]
    if info.kind == "sheet":
        n1 = max(1, round(SHEET_BONES_PER_SIDE * density))
        n2 = int(np.clip(round(n1 * e[1] / max(e[0], 1e-12)), 1, n1))
        count = min(n1 * n2, round(MAX_SHEET_BONES * density**2), most)
    else:
        count = min(round(ELASTIC_BONES * density**3), most)
    chosen = farthest_point_subsample(pts, count, np.random.default_rng(0))
    # bone heads away from the rim: each head is the mean of the vertices nearest it
    heads = pts[chosen]
    for _ in range(4):  # a few Lloyd iterations spread the heads by area
        _, owner = cKDTree(heads).query(pts)
        count = np.bincount(owner, minlength=len(heads))
        sums = np.stack([np.bincount(owner, pts[:, k], len(heads)) for k in range(3)], 1)
        held = count > 0
        heads[held] = sums[held] / count[held, None]
    return heads


def part_weights(points: np.ndarray, heads: np.ndarray, k: int = MAX_INFLUENCES) -> tuple:
    """Normalised Gaussian weights of ``points`` (P, 3) on ``heads`` (n, 3): (index (P, k'),
    weights (P, k')) with k' = min(k, n), rows summing to one."""
    n = len(heads)
    kk = min(k, n)
    if n == 1:
        return np.zeros((len(points), 1), dtype=np.int64), np.ones((len(points), 1))
    spacing = float(np.median(cKDTree(heads).query(heads, 2)[0][:, 1]))
    sigma = SIGMA_SHARE * max(spacing, 1e-12)
    dist, index = cKDTree(heads).query(points, kk)
    dist, index = dist.reshape(len(points), kk), index.reshape(len(points), kk)
    logits = -((dist / sigma) ** 2)
    logits -= logits.max(1, keepdims=True)
    w = np.exp(logits)
    w[w < 1e-4 * w.max(1, keepdims=True)] = 0.0
    w /= w.sum(1, keepdims=True)
    return index.astype(np.int64), w


# -- bend boundaries ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Dual:
    """The dual graph of a set of faces (F,): face ``areas`` (F,) and ``centres`` (F, 3); its
    manifold edges (E,) as the pair of faces ``fa``, ``fb`` on them, their ``length`` and their
    ``crease`` in [0, 1] (0: flat or convex, 1: a concave fold of at least ``CREASE_BEND[1]``);
    ``seam_length``: the length of the edges with three faces or more (a weld: no dual edge);
    ``open``: whether some edge has one face only."""

    areas: np.ndarray
    centres: np.ndarray
    fa: np.ndarray
    fb: np.ndarray
    length: np.ndarray
    crease: np.ndarray
    seam_length: float
    open: bool


def _dual(vertices: np.ndarray, faces: np.ndarray) -> _Dual:
    """The :class:`_Dual` of ``faces`` (F, 3) (global vertex indices), outward-oriented."""
    nf = len(faces)
    corner = np.stack([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]], 1).reshape(-1, 2)
    opposite = faces[:, [2, 0, 1]].reshape(-1)  # (3F,) the corner facing each face edge
    owner = np.repeat(np.arange(nf), 3)
    _, edge, count = np.unique(edge_keys(faces)[0], return_inverse=True, return_counts=True)
    edge = edge.reshape(-1)
    per = count[edge]  # (3F,) faces on each incidence's edge
    order = np.argsort(edge, kind="stable")
    pairs = order[per[order] == 2].reshape(-1, 2)  # the two incidences of each manifold edge
    cross = face_cross(vertices, faces)
    double = np.linalg.norm(cross, axis=1)
    normal = cross / np.maximum(double, 1e-300)[:, None]  # (F, 3)
    ia, ib = pairs[:, 0], pairs[:, 1]
    fa, fb = owner[ia], owner[ib]
    a0, a1 = vertices[corner[ia, 0]], vertices[corner[ia, 1]]
    length = np.linalg.norm(a1 - a0, axis=1)
    bend = np.degrees(np.arccos(np.clip((normal[fa] * normal[fb]).sum(1), -1.0, 1.0)))
    # concave: the far corner of one face lies on the outer side of the other's plane
    height = ((vertices[opposite[ib]] - a0) * normal[fa]).sum(1)
    lo, hi = CREASE_BEND
    crease = np.where(height > 1e-9 * length, np.clip((bend - lo) / (hi - lo), 0.0, 1.0), 0.0)
    thick = per >= 3
    seam = float(
        np.linalg.norm(vertices[corner[thick, 1]] - vertices[corner[thick, 0]], axis=1).sum()
    )
    seam /= max(float(per[thick].mean()) if thick.any() else 1.0, 1.0)  # each edge once
    centres = vertices[faces].mean(1)
    return _Dual(0.5 * double, centres, fa, fb, length, crease, seam, bool((per == 1).any()))


def _clusters(a, b, dist, centres, areas) -> np.ndarray:
    """(M,) patch labels of M faces joined by dual edges (a, b) of length ``dist``: each face
    joins its nearest seed along the graph; seeds one per cell of a grid sized for about
    ``COARSE_CLUSTERS`` of them."""
    m = len(centres)
    h = np.sqrt(areas.sum() / COARSE_CLUSTERS)
    cell = np.floor((centres - centres.min(0)) / max(h, 1e-300)).astype(np.int64)  # (M, 3)
    _, seeds = np.unique(cell, axis=0, return_index=True)
    graph = coo_matrix((dist, (a, b)), shape=(m, m)).tocsr()
    _, _, source = dijkstra(
        graph, directed=False, indices=seeds, min_only=True, return_predecessors=True
    )
    lost = source < 0  # faces no seed reaches: patches of their own
    source[lost] = m + np.arange(int(lost.sum()))
    return np.unique(source, return_inverse=True)[1].reshape(-1)


def _fiedler(a, b, w, areas) -> np.ndarray:
    """The Fiedler vector (M,) of the graph of M nodes with edges (a, b) of weights ``w`` and
    node masses ``areas``: the second eigenvector of L x = lambda A x (L = D - W)."""
    m = len(areas)
    graph = coo_matrix((np.r_[w, w], (np.r_[a, b], np.r_[b, a])), shape=(m, m)).tocsr()
    lap = diags(np.asarray(graph.sum(1)).reshape(-1)) - graph
    if m <= 400:
        _, vec = eigh(lap.toarray(), np.diag(areas), subset_by_index=[0, 1])
        return vec[:, 1]
    scale = float(lap.diagonal().sum() / areas.sum())
    start = np.random.default_rng(0).normal(size=m)
    lam, vec = eigsh(lap, k=2, M=diags(areas), sigma=-1e-6 * scale, which="LM", v0=start)
    return vec[:, np.argsort(lam)[1]]


def _bisect(dual: _Dual, sel: np.ndarray) -> np.ndarray | None:
    """A bend boundary through the faces ``sel`` (M,) of ``dual``: the mask (M,) of one side,
    or None. The spectral relaxation of the cut (the Fiedler vector of the faces' graph whose
    edges weigh their length off creases), then the sweep over its order that minimises the
    cut's length off creases over the square root of the smaller side's area, among cuts that
    leave each side ``MIN_SHARE`` of the area and run ``CREASE_SHARE`` along creases."""
    m = len(sel)
    local = np.full(len(dual.areas), -1)
    local[sel] = np.arange(m)
    inside = (local[dual.fa] >= 0) & (local[dual.fb] >= 0)
    a, b = local[dual.fa[inside]], local[dual.fb[inside]]
    length, crease = dual.length[inside], dual.crease[inside]
    areas = dual.areas[sel]
    total = float(areas.sum())
    if m < 8 or (length * crease).sum() < CREASE_GATE * np.sqrt(total):
        return None
    # off creases, an edge weighs more the farther it is from them: a cut closes a crease the
    # shortest way around the solid (a fold's outer corner, not anywhere on the outer face)
    c = dual.centres[sel]
    mid = 0.5 * (c[a] + c[b])
    folds = crease >= 0.5
    far = cKDTree(mid[folds]).query(mid)[0] if folds.any() else np.zeros(len(mid))
    off_weight = length * (1.0 - crease) * (1.0 + far / (FAR_SHARE * np.sqrt(total)))
    w = off_weight + 1e-3 * length
    if m > COARSE_FACES:  # on patches that do not cross creases, then back on the faces
        dist = np.linalg.norm(c[a] - c[b], axis=1) * (1.0 + 100.0 * crease)
        patch = _clusters(a, b, dist, c, areas)
        pa, pb = patch[a], patch[b]
        apart = pa != pb
        count = int(patch.max()) + 1
        value = _fiedler(pa[apart], pb[apart], w[apart], np.bincount(patch, areas, count))
        order = np.lexsort((patch, value[patch]))
    else:
        order = np.argsort(_fiedler(a, b, w, areas), kind="stable")
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m)
    lo, hi = np.minimum(rank[a], rank[b]) + 1, np.maximum(rank[a], rank[b]) + 1

    def cut(values):  # (m - 1,) the sum of ``values`` over the edges cut by each prefix
        d = np.bincount(lo, values, m + 1) - np.bincount(hi, values, m + 1)
        return np.cumsum(d)[1:m]

    off, along, cost = cut(length * (1.0 - crease)), cut(length * crease), cut(off_weight)
    side = np.cumsum(areas[order])[: m - 1]
    small = np.minimum(side, total - side)
    ok = (small >= MIN_SHARE * total) & (along >= CREASE_SHARE * (off + along))
    if not ok.any():
        return None
    score = np.where(ok, cost / np.sqrt(np.maximum(small, 1e-300)), np.inf)
    k = int(np.argmin(score))
    if off[k] > CUT_RATIO * np.sqrt(small[k]):
        return None
    mask = np.zeros(m, dtype=bool)
    mask[order[: k + 1]] = True
    return _tighten(a, b, off_weight + 1e-3 * length, mask, c, far, length)


def _tighten(a, b, weight, side, centres, far, length) -> np.ndarray:
    """The side (M,) bool of a cut moved to the least-weight cut near it: a minimum cut
    (maximum flow) of the faces' graph, with edge ``weight``, over the faces closer to the cut
    than its farthest edge is from the creases (``far``); faces beyond keep their side. A
    spectral cut is only a level set of the Fiedler vector: this lays its stretch off the creases
    along the way the solid is closed shortest."""
    m = len(side)
    cut = side[a] != side[b]
    if not cut.any():
        return side
    reach = float(far[cut].max()) + 3.0 * float(np.median(length))
    rim = np.unique(np.r_[a[cut], b[cut]])
    free = cKDTree(centres[rim]).query(centres, distance_upper_bound=reach)[0] <= reach
    scale = float(2**28 / max(weight.sum(), 1e-300))
    cap = np.ceil(weight * scale).astype(np.int32) + 1
    big = np.int32(2**30)
    src, dst = m, m + 1
    held_a = np.flatnonzero(side & ~free)
    held_b = np.flatnonzero(~side & ~free)
    rows = np.r_[a, b, np.full(len(held_a), src), held_b]
    cols = np.r_[b, a, held_a, np.full(len(held_b), dst)]
    caps = np.r_[cap, cap, np.full(len(held_a) + len(held_b), big, dtype=np.int32)]
    graph = coo_matrix((caps, (rows, cols)), shape=(m + 2, m + 2)).tocsr()
    graph.sum_duplicates()
    flow = maximum_flow(graph, src, dst).flow
    residual = (graph - flow).tocsr()
    residual.data[residual.data < 0] = 0
    residual.eliminate_zeros()
    seen = breadth_first_order(residual, src, directed=True, return_predecessors=False)
    out = np.zeros(m + 2, dtype=bool)
    out[seen] = True
    return out[:m]


def _membership(faces, labels, count):
    """Sparse (V, count) 0/1: which segments' faces (labels (F,)) each vertex belongs to."""
    key = np.unique(faces.reshape(-1) * count + np.repeat(labels, 3))
    ones = np.ones(len(key))
    return coo_matrix((ones, (key // count, key % count)), shape=(int(faces.max()) + 1, count))


def _section(points: np.ndarray) -> float:
    """The area (m^2) of the rectangle that ``points`` (P, 3) span in their own plane (each side
    the 10-90% range of the points along it, stretched by 1.25 to the whole of a uniform
    spread; robust to a few stray points): how wide the solid is where a boundary through these
    points cuts it (0 along a line)."""
    if len(points) < 3:
        return 0.0
    d = points - points.mean(0)
    _, _, vt = np.linalg.svd(d, full_matrices=False)
    lo, hi = np.percentile(d @ vt[:2].T, [10.0, 90.0], axis=0)
    extent = 1.25 * (hi - lo)
    return float(extent[0] * extent[1])


class _Segments:
    """Segments of one part's faces (labels (F,)) with their area, volume (each closed by a fan
    to the centre of its boundary) and which vertices each shares with which."""

    def __init__(self, vertices, faces, labels, areas):
        self.labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
        count = self.count = int(self.labels.max()) + 1
        self.area = np.bincount(self.labels, areas, count)
        member = _membership(faces, self.labels, count)
        self.member = member.tocsc().astype(bool)  # (n, S)
        self.shared = np.asarray((member.T @ member).todense())  # (S, S) vertices in common
        np.fill_diagonal(self.shared, 0)
        on_rim = np.asarray(self.member.sum(1)).reshape(-1) > 1
        self.volume = np.zeros(count)
        for s in range(count):
            f = faces[self.labels == s]
            mine = self.member[:, s].toarray().reshape(-1)
            rim = on_rim & mine
            # (the membership spans the vertices the faces use, not loose ones after them)
            apex = vertices[np.flatnonzero(rim)].mean(0) if rim.any() else vertices[f].mean((0, 1))
            a, b, c = (vertices[f[:, k]] - apex for k in range(3))
            self.volume[s] = abs(float(np.einsum("ij,ij->i", a, cross3(b, c)).sum()) / 6.0)

    def rim(self, a: int, b: int) -> np.ndarray:
        """Vertices shared by segments ``a`` and ``b``."""
        both = self.member[:, a].toarray().reshape(-1) & self.member[:, b].toarray().reshape(-1)
        return np.flatnonzero(both)

    def weak(self, vertices, s: int, n: int) -> bool:
        """Whether segment ``s`` should join its neighbour ``n``: too small against it in area
        or volume, or joined to it where the solid is not thin."""
        area, volume = self.area[[s, n]], self.volume[[s, n]]
        if area[0] < MIN_SHARE * area.sum() or volume[0] < MIN_VOLUME_SHARE * volume.sum():
            return True
        return _section(vertices[self.rim(s, n)]) > THIN * float(volume.min()) ** (2.0 / 3.0)


def bend_segments(
    vertices: np.ndarray, faces: np.ndarray, counts: np.ndarray | None = None
) -> np.ndarray:
    """Segment labels (F,) int64 of the faces (F, 3) of one closed loose part (0 everywhere:
    it does not bend).

    A part bends where two wide pieces of its solid meet where it is thin, along creases: the
    faces' graph joins two faces across each edge they alone share, with the edge's length as
    the weight, a concave crease's edges weighing less the sharper they fold (nothing from
    ``CREASE_BEND[1]``) and an edge of three faces or more (a weld seam, the vertices of a lid's
    hinge edge shared with its base's) joining nothing. Its components are the first segments
    (the smallest joined to their neighbours, :func:`_merge_patches`); each is then cut in two
    where :func:`_bisect` finds a boundary along creases (a spectral cut, then a minimum cut
    near it), up to ``MAX_SEGMENTS``. Last, a segment joins the neighbour it shares most
    vertices with when it has less than ``MIN_SHARE`` of their area or ``MIN_VOLUME_SHARE`` of
    their volume (a patch of the surface bounded by creases: the inside of a cup's bottom), or
    when the solid is not thin where they meet (its section there, :func:`_section`, over
    ``THIN`` x the smaller one's volume^(2/3): a groove round a cylinder, a thick L-shaped
    block). A convex part, a ball, a box, a flat sheet have no crease and no seam: they are one
    segment, at the cost of one pass over their edges (``counts``: their :func:`_edge_counts`,
    when known; an open part is one segment before any other work)."""
    faces = np.asarray(faces, dtype=np.int64)
    labels = np.zeros(len(faces), dtype=np.int64)
    if len(faces) < 8:
        return labels
    if ((_edge_counts(faces) if counts is None else counts) == 1).any():  # open
        return labels
    dual = _dual(vertices, faces)
    creases = float((dual.length * dual.crease).sum()) + dual.seam_length
    if dual.open or creases < CREASE_GATE * np.sqrt(dual.areas.sum()):
        return labels
    joined = dual.crease < 1.0
    graph = coo_matrix(
        (np.ones(int(joined.sum())), (dual.fa[joined], dual.fb[joined])),
        shape=(len(faces), len(faces)),
    )
    count, labels = connected_components(graph, directed=False)
    labels = _merge_patches(faces, labels.astype(np.int64), count, dual.areas)
    count = int(labels.max()) + 1
    queue = list(range(count))
    while queue and count < MAX_SEGMENTS:
        s = queue.pop(0)
        sel = np.flatnonzero(labels == s)
        side = _bisect(dual, sel)
        if side is None:
            continue
        labels[sel[side]] = count
        queue += [s, count]
        count += 1
    return _merge_weak(vertices, faces, labels, dual.areas)


def _merge_patches(faces, labels, count, areas) -> np.ndarray:
    """Components ``labels`` (F,) of a part's faces with each one too small against the
    neighbour it shares most vertices with (less than ``MIN_SHARE`` of their area) joined to
    it, the smallest first, and the smallest joined to their neighbours while there are more
    than ``MAX_SEGMENTS``; renumbered 0.. (one pass, the neighbours updated as they grow)."""
    if count == 1:
        return labels
    area = np.bincount(labels, areas, count)
    member = _membership(faces, labels, count)
    shared = (member.T @ member).tocoo()
    near: list[dict] = [{} for _ in range(count)]
    for a, b, c in zip(shared.row, shared.col, shared.data, strict=True):
        if a != b:
            near[a][b] = c
    owner = np.arange(count)
    alive = count
    heap = [(area[s], s) for s in range(count)]
    heapq.heapify(heap)
    while heap:
        size, s = heapq.heappop(heap)
        if owner[s] != s or size != area[s] or not near[s]:
            continue
        n = max(near[s], key=near[s].get)
        if area[s] >= MIN_SHARE * (area[s] + area[n]) and alive <= MAX_SEGMENTS:
            continue
        owner[s], area[n], alive = n, area[n] + area[s], alive - 1
        for t, c in near[s].items():
            del near[t][s]
            if t != n:
                near[n][t] = near[n].get(t, 0) + c
                near[t][n] = near[t].get(n, 0) + c
        near[s] = {}
        for t in (n, *near[n]):  # their neighbour grew: look at them again
            heapq.heappush(heap, (area[t], t))
    while (owner[owner] != owner).any():
        owner = owner[owner]
    return np.unique(owner[labels], return_inverse=True)[1].reshape(-1)


def _merge_weak(vertices, faces, labels, areas) -> np.ndarray:
    """``labels`` with each segment that is weak against the neighbour it shares most vertices
    with (:meth:`_Segments.weak`) joined to it, the smallest first; renumbered 0.. in order of
    first face."""
    while True:
        seg = _Segments(vertices, faces, labels, areas)
        labels = seg.labels
        if seg.count == 1:
            return labels
        for s in np.argsort(seg.area):
            if not seg.shared[s].any():
                continue
            n = int(np.argmax(seg.shared[s]))
            if seg.weak(vertices, int(s), n):
                labels = np.where(labels == s, n, labels)
                break
        else:
            first = np.unique(labels, return_index=True)[1]
            rank = np.empty(seg.count, dtype=np.int64)
            rank[np.argsort(first)] = np.arange(seg.count)
            return rank[labels]


def _segment_parts(vertices, faces, parts, face_part) -> tuple:
    """Loose parts split where they bend (:func:`bend_segments`): (face segment (F,), vertex
    segment (N,): the segment holding most of a vertex's faces' area, the loose part of each
    segment (S,), whether each loose part is watertight (P,)). Open parts and parts that do
    not bend are one segment, numbered as their loose part would be when nothing bends."""
    face_seg = np.zeros(len(faces), dtype=np.int64)
    loose_of = []
    closed = []
    for p in range(int(parts.max()) + 1 if len(parts) else 0):
        mine = np.flatnonzero(face_part == p)
        counts = _edge_counts(faces[mine]) if len(mine) else np.zeros(0, np.int64)
        closed.append(_is_closed(faces[mine], counts))
        local = bend_segments(vertices, faces[mine], counts) if len(mine) else np.zeros(0, np.int64)
        face_seg[mine] = len(loose_of) + local
        loose_of += [p] * (int(local.max()) + 1 if len(local) else 1)
    vertex_seg = parts.copy()
    loose_of = np.asarray(loose_of, dtype=np.int64)
    if len(loose_of) > int(parts.max()) + 1:  # something bends: vertices by their faces' area
        share = _area_shares(vertices, faces, face_seg, len(loose_of))
        # a vertex in no face keeps its loose part's first segment
        vertex_seg = np.searchsorted(loose_of, np.arange(int(parts.max()) + 1))[parts]
        vertex_seg[faces.reshape(-1)] = np.repeat(face_seg, 3)
        several = np.flatnonzero(np.diff(share.indptr) > 1)
        vertex_seg[several] = share[several].toarray().argmax(1)
    return face_seg, vertex_seg.astype(np.int64), loose_of, np.asarray(closed, dtype=bool)


def _area_shares(vertices, faces, face_seg, count):
    """Sparse (N, count): a third of the area of each vertex's faces in each segment."""
    area = np.repeat(np.linalg.norm(face_cross(vertices, faces), axis=1) / 6.0, 3)
    rows, cols = faces.reshape(-1), np.repeat(face_seg, 3)
    out = coo_matrix((area, (rows, cols)), shape=(len(vertices), count)).tocsr()
    out.sum_duplicates()
    return out


def geometric_bones(
    vertices: np.ndarray,
    faces: np.ndarray,
    *,
    elastic: bool,
    density: float = 1.0,
    kinds: dict | None = None,
) -> BoneLayout:
    """Bones and weights of a mesh from its geometry (module docstring); ``density``: see
    ``_heads_of`` (more bones where a part bends, for a fit to a target's folds); ``kinds``
    {part: kind}: parts whose kind is given (an artist's structure) instead of found."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    loose = loose_parts(vertices, faces)
    loose_face = loose[faces[:, 0]] if len(faces) else np.zeros(0, dtype=np.int64)
    n = len(vertices)
    if len(faces):
        face_part, parts, loose_of, closed = _segment_parts(vertices, faces, loose, loose_face)
    else:
        face_part, parts, loose_of = loose_face, loose, np.unique(loose)
        closed = np.zeros(len(loose_of), dtype=bool)
    infos, heads, bone_parts = [], [], []
    vertex_bones = np.zeros((n, MAX_INFLUENCES), dtype=np.int64)
    vertex_weights = np.zeros((n, MAX_INFLUENCES))
    count = len(loose_of)
    elastic = elastic and count == 1
    bent = np.bincount(loose_of, minlength=int(loose.max()) + 1 if n else 0)[loose_of] > 1
    for p in range(count):
        index = np.flatnonzero(parts == p)
        # a segment of a closed part is a solid's piece; an unbent part is its loose part
        whole = True if bent[p] else bool(closed[loose_of[p]])
        info = classify_part(vertices, faces[face_part == p], index, elastic, whole)
        if kinds and p in kinds and len(index) >= 4:
            info = dataclasses.replace(info, kind=kinds[p])
        infos.append(info)
        h = _heads_of(info, vertices, density)
        offset = sum(len(x) for x in heads)
        idx, w = part_weights(vertices[index], h)
        vertex_bones[index, : idx.shape[1]] = idx + offset
        vertex_bones[index, idx.shape[1] :] = idx[:, :1] + offset
        vertex_weights[index, : w.shape[1]] = w
        heads.append(h)
        bone_parts.append(np.full(len(h), p, dtype=np.int64))
    heads = np.concatenate(heads)
    seams = ()
    if count > len(np.unique(loose)):
        seams = _blend_seams(
            vertices, faces, face_part, heads, bone_parts, vertex_bones, vertex_weights
        )
    return BoneLayout(
        heads,
        np.concatenate(bone_parts),
        vertex_bones,
        vertex_weights,
        parts,
        tuple(infos),
        face_part,
        seams,
    )


def _blend_seams(vertices, faces, face_part, heads, bone_parts, vertex_bones, vertex_weights):
    """Give the vertices shared by segments the blend of their segments' weights, each by its
    share of the vertex's faces' area (in place); return the :class:`Seam` of each pair."""
    count = int(face_part.max()) + 1
    shares = _area_shares(vertices, faces, face_part, count)
    seam = np.flatnonzero(np.diff(shares.indptr) > 1)
    if not len(seam):
        return ()
    share = shares[seam].toarray()  # (V, S)
    on = share > 0
    share /= share.sum(1, keepdims=True)
    bone_parts = np.concatenate(bone_parts)
    blend = np.zeros((len(seam), len(heads)))  # (V, B)
    for s in range(count):
        near = np.flatnonzero(share[:, s] > 0)
        if not len(near):
            continue
        own = np.flatnonzero(bone_parts == s)
        idx, w = part_weights(vertices[seam[near]], heads[own])
        np.add.at(
            blend,
            (np.repeat(near, idx.shape[1]), own[idx].reshape(-1)),
            (w * share[near, s][:, None]).reshape(-1),
        )
    top = np.argsort(-blend, axis=1, kind="stable")[:, :MAX_INFLUENCES]  # (V, K)
    w = np.take_along_axis(blend, top, 1)
    w[w < 1e-4 * w.max(1, keepdims=True)] = 0.0
    w /= w.sum(1, keepdims=True)
    k = top.shape[1]
    vertex_bones[seam, :k] = np.where(w > 0, top, top[:, :1])
    vertex_bones[seam, k:] = top[:, :1]
    vertex_weights[seam, :k] = w
    vertex_weights[seam, k:] = 0.0
    out = []
    for a in range(count):
        for b in range(a + 1, count):
            both = seam[on[:, a] & on[:, b]]
            if len(both):
                out.append(Seam(a, b, both))
    return tuple(out)
