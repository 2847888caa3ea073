"""The rig space (neurok_core.rigspace): energies against finite differences, joints from the
interface's shape, and the motion's properties against analytic answers."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import trimesh
from mesh_pieces import box_mesh, join_meshes

from neurok_core.dynamics import Drag, Force, InitialVelocity, SimulationConditions
from neurok_core.dynamics.obstacles import Obstacles
from neurok_core.errors import SimulationError
from neurok_core.metrics import best_rotations, rigid_fit_residual
from neurok_core.rigspace import RigSettings, build_rig_space, simulate_rig
from neurok_core.rigspace.contact import Contact, ContactPoints, WorldObstacle
from neurok_core.rigspace.energies import Rigidity, Springs

RNG = np.random.default_rng(3)


def _check_gradient(energy, q, scale=1e-6):
    """Central differences of the value along random directions against the gradient and
    the Hessian's action against differences of the gradient (float64)."""
    for _ in range(3):
        d = RNG.normal(size=q.shape)
        e_plus, g_plus, _ = energy(q + scale * d, False)
        e_minus, g_minus, _ = energy(q - scale * d, False)
        value, grad, hess = energy(q, True)
        numeric = (e_plus - e_minus) / (2 * scale)
        assert numeric == pytest.approx(float((grad * d).sum()), rel=1e-5, abs=1e-9)
        if hess is not None:
            return hess


def test_energy_gradients_match_finite_differences():
    q = np.zeros((3, 4, 3))
    q[:, :3, :] = np.eye(3) + 0.1 * RNG.normal(size=(3, 3, 3))
    q[:, 3, :] = RNG.normal(size=(3, 3))
    rigidity = Rigidity(np.array([2.0, 0.0, 5.0]), 1.0)
    _check_gradient(rigidity, q)
    rows = RNG.normal(size=(7, 12))
    springs = Springs(rows, np.abs(RNG.normal(size=7)) + 0.5, np.abs(RNG.normal(size=7)), 1.0)
    _check_gradient(springs, q)
    pts = ContactPoints(RNG.normal(size=(9, 12)), np.full(9, 3.0), np.full(9, 0.5))
    contact = Contact(pts, WorldObstacle(Obstacles(0.0)), friction=0.0, slip=1e-3, omega=1.0)
    assert contact(q, True)[0] > 0  # some points are below the ground
    _check_gradient(contact, q)


def test_rigidity_hessian_is_exact_where_positive():
    """At a stretched state (every eigenvalue positive) the projected Hessian is the exact
    one: its action matches differences of the gradient."""
    q = np.zeros((1, 4, 3))
    q[0, :3, :] = 1.3 * np.eye(3)
    energy = Rigidity(np.array([1.5]), 1.0)
    hess = energy(q, True)[2]
    d = RNG.normal(size=q.shape)
    eps = 1e-6
    diff = (energy(q + eps * d, False)[1] - energy(q - eps * d, False)[1]) / (2 * eps)
    np.testing.assert_allclose(hess @ d.reshape(-1), diff.reshape(-1), rtol=1e-5, atol=1e-8)


def _sparse_rows(count: int, width: int) -> np.ndarray:
    """Skinning-like rows: a few nonzero coordinates each (as a rope's edges have)."""
    rows = RNG.normal(size=(count, width))
    rows[RNG.random((count, width)) > 0.3] = 0.0
    return rows


def test_springs_sparse_hessian_is_the_dense_one():
    """Rows with few nonzeros take the pairs' sparse sum (``RowPairs``); it gives the dense
    products' Hessian and Jacobian, and rows too dense for it keep the dense products."""
    rows = _sparse_rows(40, 24)
    sparse_springs = Springs(rows, np.abs(RNG.normal(size=40)) + 0.5, np.full(40, 3.0), 1.0)
    dense = Springs(rows, sparse_springs.lengths, sparse_springs.k, 1.0)
    dense.pairs = None
    assert sparse_springs.pairs is not None
    assert Springs(RNG.normal(size=(7, 12)), np.ones(7), np.ones(7), 1.0).pairs is None
    q0 = np.zeros((6, 4, 3))
    q0[:, :3, :] = np.eye(3) + 0.1 * RNG.normal(size=(6, 3, 3))
    y = q0 + 0.2 * RNG.normal(size=q0.shape)
    for a, b in (
        (sparse_springs(y)[2], dense(y)[2]),
        (sparse_springs.discrete_gradient(q0, y)[1], dense.discrete_gradient(q0, y)[1]),
    ):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())


