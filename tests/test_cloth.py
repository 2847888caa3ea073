"""Cloth at its own resolution (neurok_core.rigspace.cloth, cloth_simulate): the bending
operator, the step's potential, the simulation mesh, and motions with known answers."""

import math

import numpy as np
import pytest
import trimesh
from scipy.spatial.transform import Rotation

from neurok_core.dynamics import Force, InitialVelocity, SimulationConditions
from neurok_core.dynamics.conditions import CLOTH_MATERIALS
from neurok_core.errors import ConditionError
from neurok_core.geometry import unique_edges
from neurok_core.rigspace.cloth import (
    CLOTH_PRESETS,
    ClothEnergy,
    ClothStep,
    bending_matrix,
    node_masses,
    sim_mesh,
)
from neurok_core.rigspace.cloth_contact import ClothContact, face_samples, rim_samples
from neurok_core.rigspace.cloth_simulate import simulate_cloth
from neurok_core.rigspace.space import RigSettings
from neurok_core.sheets import is_cloth


def _sheet(nx: int, ny: int, width: float = 1.0, depth: float = 0.6, z: float = 1.0):
    """A flat quad grid split into triangles, in the XY plane at height ``z``; (vertices, faces,
    the vertices along x = 0, those along x = width)."""
    xs, ys = np.meshgrid(np.linspace(0, width, nx), np.linspace(0, depth, ny), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.full(nx * ny, z)], 1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    f = np.concatenate([np.stack([a, a + ny, a + ny + 1], 1), np.stack([a, a + ny + 1, a + 1], 1)])
    return v, f, np.arange(ny), np.arange((nx - 1) * ny, nx * ny)


def test_bending_keeps_rigid_motions_free_and_measures_a_cylinders_curvature():
    v, f, _, _ = _sheet(30, 20, 1.16, 0.76)
    q = bending_matrix(v, f)
    assert abs(q - q.T).max() < 1e-9
    r = Rotation.from_rotvec([0.3, 1.0, -0.4]).as_matrix()
    moved = v @ r.T + 0.3
    assert abs(0.5 * (moved * (q @ moved)).sum()) < 1e-8
    radius = 0.5  # rolled about the y axis: curvature 2 / m, area 1.16 x 0.76
    th = v[:, 0] / radius
    rolled = np.stack([radius * np.sin(th), v[:, 1], radius * (1 - np.cos(th))], 1)
    energy = 0.5 * (rolled * (q @ rolled)).sum()
    assert energy == pytest.approx(0.5 / radius**2 * 1.16 * 0.76, rel=0.1)


def pinned_sheet_energy(nx: int, ny: int, mass: float, stiffness: float, bending: float):
    """(vertices, node masses, free (N,) bool: all but the pinned edge, a ClothEnergy: springs
    of ``stiffness`` shortened at 0.3 of it, the bending matrix times ``bending``) of
    :func:`_sheet`."""
    v, f, pins, _ = _sheet(nx, ny)
    e = unique_edges(f)
    lengths = np.linalg.norm(v[e[:, 1]] - v[e[:, 0]], axis=1)
    energy = ClothEnergy(
        e, lengths, np.full(len(e), stiffness), 0.3, bending_matrix(v, f) * bending
    )
    free = np.ones(len(v), bool)
    free[pins] = False
    return v, node_masses(v, f, mass), free, energy


