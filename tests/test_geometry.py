"""Mesh validation, triangulation, normalisation, surface sampling and nearest neighbours."""

import numpy as np
import pytest
import torch
from bounds import assert_within
from scipy.spatial.transform import Rotation
from torch.testing import assert_close

from neurok_core.errors import MeshError
from neurok_core.geometry import (
    Normalization,
    face_areas,
    face_normals,
    farthest_point_subsample,
    locate,
    nearest_neighbors,
    newell_normal,
    sample_surface,
    sample_surface_points,
    triangulate_loops,
    triangulate_polygons,
    validate_mesh,
    vertex_areas,
)

TETRA_V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float64)
TETRA_F = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])


def close(a, b, **kw):
    assert_close(torch.tensor(np.asarray(a)), torch.tensor(np.asarray(b)), **kw)


# ---------------------------------------------------------------- validation


def test_validate_returns_typed_copies_and_keeps_vertices():
    loose = np.vstack([TETRA_V, [[5.0, 5.0, 5.0]]])  # an unreferenced vertex is allowed
    v, f = validate_mesh(loose.tolist(), TETRA_F.astype(np.int32))
    assert v.dtype == np.float64 and v.shape == (5, 3)
    assert f.dtype == np.int64 and f.shape == (4, 3)
    close(v, loose)


def test_validate_drops_degenerate_faces_only():
    v = np.vstack([TETRA_V, [[2.0, 0, 0]]])  # vertex 4 is collinear with 0 and 1
    faces = np.vstack([TETRA_F, [[0, 1, 4], [1, 1, 2]]])  # zero area, repeated index
    out_v, out_f = validate_mesh(v, faces)
    assert len(out_v) == 5
    np.testing.assert_array_equal(out_f, TETRA_F)


@pytest.mark.parametrize(
    "vertices, faces, message",
    [
        (np.zeros((0, 3)), TETRA_F, "no vertices"),
        (TETRA_V, np.zeros((0, 3), dtype=int), "no faces"),
        (TETRA_V[:, :2], TETRA_F, r"shape \(N, 3\)"),
        (TETRA_V, np.array([[0, 1, 2, 3]]), "triangulate"),
        (np.where(np.arange(12).reshape(4, 3) == 4, np.nan, TETRA_V), TETRA_F, "NaN"),
        (np.where(np.arange(12).reshape(4, 3) == 4, np.inf, TETRA_V), TETRA_F, "vertex 1"),
        (TETRA_V, TETRA_F + 0.5, "whole numbers"),
        (TETRA_V, TETRA_F.astype(str), "integers"),
        (TETRA_V, TETRA_F + 1, r"\[0, 4\)"),
        (TETRA_V, TETRA_F - 1, r"\[0, 4\)"),
        (np.zeros((4, 3)), TETRA_F, "zero size"),
        (TETRA_V, np.array([[0, 1, 1], [0, 0, 0]]), "all 2 faces are degenerate"),
        ([[0, 0, 0], [1, 0]], TETRA_F, "shape"),
    ],
)
def test_validate_rejects_bad_meshes(vertices, faces, message):
    with pytest.raises(MeshError, match=message):
        validate_mesh(vertices, faces)


def test_validate_accepts_whole_float_indices():
    _, f = validate_mesh(TETRA_V, TETRA_F.astype(np.float32))
    assert f.dtype == np.int64
    np.testing.assert_array_equal(f, TETRA_F)


# ---------------------------------------------------------------- triangulation


def polygon_area_normal(points):
    vec = newell_normal(points)
    return np.linalg.norm(vec), vec / np.linalg.norm(vec)


def test_triangle_passes_through_and_square_splits():
    v = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]], dtype=float)
    tris = triangulate_polygons([[0, 1, 2], [0, 1, 2, 3]], v)
    np.testing.assert_array_equal(tris[0], [0, 1, 2])
    assert tris.shape == (3, 3) and tris.dtype == np.int64
    close(face_areas(v, tris[1:]).sum(), 1.0)
    assert_within(face_normals(v, tris[1:]) @ [0, 0, 1], above=0.99, strict=True, what="normal z")


