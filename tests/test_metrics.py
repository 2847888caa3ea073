"""Metrics of design section 6 against analytic values."""

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from neurok_core.errors import MeshError
from neurok_core.geometry import sample_surface_points
from neurok_core.metrics import (
    chamfer_distance,
    compare_meshes,
    drag_alignment,
    edge_strain,
    energy_drift,
    occupancy_iou,
    part_rigidity_error,
    rigid_fit_residual,
    winding_numbers,
)


@pytest.fixture(scope="module")
def sphere():
    mesh = trimesh.creation.icosphere(subdivisions=5)  # 20,480 faces, radius 1
    return np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)


def cube(shift=0.0):
    mesh = trimesh.creation.box(extents=(1.0, 1.0, 1.0))
    return np.asarray(mesh.vertices) + [shift, 0.0, 0.0], np.asarray(mesh.faces)


def test_chamfer_of_concentric_spheres(sphere):
    v, f = sphere
    # a small gap keeps the k-d tree fast (a far nearest neighbour makes queries slow); the
    # sample spacing then adds a known bias of E[rho^2] / (2 gap) ~ 2e-4 to L1 (rho: the lateral
    # offset to the nearest sample, E[rho^2] = 1 / (pi * density))
    r1, r2 = 0.9, 1.0
    rng = np.random.default_rng(0)
    inner = sample_surface_points(v * r1, f, 100_000, rng)
    outer = sample_surface_points(v * r2, f, 100_000, rng)
    l1, l2 = chamfer_distance(inner, outer)
    assert l1 == pytest.approx(r2 - r1, rel=5e-3)
    assert l2 == pytest.approx((r2 - r1) ** 2, rel=1e-2)
    assert chamfer_distance(outer, inner) == pytest.approx((l1, l2))


def test_chamfer_of_a_mesh_with_itself_is_near_zero(sphere):
    v, f = sphere
    a = sample_surface_points(v, f, 20_000, np.random.default_rng(1))
    b = sample_surface_points(v, f, 20_000, np.random.default_rng(2))
    l1, l2 = chamfer_distance(a, b)
    # independent uniform points of density lam on a surface: the nearest one lies at mean
    # distance 1 / (2 sqrt(lam)), mean squared distance 1 / (pi lam)
    lam = 20_000 / (4 * np.pi)
    assert l1 == pytest.approx(0.5 / np.sqrt(lam), rel=0.05)
    assert l2 == pytest.approx(1 / (np.pi * lam), rel=0.05)
    assert chamfer_distance(a, a) == (0.0, 0.0)


def test_chamfer_simple_values():
    a = np.array([[0.0, 0, 0], [1, 0, 0]])
    b = np.array([[0.0, 0, 2]])
    # a->b: 2, sqrt(5); b->a: 2
    l1, l2 = chamfer_distance(a, b)
    assert l1 == pytest.approx(0.5 * ((2 + np.sqrt(5)) / 2 + 2))
    assert l2 == pytest.approx(0.5 * ((4 + 5) / 2 + 4))
    with pytest.raises(MeshError, match="points_b"):
        chamfer_distance(a, np.zeros((0, 3)))


def test_iou_of_concentric_spheres(sphere):
    v, f = sphere
    r1, r2 = 0.7, 1.0
    iou = occupancy_iou(v * r1, f, v * r2, f, rng=np.random.default_rng(3))
    # ~40k points in the union: std of the estimate ~0.0024
    assert iou == pytest.approx((r1 / r2) ** 3, abs=0.012)


def test_iou_of_shifted_cubes():
    d = 0.2
    iou = occupancy_iou(*cube(), *cube(d), rng=np.random.default_rng(4))
    assert iou == pytest.approx((1 - d) / (1 + d), rel=0.01)
    assert occupancy_iou(*cube(), *cube(), samples=5_000) == 1.0
    assert occupancy_iou(*cube(), *cube(3.0), samples=5_000) == 0.0


def test_iou_needs_closed_meshes():
    plane_v = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0.0]])
    plane_f = np.array([[0, 1, 2], [0, 2, 3]])
    with pytest.raises(MeshError, match="closed"):
        occupancy_iou(plane_v, plane_f, plane_v, plane_f, samples=1_000)


def test_winding_number_inside_outside(sphere):
    v, f = sphere
    w = winding_numbers(v, f, np.array([[0, 0, 0], [0.5, 0.2, 0.1], [2.0, 0, 0], [0, 0, -1.5]]))
    np.testing.assert_allclose(w, [1, 1, 0, 0], atol=5e-3)  # Barnes-Hut approximation


def test_compare_meshes_is_in_the_rest_frame():
    # the same relative error at two scales gives the same numbers: metrics live in M0's frame
    rest_v, faces = cube()
    gt_v, _ = cube(0.1)
    scores = []
    for scale in (1.0, 7.0):
        scores.append(
            compare_meshes(
                rest_v * scale,
                rest_v * scale,
                faces,
                gt_v * scale,
                faces,
                closed=True,
                samples=20_000,
            )
        )
    assert scores[0]["iou"] == pytest.approx(0.9 / 1.1, rel=0.02)
    for key in ("chamfer_l1", "chamfer_l2", "iou"):
        assert scores[1][key] == pytest.approx(scores[0][key], rel=1e-9)
    assert 0.0 < scores[0]["chamfer_l1"] < 0.1
    open_score = compare_meshes(rest_v, rest_v, faces, rest_v, faces, closed=False, samples=2_000)
    assert open_score["iou"] is None
    assert open_score["chamfer_l1"] < 0.05