def test_the_steps_potential_has_the_gradient_it_reports():
    rng = np.random.default_rng(0)
    v, m, free, energy = pinned_sheet_energy(6, 5, 1.0, 100.0, 0.01)
    step = ClothStep(
        m,
        free,
        energy,
        None,
        damping=0.2,
        stretch_zeta=0.5,
        omega=50.0,
        size=1.0,
        bending_damping=0.1,
    )
    step.x0 = v + rng.normal(0, 0.01, v.shape)  # the step's start (the viscous terms')
    x = v + rng.normal(0, 0.02, v.shape)
    z = v + rng.normal(0, 0.02, v.shape)
    d0 = energy.g @ v
    start = np.sqrt((d0 * d0).sum(1))
    forces = rng.normal(0, 1, v.shape)
    drags = [(np.array([3, 4, 9]), np.array([0.2, 0.3, 0.5]), 50.0, np.array([0.1, 0.2, 0.3]))]
    args = (z, 50.0, 0.01, start, forces, drags)
    value, grad = step._potential(x, *args)
    # the value, formed again from its terms in numpy (the compiled pass's reference)
    d = energy.g @ x
    rate = np.sqrt((d * d).sum(1)) - start
    off = drags[0][1] @ x[drags[0][0]] - drags[0][3]
    bq = energy.bending @ (x - step.x0)
    expected = (
        50.0 * float(m @ ((x - z) ** 2).sum(1))
        + energy.value(x)
        + 0.5 * (step.beta / 0.01) * float(energy.k @ (rate * rate))
        + 0.5 * (0.1 / 0.01) * float(((x - step.x0) * bq).sum())
        + 0.5 * 50.0 * float(off @ off)
        - float((forces * x).sum())
    )
    assert value == pytest.approx(expected, rel=1e-12)
    numeric = np.zeros_like(x)
    eps = 1e-6
    for i in np.flatnonzero(free):
        for k in range(3):
            xp, xm = x.copy(), x.copy()
            xp[i, k] += eps
            xm[i, k] -= eps
            numeric[i, k] = (step._potential(xp, *args)[0] - step._potential(xm, *args)[0]) / (
                2 * eps
            )
    assert np.abs(numeric - grad).max() < 1e-6 * np.abs(grad).max()
    assert not grad[~free].any()


@pytest.mark.parametrize("far", [False, True])
def test_the_steps_matrix_in_band_storage_is_the_one_from_its_entries(far):
    """``ClothStep._matrix`` straight into band storage (the springs' blocks compiled) against
    the same matrix from its entries (``NodeSystem.factor``): the same solves to rounding; a
    drag coupling nodes farther apart than the band (``far``) takes the entries' path."""
    rng = np.random.default_rng(3)
    v, m, free, energy = pinned_sheet_energy(12, 9, 1.0, 100.0, 0.01)
    step = ClothStep(
        m, free, energy, None, damping=0.2, stretch_zeta=0.5, omega=50.0, size=1.0,
        bending_damping=0.1,
    )  # fmt: skip
    assert step._band is not None
    x = v + rng.normal(0, 0.02, v.shape)  # some springs stretched, some shortened
    nodes = np.array([20, len(v) - 1]) if far else np.array([30, 31, 40])
    drags = [(nodes, np.full(len(nodes), 1.0 / len(nodes)), 50.0, np.zeros(3))]
    assert step._band_matrix(x, 50.0, 0.01, None, drags) != far
    g = rng.normal(size=v.shape)
    step._matrix(x, 50.0, 0.01, None, drags)
    banded = step._solve(g)
    step._band = None  # the entries' path
    step._matrix(x, 50.0, 0.01, None, drags)
    direct = step._solve(g)
    np.testing.assert_allclose(banded, direct, rtol=0, atol=1e-12 * np.abs(direct).max())


def test_a_big_sheet_is_simulated_on_a_coarser_mesh_that_holds_its_vertices():
    v, f, _, _ = _sheet(200, 100)
    mesh = sim_mesh(v, f, max_nodes=2000)
    assert not mesh.identity and len(mesh.nodes) <= 2600
    cell = math.sqrt(0.6 / 2000)  # the clustering's cell: the sheet's area over the nodes
    assert np.abs(mesh.embed(mesh.nodes) - v).max() < 0.5 * cell  # the rim clamped inside
    assert np.allclose(mesh.bary.sum(1), 1.0) and (mesh.bary >= 0).all()


def test_scattered_pins_never_fold_the_coarser_mesh():
    """A painted pin group scattered over a big sheet: the coarser mesh's nodes go onto pins
    only where no face of theirs turns round or loses half its area (a node put onto a pin at
    a cell's far corner folded two triangles over each other at rest, and the bending then
    moved an unloaded sheet); the flat sheet's coarse faces all keep their side, and the
    bending is at rest on it."""
    v, f, _, _ = _sheet(60, 60, 1.0, 1.0)
    rng = np.random.default_rng(2)
    for count in (40, 171, 330):
        pins = rng.choice(len(v), count, replace=False)
        mesh = sim_mesh(v, f, anchors=pins)
        x, faces = mesh.nodes[:, :2], mesh.faces
        # each edge with its face's third corner; an edge of two faces folds where both
        # corners lie on one side of it
        a = faces.ravel()
        b = np.roll(faces, -1, axis=1).ravel()
        c = np.roll(faces, -2, axis=1).ravel()
        key = np.minimum(a, b) * len(x) + np.maximum(a, b)
        order = np.argsort(key, kind="stable")
        pair = np.flatnonzero(key[order][1:] == key[order][:-1])
        i, j = order[pair], order[pair + 1]
        e, d_i, d_j = x[b[i]] - x[a[i]], x[c[i]] - x[a[i]], x[c[j]] - x[a[i]]
        side_i = e[:, 0] * d_i[:, 1] - e[:, 1] * d_i[:, 0]
        side_j = e[:, 0] * d_j[:, 1] - e[:, 1] * d_j[:, 0]
        assert len(pair) > 500 and (side_i * side_j < 0).all()  # no fold
        bend = bending_matrix(mesh.nodes, mesh.faces)
        assert np.abs(bend @ mesh.nodes).max() < 1e-8


