"""Compiled loops (numba), most of them contact geometry: the closest point of a triangle,
each point's nearest triangle among candidate pairs (the obstacles' exact distances and grid
fills, ``dynamics.obstacles``), a distance grid's samples, a moving part's contact points
(``rigspace.contact.PartCull``), a cloth's contact with itself (``rigspace.cloth_self``) and its
step's potential (``rigspace.cloth``), and farthest-point sampling (``geometry``).

In numpy each of these was a pass over thousands of pairs with arrays in between, and a
call cost milliseconds where the arithmetic is microseconds; here each pair is one pass of a
loop. Imported where a run first needs it (numba and the cached machine code load in about a
second), so that the Blender side never imports numba. One file: numba's cache of a function
is kept current by its own file only, so the loops that call each other live together.

**Closest points.** The regions of the triangle's Voronoi diagram, tried in Ericson's order
("Real-Time Collision Detection", 2004, 5.1.5): vertex a, vertex b, edge ab, vertex c, edge ca,
edge bc, the face. Feature codes as ``dynamics.obstacles.closest_on_triangles``: 0 the face,
1-3 the vertices a, b, c, 4 edge ab, 5 edge bc, 6 edge ca.

**A cloth's pairs.** Each candidate pair of its barrier (a node and a triangle, ``kind`` 0, or
two edges, ``kind`` 1; its four nodes as ``nodes`` (P, 4) int64, as ``SelfContact``'s):
its nodes' relative motion since it was found, then maybe its exact distance; the pairs that
cannot be near are left before their distance is taken, and conservative advancement follows
each pair on its own. A point to a triangle: gradient n on the point and -beta_i n on the
corners; two segments (the closest points' parameters s, t clamped to [0, 1], s taken again
for the clamped t; parallel segments: s = 0 first): gradient (1 - s) n, s n, -(1 - t) n, -t n.

Shapes: points, x, dx (n, 3), vertices (V, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

TINY = 1e-300  # a distance below which a direction is not taken


@njit(cache=True)
def sub3(a, b):
    """a - b of two 3-tuples."""
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True)
def dot3(a, b):
    """a . b of two 3-tuples, summed as numpy's einsum sums a row of three here ((x + z) +
    y): the closest points of ``closest_point`` are then numpy's to the bit."""
    return (a[0] * b[0] + a[2] * b[2]) + a[1] * b[1]


@njit(cache=True)
def closest_point(p, a, b, c):
    """(wa, wb, wc, feature, q): the barycentric coordinates of the point q of triangle a, b,
    c (tuples) nearest to ``p``, the feature it lies on (module docstring) and q itself, formed
    as ``closest_on_triangles`` forms it (a + t ab on edge ab, b + t (c - b) on edge bc, a + v
    ab + w ac on the face), to the last bit: a point as near two triangles facing apart
    (where panels of a mesh meet) takes the same one, so the same sign. A triangle of no area
    (its corners on a line, to rounding) takes the nearest point of its three edges: the
    regions' tests need a plane."""
    ab, ac, ap = sub3(b, a), sub3(c, a), sub3(p, a)
    n0 = ab[1] * ac[2] - ab[2] * ac[1]
    n1 = ab[2] * ac[0] - ab[0] * ac[2]
    n2 = ab[0] * ac[1] - ab[1] * ac[0]
    if n0 * n0 + n1 * n1 + n2 * n2 <= 1e-24 * dot3(ab, ab) * dot3(ac, ac):
        wa, wb, wc, feature = _closest_on_edges(p, a, b, c)
        q = (
            wa * a[0] + wb * b[0] + wc * c[0],
            wa * a[1] + wb * b[1] + wc * c[1],
            wa * a[2] + wb * b[2] + wc * c[2],
        )
        return wa, wb, wc, feature, q
    d1, d2 = dot3(ab, ap), dot3(ac, ap)
    if d1 <= 0.0 and d2 <= 0.0:
        return 1.0, 0.0, 0.0, 1, a
    bp = sub3(p, b)
    d3, d4 = dot3(ab, bp), dot3(ac, bp)
    if d3 >= 0.0 and d4 <= d3:
        return 0.0, 1.0, 0.0, 2, b
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        t = d1 / (d1 - d3) if d1 != d3 else 0.0
        return 1.0 - t, t, 0.0, 4, (a[0] + t * ab[0], a[1] + t * ab[1], a[2] + t * ab[2])
    cp = sub3(p, c)
    d5, d6 = dot3(ab, cp), dot3(ac, cp)
    if d6 >= 0.0 and d5 <= d6:
        return 0.0, 0.0, 1.0, 3, c
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        t = d2 / (d2 - d6) if d2 != d6 else 0.0
        return 1.0 - t, 0.0, t, 6, (a[0] + t * ac[0], a[1] + t * ac[1], a[2] + t * ac[2])
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:
        den = (d4 - d3) + (d5 - d6)
        t = (d4 - d3) / den if den != 0.0 else 0.0
        bc = sub3(c, b)
        return 0.0, 1.0 - t, t, 5, (b[0] + t * bc[0], b[1] + t * bc[1], b[2] + t * bc[2])
    den = va + vb + vc
    v, w = vb / den, vc / den
    q = (
        a[0] + v * ab[0] + w * ac[0],
        a[1] + v * ab[1] + w * ac[1],
        a[2] + v * ab[2] + w * ac[2],
    )
    return 1.0 - v - w, v, w, 0, q


