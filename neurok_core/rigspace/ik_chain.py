"""Starts of a rig-space fit for the chains: a rope laid along the target's centre line.

A chain (a rope, a cable: :mod:`.bones`, kind "chain") bends at every one of its bones. Draped
far from its rest, it lies where neither the part search (:mod:`.ik_search`: it turns and
slides whole parts) nor the nearest-point pairs of the local solver can take it: the pairs
fold the rope onto the nearest stretch of the target. What a chain's target looks like is a
tube about a curve, and a rope does not stretch, so its bones belong along that curve at their
own distances from the rope's end. These starts put them there:

1. **The chain's target points.** Target points that the other parts already explain (their
   nearest sample, in the searched state, belongs to another part and lies within
   ``EXPLAINED`` object sizes) are set aside; the rest split into connected pieces of their
   k-nearest-neighbour graph, and each chain that lies off the target (its samples' mean
   distance to it over ``OFF_TARGET``) takes the unused piece whose length is nearest its own.
2. **The centre line** of a piece: the geodesic distances over its graph from one end (the
   point farthest from any point, twice: the graph's diameter) order its points; the means
   of ``BINS`` bins of that distance, between the two ends, are the curve.
3. **The bones.** The bone at a share u of the chain's rest length goes to the point at the
   share u of the curve's length, its rest direction turned onto the curve's tangent there
   (parallel transport from bone to bone, so that the chain does not twist), once from each
   end of the curve.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components, dijkstra
from scipy.spatial import cKDTree

EXPLAINED = 0.02  # object sizes: a target point this near another part's sample is that part's
OFF_TARGET = 0.02  # object sizes: a chain whose samples lie this far off (mean) is re-laid
NEIGHBOURS = 8
BINS = 48
MIN_PIECE = 16  # target points of a piece, at least


def _turn_onto(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(3, 3) the least rotation taking unit a (3,) onto unit b (3,)."""
    v = np.cross(a, b)
    c = float(np.dot(a, b))
    s = float(np.linalg.norm(v))
    if s < 1e-12:
        if c > 0:
            return np.eye(3)
        # half a turn about any axis normal to a
        axis = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
        axis /= np.linalg.norm(axis)
        return 2.0 * np.outer(axis, axis) - np.eye(3)
    k = np.array([[0, -v[2], v[1]], [v[2], 0, -v[0]], [-v[1], v[0], 0]])
    return np.eye(3) + k + k @ k * ((1.0 - c) / s**2)


def _graph(points: np.ndarray) -> sparse.csr_matrix:
    k = min(NEIGHBOURS + 1, len(points))
    dist, idx = cKDTree(points).query(points, k)
    rows = np.repeat(np.arange(len(points)), k - 1)
    g = sparse.csr_matrix(
        (dist[:, 1:].reshape(-1), (rows, idx[:, 1:].reshape(-1))), shape=(len(points),) * 2
    )
    return g.maximum(g.T)


def pieces(points: np.ndarray) -> list[np.ndarray]:
    """The connected pieces of ``points`` (M, 3) in their k-nearest-neighbour graph, as index
    arrays, largest first, those of under ``MIN_PIECE`` points left out."""
    if len(points) < MIN_PIECE:
        return []
    _, label = connected_components(_graph(points), directed=False)
    out = [np.flatnonzero(label == c) for c in np.unique(label)]
    return sorted((p for p in out if len(p) >= MIN_PIECE), key=len, reverse=True)


def centre_line(points: np.ndarray) -> np.ndarray:
    """(C, 3) the centre line of a tube's surface points (M, 3) (module docstring, 2), from one
    end to the other."""
    graph = _graph(points)
    far = dijkstra(graph, indices=0)
    a = int(np.argmax(np.where(np.isfinite(far), far, -1.0)))
    along = dijkstra(graph, indices=a)
    along = np.where(np.isfinite(along), along, np.nan)
    b = int(np.nanargmax(along))
    edges = np.linspace(0.0, along[b], BINS + 1)
    bins = np.clip(np.searchsorted(edges, along, side="right") - 1, 0, BINS - 1)
    line = [points[a]]
    for i in range(BINS):
        mine = (bins == i) & np.isfinite(along)
        if mine.any():
            line.append(points[mine].mean(0))
    line.append(points[b])
    return np.asarray(line)