def test_a_cloth_is_an_object_of_open_sheets():
    v, f, _, _ = _sheet(5, 4)
    box = trimesh.creation.box((0.2, 0.2, 0.2))
    assert is_cloth(v, f)
    assert not is_cloth(box.vertices, box.faces)
    both_v = np.concatenate([v, box.vertices + 3.0])
    both_f = np.concatenate([f, box.faces + len(v)])
    assert not is_cloth(both_v, both_f)


def test_a_sheet_pinned_along_an_edge_falls_and_hangs_keeping_its_size():
    """A 1 x 0.6 m sheet lying flat, pinned along one short edge, damped at 3/s as Blender's
    default air: by 2 s its free edge hangs about its length below the pins (Blender's cloth on
    the same grid: 0.97 m at 1 s, 1.16 m at 2 s for a 1.16 m sheet), its edges within 3% of
    their lengths, the pins exactly at rest."""
    v, f, pins, far = _sheet(25, 15)
    cond = SimulationConditions(pins=tuple(pins.tolist()), mass=0.1, damping=3.0, frames=49)
    result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
    drop = v[far, 2].mean() - result.positions[:, far, 2].mean(1)
    assert 0.75 < drop[24] < 1.1 and 0.85 < drop[48] < 1.1
    assert result.info["edge_strain_max"] < 0.03
    assert np.array_equal(
        result.positions[:, pins], np.broadcast_to(v[pins].astype(np.float32), (49, len(pins), 3))
    )


def test_a_coarse_sheet_pinned_at_two_corners_hangs_from_those_points_alone():
    """A sheet of more vertices than a simulation mesh takes (30 x 30 on about 600 nodes),
    pinned at two adjacent corners: each pin is a node of the coarser mesh, so it holds the
    cloth at a point, as the sheet's own vertex does, not by the whole coarse triangle round
    it (which kept the first 4 cm of each side level and the sheet hanging 3 cm high beside
    MuJoCo's shell). After 2 s the vertex one edge below each pin along the free side hangs
    below it, and the pins stay exactly where they were."""
    v, f, _, _ = _sheet(30, 30, 0.96, 0.96, z=1.5)
    pins = np.array([0, 29 * 30])  # the corners at y = 0
    mesh = sim_mesh(v, f, anchors=pins)
    assert not mesh.identity
    assert np.linalg.norm(mesh.nodes[:, None] - v[pins][None], axis=2).min(0).max() < 1e-12
    cond = SimulationConditions(pins=tuple(pins.tolist()), mass=0.14, damping=1.0, frames=49)
    result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
    x = result.positions.astype(np.float64)
    edge = 0.96 / 29
    for pin, below in ((0, 1), (29 * 30, 29 * 30 + 1)):
        assert np.array_equal(x[:, pin], np.broadcast_to(v[pin], (49, 3)).astype(np.float32))
        # hanging: the next vertex lies mostly below the pin (held level: 0.1 edge below)
        assert v[pin, 2] - x[-1, below, 2] > 0.5 * edge


def test_an_undamped_kick_keeps_its_energy():
    v, f, pins, far = _sheet(12, 8)
    kick = InitialVelocity((0.0, 0.0, 0.5), vertex=int(far[3]))
    cond = SimulationConditions(
        pins=tuple(pins.tolist()), gravity=(0, 0, 0), velocities=(kick,), frames=121, fps=12.0
    )
    result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
    energy = result.energy
    assert energy[0] > 0 and np.abs(energy / energy[0] - 1).max() < 0.01
    assert np.abs(result.positions[-1] - v).max() > 0.01  # it moved