@pytest.mark.parametrize("kind", ["rigidity", "springs", "sparse springs"])
def test_discrete_gradients_keep_the_energy_and_have_their_jacobian(kind):
    """E(q1) - E(q0) = dg . (q1 - q0) exactly across a large step, dg(q, q) is the gradient,
    and the Jacobian in the midpoint matches central differences (float64)."""
    q0 = np.zeros((3, 4, 3))
    q0[:, :3, :] = np.eye(3) + 0.1 * RNG.normal(size=(3, 3, 3))
    q0[:, 3, :] = RNG.normal(size=(3, 3))
    y = q0 + 0.2 * RNG.normal(size=q0.shape)
    if kind == "rigidity":
        energy = Rigidity(np.array([2.0, 0.0, 5.0]), 1.0)
    else:
        rows = RNG.normal(size=(7, 12)) if kind == "springs" else _sparse_rows(30, 12)
        count = len(rows)
        energy = Springs(rows, np.abs(RNG.normal(size=count)) + 0.5, np.full(count, 3.0), 1.0)
        assert (energy.pairs is None) == (kind == "springs")
    q1 = 2 * y - q0
    grad, jac = energy.discrete_gradient(q0, y, True)
    change = energy(q1, False)[0] - energy(q0, False)[0]
    assert abs(change) > 1e-2  # a step that changes the energy
    assert float((grad * (q1 - q0)).sum()) == pytest.approx(change, rel=1e-10)
    np.testing.assert_allclose(energy.discrete_gradient(q0, q0, False)[0], energy(q0, False)[1])
    eps = 1e-6
    numeric = np.zeros_like(jac)
    for i in range(y.size):
        d = np.zeros(y.size)
        d[i] = eps
        plus = energy.discrete_gradient(q0, y + d.reshape(y.shape), False)[0]
        minus = energy.discrete_gradient(q0, y - d.reshape(y.shape), False)[0]
        numeric[:, i] = ((plus - minus) / (2 * eps)).reshape(-1)
    np.testing.assert_allclose(jac, numeric, rtol=1e-6, atol=1e-6 * np.abs(jac).max())


@pytest.mark.parametrize(
    ("top", "kind"),
    [
        (((0.3, 0.3, 0.05), (0.0, 0.0, 0.125)), None),  # a slab on a box: a wide patch
        (((0.02, 0.3, 0.05), (0.0, 0.0, 0.125)), "hinge"),  # touching along a line
        (((0.3, 0.3, 0.05), (0.0, 0.0, 0.12)), "weld"),  # sunk 5 mm into it
    ],
)
def test_the_interface_decides_the_joint(top, kind):
    base = box_mesh((0.3, 0.3, 0.2), (0.0, 0.0, 0.0))
    if kind == "hinge":  # a thin bar lying along the top's edge, touching it on a line
        bar = trimesh.creation.box((0.3, 0.02, 0.02))
        bar.apply_transform(trimesh.transformations.rotation_matrix(np.pi / 4, (1, 0, 0)))
        bar.apply_translation((0.0, 0.15, 0.1 + 0.01 * np.sqrt(2)))
        piece = (np.asarray(bar.vertices), np.asarray(bar.faces))
    else:
        piece = box_mesh(*top)
    v, f = join_meshes(base, piece)
    space = build_rig_space(v, f, mass=1.0, pins=np.arange(len(base[0])))
    kinds = [j.kind for j in space.joints]
    assert kinds == ([] if kind is None else [kind])


