"""Contact (design section 11): signed distances to the ground and collider meshes, the penalty
forces, the free translation, and objects that land on obstacles and come to rest."""

import json

import numpy as np
import pytest
import torch
import trimesh
from bounds import assert_within

from neurok_core.dynamics import (
    Collider,
    InitialVelocity,
    MechanicalSystem,
    SimulationConditions,
    simulate,
)
from neurok_core.dynamics.contact import ContactForces
from neurok_core.dynamics.obstacles import MeshDistance, Obstacles, closest_on_triangles
from neurok_core.errors import ConditionError

F64 = torch.float64


def box_sdf(p, half):
    q = np.abs(p) - half
    return np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(1), 0)


# -- distances -----------------------------------------------------------------------------------
def test_closest_points_on_a_triangle_match_a_dense_sampling():
    rng = np.random.default_rng(0)
    a, b, c = np.array([0.0, 0, 0]), np.array([1.0, 0, 0]), np.array([0.2, 0.8, 0])
    u, v = np.meshgrid(np.linspace(0, 1, 301), np.linspace(0, 1, 301))
    keep = (u + v) <= 1
    dense = a + u[keep, None] * (b - a) + v[keep, None] * (c - a)  # (D, 3)
    p = rng.uniform(-1, 2, (200, 3))
    n = len(p)
    closest, feature = closest_on_triangles(
        p, np.tile(a, (n, 1)), np.tile(b, (n, 1)), np.tile(c, (n, 1))
    )
    exact = np.linalg.norm(p - closest, axis=1)
    sampled = np.linalg.norm(p[:, None] - dense[None], axis=2).min(1)
    assert_within(exact, below=sampled + 1e-12, what="exact distance vs the sampled one")
    assert np.allclose(exact, sampled, atol=5e-3)
    assert set(np.unique(feature)) == set(range(7))  # every region met: face, vertices, edges


@pytest.mark.parametrize("sphere", [False, True])
def test_mesh_distances_are_signed_and_the_grid_follows_them(sphere):
    if sphere:
        mesh = trimesh.creation.icosphere(2, 0.5)
        reference, tol = (lambda p: np.linalg.norm(p, axis=1) - 0.5), 0.02  # facets
    else:
        mesh = trimesh.creation.box((1.0, 0.6, 0.4))
        reference, tol = (lambda p: box_sdf(p, np.array([0.5, 0.3, 0.2]))), 1e-12
    md = MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.1)
    p = np.random.default_rng(1).uniform(-0.7, 0.7, (1500, 3))
    d = md.exact(p)
    assert np.abs(d - reference(p)).max() < tol
    near = md.near(p) & (np.abs(d) < 0.08)
    g, grad = md.query(p[near])
    # trilinear interpolation of exact node values: exact on flat faces, about a cell at edges
    assert np.abs(g - d[near]).max() < 0.02 and np.median(np.abs(g - d[near])) < 1e-3
    e = 1e-7
    fd = np.stack(
        [
            (md.query(p[near] + e * ax)[0] - md.query(p[near] - e * ax)[0]) / (2 * e)
            for ax in np.eye(3)
        ],
        1,
    )
    assert np.abs(fd - grad).max() < 1e-5  # the gradient is that of the interpolant


def test_the_grid_computes_only_the_nodes_its_queries_visit_and_each_exactly():
    """A node is its exact signed distance (clipped to the band) and is computed when a query
    first needs it: one point costs its cell's 8 nodes, not its block's 729."""
    mesh = trimesh.creation.icosphere(2, 0.5)
    md = MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.08)
    md.query(np.array([[0.51, 0.013, -0.007]]))
    assert md.blocks == 1 and np.isfinite(md._store[:1]).sum() == 8
    # grid nodes near the surface, inside and out: the interpolant there is the node's value
    rng = np.random.default_rng(3)
    dirs = rng.normal(size=(400, 3))
    p = (dirs / np.linalg.norm(dirs, axis=1, keepdims=True)) * rng.uniform(0.3, 0.7, (400, 1))
    nodes = md.lo + np.round((p - md.lo) / md.cell) * md.cell
    nodes = nodes[md.near(nodes)]
    d, _ = md.query(nodes)
    np.testing.assert_allclose(d, np.clip(md.exact(nodes), -0.08, 0.08), atol=1e-12)