def test_a_push_moves_the_cloth_and_the_rig_replays_it_roughly():
    v, f, pins, far = _sheet(15, 9)
    push = Force(vertex=int(far[4]), direction=(0, 0, 1), strength=2.0, end_frame=6)
    cond = SimulationConditions(
        pins=tuple(pins.tolist()), forces=(push,), gravity=(0, 0, 0), damping=0.5, frames=13
    )
    result = simulate_cloth(v, f, cond, settings=RigSettings())
    assert result.positions[6, far[4], 2] > v[far[4], 2] + 0.05
    rig = result.rig
    assert rig is not None and rig.num_frames == 13 and math.isfinite(rig.translations.sum())


def test_the_rig_of_a_cloth_replays_its_motion():
    """A bone at every node and one still bone for the pins: where the nodes are the
    vertices the rig replays them exactly; on a coarser simulation mesh, within a cell of it
    (a rim vertex lies outside the coarse mesh by up to half a cell, and its bones turn that
    offset), the pins exactly and the vertices beside them within a few millimetres (with
    the pins' nodes' bones held unturned instead, a pin on a coarse edge kept the cloth
    beside it from turning: 30 mm off at a hoist, 31 mm at a corner)."""
    v, f, pins, far = _sheet(15, 9)
    cond = SimulationConditions(pins=tuple(pins.tolist()), mass=0.1, damping=3.0, frames=25)
    result = simulate_cloth(v, f, cond, settings=RigSettings())
    assert result.rig.num_bones == len(v) + 1
    for t in (5, 24):
        np.testing.assert_allclose(result.rig.skin(v, t), result.positions[t], atol=1e-5)
    big, big_f, big_pins, _ = _sheet(60, 40)
    for hold in (big_pins, np.array([0, 39])):  # a hoist, two corners
        cond = SimulationConditions(pins=tuple(hold.tolist()), damping=3.0, frames=13)
        result = simulate_cloth(big, big_f, cond, settings=RigSettings())  # about 600 nodes
        assert result.rig.num_bones == result.info["space"]["nodes"] + 1 <= 800
        cell = math.sqrt(0.6 / result.info["space"]["nodes"])  # the sheet's area per node
        off = np.linalg.norm(result.rig.skin(big, 12) - result.positions[12], axis=1)
        assert off.max() < cell
        assert off[hold].max() < 1e-6  # the pins, as float32 keeps them
        near = np.linalg.norm(big[:, None] - big[hold][None], axis=2).min(1) < 0.05
        assert off[near].max() < 0.1 * cell  # 0.9-1.4 mm measured, 30 mm held unturned


def test_the_presets_are_the_conditions_materials_and_move_apart():
    """Blender's presets by their names; a silk and a denim flag, lying flat and pinned at
    the hoist, fall along far-edge paths apart by at least 10% of the motion (Blender's own
    presets: silk hangs at once, denim swings back)."""
    assert tuple(sorted(CLOTH_PRESETS)) == CLOTH_MATERIALS
    v, f, pins, far = _sheet(20, 12, 1.16, 0.76)
    paths = {}
    for name in ("silk", "denim"):
        cond = SimulationConditions(pins=tuple(pins.tolist()), mass=0.13, frames=25, material=name)
        result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
        paths[name] = v[far, 2].mean() - result.positions[:, far, 2].mean(1)
    motion = max(paths["silk"].max(), paths["denim"].max())
    assert np.abs(paths["silk"] - paths["denim"]).max() > 0.1 * motion
    with pytest.raises(ConditionError, match="material must be one of"):
        SimulationConditions(material="wool")


def test_a_flag_on_an_upright_pole_buckles_and_hangs_in_folds():
    """A flag exactly flat in its upright plane, pinned along its vertical hoist: it leaves
    its plane and hangs, as cloth does (Blender's hangs 0.8 m in 2 s from 10 um off its
    plane, docs/experiments/cloth.md), where exact arithmetic would keep it out like a
    board (its drop 0.05 m); with nothing acting, the same flag stays exactly where it is."""
    v, f, pins, far = _sheet(20, 14, 1.16, 0.76)
    v = v[:, [0, 2, 1]]  # the XZ plane: the hoist x = 0 vertical
    cond = SimulationConditions(pins=tuple(pins.tolist()), damping=0.5, frames=49)
    result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
    x = result.positions
    assert v[far, 2].mean() - x[-1, far, 2].mean() > 0.4  # it hangs
    assert np.abs(x[:, :, 1]).max() > 0.05  # out of its plane: in folds
    still = SimulationConditions(pins=tuple(pins.tolist()), gravity=(0, 0, 0), frames=5)
    rest = simulate_cloth(v, f, still, settings=RigSettings(), want_rig=False)
    assert np.abs(rest.positions - v.astype(np.float32)[None]).max() == 0.0