def _at(line: np.ndarray, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Points (n, 3) and unit tangents (n, 3) at the shares (n,) of the polyline's length."""
    seg = np.linalg.norm(np.diff(line, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    total = max(s[-1], 1e-12)
    pos = np.stack([np.interp(share * total, s, line[:, i]) for i in range(3)], 1)
    h = 0.5 / max(len(share), 1)
    ahead = np.stack(
        [np.interp(np.minimum(share + h, 1) * total, s, line[:, i]) for i in range(3)], 1
    )
    back = np.stack(
        [np.interp(np.maximum(share - h, 0) * total, s, line[:, i]) for i in range(3)], 1
    )
    tangent = ahead - back
    tangent /= np.maximum(np.linalg.norm(tangent, axis=1, keepdims=True), 1e-12)
    return pos, tangent


def lay_chain(share: np.ndarray, axis: np.ndarray, line: np.ndarray) -> tuple:
    """(rot (n, 3, 3), centre (n, 3)) of a chain's bones at the shares (n,) of its rest length
    (from the end where its rest direction ``axis`` (3,) starts) laid along ``line`` (C, 3)
    (module docstring, 3)."""
    pos, tangent = _at(line, np.clip(share, 0.0, 1.0))
    rot = np.empty((len(share), 3, 3))
    prev_dir, prev_rot = axis, np.eye(3)
    for b in np.argsort(share):  # parallel transport from the first bone
        if np.linalg.norm(tangent[b]) < 0.5:  # a collapsed stretch of the line: no turn
            rot[b] = prev_rot
            continue
        turn = _turn_onto(prev_dir, tangent[b])
        rot[b] = turn @ prev_rot
        prev_dir, prev_rot = tangent[b], rot[b]
    return rot, pos


def _shares(space, part: int, bones: np.ndarray) -> np.ndarray:
    """(n,) where the ``bones`` of a chain sit along it, as shares of its rest length."""
    info = space.layout.part_info[part]
    along = (space.vertices[info.vertices] - info.centre) @ info.axes[0]
    heads = (space.heads[bones] - info.centre) @ info.axes[0]
    lo, hi = along.min(), along.max()
    return (heads - lo) / max(hi - lo, 1e-12)


def chain_starts(fit, rot: np.ndarray, centre: np.ndarray, target) -> list[tuple]:
    """[(name, rot, centre)]: the searched state (rot (B, 3, 3), centre (B, 3)) with its chains
    that lie off the ``target`` laid along the target's centre lines, once from each end
    (module docstring); empty when no chain lies off the target."""
    space = fit.space
    info = space.layout.part_info
    chains = [p for p, part in enumerate(info) if part.kind == "chain"]
    if not chains:
        return []
    x = fit.samples.positions(rot, centre)  # (P, 3)
    near, _ = target.tree.query(x)
    off = [p for p in chains if (fit.sample_parts == p).any()]
    off = [p for p in off if float(near[fit.sample_parts == p].mean()) > OFF_TARGET]
    if not off:
        return []
    others = ~np.isin(fit.sample_parts, off)
    free = np.ones(len(target.points), dtype=bool)
    if others.any():
        d, _ = cKDTree(x[others]).query(target.points)
        free = d > EXPLAINED
    points = target.points[free]
    found = [centre_line(points[i]) for i in pieces(points)]  # each piece's line, once
    lines = {}
    for p in sorted(off, key=lambda p: -info[p].extents[0]):
        if not found:
            break
        k = int(np.argmin([abs(_length(line) - info[p].extents[0]) for line in found]))
        lines[p] = found.pop(k)
    if not lines:
        return []
    out = []
    for name, flip in (("chain", False), ("chain reversed", True)):
        r, c = rot.copy(), centre.copy()
        for p, line in lines.items():
            own = np.flatnonzero(space.bone_parts == p)
            share = _shares(space, p, own)
            r[own], c[own] = lay_chain(share, info[p].axes[0], line[::-1] if flip else line)
        out.append((name, r, c))
    return out


def _length(line: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(line, axis=0), axis=1).sum())