def test_the_grid_fills_its_nodes_in_bounded_chunks_with_the_same_values(monkeypatch):
    from neurok_core.dynamics import obstacles

    mesh = trimesh.creation.icosphere(3, 0.5)
    x = np.random.default_rng(4).uniform(-0.6, 0.6, (1500, 3))
    whole = MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.08).query(x)
    monkeypatch.setattr(obstacles, "_PAIRS", 300)  # a few nodes' pairs a chunk
    chunked = MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.08).query(x)
    for a, b in zip(whole, chunked, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fine, nearest", [(False, 32), (True, 32), (True, 2)])
def test_a_fine_mesh_fills_its_grid_by_its_triangles_tree_with_the_exact_values(
    monkeypatch, fine, nearest
):
    """Above ``FINE_FACES`` faces a node tries only the triangles near it (a k-d tree of their
    centroids) instead of its block's every candidate: the same exact distances, inside, near
    and beyond the band (a box's corners and edges, whose nearest triangle is not the nearest
    centroid's), also where a node's ``FINE_NEAREST`` nearest centroids are too few (2: most
    nodes search their ball)."""
    from neurok_core.dynamics import obstacles

    mesh = trimesh.creation.box((0.4, 0.3, 0.2)).subdivide().subdivide().subdivide()
    monkeypatch.setattr(obstacles, "FINE_FACES", 0 if fine else 10**9)
    monkeypatch.setattr(obstacles, "FINE_NEAREST", nearest)
    md = MeshDistance(mesh.vertices, mesh.faces, cell=0.01, band=0.04)
    x = np.random.default_rng(5).uniform(-0.3, 0.3, (3000, 3))
    x = x[md.near(x)]
    nodes = md.lo + np.round((x - md.lo) / md.cell) * md.cell  # grid nodes: exact values
    d, _ = md.query(nodes)
    np.testing.assert_allclose(
        d, np.clip(box_sdf(nodes, [0.2, 0.15, 0.1]), -0.04, 0.04), atol=1e-12
    )


def test_the_cheap_distance_bound_never_exceeds_the_exact_distance():
    mesh = trimesh.creation.box((1.0, 0.6, 0.4))
    obstacles = Obstacles(-1.0, [MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.1)])
    p = np.random.default_rng(2).uniform(-3.0, 3.0, (2000, 3))
    p = p[box_sdf(p, np.array([0.5, 0.3, 0.2])) > 0]  # outside the box
    exact = np.minimum(box_sdf(p, np.array([0.5, 0.3, 0.2])), p[:, 2] + 1.0)
    bound = obstacles.farther_than(p)
    assert (bound <= exact + 1e-12).all()
    assert np.median(bound / np.maximum(exact, 1e-9)) > 0.9  # and close: a box is its own box
    assert np.isinf(Obstacles(None).farther_than(p)).all()


@pytest.mark.parametrize("sphere", [False, True])
def test_distances_within_a_band_match_the_reference_and_leave_the_rest_out(sphere):
    mesh = trimesh.creation.icosphere(3, 0.5) if sphere else trimesh.creation.box((1, 0.6, 0.4))
    if sphere:
        reference = lambda p: np.linalg.norm(p, axis=1) - 0.5  # noqa: E731
        tol = 0.01  # facets
    else:
        reference, tol = (lambda p: box_sdf(p, np.array([0.5, 0.3, 0.2]))), 1e-12
    md = MeshDistance(mesh.vertices, mesh.faces, cell=0.02, band=0.1)
    p = np.random.default_rng(2).uniform(-0.7, 0.7, (3000, 3))
    band = 0.05
    d = md.within(p, band)
    ref = reference(p)
    inside_band = np.abs(ref) < band - tol
    assert np.abs(d[inside_band] - ref[inside_band]).max() < tol  # signed and exact
    far = np.abs(ref) > band + tol
    assert np.isinf(d[far]).all()  # farther than the band: +inf
    assert_within(d[far], above=0, strict=True, what="distance beyond the band")
    both = np.isfinite(d)
    assert np.array_equal(d[both], md.exact(p[both]))  # the same value as the brute force


def test_an_open_plane_is_solid_below_its_normals():
    v = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0]], dtype=float)
    md = MeshDistance(v, [[0, 1, 2], [0, 2, 3]], cell=0.05, band=0.2)
    assert md.exact([[0.2, 0.3, 0.1]])[0] == pytest.approx(0.1)
    assert md.exact([[0.2, 0.3, -0.1]])[0] == pytest.approx(-0.1)
    with pytest.raises(ValueError, match="no face of positive area"):
        MeshDistance([[0, 0, 0], [1, 0, 0], [2, 0, 0]], [[0, 1, 2]], cell=0.1, band=0.2)