def test_l_shaped_hexagon_covers_its_area_without_flips():
    flat = np.array([[0, 0], [2, 0], [2, 1], [1, 1], [1, 2], [0, 2]], dtype=float)
    rot = Rotation.from_euler("xyz", [0.3, -0.7, 1.1]).as_matrix()
    for winding in (list(range(6)), list(range(6))[::-1]):
        v = np.c_[flat, np.zeros(6)] @ rot.T + [0.5, -2.0, 3.0]
        area, normal = polygon_area_normal(v[winding])
        tris = triangulate_polygons([winding], v)
        assert tris.shape == (4, 3)
        close(face_areas(v, tris).sum(), 3.0)
        close(area, 3.0)
        cos = face_normals(v, tris) @ normal
        assert_within(cos, above=0.999, strict=True, what="triangles' normals . the polygon's")
        # every triangle lies inside the L: its centroid is not in the missing square
        centroid = (np.c_[flat, np.zeros(6)][tris].mean(1))[:, :2]
        missing = (centroid[:, 0] > 1) & (centroid[:, 1] > 1)
        assert not missing.any(), f"centroids in the missing square x, y > 1: {centroid[missing]}"


def test_star_ngon_is_tiled_exactly():
    angle = np.linspace(0, 2 * np.pi, 14, endpoint=False)
    radius = np.where(np.arange(14) % 2 == 0, 1.0, 0.35)
    v = np.stack([radius * np.cos(angle), radius * np.sin(angle), 0.05 * np.sin(3 * angle)], 1)
    area, normal = polygon_area_normal(v)
    tris = triangulate_polygons([list(range(14))], v)
    assert tris.shape == (12, 3)
    planar = v.copy()
    planar[:, 2] = 0
    # tiled exactly: the triangles' projected areas add up to the star's, with none flipped
    close(face_areas(planar, tris).sum(), newell_normal(planar)[2])
    close(area, newell_normal(planar)[2])  # the bend is symmetric: best-fit plane is z = 0
    cos = face_normals(v, tris) @ normal
    assert_within(cos, above=0, strict=True, what="triangles' normals . the star's")


def test_non_planar_quad_uses_shorter_diagonal():
    # corners 1 and 3 are lifted; the 1-3 diagonal is shorter than 0-2
    v = np.array([[0, 0, 0], [1.0, -0.2, 0.5], [2, 0, 0], [1.0, 0.2, 0.5]])
    tris = triangulate_polygons([[0, 1, 2, 3]], v)
    used = {frozenset(e) for t in tris for e in ((t[0], t[1]), (t[1], t[2]), (t[2], t[0]))}
    assert frozenset((1, 3)) in used and frozenset((0, 2)) not in used
    _, normal = polygon_area_normal(v)
    cos = face_normals(v, tris) @ normal
    assert_within(cos, above=0, strict=True, what="triangles' normals . the quad's")


def test_loops_equal_lists():
    rng = np.random.default_rng(3)
    v = rng.normal(size=(40, 3))
    polygons = [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9, 10, 11], [12, 13, 14], list(range(15, 23))]
    polygons += [[23, 24, 25, 26], list(range(27, 40))]
    totals = np.array([len(p) for p in polygons])
    starts = np.cumsum(totals) - totals
    loops = np.concatenate(polygons)
    from_loops = triangulate_loops(loops, starts, totals, v)
    from_list = triangulate_polygons(polygons, v)
    np.testing.assert_array_equal(from_loops, from_list)
    # polygon p's triangles are consecutive and use only its vertices
    owner = np.repeat(np.arange(len(polygons)), totals - 2)
    for row, p in zip(from_loops, owner, strict=True):
        assert set(row) <= set(polygons[p])


def test_triangulation_rejects_bad_polygons():
    v = np.zeros((4, 3))
    with pytest.raises(MeshError, match="at least 3"):
        triangulate_polygons([[0, 1]], v)
    with pytest.raises(MeshError, match="integers"):
        triangulate_polygons([[0.0, 1.5, 2.0]], v)
    with pytest.raises(MeshError, match=r"\[0, 4\)"):
        triangulate_polygons([[0, 1, 7]], v)
    with pytest.raises(MeshError, match="outside"):
        triangulate_loops([0, 1, 2], [0], [4], v)