def test_a_damped_step_is_bdf2_where_it_continues_the_last_and_backward_euler_at_first():
    """A damped sheet falling free: v' = g - c v, so its centre falls
    g / c (t - (1 - exp(-c t)) / c); BDF2's steps (after a backward-Euler first step) follow
    it far closer than backward Euler's all the way (v_{n+1} = (v_n + h g) / (1 + c h),
    x_{n+1} = x_n + h v_{n+1}), at one step a frame."""
    v, f, _, _ = _sheet(8, 6)
    c, frames, fps = 2.0, 25, 24
    result = simulate_cloth(
        v, f, SimulationConditions(damping=c, frames=frames), settings=RigSettings(), want_rig=False
    )
    t, h = (frames - 1) / fps, 1.0 / fps
    exact = 9.81 / c * (t - (1.0 - math.exp(-c * t)) / c)
    euler_fall, speed = 0.0, 0.0
    for _ in range(frames - 1):
        speed = (speed + h * 9.81) / (1.0 + c * h)
        euler_fall += h * speed
    fall = v[:, 2].mean() - result.positions[-1, :, 2].mean()
    assert result.info["backward_euler_steps"] == 1
    assert abs(fall - exact) < 0.1 * abs(euler_fall - exact), (fall, euler_fall, exact)


def test_an_undamped_pinned_cloth_under_gravity_keeps_its_energy():
    v, f, pins, _ = _sheet(12, 8)
    cond = SimulationConditions(pins=tuple(pins.tolist()), frames=97)
    result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
    assert np.abs(result.energy / result.energy[0] - 1).max() < 0.01


def test_curved_or_closed_or_soup_meshes_are_no_cloth_and_a_welded_seam_holds():
    """A bowl, a sphere missing a face and a box stored as a triangle soup keep their bones;
    a flat sheet whose seam is stored twice is one cloth that does not come apart."""
    bowl = trimesh.creation.icosphere(subdivisions=2)
    keep = bowl.triangles_center[:, 2] < 0.1
    assert not is_cloth(bowl.vertices, bowl.faces[keep])
    assert not is_cloth(bowl.vertices, bowl.faces[1:])
    box = trimesh.creation.box((0.2, 0.2, 0.2))
    soup = box.vertices[box.faces].reshape(-1, 3)
    assert not is_cloth(soup, np.arange(len(soup)).reshape(-1, 3))
    v, f, pins, far = _sheet(10, 6)
    seam = np.flatnonzero(np.isclose(v[:, 0], v[:, 0].max() / 9 * 5))  # a column: stored twice
    remap = np.arange(len(v))
    remap[seam] = len(v) + np.arange(len(seam))
    right = (v[f][:, :, 0] > v[seam[0], 0] - 1e-9).all(1)  # the faces right of the seam
    seamed_f = np.where(right[:, None], remap[f], f)
    seamed_v = np.concatenate([v, v[seam]])
    copy = seam
    assert is_cloth(seamed_v, seamed_f)
    cond = SimulationConditions(pins=tuple(pins.tolist()), damping=1.0, frames=25)
    result = simulate_cloth(seamed_v, seamed_f, cond, settings=RigSettings(), want_rig=False)
    np.testing.assert_allclose(result.positions[-1][copy], result.positions[-1][len(v) :])


