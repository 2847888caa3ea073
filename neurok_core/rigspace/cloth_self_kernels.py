"""Compiled loops of a cloth's contact with itself (:mod:`.cloth_self`).

Each candidate pair of the barrier (a node and a triangle, or two edges: its four nodes as
``nodes`` (P, 4) int64, as ``SelfContact._nodes``) needs a few dozen flops: its nodes' relative
motion since it was found, then maybe its exact distance. In numpy each of those is a pass
over all the pairs with arrays in between, and a cloth's few thousand pairs a call cost
milliseconds where the arithmetic is microseconds; here each pair is one pass of a loop,
the pairs that cannot be near are left before their distance is taken, and conservative
advancement follows each pair on its own.

Distances (as ``cloth_self``'s module docstring): a point to a triangle (its closest point:
``triangle_kernels.closest_weights``), its gradient n on the point and
-beta_i n on the corners; two segments (the closest points' parameters s, t clamped to
[0, 1], s taken again for the clamped t; parallel segments: s = 0 first), gradient (1 - s) n,
s n, -(1 - t) n, -t n. ``kind`` 0: node-triangle pairs, 1: edge-edge pairs.

Shapes: x, dx (n, 3) float64 metres; nodes (P, 4) int64; found (P,) float64.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..triangle_kernels import closest_weights, dot3, sub3

TINY = 1e-300


@njit(cache=True)
def _at(x, dx, t, i):
    """Node ``i`` of the state x + t dx, as a tuple."""
    return (x[i, 0] + t * dx[i, 0], x[i, 1] + t * dx[i, 1], x[i, 2] + t * dx[i, 2])


@njit(cache=True)
def _segment_params(p0, p1, q0, q1):
    """(s, t): the parameters of the closest points p0 + s (p1 - p0), q0 + t (q1 - q0)."""
    u, v, w0 = sub3(p1, p0), sub3(q1, q0), sub3(p0, q0)
    a, b, c = dot3(u, u), dot3(u, v), dot3(v, v)
    d, e = dot3(u, w0), dot3(v, w0)
    den = a * c - b * b
    s = 0.0
    if den > 1e-12 * max(a * c, TINY):
        s = min(max((b * e - c * d) / den, 0.0), 1.0)
    t = min(max((b * s + e) / c, 0.0), 1.0) if c > 0.0 else 0.0
    s = min(max((b * t - d) / a, 0.0), 1.0) if a > 0.0 else 0.0
    return s, t


@njit(cache=True)
def _pair(kind, x, dx, t, i, j, k, m):
    """(d, n (3,), w (4,)) of the pair of nodes i, j, k, m at x + t dx: its distance, the
    unit direction between its closest points and the weights of n on each node."""
    p0, p1, p2, p3 = _at(x, dx, t, i), _at(x, dx, t, j), _at(x, dx, t, k), _at(x, dx, t, m)
    if kind == 0:
        ba, bb, bc, _ = closest_weights(p0, p1, p2, p3)
        gap = (
            p0[0] - (ba * p1[0] + bb * p2[0] + bc * p3[0]),
            p0[1] - (ba * p1[1] + bb * p2[1] + bc * p3[1]),
            p0[2] - (ba * p1[2] + bb * p2[2] + bc * p3[2]),
        )
        w = (1.0, -ba, -bb, -bc)
    else:
        s, u = _segment_params(p0, p1, p2, p3)
        gap = (
            (1.0 - s) * p0[0] + s * p1[0] - ((1.0 - u) * p2[0] + u * p3[0]),
            (1.0 - s) * p0[1] + s * p1[1] - ((1.0 - u) * p2[1] + u * p3[1]),
            (1.0 - s) * p0[2] + s * p1[2] - ((1.0 - u) * p2[2] + u * p3[2]),
        )
        w = (1.0 - s, s, u - 1.0, -u)
    d = math.sqrt(dot3(gap, gap))
    inv = 1.0 / max(d, TINY)
    return d, (gap[0] * inv, gap[1] * inv, gap[2] * inv), w


@njit(cache=True)
def _motion(kind, delta, i, j, k, m):
    """How much the distance of the pair (nodes i, j, k, m) may change when its nodes move
    by ``delta`` (n, 3): the largest relative motion of a point of one element and a point
    of the other (of the node and a corner, of an end of one edge and an end of the other)."""
    best = 0.0
    if kind == 0:
        for c in (j, k, m):
            r0, r1, r2 = (
                delta[c, 0] - delta[i, 0],
                delta[c, 1] - delta[i, 1],
                delta[c, 2] - delta[i, 2],
            )
            best = max(best, r0 * r0 + r1 * r1 + r2 * r2)
    else:
        for a in (k, m):
            for b in (i, j):
                r0, r1, r2 = (
                    delta[a, 0] - delta[b, 0],
                    delta[a, 1] - delta[b, 1],
                    delta[a, 2] - delta[b, 2],
                )
                best = max(best, r0 * r0 + r1 * r1 + r2 * r2)
    return math.sqrt(best)


@njit(cache=True)
def distances(kind, nodes, x):
    """(P,) the distances of the pairs ``nodes`` at ``x``."""
    out = np.empty(len(nodes))
    for p in range(len(nodes)):
        out[p] = _pair(kind, x, x, 0.0, nodes[p, 0], nodes[p, 1], nodes[p, 2], nodes[p, 3])[0]
    return out


@njit(cache=True)
def geometry(kind, nodes, x):
    """(d (P,), n (P, 3), w (P, 4)) of the pairs ``nodes`` at ``x``: each distance, unit
    direction and the weights of n on its four nodes (the distance's gradient)."""
    count = len(nodes)
    d, n, w = np.empty(count), np.empty((count, 3)), np.empty((count, 4))
    for p in range(count):
        dp, np_, wp = _pair(kind, x, x, 0.0, nodes[p, 0], nodes[p, 1], nodes[p, 2], nodes[p, 3])
        d[p] = dp
        for c in range(3):
            n[p, c] = np_[c]
        for c in range(4):
            w[p, c] = wp[c]
    return d, n, w


@njit(cache=True)
def near(kind, nodes, found, x, shift, below, cutoff):
    """The pairs under ``below`` apart at ``x``: (index (R,) into ``nodes``, d (R,), n (R, 3),
    w (R, 4)), of the candidates ``nodes`` found ``found`` apart before their nodes moved by
    ``shift`` (n, 3): a pair found ``cutoff`` or more apart (no node moved enough to bring
    it under ``below``), or whose own nodes' relative motion cannot, is left without its
    distance taken."""
    count = len(nodes)
    idx, d, n, w = (
        np.empty(count, np.int64),
        np.empty(count),
        np.empty((count, 3)),
        np.empty((count, 4)),
    )
    r = 0
    for p in range(count):
        if found[p] >= cutoff:
            continue
        i, j, k, m = nodes[p, 0], nodes[p, 1], nodes[p, 2], nodes[p, 3]
        if found[p] - _motion(kind, shift, i, j, k, m) >= below:
            continue
        dp, np_, wp = _pair(kind, x, x, 0.0, i, j, k, m)
        if dp >= below:
            continue
        idx[r], d[r] = p, dp
        for c in range(3):
            n[r, c] = np_[c]
        for c in range(4):
            w[r, c] = wp[c]
        r += 1
    return idx[:r].copy(), d[:r].copy(), n[:r].copy(), w[:r].copy()


@njit(cache=True)
def advance(kind, nodes, found, x, dx, moved, t_max, eta, rounds, cutoff):
    """Conservative advancement (``SelfContact.max_step``): the largest t <= ``t_max`` such
    that along x + s dx, 0 <= s <= t, every pair of ``nodes`` stays at least ``eta`` of its
    distance at x apart. ``found``: each pair's distance where it was found, before its nodes
    moved by ``moved`` (n, 3) to ``x``; a pair closes by at most rel ds (rel its nodes'
    largest relative displacement along ``dx``), so its t may grow by 0.9 of the distance
    left over rel, repeated up to ``rounds`` times (then the step ends where it got). Pairs
    found ``cutoff`` or more apart cannot reach their floor and are not followed."""
    for p in range(len(nodes)):
        if found[p] >= cutoff:
            continue
        i, j, k, m = nodes[p, 0], nodes[p, 1], nodes[p, 2], nodes[p, 3]
        rel = max(_motion(kind, dx, i, j, k, m), TINY)
        off = _motion(kind, moved, i, j, k, m)
        # its distance at x is within ``off`` of ``found``: far ones cannot reach their floor
        if found[p] - off - rel * t_max >= eta * (found[p] + off):
            continue
        d = _pair(kind, x, dx, 0.0, i, j, k, m)[0]
        floor = eta * d
        if d - rel * t_max >= floor:
            continue
        t = 0.0
        for _ in range(rounds):
            grow = 0.9 * max(d - floor, 0.0) / rel
            if t + grow >= t_max:  # no closer than its floor up to t_max
                break
            if grow <= 1e-6 * t_max:  # at its floor: the step ends there
                t_max = min(t_max, t)
                break
            t += grow
            d = _pair(kind, x, dx, t, i, j, k, m)[0]
            if d - rel * (t_max - t) >= floor:  # cannot reach its floor any more
                break
        else:
            t_max = min(t_max, t)
    return t_max


@njit(cache=True)
def _spheres(x, elems):
    """(centres (M, 3), radii (M,)): each element's (a triangle's, an edge's) corners' mean and
    the largest distance of a corner from it."""
    m, k = elems.shape
    centre, radius = np.zeros((m, 3)), np.zeros(m)
    for e in range(m):
        for c in range(3):
            total = 0.0
            for a in range(k):
                total += x[elems[e, a], c]
            centre[e, c] = total / k
        best = 0.0
        for a in range(k):
            r0 = x[elems[e, a], 0] - centre[e, 0]
            r1 = x[elems[e, a], 1] - centre[e, 1]
            r2 = x[elems[e, a], 2] - centre[e, 2]
            best = max(best, r0 * r0 + r1 * r1 + r2 * r2)
        radius[e] = math.sqrt(best)
    return centre, radius


@njit(cache=True)
def _cells(points, cell, lo, dims):
    """(order (M,), starts (C + 1,)): ``points`` sorted by their cell of a grid of ``dims``
    cells of side ``cell`` from ``lo``, and where each cell's run starts."""
    m = len(points)
    key = np.empty(m, np.int64)
    for p in range(m):
        c0 = min(int((points[p, 0] - lo[0]) / cell), dims[0] - 1)
        c1 = min(int((points[p, 1] - lo[1]) / cell), dims[1] - 1)
        c2 = min(int((points[p, 2] - lo[2]) / cell), dims[2] - 1)
        key[p] = (c0 * dims[1] + c1) * dims[2] + c2
    order = np.argsort(key, kind="mergesort")
    starts = np.zeros(dims[0] * dims[1] * dims[2] + 1, np.int64)
    for p in range(m):
        starts[key[p] + 1] += 1
    for c in range(1, len(starts)):
        starts[c] += starts[c - 1]
    return order, starts


@njit(cache=True)
def candidates(kind, x, elems, within, apart):
    """(pairs (P, 2) int64, nodes (P, 4) int64, d (P,)): the pairs closer than ``within``
    at ``x`` of a node and a triangle ``elems`` (F, 3) it is no corner of (``kind`` 0; pairs
    (node, triangle), nodes the node and the corners), or of two edges ``elems`` (E, 2) with
    no node in common (1; pairs (e, f), e < f; nodes one edge's ends, then the other's),
    none whose key (node F + triangle, or e E + f) is among the sorted ``apart``. A uniform
    grid of the elements' centres, its cells as wide as ``within`` plus the largest
    element's reach (no pair that near lies more than one cell apart), finds them."""
    for i in range(len(x)):  # a grid over a non-finite box would be unbounded
        if not (np.isfinite(x[i, 0]) and np.isfinite(x[i, 1]) and np.isfinite(x[i, 2])):
            raise ValueError("a cloth node's position is not finite")
    centre, radius = _spheres(x, elems)
    m = len(elems)
    reach = radius.max() if m else 0.0
    cell = max(within + (1.0 if kind == 0 else 2.0) * reach, 1e-12)
    lo, hi = np.empty(3), np.empty(3)
    for c in range(3):
        lo[c] = min(x[:, c].min(), centre[:, c].min() if m else x[:, c].min())
        hi[c] = max(x[:, c].max(), centre[:, c].max() if m else x[:, c].max())
    dims = np.empty(3, np.int64)
    # at most about 8 cells an element (a flat or long cloth: few in its boxes; counted in
    # floats: pieces far apart would overflow an integer count)
    while ((hi[0] - lo[0]) / cell + 1) * ((hi[1] - lo[1]) / cell + 1) * (
        (hi[2] - lo[2]) / cell + 1
    ) > 8 * m + 64:
        cell *= 1.5
    for c in range(3):
        dims[c] = int((hi[c] - lo[c]) / cell) + 1
    order, starts = _cells(centre, cell, lo, dims)
    queries = x if kind == 0 else centre
    # each query's run of ``apart`` (its keys q m + e are contiguous, sorted)
    first = np.searchsorted(apart, np.arange(len(queries) + 1) * m)
    out = np.empty((max(16, 4 * len(queries)), 2), np.int64)
    quad = np.empty((len(out), 4), np.int64)
    dist = np.empty(len(out))
    r = 0
    for q in range(len(queries)):
        c0 = int((queries[q, 0] - lo[0]) / cell)
        c1 = int((queries[q, 1] - lo[1]) / cell)
        c2 = int((queries[q, 2] - lo[2]) / cell)
        for a in range(max(c0 - 1, 0), min(c0 + 2, dims[0])):
            for b in range(max(c1 - 1, 0), min(c1 + 2, dims[1])):
                for c in range(max(c2 - 1, 0), min(c2 + 2, dims[2])):
                    key = (a * dims[1] + b) * dims[2] + c
                    for s in range(starts[key], starts[key + 1]):
                        e = order[s]
                        if kind == 0:
                            i, j, k, l = q, elems[e, 0], elems[e, 1], elems[e, 2]
                            if q == j or q == k or q == l:
                                continue
                        else:
                            if e <= q:
                                continue
                            i, j, k, l = elems[q, 0], elems[q, 1], elems[e, 0], elems[e, 1]
                            if i == k or i == l or j == k or j == l:
                                continue
                        g0 = queries[q, 0] - centre[e, 0]
                        g1 = queries[q, 1] - centre[e, 1]
                        g2 = queries[q, 2] - centre[e, 2]
                        spread = within + radius[e] + (radius[q] if kind == 1 else 0.0)
                        if g0 * g0 + g1 * g1 + g2 * g2 > spread * spread:
                            continue
                        d = _pair(kind, x, x, 0.0, i, j, k, l)[0]
                        if d >= within:
                            continue
                        pair_key = q * m + e
                        left = False  # among this query's keys of ``apart``
                        for slot in range(first[q], first[q + 1]):
                            if apart[slot] == pair_key:
                                left = True
                                break
                        if left:
                            continue
                        if r == len(out):
                            grown = np.empty((2 * len(out), 2), np.int64)
                            grown[:r] = out
                            out = grown
                            longer = np.empty(2 * len(dist))
                            longer[:r] = dist
                            dist = longer
                            wider = np.empty((2 * len(quad), 4), np.int64)
                            wider[:r] = quad
                            quad = wider
                        out[r, 0], out[r, 1], dist[r] = q, e, d
                        quad[r, 0], quad[r, 1], quad[r, 2], quad[r, 3] = i, j, k, l
                        r += 1
    return out[:r].copy(), quad[:r].copy(), dist[:r].copy()


@njit(cache=True)
def spread(state, ref):
    """The largest distance of a node of ``state`` (n, 3) from its place in ``ref``, less the
    nodes' mean shift."""
    n = len(state)
    mean = np.zeros(3)
    for i in range(n):
        for c in range(3):
            mean[c] += state[i, c] - ref[i, c]
    mean /= max(n, 1)
    best = 0.0
    for i in range(n):
        r0 = state[i, 0] - ref[i, 0] - mean[0]
        r1 = state[i, 1] - ref[i, 1] - mean[1]
        r2 = state[i, 2] - ref[i, 2] - mean[2]
        best = max(best, r0 * r0 + r1 * r1 + r2 * r2)
    return math.sqrt(best)


@njit(cache=True)
def rigid_fit(ref, state):
    """``ref`` (n, 3) moved rigidly as near ``state`` (n, 3) as it goes (least squares: the
    Kabsch rotation about the centroids, Umeyama's sign correction)."""
    n = len(ref)
    mr, ms = np.zeros(3), np.zeros(3)
    for i in range(n):
        for c in range(3):
            mr[c] += ref[i, c]
            ms[c] += state[i, c]
    mr /= max(n, 1)
    ms /= max(n, 1)
    h = np.zeros((3, 3))  # sum (ref - mr)(state - ms)^T
    for i in range(n):
        for a in range(3):
            for b in range(3):
                h[a, b] += (ref[i, a] - mr[a]) * (state[i, b] - ms[b])
    u, _, vt = np.linalg.svd(h)
    rot = vt.T @ u.T
    if np.linalg.det(rot) < 0.0:  # a reflection: the proper rotation nearest
        fix = np.eye(3)
        fix[2, 2] = -1.0
        rot = vt.T @ fix @ u.T
    out = np.empty((n, 3))
    for i in range(n):
        for a in range(3):
            out[i, a] = ms[a]
            for b in range(3):
                out[i, a] += rot[a, b] * (ref[i, b] - mr[b])
    return out
