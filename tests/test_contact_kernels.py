"""The compiled contact loops (neurok_core/contact_kernels.py) against independent references:
numpy's closest points on triangles (``dynamics.obstacles.closest_on_triangles``), each point's
nearest triangle by brute force, a dense search of two segments' parameters, every cloth pair by
brute force, the metrics' Kabsch fit."""

import itertools

import numpy as np
import pytest

from neurok_core import contact_kernels as kernels
from neurok_core.dynamics.obstacles import closest_on_triangles
from neurok_core.geometry import unique_edges
from neurok_core.metrics import best_rotations


def _pairs_of(points_per_pair: list[np.ndarray]):
    """(nodes (P, 4), x (4P, 3)) of pairs given as P arrays (4, 3)."""
    x = np.concatenate(points_per_pair).astype(np.float64)
    return np.arange(len(x), dtype=np.int64).reshape(-1, 4), x


def test_point_triangle_matches_the_obstacles_closest_points():
    rng = np.random.default_rng(0)
    quads = [rng.normal(size=(4, 3)) for _ in range(400)]
    quads += [np.array([[0.3, 0.2, 1.0], [0, 0, 0], [1, 0, 0], [2, 0, 0]])]  # a sliver
    quads += [np.array([[0.5, 0.5, 0.0], [0, 0, 0], [1, 0, 0], [0, 1, 0]])]  # in its plane
    nodes, x = _pairs_of(quads)
    d, n, w = kernels.geometry(0, nodes, x)
    p, a, b, c = (x[nodes[:, k]] for k in range(4))
    closest = closest_on_triangles(p, a, b, c)[0]
    np.testing.assert_allclose(d, np.linalg.norm(p - closest, axis=1), atol=1e-12)
    # the weights are the closest point's barycentric coordinates, the normal points at p
    mine = -(w[:, 1:2] * a + w[:, 2:3] * b + w[:, 3:4] * c)
    np.testing.assert_allclose(mine, closest, atol=1e-9)
    np.testing.assert_allclose(w.sum(1), 0.0, atol=1e-12)
    np.testing.assert_allclose(p - d[:, None] * n, closest, atol=1e-9)


def test_edge_edge_is_the_least_distance_of_a_dense_search():
    rng = np.random.default_rng(1)
    quads = [rng.normal(size=(4, 3)) for _ in range(60)]
    quads += [np.array([[0, 0, 0], [1, 0, 0], [0.5, 0.1, 0], [1.5, 0.1, 0]])]  # parallel
    quads += [np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]])]  # on one line
    nodes, x = _pairs_of(quads)
    d, n, w = kernels.geometry(1, nodes, x)
    grid = np.linspace(0.0, 1.0, 401)
    for k, (p0, p1, q0, q1) in enumerate(x.reshape(-1, 4, 3)):
        on_p = p0 + grid[:, None] * (p1 - p0)  # (G, 3)
        on_q = q0 + grid[:, None] * (q1 - q0)
        dense = np.linalg.norm(on_p[:, None] - on_q[None], axis=2).min()
        step = (np.linalg.norm(p1 - p0) + np.linalg.norm(q1 - q0)) / 400
        assert d[k] <= dense + 1e-12
        assert d[k] >= dense - step
        # the weights place the two closest points d apart along n
        gap = w[k, 0] * p0 + w[k, 1] * p1 + w[k, 2] * q0 + w[k, 3] * q1
        np.testing.assert_allclose(gap, d[k] * n[k], atol=1e-9)


def _crumpled_sheet(seed: int):
    """A 12 x 9 grid sheet folded twice over itself and shaken: close layers."""
    rng = np.random.default_rng(seed)
    nx, ny = 12, 9
    u, v = np.meshgrid(np.linspace(0, 1, nx), np.linspace(0, 0.7, ny), indexing="ij")
    angle = 3.0 * u.ravel()
    x = np.stack([0.2 * np.cos(angle) + 0.05 * u.ravel(), v.ravel(), 0.2 * np.sin(angle)], 1)
    x += rng.normal(scale=0.01, size=x.shape)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    faces = np.concatenate(
        [np.stack([a, a + ny, a + ny + 1], 1), np.stack([a, a + ny + 1, a + 1], 1)]
    )
    return x, faces.astype(np.int64)


