"""Bones of an object from its geometry (design section 12, "Choosing bones").

Every loose part gets at least one bone, and bones never blend across parts:

- a **closed solid** is rigid (one bone at its centre of area) unless it is slender (its longest
  side at least ``ROPE_SLENDERNESS`` times its second: a rope, a cable: a chain of bones along
  it) or the user asked for an elastic object (stiffness > 0 on an object of one part: bones
  spread through it, so that it can bend and squash; in an object of several parts the
  stiffness acts on its joints and the parts stay rigid);
- an **open sheet** (cloth: edges with one face) gets a grid of bones over its area;
- not yet: a part made of two wide pieces joined by a seam of shared vertices (a laptop welded
  at its hinge) is one rigid part here; it needs a bone boundary at the seam.

Weights within a part are normalised Gaussians of the distance to the part's bone heads
(sigma = ``SIGMA_SHARE`` x the heads' spacing), each vertex keeping its ``MAX_INFLUENCES``
heaviest bones. Pinned vertices are handled by :mod:`~neurok_core.rigspace.pins`.

Shapes: vertices (N, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ..geometry import farthest_point_subsample, vertex_areas

ROPE_SLENDERNESS = 15.0  # longest / second side of a closed part from which it bends like a rope
MAX_CHAIN_BONES = 16  # bones along a rope or an elastic beam
SHEET_BONES_PER_SIDE = 5  # bones along a sheet's longest side (fewer along the other)
MAX_SHEET_BONES = 36
ELASTIC_BONES = 8  # bones spread through a compact elastic solid
MAX_INFLUENCES = 4  # bones per vertex
SIGMA_SHARE = 0.6  # Gaussian width of the weights, a share of the bones' spacing
SOUP_SHARE = 0.5  # face-components sharing this share of their vertices are one part


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
class BoneLayout:
    """heads: (B, 3) metres; bone_parts: (B,) the part of each bone; vertex_bones / weights:
    (N, K) int64 / float64, rows summing to one over bones of the vertex's own part; parts:
    (N,) int64 part labels; part_info: one :class:`PartInfo` per part."""

    heads: np.ndarray
    bone_parts: np.ndarray
    vertex_bones: np.ndarray
    vertex_weights: np.ndarray
    parts: np.ndarray
    part_info: tuple[PartInfo, ...]


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


def _is_closed(faces: np.ndarray) -> bool:
    """Whether every edge of ``faces`` is shared by exactly two faces (watertight)."""
    if not len(faces):
        return False
    e = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), 1)
    _, counts = np.unique(e, axis=0, return_counts=True)
    return bool((counts == 2).all())


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
    vertices: np.ndarray, faces: np.ndarray, index: np.ndarray, elastic: bool
) -> PartInfo:
    """The :class:`PartInfo` of the part with vertices ``index`` and its ``faces`` (global)."""
    pts = vertices[index]
    areas = vertex_areas(vertices, faces)[index] if len(faces) else np.ones(len(index))
    areas = np.where(areas > 0, areas, areas.max() * 1e-6 + 1e-300)
    centre, axes, extents = _principal(pts, areas)
    closed = _is_closed(faces)
    if not closed and len(faces):
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


def _heads_of(info: PartInfo, vertices: np.ndarray) -> np.ndarray:
    """Bone heads (n, 3) of one part by its kind."""
    pts = vertices[info.vertices]
    e = info.extents
    if info.kind == "rigid":
        return info.centre[None]
    if info.kind == "chain":
        ratio = e[0] / max(e[1], 1e-12)
        n = int(np.clip(round(ratio), 2, MAX_CHAIN_BONES))
        s = (pts - info.centre) @ info.axes[0]
        lo, hi = s.min(), s.max()
        ts = lo + (np.arange(n) + 0.5) * (hi - lo) / n
        return info.centre + ts[:, None] * info.axes[0]
    if info.kind == "sheet":
        n1 = SHEET_BONES_PER_SIDE
        n2 = int(np.clip(round(n1 * e[1] / max(e[0], 1e-12)), 1, n1))
        count = min(n1 * n2, MAX_SHEET_BONES, len(pts))
    else:
        count = min(ELASTIC_BONES, len(pts))
    chosen = farthest_point_subsample(pts, count, np.random.default_rng(0))
    # bone heads away from the rim: each head is the mean of the vertices nearest it
    heads = pts[chosen]
    for _ in range(4):  # a few Lloyd iterations spread the heads by area
        _, owner = cKDTree(heads).query(pts)
        for b in range(len(heads)):
            mine = owner == b
            if mine.any():
                heads[b] = pts[mine].mean(0)
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


def geometric_bones(vertices: np.ndarray, faces: np.ndarray, *, elastic: bool) -> BoneLayout:
    """Bones and weights of a mesh from its geometry (module docstring)."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    parts = loose_parts(vertices, faces)
    face_part = parts[faces[:, 0]] if len(faces) else np.zeros(0, dtype=np.int64)
    n = len(vertices)
    infos, heads, bone_parts = [], [], []
    vertex_bones = np.zeros((n, MAX_INFLUENCES), dtype=np.int64)
    vertex_weights = np.zeros((n, MAX_INFLUENCES))
    count = int(parts.max()) + 1 if n else 0
    elastic = elastic and count == 1
    for p in range(count):
        index = np.flatnonzero(parts == p)
        info = classify_part(vertices, faces[face_part == p], index, elastic)
        infos.append(info)
        h = _heads_of(info, vertices)
        offset = sum(len(x) for x in heads)
        idx, w = part_weights(vertices[index], h)
        vertex_bones[index, : idx.shape[1]] = idx + offset
        vertex_bones[index, idx.shape[1] :] = idx[:, :1] + offset
        vertex_weights[index, : w.shape[1]] = w
        heads.append(h)
        bone_parts.append(np.full(len(h), p, dtype=np.int64))
    return BoneLayout(
        np.concatenate(heads),
        np.concatenate(bone_parts),
        vertex_bones,
        vertex_weights,
        parts,
        tuple(infos),
    )