def _laptop():
    """A pinned base box and a lid slab open by 100 deg, touching along the back edge."""
    base = box_mesh((0.3, 0.2, 0.02), (0.0, 0.0, 0.01))
    lid_v, lid_f = box_mesh((0.28, 0.18, 0.008), (0.0, 0.0, 0.0))
    lid_v = lid_v + (0.0, -0.09, 0.004)  # its back bottom edge on the x axis
    angle = np.radians(100.0)
    rot = trimesh.transformations.rotation_matrix(-angle, (1, 0, 0))[:3, :3]
    lid_v = lid_v @ rot.T + (0.0, 0.1, 0.02)
    v, f = join_meshes(base, (lid_v, lid_f))
    return v, f, len(base[0])


def _pushed_lid():
    """(vertices, faces, base vertex count, the lid's vertices, conditions): the laptop's
    base pinned, its lid's top edge pushed closed for 8 frames, 36 frames, damping 0.5."""
    v, f, nb = _laptop()
    lid = np.arange(nb, len(v))
    edge = lid[np.argmax(v[lid, 2])]
    cond = SimulationConditions(
        forces=(Force((0.0, -1.0, -0.3), 1.0, vertex=int(edge), end_frame=8),),
        pins=tuple(range(nb)),
        mass=1.0,
        frames=36,
        fps=24.0,
        damping=0.5,
    )
    return v, f, nb, lid, cond


def test_a_pushed_lid_closes_rigidly_about_its_hinge_and_rests_on_its_base():
    v, f, nb, lid, cond = _pushed_lid()
    result = simulate_rig(v, f, cond)
    x = result.positions.astype(np.float64)
    assert np.abs(x[:, :nb] - v[:nb].astype(np.float32)).max() == 0.0  # the base never moves
    assert rigid_fit_residual(v[lid], x[:, lid]).max() < 1e-5 * 0.3
    rot = best_rotations(v[lid], x[-1:, lid])[0]
    angle = np.degrees(np.arccos(np.clip((np.trace(rot) - 1) / 2, -1, 1)))
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    assert angle > 80.0, angle  # closed (from 100 deg open)
    assert abs(axis[0]) / np.linalg.norm(axis) > 0.99  # about the hinge (x)
    assert x[-1, lid, 2].min() > 0.02 - 0.01 * 0.3  # on the base, not through it
    # the rig plays the same vertices back
    for t in (5, 20, 35):
        np.testing.assert_allclose(result.rig.skin(v, t), x[t], atol=1e-5)


def test_free_fall_and_the_response_follows_the_load():
    v, f = box_mesh((1.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    fall = simulate_rig(v, f, SimulationConditions(frames=25, fps=24.0))
    drop = v[:, 2].mean() - fall.positions[-1, :, 2].mean()
    assert drop == pytest.approx(0.5 * 9.81 * 1.0**2, rel=1e-3)
    moved = []
    for newtons in (10.0, 40.0):
        cond = SimulationConditions(
            forces=(Force((1.0, 0.0, 0.0), newtons, point=(0.0, 0.0, 0.0)),),
            gravity=(0, 0, 0),
            frames=13,
            fps=24.0,
        )
        moved.append(simulate_rig(v, f, cond).positions[-1, :, 0].mean() - v[:, 0].mean())
    assert moved[1] / moved[0] == pytest.approx(4.0, rel=1e-3)
    assert moved[0] == pytest.approx(0.5 * 10.0 * 0.5**2, rel=1e-2)


def test_a_spinning_body_keeps_its_energy_and_its_shape():
    v, f = box_mesh((1.0, 0.5, 0.2), (0.0, 0.0, 0.0))
    cond = SimulationConditions(
        velocities=(InitialVelocity((0.0, 0.0, 1.0), vertex=0),),
        gravity=(0, 0, 0),
        frames=49,
        fps=24.0,
    )
    result = simulate_rig(v, f, cond, settings=RigSettings(substeps=4))
    e = result.energy
    assert np.abs(e - e[0]).max() / e[0] < 0.01
    assert rigid_fit_residual(v, result.positions.astype(np.float64)).max() < 1e-5


def test_a_pinned_cloth_keeps_its_size_and_its_pins():
    n = 13
    xs, zs = np.meshgrid(np.linspace(0, 1.0, n), np.linspace(0, 0.6, n), indexing="ij")
    # bowed a little out of its plane: a perfectly flat flag on a vertical pole could only
    # fall by stretching in its plane, and would hang there stiffly
    v = np.stack([xs.ravel(), 0.05 * xs.ravel() ** 2, zs.ravel() + 1.0], 1)
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = (
        idx[:-1, :-1].ravel(),
        idx[1:, :-1].ravel(),
        idx[1:, 1:].ravel(),
        idx[:-1, 1:].ravel(),
    )
    f = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])
    pins = tuple(np.flatnonzero(v[:, 0] == 0.0).tolist())
    cond = SimulationConditions(pins=pins, mass=0.2, frames=25, fps=24.0, damping=1.0)
    result = simulate_rig(v, f, cond)
    x = result.positions.astype(np.float64)
    assert np.abs(x[:, list(pins)] - v[list(pins)].astype(np.float32)).max() == 0.0
    assert (v[:, 2] - x[:, :, 2]).max() > 0.05  # it swings down
    edges = np.unique(np.sort(np.concatenate([f[:, :2], f[:, 1:], f[:, ::2]]), 1), axis=0)
    l0 = np.linalg.norm(v[edges[:, 1]] - v[edges[:, 0]], axis=1)
    for t in range(len(x)):
        length = np.linalg.norm(x[t, edges[:, 1]] - x[t, edges[:, 0]], axis=1)
        assert np.abs(length / l0 - 1).mean() < 0.05