def test_a_long_ribbon_and_a_big_sheet_at_rest_stay_whole_and_still():
    """A 5 m x 1 cm ribbon of 1,400 vertices (narrower than a clustering cell of its area) is
    simulated, not refused; a 2,400-vertex sheet on a coarser mesh with nothing acting on it
    does not move from frame 0 to frame 1 (each vertex's offset from its triangle kept)."""
    ribbon, rf, rpins, _ = _sheet(700, 2, 5.0, 0.01)
    cond = SimulationConditions(pins=tuple(rpins.tolist()), damping=1.0, frames=5)
    result = simulate_cloth(ribbon, rf, cond, settings=RigSettings(), want_rig=False)
    assert np.isfinite(result.positions).all()
    v, f, pins, _ = _sheet(60, 40)
    still = SimulationConditions(gravity=(0, 0, 0), frames=3)
    result = simulate_cloth(v, f, still, settings=RigSettings())
    assert result.info["space"]["embedded"]  # on a coarser mesh
    assert np.abs(result.positions[1] - v).max() < 1e-6
    cond = SimulationConditions(pins=tuple(pins.tolist()), damping=1.0, frames=13)
    result = simulate_cloth(v, f, cond, settings=RigSettings())
    pinned = result.rig.skin(v, 12)[pins]
    assert np.abs(pinned - v[pins]).max() < 1e-6  # the rig holds the pins too


def pinned_sheet_laplacian(nx: int, ny: int):
    """(vertices, faces, free (N,) bool: all but the pinned edge, the graph Laplacian of the
    sheet's edges (N, N) sparse) of :func:`_sheet`."""
    from scipy import sparse

    v, f, pins, _ = _sheet(nx, ny)
    e = unique_edges(f)
    n = len(v)
    free = np.ones(n, bool)
    free[pins] = False
    lap = sparse.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    lap = lap + lap.T
    return v, f, free, sparse.diags(np.asarray(lap.sum(1)).ravel()) - lap