@njit(cache=True)
def _on_segment(p, a, b):
    """(t, squared distance): the point a + t (b - a), t in [0, 1], nearest to ``p``."""
    ab, ap = sub3(b, a), sub3(p, a)
    length = dot3(ab, ab)
    t = min(max(dot3(ap, ab) / length, 0.0), 1.0) if length > 0.0 else 0.0
    g0, g1, g2 = ap[0] - t * ab[0], ap[1] - t * ab[1], ap[2] - t * ab[2]
    return t, g0 * g0 + g1 * g1 + g2 * g2


@njit(cache=True)
def _closest_on_edges(p, a, b, c):
    """(wa, wb, wc, feature) of ``closest_point`` for a triangle of no area: the nearest
    point of its edges ab, bc, ca (an end of an edge: that vertex's feature)."""
    t, best = _on_segment(p, a, b)
    out = (1.0 - t, t, 0.0, 1 if t == 0.0 else (2 if t == 1.0 else 4))
    t, d2 = _on_segment(p, b, c)
    if d2 < best:
        best, out = d2, (0.0, 1.0 - t, t, 2 if t == 0.0 else (3 if t == 1.0 else 5))
    t, d2 = _on_segment(p, c, a)
    if d2 < best:
        out = (t, 0.0, 1.0 - t, 3 if t == 0.0 else (1 if t == 1.0 else 6))
    return out


@njit(cache=True)
def nearest_pairs(points, rows, tris, vertices, faces, by_index=False):
    """For each point of ``points``, its nearest among the candidate pairs (point ``rows``
    (K,), triangle ``tris`` (K,)), ties to the first pair (``by_index``: to the lowest
    triangle, in whatever order the pairs come): (squared distance (P,), inf without a pair;
    closest point (P, 3); its triangle (P,); its feature (P,))."""
    n = len(points)
    best_d2 = np.full(n, np.inf)
    best = np.zeros((n, 3))
    best_tri = np.zeros(n, np.int64)
    best_feat = np.zeros(n, np.int64)
    for k in range(len(rows)):
        r, t = rows[k], tris[k]
        p = (points[r, 0], points[r, 1], points[r, 2])
        ia, ib, ic = faces[t, 0], faces[t, 1], faces[t, 2]
        a = (vertices[ia, 0], vertices[ia, 1], vertices[ia, 2])
        b = (vertices[ib, 0], vertices[ib, 1], vertices[ib, 2])
        c = (vertices[ic, 0], vertices[ic, 1], vertices[ic, 2])
        _, _, _, feature, q = closest_point(p, a, b, c)
        q0, q1, q2 = q
        g0, g1, g2 = p[0] - q0, p[1] - q1, p[2] - q2
        d2 = g0 * g0 + g1 * g1 + g2 * g2
        if d2 < best_d2[r] or (by_index and d2 == best_d2[r] and t < best_tri[r]):
            best_d2[r] = d2
            best[r, 0], best[r, 1], best[r, 2] = q0, q1, q2
            best_tri[r], best_feat[r] = t, feature
    return best_d2, best, best_tri, best_feat


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
        ba, bb, bc, _, q = closest_point(p0, p1, p2, p3)
        gap = sub3(p0, q)
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
    best = _larger(_apart2(delta, k, i), _apart2(delta, m, i))
    if kind == 0:
        best = _larger(best, _apart2(delta, j, i))
    else:
        best = _larger(best, _larger(_apart2(delta, k, j), _apart2(delta, m, j)))
    return math.sqrt(best)