# -- forces ---------------------------------------------------------------------------------
def _forces(**kw):
    args = dict(omega=200.0, zeta=2.0, sticking=0.5, friction=0.5, margin=0.002, hard=0.004)
    args.update(kw)
    masses = np.full(5, 0.2)
    return ContactForces(Obstacles(0.0), masses, **args)


def test_the_penalty_is_conservative_and_damping_and_friction_only_remove_energy():
    c = _forces()
    rng = np.random.default_rng(0)
    x = np.column_stack([rng.uniform(-1, 1, (5, 2)), [-0.004, -0.001, 0.001, 0.003, 0.5]])
    energy, force, power = c.evaluate(x, np.zeros_like(x))
    assert energy > 0 and power == 0.0
    e = 1e-7
    for i in range(5):
        xp, xm = x.copy(), x.copy()
        xp[i, 2] += e
        xm[i, 2] -= e
        assert -(c.energy(xp) - c.energy(xm)) / (2 * e) == pytest.approx(
            force[i, 2], rel=1e-5, abs=1e-9
        )
    assert force[3:].tolist() == [[0, 0, 0]] * 2 and force[:3, 2].min() > 0  # beyond the margin
    # moving: the normal force never pulls, friction opposes sliding and is at most mu f_n
    v = rng.normal(size=(5, 3))
    v[0, 2] = 50.0  # leaving fast
    _, force, power = c.evaluate(x, v)
    assert force[0, 2] == 0.0 and power <= 0.0
    tangential = force[:4, :2]
    assert_within((tangential * v[:4, :2]).sum(1), below=0, what="friction . sliding velocity")
    friction = np.linalg.norm(tangential, axis=1)
    assert_within(friction, below=0.5 * force[:4, 2] + 1e-12, what="friction vs mu f_n")


# -- dynamics --------------------------------------------------------------------------------
def _box_points():
    g = np.linspace(-0.1, 0.1, 5)
    x, y, z = np.meshgrid(g, g, [0.0, 0.05])
    return torch.tensor(np.stack([x.ravel(), y.ravel(), z.ravel() + 0.3], 1), dtype=F64)


def _translating_box():
    """A rigid 20 x 20 x 5 cm block of points whose coordinates are its translation."""
    rest = _box_points()
    eye = torch.eye(3, dtype=F64)

    def decode(q):
        return rest + q

    def kinematics(q, v):
        return rest + q, eye.expand(len(rest), 3, 3).clone(), torch.zeros_like(rest)

    return MechanicalSystem(
        decode_points=decode,
        point_weights=torch.ones(len(rest), dtype=F64),
        num_coords=3,
        dtype=F64,
        kinematics=kinematics,
    )


@pytest.mark.parametrize("obstacle", ["ground", "collider"])
def test_a_dropped_block_lands_and_rests_on_the_obstacle(obstacle):
    table = trimesh.creation.box((1.0, 1.0, 0.1))
    table.apply_translation((0.0, 0.0, 0.05))  # top at z = 0.1
    extra = (
        {"ground": 0.1}
        if obstacle == "ground"
        else {"colliders": (Collider(table.vertices.tolist(), table.faces.tolist(), "table"),)}
    )
    cond = SimulationConditions(
        mass=2.0, frames=49, velocities=[{"velocity": (0.5, 0, 0)}], **extra
    )
    traj = simulate(_translating_box(), cond, {})
    bottom = 0.3 + traj.q[:, 2].numpy()  # the block's lowest points
    size = 0.2
    assert bottom.min() > 0.1 - 0.01 * size  # never deeper than 1% of the size
    assert abs(bottom[-1] - 0.1) < 0.01 * size  # resting on the top
    assert bottom[5] < 0.2  # it fell
    last = traj.q[-10:].numpy()
    assert np.abs(last - last[-1]).max() < 0.005 * size  # at rest
    slide = traj.q[-1, 0].item()
    assert 0.0 < slide < 0.5 * 2.0  # friction stopped its sliding
    work = traj.work.numpy()
    assert work[-1] < 0  # contact damping and friction removed energy, booked as work
    # and reported as the contact's own share: here the only non-conservative force
    assert traj.contact_work == pytest.approx(work[-1], rel=0.05)
    balance = (traj.energy - traj.work - traj.energy[0]).abs().max().item()
    assert balance < 1e-2 * traj.energy.abs().max().item()


def test_an_object_starting_deep_inside_an_obstacle_is_refused():
    cond = SimulationConditions(frames=3, ground=0.33)  # 3 cm into the 5 cm block: 15% of 0.2 m
    with pytest.raises(ConditionError, match="inside the ground or a collider"):
        simulate(_translating_box(), cond, {})


