"""The compiled closest points on triangles (neurok_core/triangle_kernels.py) against numpy's
(``dynamics.obstacles.closest_on_triangles``): the same closest points and features, each
point's nearest triangle by brute force, ties to the first pair."""

import numpy as np

from neurok_core.dynamics.obstacles import closest_on_triangles
from neurok_core.triangle_kernels import nearest_pairs


def test_nearest_pairs_match_numpys_regions_pair_by_pair():
    rng = np.random.default_rng(0)
    vertices = rng.normal(size=(900, 3))
    faces = rng.integers(0, 900, size=(400, 3)).astype(np.int64)
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2])]
    faces = faces[faces[:, 0] != faces[:, 2]]
    points = rng.normal(size=(len(faces), 3))
    rows = np.arange(len(faces), dtype=np.int64)  # one pair each: point k, triangle k
    d2, best, tri, feat = nearest_pairs(points, rows, rows, vertices, faces)
    closest, feature = closest_on_triangles(points, *np.moveaxis(vertices[faces], 1, 0))
    np.testing.assert_allclose(best, closest, atol=1e-12)
    np.testing.assert_array_equal(feat, feature)
    np.testing.assert_allclose(d2, ((points - closest) ** 2).sum(1), atol=1e-12)
    assert set(feature.tolist()) == set(range(7))  # every region met


def test_each_point_keeps_its_nearest_triangle_and_the_first_of_a_tie():
    rng = np.random.default_rng(1)
    vertices = rng.normal(size=(40, 3))
    faces = np.stack([np.arange(0, 39, 3), np.arange(1, 40, 3), np.arange(2, 41, 3) % 40], 1)
    points = rng.normal(size=(25, 3))
    rows = np.repeat(np.arange(25), len(faces))
    tris = np.tile(np.arange(len(faces)), 25)
    d2, _, tri, _ = nearest_pairs(points, rows, tris, vertices, faces)
    every = ((points[:, None] - _all_closest(points, vertices, faces)) ** 2).sum(2)  # (P, F)
    np.testing.assert_allclose(d2, every.min(1), atol=1e-12)
    np.testing.assert_array_equal(tri, every.argmin(1))
    # a triangle listed twice: the first listing wins, and a point with no pair keeps inf
    twice = np.concatenate([tris[:13], tris[:13]])
    d2, _, tri, _ = nearest_pairs(points, np.zeros(26, np.int64), twice, vertices, faces)
    assert tri[0] == every[0, :13].argmin() and np.isinf(d2[1:]).all()


def _all_closest(points, vertices, faces):
    """(P, F, 3) every point's closest point on every triangle (numpy's regions)."""
    p = np.repeat(points, len(faces), axis=0)
    corners = np.tile(vertices[faces], (len(points), 1, 1))
    closest = closest_on_triangles(p, corners[:, 0], corners[:, 1], corners[:, 2])[0]
    return closest.reshape(len(points), len(faces), 3)