@njit(cache=True)
def _apart2(delta, a, b):
    """The squared distance between rows ``a`` and ``b`` of ``delta`` (n, 3)."""
    r0, r1, r2 = delta[a, 0] - delta[b, 0], delta[a, 1] - delta[b, 1], delta[a, 2] - delta[b, 2]
    return r0 * r0 + r1 * r1 + r2 * r2


@njit(cache=True)
def _larger(a, b):
    """max(a, b), NaN where either is (numba's max drops a NaN: a motion that is not finite
    must not read as none)."""
    return a if (a > b or a != a) else b


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
    """(order (M,), cells (U,), runs (U + 1,)): ``points`` sorted by their cell of a grid of
    ``dims`` cells of side ``cell`` from ``lo`` (a cell's key: (i dims[1] + j) dims[2] + k),
    the keys of the cells they occupy, sorted, and where each one's run of ``order`` starts.
    Only occupied cells are kept: pieces far apart cost no empty cells between them."""
    m = len(points)
    key = np.empty(m, np.int64)
    for p in range(m):
        c0 = min(int((points[p, 0] - lo[0]) / cell), dims[0] - 1)
        c1 = min(int((points[p, 1] - lo[1]) / cell), dims[1] - 1)
        c2 = min(int((points[p, 2] - lo[2]) / cell), dims[2] - 1)
        key[p] = (c0 * dims[1] + c1) * dims[2] + c2
    order = np.argsort(key, kind="mergesort")
    cells, runs = np.empty(m, np.int64), np.empty(m + 1, np.int64)
    u = 0
    for s in range(m):
        if s == 0 or key[order[s]] != key[order[s - 1]]:
            cells[u], runs[u] = key[order[s]], s
            u += 1
    runs[u] = m
    return order, cells[:u].copy(), runs[: u + 1].copy()


@njit(cache=True)
def _occupied(cells, table, key):
    """The index of cell ``key`` among the occupied ``cells`` (sorted keys), -1 where it is
    empty: from ``table`` (every cell's index) where there is one, else a binary search."""
    if len(table):
        return table[key]
    u = np.searchsorted(cells, key)
    return u if u < len(cells) and cells[u] == key else -1