def test_undamped_motion_without_contact_is_unchanged_by_the_contact_code():
    """A block flying over a ground it never reaches conserves energy as before."""
    cond = SimulationConditions(
        mass=1.0, frames=121, gravity=(0, 0, 0), velocities=[{"velocity": (1.0, 0, 0)}], ground=-5.0
    )
    traj = simulate(_translating_box(), cond, {})
    assert traj.q[-1, 0].item() == pytest.approx(5.0, rel=1e-6)
    assert (traj.energy - traj.energy[0]).abs().max().item() < 1e-9


# -- conditions -------------------------------------------------------------------------------
def test_colliders_are_validated_and_cross_json():
    box = trimesh.creation.box((0.2, 0.2, 0.2))
    c = Collider(box.vertices.tolist(), box.faces.tolist(), "crate")
    cond = SimulationConditions(ground=0.0, colliders=[c], friction=0.8)
    back = SimulationConditions.from_dict(json.loads(json.dumps(cond.to_dict())))
    assert back == cond and back.contact and not SimulationConditions().contact
    with pytest.raises(ConditionError, match="uses vertex 9"):
        Collider([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [(0, 1, 9)], "bad")
    with pytest.raises(ConditionError, match="no faces"):
        Collider([(0, 0, 0)], [], "empty")
    with pytest.raises(ConditionError, match="triangles"):
        Collider([(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)], [(0, 1, 2, 3)], "quad")
    with pytest.raises(ConditionError, match="finite"):
        SimulationConditions(ground=float("nan"))
    with pytest.raises(ConditionError, match="friction"):
        SimulationConditions(friction=-1)


def test_a_grid_too_big_for_its_block_table_answers_the_same():
    """A collider far larger than the object's cell keeps its blocks in a dictionary: the same
    distances as a grid that indexes them with an array."""
    from neurok_core.dynamics import obstacles

    floor = trimesh.creation.box((2.0, 2.0, 0.1))
    points = np.random.default_rng(0).uniform(-0.2, 0.2, (50, 3))
    table = obstacles.MeshDistance(floor.vertices, floor.faces, 0.01, 0.04)
    limit = obstacles.MAX_TABLE
    obstacles.MAX_TABLE = 10
    try:
        plain = obstacles.MeshDistance(floor.vertices, floor.faces, 0.01, 0.04)
    finally:
        obstacles.MAX_TABLE = limit
    assert table._slot_of is not None and plain._slot_of is None
    for a, b in zip(table.query(points), plain.query(points), strict=True):
        np.testing.assert_array_equal(a, b)


def test_rolling_resistance_gradient_and_hessian_match_finite_differences():
    """The rolling resistance's energy over a step, both below its slip angle (quadratic) and
    beyond it: its gradient and Hessian against central differences (float64)."""
    from neurok_core.rigspace.contact import RollingResistance

    rng = np.random.default_rng(7)
    q0 = np.zeros((2, 4, 3))
    q0[:, :3, :] = np.eye(3) + 0.05 * rng.normal(size=(2, 3, 3))
    q0[:, 3, :] = rng.normal(size=(2, 3))
    rolling = RollingResistance(0.02, {0: np.array([0, 1])}, {0: 0.3})
    normals = np.tile([0.0, 0.0, 1.0], (4, 1))
    lag = rolling.lag(q0, np.zeros(4, dtype=int), normals, np.full(4, 2.5))
    for turn, slip in ((1e-4, 1e-2), (0.05, 1e-4)):  # inside the slip angle, then beyond
        q = q0 + turn * rng.normal(size=q0.shape)
        value, grad, hess = rolling.energy(q, lag, slip, True)
        assert value > 0
        eps = 1e-7
        for i in rng.choice(q.size, 8, replace=False):
            d = np.zeros(q.size)
            d[i] = eps
            up = rolling.energy(q + d.reshape(q.shape), lag, slip, True)
            down = rolling.energy(q - d.reshape(q.shape), lag, slip, True)
            assert (up[0] - down[0]) / (2 * eps) == pytest.approx(
                grad.reshape(-1)[i], rel=1e-5, abs=1e-9
            )
            column = (up[1] - down[1]).reshape(-1) / (2 * eps)
            np.testing.assert_allclose(
                column, hess[:, i], rtol=1e-4, atol=1e-6 * np.abs(hess).max()
            )
    # a spin about the contact's normal is not resisted, a roll across it is
    still = np.zeros((2, 4, 3))
    still[:, :3, :] = np.eye(3)
    lag = rolling.lag(still, np.zeros(4, dtype=int), normals, np.full(4, 2.5))
    for axis, resisted in ((2, False), (0, True)):
        turned = still.copy()
        turned[:, :3, :] = trimesh.transformations.rotation_matrix(1e-3, np.eye(3)[axis])[:3, :3].T
        assert (rolling.energy(turned, lag, 1e-4, False)[0] > 1e-9) == resisted


def test_a_rolling_ball_slows_down_by_its_rolling_resistance():
    """A ball rolling on the ground loses speed to its facets' impacts alone; a rolling
    resistance adds a deceleration of about its torque over the ball's rolling inertia (a
    shell's mass: 5/3 m r), in proportion to its coefficient."""
    from neurok_core.rigspace import RigSettings, simulate_rig

    mesh = trimesh.creation.icosphere(3, radius=0.1)
    v = np.asarray(mesh.vertices) + [0.0, 0.0, 0.1]
    cond = SimulationConditions(
        ground=0.0,
        frames=49,
        fps=24.0,
        damping=0.0,
        friction=0.5,
        bounciness=0.0,
        velocities=(InitialVelocity((1.0, 0.0, 0.0)),),
    )

    def deceleration(resistance):
        settings = RigSettings(rolling_resistance=resistance)
        x = simulate_rig(v, mesh.faces, cond, settings=settings).positions[:, :, 0].mean(1)
        early, late = (x[8] - x[4]) * 6.0, (x[48] - x[44]) * 6.0  # m/s over 4 frames
        return (early - late) / (40 / 24.0)

    base, once, twice = (deceleration(r) for r in (0.0, 0.01, 0.02))
    expected = 0.01 * 0.2 * 9.81 / (0.1 * 5 / 3)  # torque / (r (1 + 2/3)) per kg: 0.118 m/s^2
    assert once - base == pytest.approx(expected, rel=0.4)
    assert twice - base == pytest.approx(2 * (once - base), rel=0.2)


def test_a_fine_mesh_with_long_triangles_keeps_the_right_sign_above_them():
    """A cylinder of 43k faces whose caps are fans of long triangles: the grid above a cap,
    beyond the band, reads +band (outside), not a phantom contact (the nearest triangle of a
    fan is not the one whose centroid is nearest)."""
    seg, rings = 1024, 20
    theta = np.linspace(0, 2 * np.pi, seg, endpoint=False)
    rim = [
        np.c_[0.5 * np.cos(theta), 0.5 * np.sin(theta), np.full(seg, z)]
        for z in np.linspace(0, 1, rings + 1)
    ]
    v = np.concatenate([*rim, [[0, 0, 0]], [[0, 0, 1]]])
    i = np.arange(seg)
    sides = [
        np.concatenate(
            [
                np.c_[r * seg + i, r * seg + (i + 1) % seg, (r + 1) * seg + (i + 1) % seg],
                np.c_[r * seg + i, (r + 1) * seg + (i + 1) % seg, (r + 1) * seg + i],
            ]
        )
        for r in range(rings)
    ]
    bottom, top = len(v) - 2, len(v) - 1
    caps = [
        np.c_[np.full(seg, bottom), (i + 1) % seg, i],
        np.c_[np.full(seg, top), rings * seg + i, rings * seg + (i + 1) % seg],
    ]
    f = np.concatenate([*sides, *caps])
    md = MeshDistance(v, f, cell=0.01, band=0.04)
    points = np.array([[0.45, 0.0, 1.0 + h] for h in (0.02, 0.035, 0.045, 0.06)])
    np.testing.assert_allclose(md.query(points)[0], [0.02, 0.035, 0.04, 0.04], atol=1e-9)


def test_within_breaks_a_tie_as_exact_does_on_a_two_sided_sheet():
    """A square as two large triangles facing +z, and again as eight small ones facing -z:
    a point above it is equally near both; ``within`` takes the first triangle, as ``exact``
    does, so the two agree on its side."""
    big = [[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0]]
    grid = [[x, y, 0.0] for x in (0, 0.5, 1) for y in (0, 0.5, 1)]
    small = []
    for i in range(2):
        for j in range(2):
            a = i * 3 + j
            small += [[a, a + 4, a + 3], [a, a + 1, a + 4]]  # wound to face -z
    v = np.array(big + grid, dtype=np.float64)
    f = np.array([[0, 1, 2], [0, 2, 3]] + (np.array(small) + 4).tolist())
    mesh = MeshDistance(v, f, cell=0.05, band=0.2)
    p = np.array([[0.3, 0.2, 0.1], [0.7, 0.6, -0.1]])
    np.testing.assert_allclose(mesh.within(p, 0.2), mesh.exact(p))
    np.testing.assert_allclose(mesh.exact(p), [0.1, -0.1])