def test_the_banded_solve_is_the_matrixs_solve_and_a_wide_band_falls_back_to_lu():
    from scipy import sparse

    from neurok_core.rigspace import band

    rng = np.random.default_rng(3)
    v, f, free, lap = pinned_sheet_laplacian(30, 20)
    e, n = unique_edges(f), len(v)
    spd = sparse.kron(lap, np.eye(3) + 0.2) + sparse.eye(3 * n) * 0.5
    spd = spd + sparse.kron(bending_matrix(v, f), np.eye(3))
    coo = spd.tocoo()
    dofs = (3 * np.flatnonzero(free)[:, None] + np.arange(3)).ravel()
    dense = spd.toarray()[np.ix_(dofs, dofs)]
    rhs = rng.normal(size=(int(free.sum()), 3))
    want = np.linalg.solve(dense, rhs.ravel()).reshape(-1, 3)
    pairs = np.concatenate([e, np.stack([coo.row // 3, coo.col // 3], 1)])
    for share in (band.BAND_SHARE, 0.0):  # the band, then the sparse LU
        system = band.NodeSystem(free, pairs)
        old, band.BAND_SHARE = band.BAND_SHARE, share
        try:
            system.factor(coo.row, coo.col, coo.data)
        finally:
            band.BAND_SHARE = old
        assert (system._band is not None) == (share > 0)
        np.testing.assert_allclose(system.solve(rhs), want, rtol=1e-9, atol=1e-12)


def test_each_vertex_is_embedded_in_its_nearest_candidate_triangle():
    from neurok_core.dynamics.obstacles import closest_on_triangles
    from neurok_core.rigspace.cloth import _embed, _frames

    rng = np.random.default_rng(1)
    v, f, _, _ = _sheet(12, 9)
    v[:, 2] += 0.15 * np.sin(3 * v[:, 0]) * np.cos(4 * v[:, 1])  # a curved sheet
    points = v[rng.choice(len(v), 60)] + rng.normal(scale=0.03, size=(60, 3))
    points = np.concatenate([points, v[:10] + [0.0, 0.0, 0.05]])  # beside its rim, above it
    best, bary, local = _embed(points, v, f, k=8)
    # the brute-force answer: each candidate's exact distance
    from scipy.spatial import cKDTree

    _, cand = cKDTree(v[f].mean(1)).query(points, k=8)
    dist = np.stack(
        [
            np.linalg.norm(
                points - closest_on_triangles(points, *np.moveaxis(v[f[c]], 1, 0))[0], axis=1
            )
            for c in cand.T
        ],
        1,
    )
    chosen = np.linalg.norm(
        points - closest_on_triangles(points, *np.moveaxis(v[f[best]], 1, 0))[0], axis=1
    )
    np.testing.assert_allclose(chosen, dist.min(1), atol=1e-12)
    corners = v[f[best]]
    again = np.einsum("nk,nkd->nd", bary, corners) + np.einsum(
        "nk,nkd->nd", local, _frames(corners)
    )
    np.testing.assert_allclose(again, points, atol=1e-12)


def _pole(radius: float = 0.008, x: float = 0.0):
    """A 16-gon pole of ``radius`` along z from 0 to 0.5 m at (x, 0), as a collider."""
    from neurok_core.dynamics import Collider

    pole = trimesh.creation.cylinder(radius=radius, height=0.5, sections=16)
    pole.apply_translation((x, 0.0, 0.25))
    return Collider(vertices=tuple(map(tuple, pole.vertices)), faces=tuple(map(tuple, pole.faces)))


def _contact_with(obstacle_meshes, nodes, faces, margin: float, thin: bool, mu: float = 0.0):
    from neurok_core.dynamics.obstacles import MeshDistance, Obstacles

    meshes = [
        MeshDistance(np.asarray(c.vertices), np.asarray(c.faces), 0.002, 0.03)
        for c in obstacle_meshes
    ]
    tri, bary = face_samples(nodes, faces, 0.5 * margin)
    k = np.full(len(nodes), 100.0)
    contact = ClothContact(
        Obstacles(None, meshes),
        k,
        margin,
        mu,
        1e-4,
        faces,
        (tri, bary, np.full(len(tri), 100.0)),
        thin=Obstacles(None, meshes) if thin else None,
    )
    contact.set_ahead(0.01)
    return contact


def test_a_triangle_straddling_a_thin_pole_is_pushed_off_it_though_its_corners_are_clear():
    """One 6 cm triangle across a 16 mm pole, its corners 2-3 cm from it: with points on the
    triangle (a thin collider's) the contact pushes it; with its corners alone it does not.
    The energy's gradient is its derivative (finite differences), the step's matrix springs
    (``blocks``) its Hessian where the penalty acts, and ``push_out`` moves a triangle whose
    middle a step left inside the pole out of it."""
    # (off the distance grid's planes, where its gradient is one-sided)
    nodes = np.array(
        [[-0.0307, 0.0043, 0.2011], [0.0293, 0.0043, 0.2011], [0.0293, 0.0043, 0.2613]]
    )
    faces = np.array([[0, 1, 2]])
    margin = 0.003
    for thin in (False, True):
        contact = _contact_with([_pole()], nodes, faces, margin, thin)
        contact.begin(nodes, nodes)
        value, grad = contact(nodes)
        if not thin:
            assert value == 0.0 and not grad.any()
            continue
        assert value > 0 and grad[:, 1].sum() < 0  # pushed off along +y (the gradient's -)
        rng = np.random.default_rng(0)
        d = rng.normal(size=nodes.shape) * 1e-4
        eps = 1e-4
        fd = (contact(nodes + eps * d)[0] - contact(nodes - eps * d)[0]) / (2 * eps)
        assert fd == pytest.approx(float((grad * d).sum()), rel=1e-3)
        # the matrix's springs: the Gauss-Newton Hessian of the penalty (its normals fixed),
        # sum k (w (x) n)(w (x) n)^T over the points near, each spread by its weights w
        touch = contact.begin(nodes, nodes)
        rows, cols, vals = contact.blocks(touch)
        big = np.zeros((9, 9))
        np.add.at(big, (rows, cols), vals)
        points, normals, _ = touch
        weights = contact.blend[points].toarray()  # (m, 3)
        jac = (weights[:, :, None] * normals[:, None, :]).reshape(len(points), 9)
        want = (jac * contact.k[points][:, None]).T @ jac
        np.testing.assert_allclose(big, want, rtol=1e-12, atol=1e-12)
        assert np.linalg.eigvalsh(big).min() > -1e-9
        # a triangle whose middle lies inside the pole is moved out of it
        inside = nodes.copy()
        inside[:, 1] = -0.002
        v = np.zeros_like(inside)
        contact.begin(inside, inside)
        assert contact.push_out(inside, v) > 0
        middle = inside.mean(0)
        assert np.hypot(middle[0], middle[1]) >= 0.008 - 1e-4


def test_face_and_rim_samples_lie_on_the_triangles_and_the_rim():
    """The triangles' points are barycentric (each sums to 1, inside [0, 1], no node), each
    once (an edge's points are not repeated by its two triangles), every edge's midpoint
    among them; the rim a coarser mesh cuts off, given as its triangles' points, comes back
    at rest where it is, and a vertex off its triangle's plane alone (a curved sheet's) is
    not rim."""
    v, f, _, _ = _sheet(40, 30, 1.0, 0.7)
    for spacing in (0.01, 0.1):  # (at 0.1 an edge's one point: its middle)
        tri, bary = face_samples(v, f, spacing)
        np.testing.assert_allclose(bary.sum(1), 1.0)
        assert (bary >= 0).all() and (bary < 1).all()
        at = np.einsum("sk,skd->sd", bary, v[f[tri]])
        assert len(np.unique(np.round(at, 9), axis=0)) == len(at)  # each point once
    edges = unique_edges(f)
    middles = 0.5 * (v[edges[:, 0]] + v[edges[:, 1]])
    assert len(at) == len(edges)
    assert np.linalg.norm(at[:, None] - middles[None], axis=2).min(0).max() < 1e-12
    mesh = sim_mesh(v, f)  # 1,200 vertices on a coarser mesh
    assert not mesh.identity and mesh.offset.any()
    rim_tri, rim_bary = rim_samples(mesh, v)
    assert len(rim_tri) and (rim_bary.min(1) < 0).all()
    at = np.einsum("sk,skd->sd", rim_bary, mesh.nodes[mesh.faces[rim_tri]])
    rim = np.flatnonzero(mesh.offset)
    np.testing.assert_allclose(
        np.linalg.norm(at[:, None] - v[rim][None], axis=2).min(1), 0.0, atol=1e-9
    )
    # the same sheet rolled into an arch: its vertices leave their triangles' planes alone
    angle = v[:, 0] / 1.0 * 0.8
    arch = np.stack([np.sin(angle), v[:, 1], np.cos(angle)], 1)
    bent = sim_mesh(arch, f)
    assert len(rim_samples(bent, arch)[0]) < 0.5 * bent.offset.sum()  # 160 of 640


@pytest.mark.parametrize("release,damping", [(17, 0.8), (19, 0.2)])
def test_a_flag_let_go_near_its_thin_pole_never_passes_into_it(release, damping):
    """The demo's flag on its 16 mm pole, let go at other frames and air damping than the test
    below: its vertices stay out of the pole (they went 5.8-7.1 mm in, of 8, when the contact
    acted on the simulation mesh's nodes alone: a triangle straddled the pole, and the rim the
    coarser mesh cuts off swung into it)."""
    from training.benchmarks.bench_cloth_contact import flag_on_pole, pole_depth

    v, f, cond, _ = flag_on_pole(release, damping)
    x = simulate_cloth(v, f, cond, settings=RigSettings()).positions.astype(np.float64)
    # 0-1.6 mm measured on two CPUs' kernels (the penalty contact's overshoot); the issue's bound
    # is 1% of the size (4.2 mm); a vertex on the 16-gon's flats is 0.16 mm in
    assert pole_depth(x).max() < 0.002


def test_a_flag_swung_round_its_thin_pole_wraps_it_and_its_pins_hold_in_every_frame():
    """A 0.42 x 0.27 m flag of 1,568 vertices (simulated on a coarser mesh) pinned along a 16 mm
    pole, its corner dragged out and let go: it swings back round the pole. The cloth keeps a
    collision thickness and shorter steps where a node closes on an obstacle, so no edge between
    its nodes cuts the pole (before: 7.3 mm deep); the
    streamed frames hold the pinned vertices exactly (before: 8 mm off, a free corner of their
    triangles moved them)."""
    from training.benchmarks.bench_cloth_contact import flag_on_pole, pole_depth

    v, f, cond, corner = flag_on_pole(20, 0.8, frames=40)
    pins = cond.pins
    streamed = []
    result = simulate_cloth(
        v, f, cond, settings=RigSettings(), on_frame=lambda i, x, e: streamed.append(x.copy())
    )
    assert result.info["space"]["embedded"]
    x = result.positions.astype(np.float64)
    # 0-1.6 mm measured on two CPUs' kernels (the penalty contact's overshoot); the issue's bound
    # is 1% of the size (4.2 mm); a vertex on the 16-gon's flats is 0.16 mm in
    assert pole_depth(x).max() < 0.002
    np.testing.assert_array_equal(np.stack(streamed)[:, list(pins)], x[:, list(pins)])
    assert np.abs(x[:, list(pins)] - v[list(pins)]).max() < 1e-6
    swing = np.linalg.norm(x[:, corner] - v[corner], axis=1).max()
    assert swing > 0.2  # it did swing