@pytest.mark.parametrize("kind", [0, 1])
@pytest.mark.parametrize("seed", [0, 1])
def test_candidates_are_every_pair_within_reach_by_brute_force(kind, seed):
    x, faces = _crumpled_sheet(seed)
    elems = faces if kind == 0 else unique_edges(faces)
    within = 0.06
    if kind == 0:
        every = np.array(
            [(i, f) for i in range(len(x)) for f in range(len(faces)) if i not in faces[f]]
        )
        nodes = np.column_stack([every[:, 0], faces[every[:, 1]]])
    else:
        every = np.array(
            [
                (e, f)
                for e, f in itertools.combinations(range(len(elems)), 2)
                if not set(elems[e]) & set(elems[f])
            ]
        )
        nodes = elems[every].reshape(-1, 4)
    d = kernels.geometry(kind, np.ascontiguousarray(nodes), x)[0]
    keys = every[:, 0] * len(elems) + every[:, 1]
    truth = dict(zip(keys[d < within].tolist(), d[d < within].tolist(), strict=True))
    apart = np.sort(keys[d < within][::3])  # a third left out, as pairs near at rest are
    pairs, quads, dist = kernels.candidates(kind, x, elems, within, apart)
    for key in apart.tolist():
        truth.pop(key)
    assert len(truth) > 50
    found = dict(zip((pairs[:, 0] * len(elems) + pairs[:, 1]).tolist(), dist.tolist(), strict=True))
    assert len(found) == len(pairs)
    assert found.keys() == truth.keys()
    for key, value in found.items():
        assert value == pytest.approx(truth[key], abs=1e-12)
    # each pair's nodes: the node and the triangle's corners, or the two edges' ends
    own = np.column_stack([pairs[:, 0], faces[pairs[:, 1]]]) if kind == 0 else elems[pairs]
    np.testing.assert_array_equal(quads, own.reshape(-1, 4))


def test_near_keeps_exactly_the_pairs_under_the_bound():
    x, faces = _crumpled_sheet(2)
    nodes = np.ascontiguousarray(unique_edges(faces)[:200].reshape(-1, 4))
    found = kernels.geometry(1, nodes, x)[0]
    moved = x + np.random.default_rng(3).normal(scale=0.005, size=x.shape)
    idx, d, n, w = kernels.near(1, nodes, found, moved, moved - x, 0.05, np.inf)
    truth = np.flatnonzero(kernels.geometry(1, nodes, moved)[0] < 0.05)
    # a cutoff as far as the nodes moved leaves the same pairs; a nearer one, fewer
    bound = 0.05 + 2 * np.abs(moved - x).max() * np.sqrt(3)
    assert np.array_equal(kernels.near(1, nodes, found, moved, moved - x, 0.05, bound)[0], idx)
    assert len(kernels.near(1, nodes, found, moved, moved - x, 0.05, 0.02)[0]) < len(idx)
    np.testing.assert_array_equal(idx, truth)
    np.testing.assert_allclose(d, kernels.geometry(1, nodes, moved)[0][truth])


def test_rigid_fit_and_spread_match_numpy():
    rng = np.random.default_rng(4)
    ref = rng.normal(size=(50, 3))
    rot = best_rotations(np.eye(3), (rng.normal(size=(1, 3, 3))))[0]
    state = ref @ rot.T + np.array([0.3, -1.0, 2.0]) + rng.normal(scale=1e-3, size=ref.shape)
    fitted = kernels.rigid_fit(ref, state)
    r = best_rotations(ref, state[None])[0]
    np.testing.assert_allclose(fitted, (ref - ref.mean(0)) @ r.T + state.mean(0), atol=1e-12)
    shift = state - ref
    shift -= shift.mean(0)
    assert kernels.spread(state, ref) == pytest.approx(np.sqrt((shift**2).sum(1).max()))


def test_candidates_refuse_a_state_that_is_not_finite():
    x, faces = _crumpled_sheet(5)
    x[7, 1] = np.nan
    with pytest.raises(ValueError, match="not finite"):
        kernels.candidates(0, x, faces, 0.05, np.zeros(0, dtype=np.int64))


def test_candidates_of_pieces_far_apart_keep_the_grid_small():
    """Two sheets a kilometre apart: the grid's cells grow until it has a few an element
    (not 1e18 of a sheet's own size), and each sheet's own pairs are still found."""
    x, faces = _crumpled_sheet(6)
    far = np.concatenate([x, x + 1000.0])
    both = np.concatenate([faces, faces + len(x)])
    none = np.zeros(0, dtype=np.int64)
    near, _, d = kernels.candidates(0, x, faces, 0.05, none)
    pairs, _, dist = kernels.candidates(0, far, both, 0.05, none)
    assert len(pairs) == 2 * len(near)