@pytest.mark.parametrize("scale", [0.03, 30.0])
def test_a_lid_closes_the_same_way_at_every_size(scale):
    """The laptop (32 cm) scaled to 1 cm and to 10 m, its clock with sqrt(size) (the same
    motion in units of size and sqrt(size / g), the push's share of the weight kept): the lid
    closes as far, rigidly, about its hinge, and does not go into its base."""
    from training.eval.scene_meshes import laptop
    from training.eval.scene_metrics import part_contact_scores, turn_scores
    from training.eval.scene_specs import _direction

    def closing(s):
        mesh = laptop(edge=0.04)
        v = mesh.vertices * s
        push = Force(
            _direction(mesh, None),
            2.0,
            vertex=mesh.landmarks["lid_edge"],
            end_frame=8,
        )
        cond = SimulationConditions(
            forces=(push,),
            pins=tuple(mesh.pins.tolist()),
            mass=1.5,
            damping=0.5 / np.sqrt(s),
            frames=33,
            fps=24.0 / np.sqrt(s),
        )
        x = simulate_rig(v, mesh.faces, cond).positions.astype(np.float64)
        hinge = dataclasses.replace(mesh.hinge, point=tuple(np.multiply(mesh.hinge.point, s)))
        turn = turn_scores(v, x, mesh.parts, hinge)
        parts = part_contact_scores(v, x, mesh.faces, mesh.parts)
        return turn, parts, rigid_fit_residual(v[mesh.parts == 1], x[:, mesh.parts == 1]).max()

    ref, _, _ = closing(1.0)
    turn, parts, residual = closing(scale)
    assert ref["closing_max_deg"] > 30
    assert turn["closing_max_deg"] == pytest.approx(ref["closing_max_deg"], abs=5.0)
    assert turn["turn_axis_cos"] > 0.99
    assert residual < 0.01 * 0.32 * scale
    assert parts["penetration_parts"] <= 0.01


def _flat_sheet(nx: int, ny: int):
    xs, ys = np.meshgrid(np.linspace(0, 0.6, nx), np.linspace(0, 0.3, ny), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(nx * ny)], 1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    f = np.concatenate([np.stack([a, a + ny, a + 1], 1), np.stack([a + 1, a + ny, a + ny + 1], 1)])
    return v, f