# ---------------------------------------------------------------- normalisation


def test_normalization_round_trip_numpy_and_torch():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 3)) * [3.0, 0.5, 1.0] + [10, -4, 2]
    norm = Normalization.from_vertices(v)
    out = norm.apply(v)
    close(np.ptp(out, axis=0).max(), 1.0)
    close((out.max(0) + out.min(0)) / 2, np.zeros(3), atol=1e-12, rtol=0)
    close(norm.invert(out), v)
    close(norm.size, np.ptp(v, axis=0).max())
    t = torch.tensor(v, dtype=torch.float32, requires_grad=True)
    out_t = norm.apply(t)
    assert out_t.dtype == torch.float32 and out_t.requires_grad
    assert_close(out_t.detach(), torch.tensor(out, dtype=torch.float32))
    assert_close(norm.invert(out_t).detach(), t.detach())
    again = Normalization.from_dict(norm.to_dict())
    close(again.center, norm.center)
    assert again.scale == norm.scale
    assert Normalization.from_vertices(t).scale == pytest.approx(norm.scale)


def test_normalization_rejects_bad_input():
    with pytest.raises(MeshError, match="zero-size"):
        Normalization.from_vertices(np.ones((5, 3)))
    with pytest.raises(MeshError, match="positive"):
        Normalization(center=np.zeros(3), scale=0.0)
    with pytest.raises(MeshError, match="'center' and 'scale'"):
        Normalization.from_dict({"scale": 1.0})


# ---------------------------------------------------------------- areas and sampling


def test_areas():
    close(face_areas(TETRA_V, TETRA_F), [0.5, 0.5, 0.5, np.sqrt(3) / 2])
    va = vertex_areas(TETRA_V, TETRA_F)
    close(va.sum(), face_areas(TETRA_V, TETRA_F).sum())
    close(va[0], 0.5)
    normals = face_normals(TETRA_V, TETRA_F)
    close(normals[0], [0.0, 0.0, -1.0])  # outward for this winding


def test_sampling_is_area_uniform():
    # two disjoint triangles with areas 1 : 4
    v = np.array([[0, 0, 0], [1, 0, 0], [0, 2, 0], [5, 0, 0], [7, 0, 0], [5, 4, 0]], dtype=float)
    f = np.array([[0, 1, 2], [3, 4, 5]])
    n = 20_000
    samples = sample_surface(v, f, n, np.random.default_rng(1))
    assert samples.face_ids.dtype == np.int64 and samples.barycentrics.shape == (n, 3)
    assert_within(samples.barycentrics, above=0, what="barycentrics")
    close(samples.barycentrics.sum(1), np.ones(n))
    big = int((samples.face_ids == 1).sum())
    # binomial(n, 0.8): std = 57; allow 5 std
    assert abs(big - 0.8 * n) < 5 * np.sqrt(n * 0.8 * 0.2)
    # inside one triangle, the points are uniform: each of the 4 midpoint sub-triangles gets 1/4
    b = samples.barycentrics[samples.face_ids == 1]
    corner = (b > 0.5).argmax(1) + 3 * (b <= 0.5).all(1)  # 0, 1, 2 = corner triangles, 3 = middle
    counts = np.bincount(corner, minlength=4)
    expected = len(b) / 4
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 16.3  # chi-square, 3 dof, p = 0.001