@njit(cache=True)
def candidates(kind, x, elems, within, apart):
    """(pairs (P, 2) int64, nodes (P, 4) int64, d (P,)): the pairs closer than ``within``
    at ``x`` of a node and a triangle ``elems`` (F, 3) it is no corner of (``kind`` 0; pairs
    (node, triangle), nodes the node and the corners), or of two edges ``elems`` (E, 2) with
    no node in common (1; pairs (e, f), e < f; nodes one edge's ends, then the other's),
    none whose key (node F + triangle, or e E + f) is among the sorted ``apart``. A uniform
    grid of the elements' centres, its cells as wide as ``within`` plus the largest
    element's reach (no pair that near lies more than one cell apart; only its occupied
    cells kept), finds them."""
    for i in range(len(x)):  # a grid over a non-finite box would be unbounded
        if not (np.isfinite(x[i, 0]) and np.isfinite(x[i, 1]) and np.isfinite(x[i, 2])):
            raise ValueError("a cloth node's position is not finite")
    centre, radius = _spheres(x, elems)
    m = len(elems)
    reach = radius.max() if m else 0.0
    cell = max(within + (1.0 if kind == 0 else 2.0) * reach, 1e-12)
    lo, hi = np.empty(3), np.empty(3)  # the nodes' box holds the elements' centres too
    for c in range(3):
        lo[c], hi[c] = x[:, c].min(), x[:, c].max()
    dims = np.empty(3, np.int64)
    # the cells' keys fit an int64 (counted in floats: pieces far apart would overflow)
    while ((hi[0] - lo[0]) / cell + 1) * ((hi[1] - lo[1]) / cell + 1) * (
        (hi[2] - lo[2]) / cell + 1
    ) > 4e18:
        cell *= 2.0
    for c in range(3):
        dims[c] = int((hi[c] - lo[c]) / cell) + 1
    order, cells, runs = _cells(centre, cell, lo, dims)
    # a table of every cell's run where the grid is small (the usual cloth: one piece), else
    # a search of the occupied cells' keys (pieces far apart: the empty cells between them
    # would be most of a table)
    count = dims[0] * dims[1] * dims[2]
    table = np.full(count if count <= 8 * m + 64 else 0, -1, np.int64)
    if len(table):
        table[cells] = np.arange(len(cells))
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
                    u = _occupied(cells, table, (a * dims[1] + b) * dims[2] + c)
                    if u < 0:
                        continue
                    for s in range(runs[u], runs[u + 1]):
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
        best = _larger(best, r0 * r0 + r1 * r1 + r2 * r2)
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


# -- a distance grid's samples (``dynamics.obstacles.MeshDistance.query``) ----------------------
@njit(cache=True)
def _sample(p0, p1, p2, lo, cell, shape, block, slot_of, store):
    """(known, d, d/dx, d/dy, d/dz) of the lazy grid at one point inside its box, formed as
    ``MeshDistance.query`` forms them in numpy (the same operations in the same order: the
    same bits); ``known`` False where its block or one of its cell's corners is not computed
    yet (the caller fills them)."""
    g0, g1, g2 = (p0 - lo[0]) / cell, (p1 - lo[1]) / cell, (p2 - lo[2]) / cell
    top0, top1, top2 = shape[0] * block - 1, shape[1] * block - 1, shape[2] * block - 1
    c0 = min(max(np.int64(math.floor(g0)), 0), top0)
    c1 = min(max(np.int64(math.floor(g1)), 0), top1)
    c2 = min(max(np.int64(math.floor(g2)), 0), top2)
    b0, b1, b2 = c0 // block, c1 // block, c2 // block
    key = (b0 * shape[1] + b1) * shape[2] + b2
    slot = slot_of[key] if key < len(slot_of) else -1  # no table (a huge grid): unknown
    if slot < 0:
        return False, 0.0, 0.0, 0.0, 0.0
    side = block + 1
    base = ((slot * side + (c0 - b0 * block)) * side + (c1 - b1 * block)) * side
    base += c2 - b2 * block
    # the cell's corners v_ijk (i along x, j along y, k along z); a node not filled is NaN,
    # the others finite (clipped to the band), so one NaN makes their sum NaN
    x1 = side * side
    v000, v001 = store[base], store[base + 1]
    v010, v011 = store[base + side], store[base + side + 1]
    v100, v101 = store[base + x1], store[base + x1 + 1]
    v110, v111 = store[base + x1 + side], store[base + x1 + side + 1]
    if math.isnan(v000 + v001 + v010 + v011 + v100 + v101 + v110 + v111):
        return False, 0.0, 0.0, 0.0, 0.0
    fx, fy, fz = g0 - c0, g1 - c1, g2 - c2
    cx00, cx01 = v000 + fx * (v100 - v000), v001 + fx * (v101 - v001)
    cx10, cx11 = v010 + fx * (v110 - v010), v011 + fx * (v111 - v011)
    dx00, dx01, dx10, dx11 = v100 - v000, v101 - v001, v110 - v010, v111 - v011
    cxy0 = cx00 + fy * (cx10 - cx00)
    cxy1 = cx01 + fy * (cx11 - cx01)
    d = cxy0 + fz * (cxy1 - cxy0)
    dz = cxy1 - cxy0
    dy = (1 - fz) * (cx10 - cx00) + fz * (cx11 - cx01)
    dxy0 = dx00 + fy * (dx10 - dx00)
    dxy1 = dx01 + fy * (dx11 - dx01)
    return True, d, (dxy0 + fz * (dxy1 - dxy0)) / cell, dy / cell, dz / cell