def test_nearest_pairs_match_numpys_regions_pair_by_pair():
    rng = np.random.default_rng(0)
    vertices = rng.normal(size=(900, 3))
    faces = rng.integers(0, 900, size=(400, 3)).astype(np.int64)
    faces = faces[(faces[:, 0] != faces[:, 1]) & (faces[:, 1] != faces[:, 2])]
    faces = faces[faces[:, 0] != faces[:, 2]]
    points = rng.normal(size=(len(faces), 3))
    rows = np.arange(len(faces), dtype=np.int64)  # one pair each: point k, triangle k
    d2, best, tri, feat = kernels.nearest_pairs(points, rows, rows, vertices, faces)
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
    d2, _, tri, _ = kernels.nearest_pairs(points, rows, tris, vertices, faces)
    every = ((points[:, None] - _all_closest(points, vertices, faces)) ** 2).sum(2)  # (P, F)
    np.testing.assert_allclose(d2, every.min(1), atol=1e-12)
    np.testing.assert_array_equal(tri, every.argmin(1))
    # a triangle listed twice: the first listing wins, and a point with no pair keeps inf
    twice = np.concatenate([tris[:13], tris[:13]])
    d2, _, tri, _ = kernels.nearest_pairs(points, np.zeros(26, np.int64), twice, vertices, faces)
    assert tri[0] == every[0, :13].argmin() and np.isinf(d2[1:]).all()


def _all_closest(points, vertices, faces):
    """(P, F, 3) every point's closest point on every triangle (numpy's regions)."""
    p = np.repeat(points, len(faces), axis=0)
    corners = np.tile(vertices[faces], (len(points), 1, 1))
    closest = closest_on_triangles(p, corners[:, 0], corners[:, 1], corners[:, 2])[0]
    return closest.reshape(len(points), len(faces), 3)


def test_a_triangle_of_no_area_takes_the_nearest_point_of_its_edges():
    rng = np.random.default_rng(7)
    corners = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    faces = np.array([[0, 1, 2], [2, 0, 1], [1, 2, 0]], dtype=np.int64)
    points = rng.normal(size=(300, 3))
    for face in faces:
        rows = np.arange(len(points), dtype=np.int64)
        tris = np.zeros(len(points), dtype=np.int64)
        d2, best, _, _ = kernels.nearest_pairs(points, rows, tris, corners, face[None])
        # the segment from x = 0 to x = 2 on the x axis
        on = np.column_stack([np.clip(points[:, 0], 0.0, 2.0), np.zeros((len(points), 2))])
        np.testing.assert_allclose(best, on, atol=1e-12)
        np.testing.assert_allclose(d2, ((points - on) ** 2).sum(1), atol=1e-12)


def test_a_motion_that_is_not_finite_is_not_read_as_none():
    x, _ = _crumpled_sheet(8)
    moved = x.copy()
    moved[3, 2] = np.nan
    assert np.isnan(kernels.spread(moved, x))


def test_by_index_breaks_a_tie_by_the_lowest_triangle_whatever_the_order():
    """Two copies of one triangle: equally near; ``by_index`` keeps the lower index even when
    its pair comes second."""
    vertices = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0]])
    faces = np.array([[0, 1, 2], [0, 1, 2]], dtype=np.int64)
    points = np.array([[0.2, 0.2, 0.5]])
    rows, tris = np.zeros(2, dtype=np.int64), np.array([1, 0], dtype=np.int64)
    assert kernels.nearest_pairs(points, rows, tris, vertices, faces)[2][0] == 1
    assert kernels.nearest_pairs(points, rows, tris, vertices, faces, True)[2][0] == 0


@pytest.mark.parametrize("kind", [0, 1])
def test_distance_gradients_match_finite_differences(kind):
    """The weights w of a pair's four nodes and its unit direction n are the distance's
    gradient (w_k n on node k): a point and a triangle (kind 0), two segments (1)."""
    rng = np.random.default_rng(3)
    one = np.arange(4, dtype=np.int64)[None]
    for _ in range(20):
        pts = rng.normal(size=(4, 3))
        _, n, w = kernels.geometry(kind, one, pts)
        grad = w[0][:, None] * n[0][None]  # (4, 3)
        eps = 1e-7
        for k in range(4):
            for a in range(3):
                up, down = pts.copy(), pts.copy()
                up[k, a] += eps
                down[k, a] -= eps
                fd = (kernels.geometry(kind, one, up)[0] - kernels.geometry(kind, one, down)[0]) / (
                    2 * eps
                )
                assert abs(fd[0] - grad[k, a]) < 1e-5