def test_locate_follows_a_rigid_motion_numpy_and_torch():
    rng = np.random.default_rng(2)
    samples = sample_surface(TETRA_V, TETRA_F, 500, rng)
    rest_points = locate(TETRA_V, TETRA_F, samples)
    rot = Rotation.from_euler("zyx", [0.4, 1.2, -0.3]).as_matrix()
    frames = np.stack([TETRA_V, TETRA_V @ rot.T + [1.0, 2.0, 3.0]])  # (2, 4, 3)
    moved = locate(frames, TETRA_F, samples)
    assert moved.shape == (2, 500, 3)
    close(moved[0], rest_points)
    close(moved[1], rest_points @ rot.T + [1.0, 2.0, 3.0])
    t = torch.tensor(frames, requires_grad=True)
    out = locate(t, TETRA_F, samples)
    assert_close(out.detach(), torch.tensor(moved))
    out.sum().backward()
    assert t.grad is not None and t.grad.abs().sum() > 0
    # the samples really lie on the surface: on the plane of their face
    normals = face_normals(TETRA_V, TETRA_F)[samples.face_ids]
    offset = ((rest_points - TETRA_V[TETRA_F[samples.face_ids, 0]]) * normals).sum(1)
    close(offset, np.zeros(500), atol=1e-12, rtol=0)
    pts = sample_surface_points(TETRA_V, TETRA_F, 7, np.random.default_rng(0))
    assert pts.shape == (7, 3)
    pts_t = sample_surface_points(
        torch.tensor(TETRA_V, requires_grad=True),
        torch.tensor(TETRA_F),
        7,
        np.random.default_rng(0),
    )
    assert pts_t.requires_grad
    assert_close(pts_t.detach(), torch.tensor(pts))


def test_sampling_rejects_bad_input():
    with pytest.raises(MeshError, match="at least 1"):
        sample_surface(TETRA_V, TETRA_F, 0, np.random.default_rng(0))
    with pytest.raises(MeshError, match="zero"):
        sample_surface(np.zeros((4, 3)), TETRA_F, 5, np.random.default_rng(0))


# ---------------------------------------------------------------- point sets


def test_nearest_neighbors_match_brute_force():
    rng = np.random.default_rng(4)
    points, queries = rng.normal(size=(300, 3)), rng.normal(size=(50, 3))
    all_d = np.linalg.norm(queries[:, None] - points[None], axis=-1)  # (50, 300)
    order = np.argsort(all_d, axis=1)
    for k in (1, 5):
        dist, idx = nearest_neighbors(points, queries, k)
        assert dist.shape == (50, k) and idx.shape == (50, k) and idx.dtype == np.int64
        np.testing.assert_array_equal(idx, order[:, :k])
        close(dist, np.take_along_axis(all_d, order[:, :k], axis=1))
    with pytest.raises(MeshError, match="k must lie"):
        nearest_neighbors(points, queries, 301)


def test_farthest_point_subsample_spreads_points():
    rng = np.random.default_rng(5)
    # a dense cluster and four far corners: the corners must be picked
    cluster = rng.normal(scale=0.01, size=(200, 3))
    corners = np.array([[5, 5, 5], [-5, 5, 5], [5, -5, 5], [5, 5, -5.0]])
    points = np.vstack([cluster, corners])
    chosen = farthest_point_subsample(points, 5, rng)
    assert chosen.dtype == np.int64 and len(set(chosen.tolist())) == 5
    assert set(range(200, 204)) <= set(chosen.tolist())
    with pytest.raises(MeshError, match="count must lie"):
        farthest_point_subsample(points, 205, rng)


def test_farthest_point_subsample_is_the_greedy_samples_of_numpy():
    """The compiled sampling against the greedy farthest-point sampling written in numpy
    (argmax of each point's squared distance to the nearest chosen point, the first of
    equals): the same indices, also where many distances tie (points on a coarse lattice)."""

    def greedy(p, count, first):
        chosen = [first]
        nearest = ((p - p[first]) ** 2).sum(1)
        for _ in range(1, count):
            chosen.append(int(np.argmax(nearest)))
            np.minimum(nearest, ((p - p[chosen[-1]]) ** 2).sum(1), out=nearest)
        return np.array(chosen)

    for seed in range(3):
        points = np.random.default_rng(seed).normal(size=(3000, 3)).round(1)  # ties
        first = int(np.random.default_rng(seed).integers(len(points)))
        chosen = farthest_point_subsample(points, 200, np.random.default_rng(seed))
        np.testing.assert_array_equal(chosen, greedy(points, 200, first))