def test_a_flat_part_bones_see_two_directions_and_a_box_all_three():
    v, f = _flat_sheet(20, 10)
    sheet = build_rig_space(v, f, mass=1.0, elastic=True)
    assert (sheet.seen.sum(1) == 2).all()
    normals = sheet.axes[np.arange(sheet.num_bones), :, 2]  # the unseen direction last
    np.testing.assert_allclose(np.abs(normals[:, 2]), 1.0, atol=1e-9)
    assert sheet.coordinates().shape == (12 * sheet.num_bones, 9 * sheet.num_bones)
    box = build_rig_space(*box_mesh((0.3, 0.2, 0.1), (0, 0, 0)), mass=1.0)
    assert box.seen.all() and box.coordinates() is None


def test_a_masked_rigidity_has_exact_gradients_and_discrete_gradients():
    """The rigidity along a bone's seen directions only (D (F^T F - I) D): its gradient, its
    discrete gradient's energy balance and the latter's Jacobian (float64)."""
    q0 = np.zeros((2, 4, 3))
    q0[:, :3, :] = np.eye(3) + 0.1 * RNG.normal(size=(2, 3, 3))
    axes = np.linalg.qr(RNG.normal(size=(2, 3, 3)))[0]
    seen = np.array([[True, True, False], [True, False, False]])
    proj = np.einsum("bia,ba,bja->bij", axes, seen.astype(float), axes)
    energy = Rigidity(np.array([2.0, 5.0]), 1.0, projectors=proj)
    _check_gradient(energy, q0)
    y = q0 + 0.2 * RNG.normal(size=q0.shape)
    q1 = 2 * y - q0
    grad, jac = energy.discrete_gradient(q0, y, True)
    change = energy(q1, False)[0] - energy(q0, False)[0]
    assert abs(change) > 1e-3
    assert float((grad * (q1 - q0)).sum()) == pytest.approx(change, rel=1e-10)
    eps = 1e-6
    numeric = np.zeros_like(jac)
    for i in range(y.size):
        d = np.zeros(y.size)
        d[i] = eps
        plus = energy.discrete_gradient(q0, y + d.reshape(y.shape), False)[0]
        minus = energy.discrete_gradient(q0, y - d.reshape(y.shape), False)[0]
        numeric[:, i] = ((plus - minus) / (2 * eps)).reshape(-1)
    np.testing.assert_allclose(jac, numeric, rtol=1e-6, atol=1e-6 * np.abs(jac).max())


def test_a_flat_pinned_sheet_whipped_at_its_corner_keeps_its_size():
    """A perfectly flat sheet pinned along one end and pushed up at its far corner (10 N on
    1 kg for half a second): its bones' normals move no vertex and are not coordinates, so
    the motion integrates (a 2,000-vertex sheet stopped at t = 0.37-0.46 s under 2-20 N when
    they were), keeps the cloth's size and bakes as rigid bones."""
    v, f = _flat_sheet(30, 15)
    x = v[:, 0]
    pins = tuple(np.flatnonzero(x <= 0.02).tolist())
    tip = int(np.argmax(x + v[:, 1]))
    force = Force(direction=(0, 0, 1), strength=10.0, vertex=tip, end_frame=11)
    cond = SimulationConditions(forces=(force,), pins=pins, frames=12, fps=24.0, damping=0.0)
    result = simulate_rig(v, f, cond)
    x = result.positions.astype(np.float64)
    assert (x[:, tip, 2] - v[tip, 2]).max() > 0.05  # it is whipped up
    edges = np.unique(np.sort(np.concatenate([f[:, :2], f[:, 1:], f[:, ::2]]), 1), axis=0)
    l0 = np.linalg.norm(v[edges[:, 1]] - v[edges[:, 0]], axis=1)
    for t in range(len(x)):
        length = np.linalg.norm(x[t, edges[:, 1]] - x[t, edges[:, 0]], axis=1)
        assert np.abs(length / l0 - 1).mean() < 0.05
    rot = np.asarray(result.rig.rotations)  # (T, B, 4) unit quaternions of proper rotations
    np.testing.assert_allclose(np.linalg.norm(rot, axis=-1), 1.0, atol=1e-5)


