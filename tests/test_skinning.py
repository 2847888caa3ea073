"""The sparse dual-quaternion skinning against the general one (``dualquat.dq_skin``)."""

import math

import numpy as np
import torch
from bounds import assert_within

from neurok_core.dualquat import dq_from_raw, dq_normalize, dq_skin
from neurok_core.geometry import vertex_islands
from neurok_core.skinning import DQSkinning, blend_neighbors


def _setup(n=500, q=40, k=4, seed=0):
    gen = torch.Generator().manual_seed(seed)
    points = torch.rand(n, 3, generator=gen, dtype=torch.float64)
    index = torch.stack([torch.randperm(q, generator=gen)[:k] for _ in range(n)])  # (N, K)
    weights = torch.rand(n, k, generator=gen, dtype=torch.float64) + 0.05
    weights = weights / weights.sum(1, keepdim=True)
    return points, index, weights


def _reference(skinning: DQSkinning, motions):
    return dq_skin(
        motions, skinning.index, skinning.weights[None], skinning.pivot, skinning.points[None]
    )


def test_sparse_skinning_equals_the_general_one_for_either_sign_of_each_dq():
    points, index, weights = _setup()
    skinning = DQSkinning(index, weights, points, 40)
    gen = torch.Generator().manual_seed(1)
    motions = dq_from_raw(0.3 * torch.randn(3, 40, 8, generator=gen, dtype=torch.float64))
    flips = torch.where(torch.rand(3, 40, 1, generator=gen) < 0.5, -1.0, 1.0).double()
    motions = motions * flips  # q and -q: the same motions, either hemisphere
    got = skinning(motions)
    assert got.shape == (3, 500, 3)
    torch.testing.assert_close(got, _reference(skinning, motions), rtol=1e-12, atol=1e-12)
    # the moves are real: far from the rest points
    assert float((got - points).norm(dim=-1).max()) > 0.1


def test_a_frame_with_neighbours_turned_nearly_half_a_turn_apart_is_skinned_exactly():
    """Two neighbouring points turned by +170 and -170 degrees about one axis lie in opposite
    hemispheres whatever the sign of each: that frame takes the general way, the others not."""
    points, index, weights = _setup(n=300, q=30, seed=2)
    skinning = DQSkinning(index, weights, points, 30)
    gen = torch.Generator().manual_seed(3)
    motions = dq_from_raw(0.2 * torch.randn(2, 30, 8, generator=gen, dtype=torch.float64))
    half = math.radians(170.0) / 2
    pivot = int(skinning.pivot[0])
    other = int(next(i for i in index[0].tolist() if i != pivot))
    for point, sign in ((pivot, 1.0), (other, -1.0)):  # frame 1: about z by +-170 degrees
        motions[1, point] = torch.tensor(
            [math.cos(half), 0, 0, sign * math.sin(half), 0, 0, 0, 0], dtype=torch.float64
        )
    motions = dq_normalize(motions)
    want = _reference(skinning, motions)
    torch.testing.assert_close(skinning(motions), want, rtol=1e-12, atol=1e-12)
    # the check matters: the sparse product alone gets that frame wrong
    same = torch.where(motions[..., :1] < 0, -motions, motions)
    assert float((skinning._sparse(same[1:]) - want[1:]).abs().max()) > 1e-3
    torch.testing.assert_close(skinning._sparse(same[:1]), want[:1], rtol=1e-12, atol=1e-12)


def test_a_pair_at_exactly_ninety_degrees_and_empty_batches_take_the_general_way():
    """dq_skin gives a dot of exactly 0 the sign +1 whatever the hemispheres, which the sparse
    product cannot know: such a frame is skinned the general way. No frames: no points."""
    points, index, weights = _setup(n=200, q=20, seed=4)
    skinning = DQSkinning(index, weights, points, 20)
    motions = dq_from_raw(torch.zeros(1, 20, 8, dtype=torch.float64))  # identity everywhere
    pivot = int(skinning.pivot[0])
    other = int(next(i for i in index[0].tolist() if i != pivot))
    motions[0, pivot, :4] = torch.tensor([0.0, 0.0, 0.0, 1.0], dtype=torch.float64)  # half turn
    motions[0, other, :4] = torch.tensor([-1.0, 0.0, 0.0, 0.0], dtype=torch.float64)  # -identity
    torch.testing.assert_close(skinning(motions), _reference(skinning, motions))
    assert skinning(motions[:0]).shape == (0, 200, 3)