# ---------------------------------------------------------------- plausibility


def test_rigid_fit_residual_analytic():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(30, 3))
    rot = Rotation.from_euler("xyz", [2.0, -0.5, 0.9]).as_matrix()
    s = 1.3
    targets = np.stack([x @ rot.T + 4.0, s * x, x * [1, 1, -1]])  # rigid, scaled, mirrored
    res = rigid_fit_residual(x, targets)
    assert res[0] == pytest.approx(0.0, abs=1e-12)
    centred = x - x.mean(0)
    assert res[1] == pytest.approx(abs(s - 1) * np.sqrt((centred**2).sum(1).mean()))
    assert res[2] > 0.1  # a reflection is not a proper rotation


def test_part_rigidity_error():
    rng = np.random.default_rng(7)
    rest = rng.uniform(size=(60, 3)) * [2.0, 1.0, 1.0]  # longest side ~2
    parts = np.repeat([0, 1, -1], 20)
    rot = Rotation.from_euler("z", 0.8).as_matrix()
    rigid = rest.copy()
    rigid[:20] = rest[:20] @ rot.T + [0.3, 0, 0]
    rigid[20:40] = rest[20:40] + [0, 0, 1.0]
    rigid[40:] = rng.normal(size=(20, 3))  # unlabelled vertices may do anything
    frames = np.stack([rest, rigid])
    err = part_rigidity_error(rest, frames, parts)
    assert err.shape == (2,)
    np.testing.assert_allclose(err, 0.0, atol=1e-12)

    sheared = rest.copy()
    shear = np.array([[1.0, 0.4, 0.0], [0, 1, 0], [0, 0, 1]])
    sheared[:20] = rest[:20] @ shear.T
    err = part_rigidity_error(rest, np.stack([rest, sheared]), parts)
    size = np.ptp(rest, axis=0).max()
    expected = 20 * rigid_fit_residual(rest[:20], sheared[None, :20])[0] / 40 / size
    assert err[0] == pytest.approx(0.0, abs=1e-12)
    assert err[1] == pytest.approx(expected) and err[1] > 1e-3
    with pytest.raises(MeshError, match="part label"):
        part_rigidity_error(rest, frames, np.full(60, -1))


def test_edge_strain_of_uniform_scaling(sphere):
    v, f = sphere
    frames = np.stack([v, 1.25 * v, 0.9 * v + 3.0])
    np.testing.assert_allclose(edge_strain(v, frames, f), [0.0, 0.25, 0.1], atol=1e-12)
    stretched = v * [1.5, 1.0, 1.0]
    strain = edge_strain(v, stretched[None], f)[0]
    assert 0.0 < strain < 0.5
    with pytest.raises(MeshError, match=r"\(T, 10242, 3\)"):
        edge_strain(v, v, f)


def test_energy_drift():
    assert energy_drift([2.0, 2.1, 1.8, 2.05]) == pytest.approx(0.1)
    assert energy_drift([-4.0, -4.2, -3.9]) == pytest.approx(0.05)
    assert energy_drift([0.0, 1.0, -2.0]) == pytest.approx(1.0)  # E0 = 0: scale max |E|
    assert energy_drift([0.0, 0.0]) == 0.0
    assert energy_drift([1.0, np.nan]) == np.inf


def test_drag_alignment():
    path = np.array([[0.0, 0, 0], [1, 0, 0], [2, 0, 0]])
    assert drag_alignment(path, [2.0, 0.0, 1.0], 2, 4.0) == pytest.approx(0.25)
    assert drag_alignment(path, [1.0, 0.0, 0.0], 1, 4.0) == 0.0
    with pytest.raises(MeshError, match="outside"):
        drag_alignment(path, [0, 0, 0], 3, 1.0)
    with pytest.raises(MeshError, match="positive"):
        drag_alignment(path, [0, 0, 0], 0, 0.0)


def test_self_crossings_counts_a_fold_through_the_sheet_and_not_a_fold_beside_it():
    from neurok_core.metrics import self_crossings

    # a 10 x 10 grid folded about x = 0.5: the far half laid back over the near half, 5 cm above
    # it (no crossing), then pushed 5 cm below it (through it: every folded-back edge that
    # spans the near half's plane)
    n = 11
    xs, ys = np.meshgrid(np.linspace(0, 1, n), np.linspace(0, 1, n), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(n * n)], 1)
    i, j = np.meshgrid(np.arange(n - 1), np.arange(n - 1), indexing="ij")
    a = (i * n + j).ravel()
    f = np.concatenate([np.stack([a, a + n, a + n + 1], 1), np.stack([a, a + n + 1, a + 1], 1)])
    assert self_crossings(v, f) == 0
    folded = v.copy()
    far = folded[:, 0] > 0.5
    folded[far, 0] = 1.0 - folded[far, 0]  # laid back over the near half
    folded[far, 2] = 0.05 * (v[far, 0] - 0.5) / 0.5  # rising from the fold to 5 cm
    assert self_crossings(folded, f) == 0
    folded[far, 2] = -folded[far, 2] + 0.02  # now it passes down through the near half
    assert self_crossings(folded, f) > 0