def _grid_sheet(cols: int, rows: int, size: float):
    """A free horizontal sheet of cols x rows vertices, ``size`` m along x (as Blender's Add
    Grid makes it): (vertices (N, 3), faces (F, 3))."""
    x, y = np.meshgrid(np.linspace(-1, 1, cols), np.linspace(-1, 1, rows))
    vertices = 0.5 * size * np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], 1)
    idx = np.arange(rows * cols).reshape(rows, cols)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1]
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d.ravel()], 1)])
    return vertices, faces


@pytest.mark.parametrize("cols, rows", [(4, 4), (7, 5), (11, 9)])
def test_a_coarse_free_sheet_falls_freely_and_has_a_few_vertices_a_bone(cols, rows):
    """A 2 m sheet of a few dozen vertices falling with nothing to meet falls as a whole,
    unstretched: a cloth now, moved by backward Euler (one step a frame with nothing to meet),
    whose fall after N steps of h is g h^2 N (N + 1) / 2 = g t (t + h) / 2 (2% past g t^2 / 2
    at 2 s); its bones (for a rig space) each have several vertices (a bone per vertex made
    the steps stop converging within the first second)."""
    vertices, faces = _grid_sheet(cols, rows, 2.0)
    space = build_rig_space(vertices, faces, mass=1.0)
    assert space.num_bones <= max(1, len(vertices) // 6)
    result = simulate_rig(vertices, faces, SimulationConditions(frames=48))
    fall = vertices[:, 2].mean() - result.positions[-1, :, 2].mean()
    t, h = 47 / 24, 1 / (24 * RigSettings().cloth_substeps)
    assert fall == pytest.approx(0.5 * 9.81 * t * (t + h), rel=0.005)
    drift = result.positions[-1] - result.positions[-1].mean(0) - (vertices - vertices.mean(0))
    assert np.abs(drift).max() < 1e-3 * 2.0


def test_a_push_beyond_the_steps_is_integrated_or_refused():
    """1e9 N on a 1 kg slab for 3 frames would carry it some 8e6 m: the run must either do so
    or say it cannot (a line search cut short once passed for a converged step, and the slab
    came back moved by about 5 cm, with no sign of trouble)."""
    mesh = trimesh.creation.box((1.0, 0.5, 0.1)).subdivide()
    push = Force(vertex=0, direction=(0, 0, 1), strength=1e9)
    try:
        result = simulate_rig(
            mesh.vertices, mesh.faces, SimulationConditions(frames=4, forces=(push,))
        )
    except SimulationError:
        return
    moved = np.abs(result.positions[-1] - result.positions[0]).max()
    assert moved > 0.5 * 0.5 * 1e9 * (3 / 24) ** 2


def test_a_time_limit_stops_the_integration_before_its_next_step():
    """The rig space checks its time limit before every implicit step, not only between
    frames: a limit that has passed stops the run before its first step, with the rest
    frame alone, cancelled and timed out; without one the same run gives every frame."""
    v, f = box_mesh((0.4, 0.2, 0.05), (0.0, 0.0, 0.0))
    cond = SimulationConditions(
        frames=6, forces=(Force(vertex=0, direction=(0, 0, 1), strength=5.0),)
    )
    stopped = simulate_rig(v, f, cond, time_limit=0.0)
    assert stopped.positions.shape[0] == 1 and stopped.info["substeps"] == 0
    assert stopped.info["timed_out"] and stopped.info["cancelled"]
    whole = simulate_rig(v, f, cond)
    assert whole.positions.shape[0] == 6 and not whole.info["timed_out"]


def test_a_pinned_sheet_has_no_bone_the_still_bone_covers():
    """The bones by a sheet's pinned edge, whose vertices the still bone mostly takes, are
    not coordinates (light bones there turned by up to 1.5 rad in one Newton step): every
    moving bone keeps at least half its mass moment, the weights still sum to one, the
    pinned vertices follow the still bone alone, and the space's bones all move vertices."""
    xs, ys = np.meshgrid(np.linspace(0, 0.6, 41), np.linspace(0, 0.3, 21), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    i, j = np.meshgrid(np.arange(40), np.arange(20), indexing="ij")
    a = (i * 21 + j).ravel()
    f = np.concatenate([np.stack([a, a + 21, a + 1], 1), np.stack([a + 1, a + 21, a + 22], 1)])
    pins = np.flatnonzero(v[:, 0] <= 0.02)
    free = build_rig_space(v, f, mass=1.0)
    space = build_rig_space(v, f, mass=1.0, pins=pins)
    moving = np.flatnonzero(~space.fixed)
    assert 0 < len(moving) < free.num_bones  # some bones by the pins are gone
    weights = space.vertex_weights
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-12)
    still = space.num_bones - 1
    for b in moving:
        w_free = (free.vertex_weights * (free.vertex_bones == b)).sum(1)
        w_now = (weights * (space.vertex_bones == b)).sum(1)
        kept = (space.masses * w_now**2).sum() / (free.masses * w_free**2).sum()
        assert kept >= 0.5, (b, kept)
    on_still = (weights * (space.vertex_bones == still)).sum(1)
    np.testing.assert_allclose(on_still[pins], 1.0)
    gone = np.flatnonzero(space.fixed[:still])
    assert not ((space.vertex_bones[:, :, None] == gone) & (weights[:, :, None] > 0)).any()


def test_a_small_box_falling_on_a_thin_floor_stays_on_it():
    """A 1 cm box 0.2 mm above a 0.4 mm floor (a fixed part): gravity, 30x stronger for its
    size than for a 30 cm one, carries it 2 mm (0.2 sizes) in the first frame-rate step from
    rest, through the floor, unless the step's path is swept for the impact."""
    floor = box_mesh((0.02, 0.02, 0.0004), (0.0, 0.0, -0.0002))
    box = box_mesh((0.01, 0.01, 0.004), (0.0, 0.0, 0.0022))
    v, f = join_meshes(floor, box)
    pins = tuple(range(8))  # the floor's corners: fixed
    result = simulate_rig(v, f, SimulationConditions(frames=12, pins=pins))
    bottom = result.positions[:, 8:, 2].min(1)
    assert bottom.min() > -0.01 * 0.02  # never more than 1% of the size into the floor
    assert bottom[-1] < 0.0002  # it fell onto it


def test_a_box_thrown_at_a_thin_wall_stops_at_it_within_a_long_step():
    """A 1 cm box thrown at 3 m/s at a 0.4 mm wall (a fixed part, the object 3 cm) 5 mm away:
    a step as long as its accuracy allows (5% of the size) carries it 1.5 mm, past the wall's
    whole thickness; the step's path is swept, so it meets the wall and bounces off it."""
    wall = box_mesh((0.0004, 0.03, 0.03), (0.0102, 0.0, 0.0))
    box = box_mesh((0.01, 0.01, 0.01), (0.0, 0.0, 0.0))
    v, f = join_meshes(wall, box)
    cond = SimulationConditions(
        frames=6,
        gravity=(0.0, 0.0, 0.0),
        pins=tuple(range(8)),
        velocities=(InitialVelocity(velocity=(3.0, 0.0, 0.0)),),
    )
    result = simulate_rig(v, f, cond)
    front = result.positions[:, 8:, 0].max(1)
    assert front.max() < 0.01 + 0.01 * 0.03  # never more than 1% of the size into the wall
    assert front[-1] < front[0]  # it met the wall and came back (unhindered: 6.7 cm on)


@pytest.mark.parametrize("share", [1e-17, 1.0 - 1e-16])
def test_an_impact_within_rounding_of_a_steps_end_cuts_no_sliver_of_a_step(monkeypatch, share):
    """An impact found within rounding of a step's start or end cuts nothing off it: a step of
    1e-16 s turns the rounding of its positions into velocities (pybullet's gripper, undamped,
    gained 31% of its energy in two such steps). Every impact is reported at ``share`` of its
    step here; the box, thrown undamped and elastic, keeps its energy and every step its
    length."""
    from neurok_core.rigspace import integrator

    lengths = []
    step = integrator.Integrator._step

    def recorded(self, q, v, t, h, depth=0):
        lengths.append(h)
        return step(self, q, v, t, h, depth)

    monkeypatch.setattr(integrator.Integrator, "_impact_time", lambda self, q0, q1: share)
    monkeypatch.setattr(integrator.Integrator, "_step", recorded)
    v, f = box_mesh((0.01, 0.01, 0.01), (0.0, 0.0, 0.0))
    cond = SimulationConditions(
        frames=4,
        gravity=(0.0, 0.0, 0.0),
        damping=0.0,
        bounciness=1.0,
        ground=-1.0,  # never reached: a contact whose impacts the patch reports
        velocities=(InitialVelocity(velocity=(0.3, 0.0, 0.1)),),
    )
    result = simulate_rig(v, f, cond)
    assert min(lengths) > 1e-6 / 24
    energy = np.asarray(result.energy)
    assert np.abs(energy / energy[0] - 1.0).max() < 1e-6


def test_a_drag_moves_a_small_box_against_its_friction():
    """A 1 cm box on the ground (friction 0.5) dragged 5 mm along x by a top corner follows
    the handle: the drag's spring holds the point within a few per cent of the size whatever
    the size (at 4 Hz its pull at 1 cm was less than the friction: the corner stayed 4.9 mm
    short of the target)."""
    v, f = box_mesh((0.01, 0.01, 0.01), (0.0, 0.0, 0.005))
    corner = int(np.argmin(v[:, 0] + v[:, 1] - v[:, 2]))
    target = v[corner] + np.array([0.005, 0.0, 0.0])
    cond = SimulationConditions(
        frames=24,
        ground=0.0,
        friction=0.5,
        drags=(Drag(target=tuple(target), frame=12, vertex=corner),),
    )
    result = simulate_rig(v, f, cond)
    assert np.linalg.norm(result.positions[12, corner] - target) < 0.05 * 0.01
    assert result.positions[:, :, 2].min() > -0.01 * 0.01  # on the ground, not into it


def test_the_skinning_rows_and_the_edges_against_plain_loops():
    """The sparse skinning rows u_i = (w_b (X_i - h_b), w_b) (repeated bones summed) and the
    mesh's unique edges, against element-by-element references."""
    from neurok_core.geometry import unique_edges
    from neurok_core.rigspace.space import _sparse_rows

    rng = np.random.default_rng(0)
    n, k, nb = 200, 5, 7
    v, bones = rng.normal(size=(n, 3)), rng.integers(0, nb, (n, k))
    w, heads = rng.random((n, k)), rng.normal(size=(nb, 3))
    want = np.zeros((n, 4 * nb))
    for i in range(n):
        for j in range(k):
            b = bones[i, j]
            want[i, 4 * b : 4 * b + 3] += w[i, j] * (v[i] - heads[b])
            want[i, 4 * b + 3] += w[i, j]
    np.testing.assert_allclose(_sparse_rows(v, bones, w, heads).toarray(), want, atol=1e-14)
    faces = trimesh.creation.icosphere(2).faces
    edges = sorted(
        {
            tuple(sorted((int(a), int(b))))
            for f in faces
            for a, b in zip(f, np.roll(f, -1), strict=True)
        }
    )
    np.testing.assert_array_equal(unique_edges(faces), np.asarray(edges))


def test_a_run_without_its_figures_moves_the_same():
    """A preview spares itself the strain and depth figures (``want_figures=False``): the same
    motion, its info without them."""
    v, f = box_mesh((0.2, 0.2, 0.2), np.array([0.0, 0.0, 0.15]), subdivisions=1)
    cond = SimulationConditions(frames=8, fps=24.0, ground=0.0, damping=0.5)
    full = simulate_rig(v, f, cond)
    bare = simulate_rig(v, f, cond, want_figures=False)
    np.testing.assert_array_equal(full.positions, bare.positions)
    assert "edge_strain_max" in full.info and "penetration_max" in full.info
    assert "edge_strain_max" not in bare.info and "penetration_max" not in bare.info