@njit(cache=True)
def grid_sample(points, lo, cell, shape, block, slot_of, store):
    """(d (P,), grad (P, 3), known (P,) bool) of the lazy grid at ``points`` (P, 3) inside its
    box (``_sample``): the grid's blocks indexed by ``slot_of`` (flat block key -> store slot,
    -1: not made yet), its nodes in ``store`` (flat, (block + 1)^3 a slot, NaN: not filled)."""
    n = len(points)
    d = np.zeros(n)
    grad = np.zeros((n, 3))
    known = np.zeros(n, dtype=np.bool_)
    for p in range(n):
        ok, value, gx, gy, gz = _sample(
            points[p, 0], points[p, 1], points[p, 2], lo, cell, shape, block, slot_of, store
        )
        if ok:
            known[p] = True
            d[p] = value
            grad[p, 0], grad[p, 1], grad[p, 2] = gx, gy, gz
    return d, grad, known


# -- a moving part's contact (``rigspace.contact.PartCull``) ------------------------------------
@njit(cache=True)
def _stretch(f):
    """An upper bound of the largest stretch of the 3x3 map ``f``: the square root of F^T F's
    largest absolute row sum (Gershgorin; exactly 1 for a rotation)."""
    best = 0.0
    for i in range(3):
        row = 0.0
        for j in range(3):
            row += abs(f[0, i] * f[0, j] + f[1, i] * f[1, j] + f[2, i] * f[2, j])
        best = max(best, row)
    return math.sqrt(best)


@njit(cache=True)
def _inverse(f, out):
    """``out`` = f^-1 of the 3x3 ``f`` by its cofactors; False where f is singular."""
    c00 = f[1, 1] * f[2, 2] - f[1, 2] * f[2, 1]
    c01 = f[1, 2] * f[2, 0] - f[1, 0] * f[2, 2]
    c02 = f[1, 0] * f[2, 1] - f[1, 1] * f[2, 0]
    det = f[0, 0] * c00 + f[0, 1] * c01 + f[0, 2] * c02
    if det == 0.0 or not math.isfinite(det):
        return False
    out[0, 0], out[1, 0], out[2, 0] = c00 / det, c01 / det, c02 / det
    out[0, 1] = (f[0, 2] * f[2, 1] - f[0, 1] * f[2, 2]) / det
    out[1, 1] = (f[0, 0] * f[2, 2] - f[0, 2] * f[2, 0]) / det
    out[2, 1] = (f[0, 1] * f[2, 0] - f[0, 0] * f[2, 1]) / det
    out[0, 2] = (f[0, 1] * f[1, 2] - f[0, 2] * f[1, 1]) / det
    out[1, 2] = (f[0, 2] * f[1, 0] - f[0, 0] * f[1, 2]) / det
    out[2, 2] = (f[0, 0] * f[1, 1] - f[0, 1] * f[1, 0]) / det
    return True


