"""Compiled closest points on triangles: a point's nearest point on a triangle and the feature
(vertex, edge or face) it lies on, and each point's nearest triangle among candidate pairs.

The regions of the triangle's Voronoi diagram, tried in Ericson's order ("Real-Time Collision
Detection", 2004, 5.1.5): vertex a, vertex b, edge ab, vertex c, edge ca, edge bc, the face.
Feature codes as ``dynamics.obstacles.closest_on_triangles``: 0 the face, 1-3 the vertices a, b,
c, 4 edge ab, 5 edge bc, 6 edge ca. In numpy each region is a pass over all the pairs with
arrays in between; here each pair is a few dozen flops. Imported where a run first needs it
(numba loads in about half a second), so that the Blender side never imports numba.

Shapes: points (P, 3), vertices (V, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def sub3(a, b):
    """a - b of two 3-tuples."""
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@njit(cache=True)
def dot3(a, b):
    """a . b of two 3-tuples."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@njit(cache=True)
def closest_weights(p, a, b, c):
    """(wa, wb, wc, feature): the barycentric coordinates of the point of triangle a, b, c
    (tuples) nearest to ``p`` and the feature it lies on (module docstring)."""
    ab, ac, ap = sub3(b, a), sub3(c, a), sub3(p, a)
    d1, d2 = dot3(ab, ap), dot3(ac, ap)
    if d1 <= 0.0 and d2 <= 0.0:
        return 1.0, 0.0, 0.0, 1
    bp = sub3(p, b)
    d3, d4 = dot3(ab, bp), dot3(ac, bp)
    if d3 >= 0.0 and d4 <= d3:
        return 0.0, 1.0, 0.0, 2
    vc = d1 * d4 - d3 * d2
    if vc <= 0.0 and d1 >= 0.0 and d3 <= 0.0:
        v = d1 / (d1 - d3) if d1 != d3 else 0.0
        return 1.0 - v, v, 0.0, 4
    cp = sub3(p, c)
    d5, d6 = dot3(ab, cp), dot3(ac, cp)
    if d6 >= 0.0 and d5 <= d6:
        return 0.0, 0.0, 1.0, 3
    vb = d5 * d2 - d1 * d6
    if vb <= 0.0 and d2 >= 0.0 and d6 <= 0.0:
        w = d2 / (d2 - d6) if d2 != d6 else 0.0
        return 1.0 - w, 0.0, w, 6
    va = d3 * d6 - d5 * d4
    if va <= 0.0 and d4 - d3 >= 0.0 and d5 - d6 >= 0.0:
        den = (d4 - d3) + (d5 - d6)
        w = (d4 - d3) / den if den != 0.0 else 0.0
        return 0.0, 1.0 - w, w, 5
    den = va + vb + vc
    if den == 0.0:  # a triangle of no area
        return 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 0
    v, w = vb / den, vc / den
    return 1.0 - v - w, v, w, 0


@njit(cache=True)
def nearest_pairs(points, rows, tris, vertices, faces):
    """For each point of ``points``, its nearest among the candidate pairs (point ``rows``
    (K,), triangle ``tris`` (K,)), ties to the first pair: (squared distance (P,), inf
    without a pair; closest point (P, 3); its triangle (P,); its feature (P,))."""
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
        wa, wb, wc, feature = closest_weights(p, a, b, c)
        q0 = wa * a[0] + wb * b[0] + wc * c[0]
        q1 = wa * a[1] + wb * b[1] + wc * c[1]
        q2 = wa * a[2] + wb * b[2] + wc * c[2]
        d2 = (p[0] - q0) ** 2 + (p[1] - q1) ** 2 + (p[2] - q2) ** 2
        if d2 < best_d2[r]:
            best_d2[r] = d2
            best[r, 0], best[r, 1], best[r, 2] = q0, q1, q2
            best_tri[r], best_feat[r] = t, feature
    return best_d2, best, best_tri, best_feat