def test_half_precision_is_skinned_the_general_way():
    """bfloat16 takes the general way; its answer is the float64 skinning of the same (rounded)
    inputs to bfloat16's precision, and far from the rest points."""
    points, index, weights = _setup(n=100, q=10, seed=5)
    skinning = DQSkinning(index, weights.bfloat16(), points.bfloat16(), 10)
    assert skinning.sparse is None
    gen = torch.Generator().manual_seed(6)
    motions = dq_from_raw(0.2 * torch.randn(2, 10, 8, generator=gen)).bfloat16()
    exact = DQSkinning(index, weights.bfloat16().double(), points.bfloat16().double(), 10)
    want = exact(motions.double())  # (2, 100, 3) float64
    got = skinning(motions)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got.double(), want, rtol=0, atol=0.03)
    assert float((want - points).norm(dim=-1).max()) > 0.1


def _grid(x0: float, n: int = 6) -> np.ndarray:
    """(n*n, 3) points of a unit square in the plane z = 0, starting at x = x0."""
    u = np.linspace(0.0, 1.0, n)
    return np.array([(x0 + a, b, 0.0) for a in u for b in u])


def test_vertices_blend_only_skinning_points_of_their_own_island():
    """Two squares 0.05 apart: a vertex at the gap takes its own square's points, never the other
    square's nearer ones; with a clearance it takes points inside its square, away from the gap;
    a one-island mesh keeps the plain nearest points; an island without points falls back to all."""
    points = np.concatenate([_grid(0.0), _grid(1.05)])  # (72, 3)
    point_islands = np.repeat([0, 1], 36)
    queries = np.array([[1.0, 0.5, 0.0], [1.05, 0.5, 0.0], [0.23, 0.31, 0.0], [5.0, 5.0, 0.0]])
    query_islands = np.array([0, 1, 0, 2])  # island 2 has no skinning point
    dist, index = blend_neighbors(points, point_islands, queries, query_islands, 4)
    assert (point_islands[index[0]] == 0).all() and (point_islands[index[1]] == 1).all()
    plain_d, plain_i = blend_neighbors(points, np.zeros(72, int), queries, np.zeros(4, int), 4)
    assert (point_islands[plain_i[0]] == 1).any()  # the other square's points are nearer
    np.testing.assert_array_equal(index[3], plain_i[3])  # no own point: the nearest of all
    np.testing.assert_array_equal(index[2], plain_i[2])  # far from the gap: the same points
    _, inside = blend_neighbors(points, point_islands, queries, query_islands, 4, clearance=0.3)
    gap = np.abs(points[inside[:2], 0] - 1.025)  # distance of the chosen points from the gap
    assert (point_islands[inside[0]] == 0).all() and (point_islands[inside[1]] == 1).all()
    assert_within(gap, above=0.3 - 0.025 - 1e-9, what="chosen points' distance from the gap")
    np.testing.assert_allclose(dist[0], np.sort(dist[0]))  # nearest first, as nearest_neighbors


def test_an_island_with_fewer_points_than_k_repeats_its_own():
    points = np.array([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.05, 0.0, 0.0]])
    d, i = blend_neighbors(points, np.array([0, 0, 1]), points[:2], np.array([1, 1]), 3)
    np.testing.assert_array_equal(i, [[2, 2, 2], [2, 2, 2]])


def test_islands_are_connected_faces_with_coincident_vertices_welded():
    square = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    two = np.concatenate([square, square + [3, 0, 0]])
    faces = np.array([[0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 6, 7]])
    labels = vertex_islands(two, faces)
    assert labels[0] == labels[3] != labels[4] == labels[7]
    # the same square as a triangle soup (no shared vertex indices) is one island
    soup = np.concatenate([square[[0, 1, 2]], square[[0, 2, 3]]])
    assert len(np.unique(vertex_islands(soup, np.array([[0, 1, 2], [3, 4, 5]])))) == 1
    assert len(np.unique(vertex_islands(np.concatenate([square, [[9, 9, 9]]]), faces[:2]))) == 2
    # copies 2e-13 apart on either side of a multiple of the tolerance still weld
    shifted = square + [0.5e-6, 0.0, 0.0]
    noisy = np.concatenate([shifted[[0, 1, 2]] - [1e-13, 0, 0], shifted[[0, 2, 3]] + [1e-13, 0, 0]])
    assert len(np.unique(vertex_islands(noisy, np.array([[0, 1, 2], [3, 4, 5]])))) == 1
    # copies 5e-5 apart do not, and a stray vertex far away does not widen the tolerance
    apart = np.concatenate([square[[0, 1, 2]], square[[0, 2, 3]] + 5e-5, [[1e6, 0, 0]]])
    labels = vertex_islands(apart, np.array([[0, 1, 2], [3, 4, 5]]))
    assert len(np.unique(labels)) == 3 and labels[0] != labels[3]