@njit(cache=True)
def part_nearby(
    qs,
    bone,
    heads,
    centre,
    radius,
    band,
    reach,
    ptr,
    cols,
    vals,
    cluster_of,
    cl_bone,
    cl_centre,
    cl_radius,
    hi,
    lo,
    cell,
    shape,
    block,
    slot_of,
    store,
):
    """The points closer than ``reach`` to a moving rigid part at each of the states ``qs``
    (S, B, 4, 3) (``rigspace.contact``'s docstring): (state (R,), point (R,), d (R,), g (R, 3)
    = F^-T grad sdf, rest point X (R, 3), known (R,), F^-1 (S, 3, 3)), by state, then
    point. Where a grid node is not filled yet, ``known`` is False and d, g are left for the
    caller, who fills the grid (and keeps those closer than ``reach``).

    The part: its bone ``bone``, the bones' heads (B, 3), its rest sphere (``centre``,
    ``radius``) and its grid (its ``band``; its box ``lo``, ``hi``, the band included;
    the rest, ``MeshDistance.table``'s: ``grid_sample``). The points:
    their skinning rows in compressed rows (``ptr`` (P + 1,), ``cols``, ``vals``: row p's
    entries of the flat (4B,) coordinates), each one's cluster (``cluster_of`` (P,); C, past
    the clusters: always queried) and the clusters' bones, rest centres and radii (C,),
    (C, 3), (C,).

    The broad phase of ``PartCull``: a cluster is carried by its bone into the part's rest
    frame and left out where its sphere, scaled by both bones' largest stretches, stays
    farther than ``reach`` from the grid's box; then the narrow phase of
    ``PartObstacle.entries``: a point outside the part's moved sphere (its radius + reach +
    the band), outside the grid's box, or at a state whose F is singular is left out. F^-1
    is the one used here (NaN at a singular state), for the g of the points the caller
    samples itself."""
    n_states, n_points, n_clusters = qs.shape[0], len(cluster_of), len(cl_bone)
    cap = n_states * n_points
    state = np.empty(cap, dtype=np.int64)
    point = np.empty(cap, dtype=np.int64)
    dist = np.empty(cap)
    grad = np.empty((cap, 3))
    rest = np.empty((cap, 3))
    known = np.empty(cap, dtype=np.bool_)
    invs = np.full((n_states, 3, 3), np.nan)
    count = 0
    f = np.empty((3, 3))
    inv = np.empty((3, 3))
    fb = np.empty((3, 3))
    near = np.empty(n_clusters + 1, dtype=np.bool_)
    x = np.empty(3)
    h = heads[bone]
    for s in range(n_states):
        for i in range(3):
            for j in range(3):
                f[i, j] = qs[s, bone, j, i]  # F = Q[b, :3, :]^T
        if not _inverse(f, inv):
            continue
        invs[s] = inv
        c = qs[s, bone, 3]
        scale = _stretch(f)
        shrink = _stretch(inv)
        # the part's moved sphere
        w0, w1, w2 = centre[0] - h[0], centre[1] - h[1], centre[2] - h[2]
        m0 = f[0, 0] * w0 + f[0, 1] * w1 + f[0, 2] * w2 + c[0]
        m1 = f[1, 0] * w0 + f[1, 1] * w1 + f[1, 2] * w2 + c[1]
        m2 = f[2, 0] * w0 + f[2, 1] * w1 + f[2, 2] * w2 + c[2]
        cull = scale * radius + reach + band
        near[n_clusters] = True
        for k in range(n_clusters):
            b = cl_bone[k]
            for i in range(3):
                for j in range(3):
                    fb[i, j] = qs[s, b, j, i]
            # the cluster's rest centre in the part's rest frame: h + F^-1 (F_b (X - h_b) + c_b - c)
            w0 = cl_centre[k, 0] - heads[b, 0]
            w1 = cl_centre[k, 1] - heads[b, 1]
            w2 = cl_centre[k, 2] - heads[b, 2]
            gap2 = 0.0
            for i in range(3):
                y = fb[i, 0] * w0 + fb[i, 1] * w1 + fb[i, 2] * w2 + qs[s, b, 3, i] - c[i]
                x[i] = y
            for i in range(3):
                r = h[i] + inv[i, 0] * x[0] + inv[i, 1] * x[1] + inv[i, 2] * x[2]
                out = max(max(lo[i] - r, r - hi[i]), 0.0)
                gap2 += out * out
            bound = (_stretch(fb) * cl_radius[k] + reach) * shrink
            near[k] = math.sqrt(gap2) <= bound
        for p in range(n_points):
            if not near[cluster_of[p]]:
                continue
            x[0], x[1], x[2] = 0.0, 0.0, 0.0
            for e in range(ptr[p], ptr[p + 1]):
                col, v = cols[e], vals[e]
                row = qs[s, col // 4, col % 4]
                x[0] += v * row[0]
                x[1] += v * row[1]
                x[2] += v * row[2]
            o0, o1, o2 = x[0] - m0, x[1] - m1, x[2] - m2
            if o0 * o0 + o1 * o1 + o2 * o2 >= cull * cull:
                continue
            o0, o1, o2 = x[0] - c[0], x[1] - c[1], x[2] - c[2]
            r0 = h[0] + (o0 * inv[0, 0] + o1 * inv[0, 1] + o2 * inv[0, 2])
            r1 = h[1] + (o0 * inv[1, 0] + o1 * inv[1, 1] + o2 * inv[1, 2])
            r2 = h[2] + (o0 * inv[2, 0] + o1 * inv[2, 1] + o2 * inv[2, 2])
            if not (lo[0] < r0 < hi[0] and lo[1] < r1 < hi[1] and lo[2] < r2 < hi[2]):
                continue
            ok, d, n0, n1, n2 = _sample(r0, r1, r2, lo, cell, shape, block, slot_of, store)
            if ok and not d < reach:
                continue
            state[count], point[count], known[count] = s, p, ok
            rest[count, 0], rest[count, 1], rest[count, 2] = r0, r1, r2
            dist[count] = d
            # g = F^-T n: each entry n . (column of F^-1)
            grad[count, 0] = n0 * inv[0, 0] + n1 * inv[1, 0] + n2 * inv[2, 0]
            grad[count, 1] = n0 * inv[0, 1] + n1 * inv[1, 1] + n2 * inv[2, 1]
            grad[count, 2] = n0 * inv[0, 2] + n1 * inv[1, 2] + n2 * inv[2, 2]
            count += 1
    return (
        state[:count],
        point[:count],
        dist[:count],
        grad[:count],
        rest[:count],
        known[:count],
        invs,
    )


# -- well-spread points (``geometry.farthest_point_subsample``) ---------------------------------
@njit(cache=True)
def farthest_points(points, first, count):
    """Indices (count,) of greedy farthest-point sampling of ``points`` (M, 3) from ``first``:
    each next point the farthest from those chosen (the first of equals), the squared
    distances summed as numpy sums a row of three ((x + y) + z: numpy's choice to the bit)."""
    m = len(points)
    chosen = np.empty(count, dtype=np.int64)
    nearest = np.empty(m)  # each point's squared distance to the nearest chosen one
    chosen[0] = first
    for i in range(count):
        c = chosen[i]
        cx, cy, cz = points[c, 0], points[c, 1], points[c, 2]
        best, arg = -1.0, 0
        for p in range(m):
            dx, dy, dz = points[p, 0] - cx, points[p, 1] - cy, points[p, 2] - cz
            d = (dx * dx + dy * dy) + dz * dz
            if i == 0 or d < nearest[p]:
                nearest[p] = d
            if nearest[p] > best:
                best, arg = nearest[p], p
        if i + 1 < count:
            chosen[i + 1] = arg
    return chosen


# -- a cloth's incremental potential (``rigspace.cloth.ClothStep``) ----------------------------
@njit(cache=True)
def cloth_potential(
    x, z, m, inertia, edges, lengths, k, compression, viscous, start_d, ptr, idx, val, forces
):
    """(value, gradient (n, 3), B Q x (n, 3)) of a cloth's step potential without its
    contact, drags and viscous bending: inertia |x - z|_M^2 + the springs on ``edges`` (E, 2)
    (rest ``lengths``, stiffness ``k``, ``compression`` x k shortened) + their viscous
    stretching ``viscous`` x k / 2 (|d| - ``start_d``)^2 (``viscous``: beta / h, 0 for none)
    + 1/2 x . B Q x (B Q in compressed rows ``ptr``, ``idx``, ``val``) - ``forces`` . x, as
    ``ClothStep._potential`` forms them in numpy, one pass over the nodes and one over the
    edges."""
    n, n_edges = len(x), len(edges)
    grad = np.empty((n, 3))
    bx = np.empty((n, 3))
    value = 0.0
    for i in range(n):
        w = 2.0 * inertia * m[i]
        s = 0.0
        for a in range(3):
            d = x[i, a] - z[i, a]
            s += d * d
            grad[i, a] = w * d
        value += inertia * m[i] * s
    springs = 0.0
    for e in range(n_edges):
        i, j = edges[e, 0], edges[e, 1]
        d0, d1, d2 = x[j, 0] - x[i, 0], x[j, 1] - x[i, 1], x[j, 2] - x[i, 2]
        length = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        stretch = length - lengths[e]
        ke = k[e] if stretch > 0 else k[e] * compression
        springs += ke * stretch * stretch
        along = ke * stretch
        if viscous > 0:
            rate = length - start_d[e]
            springs += k[e] * viscous * rate * rate
            along += k[e] * viscous * rate
        c = along / max(length, 1e-300)
        grad[j, 0] += c * d0
        grad[j, 1] += c * d1
        grad[j, 2] += c * d2
        grad[i, 0] -= c * d0
        grad[i, 1] -= c * d1
        grad[i, 2] -= c * d2
    value += 0.5 * springs
    bending, work = 0.0, 0.0
    for r in range(n):
        s0, s1, s2 = 0.0, 0.0, 0.0
        for p in range(ptr[r], ptr[r + 1]):
            c, v = idx[p], val[p]
            s0 += v * x[c, 0]
            s1 += v * x[c, 1]
            s2 += v * x[c, 2]
        bx[r, 0], bx[r, 1], bx[r, 2] = s0, s1, s2
        bending += x[r, 0] * s0 + x[r, 1] * s1 + x[r, 2] * s2
        work += forces[r, 0] * x[r, 0] + forces[r, 1] * x[r, 1] + forces[r, 2] * x[r, 2]
        grad[r, 0] += s0 - forces[r, 0]
        grad[r, 1] += s1 - forces[r, 1]
        grad[r, 2] += s2 - forces[r, 2]
    return value + 0.5 * bending - work, grad, bx


@njit(cache=True)
def spring_band(x, edges, lengths, k, compression, viscous, across_floor, positions, ab):
    """Add the springs' PSD-projected Hessian blocks at ``x`` (n, 3) to the band ``ab`` (flat),
    as ``ClothStep._matrix`` forms them: along each edge its spring (``compression`` x k
    shortened) and its viscous term (``viscous`` x k), across it the stretched spring's
    k (1 - L / |d|), at least ``across_floor`` x k; the edge's four 3x3 blocks (i i, j j, i j,
    j i, the last two negated) at ``positions`` (E, 36) (negative: not in the band)."""
    for e in range(len(edges)):
        i, j = edges[e, 0], edges[e, 1]
        d0, d1, d2 = x[j, 0] - x[i, 0], x[j, 1] - x[i, 1], x[j, 2] - x[i, 2]
        length = math.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        scale = max(length, 1e-300)
        u = (d0 / scale, d1 / scale, d2 / scale)
        stretched = length > lengths[e]
        spring = k[e] if stretched else k[e] * compression
        axial = spring + k[e] * viscous
        across = k[e] * (1.0 - lengths[e] / scale) if stretched else 0.0
        across = max(across, across_floor * k[e])
        for a in range(4):
            sign = 1.0 if a < 2 else -1.0
            for r in range(3):
                for c in range(3):
                    p = positions[e, (a * 3 + r) * 3 + c]
                    if p >= 0:
                        uu = u[r] * u[c]
                        eye = 1.0 if r == c else 0.0
                        ab[p] += sign * (axial * uu + across * (eye - uu))
