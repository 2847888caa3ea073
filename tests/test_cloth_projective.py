"""The cloth's projective-dynamics step (neurok_core.rigspace.cloth_projective): its fixed point
is the quasi-Newton step's minimiser, the steps it hands over, and the pieces it is built of
(the isotropic band solve, the embedding of many frames at once, the rig's node frames)."""

import numpy as np
import pytest

from neurok_core.dynamics import SimulationConditions
from neurok_core.rigspace import cloth, cloth_projective
from neurok_core.rigspace.cloth import ClothStep, bending_matrix
from neurok_core.rigspace.cloth_projective import ProjectiveClothStep
from neurok_core.rigspace.cloth_simulate import simulate_cloth
from neurok_core.rigspace.space import RigSettings
from tests.test_cloth import _sheet, pinned_sheet_energy, pinned_sheet_laplacian


def _steps(damping: float):
    """A quasi-Newton and a projective step on one small sheet: springs shortened at 0.3 of
    their stiffness, viscous stretching and bending, pins along one edge."""
    v, m, free, energy = pinned_sheet_energy(7, 5, 0.5, 400.0, 0.02)
    kwargs = dict(damping=damping, stretch_zeta=0.5, omega=60.0, size=1.0, bending_damping=0.05)
    return v, (
        ClothStep(m, free, energy, None, iterations=400, **kwargs),
        ProjectiveClothStep(m, free, energy, None, projective_iterations=4000, **kwargs),
    )


def test_the_projective_steps_fixed_point_is_the_quasi_newton_steps_minimiser(monkeypatch):
    """Run to convergence, both steps reach the same x_{n+1} from the same state under
    gravity, a force and a drag: the projections' generalised form (a shortened spring, the
    viscous stretching) is exact at the fixed point."""
    monkeypatch.setattr(cloth, "CONVERGED", 1e-12)
    monkeypatch.setattr(cloth, "SETTLED", 0.0)
    monkeypatch.setattr(cloth_projective, "CONVERGED", 1e-12)
    rng = np.random.default_rng(4)
    v, (exact, projective) = _steps(damping=0.3)
    x = v + rng.normal(0, 0.01, v.shape)
    x[~exact.free] = v[~exact.free]
    vel = rng.normal(0, 0.3, v.shape)
    vel[~exact.free] = 0.0
    forces = exact.m[:, None] * np.array([0.0, 0.0, -9.81]) + rng.normal(0, 0.05, v.shape)
    drags = [(np.array([20, 21, 26]), np.array([0.2, 0.3, 0.5]), 30.0, np.array([0.8, 0.3, 0.9]))]
    want, want_v = exact.advance(x.copy(), vel.copy(), 1 / 48, forces, drags)
    got, got_v = projective.advance(x.copy(), vel.copy(), 1 / 48, forces, drags)
    assert projective.report.factorisations == 1  # its own matrix: it took the step
    assert np.abs(got - want).max() < 1e-6
    assert np.abs(got_v - want_v).max() < 1e-4
    assert np.abs(got - x).max() > 1e-3  # the step moved it


def test_the_projective_step_hands_undamped_steps_to_the_quasi_newton_step():
    v, (_, projective) = _steps(damping=0.0)
    x, vel = v.copy(), np.zeros_like(v)
    forces = projective.m[:, None] * np.array([0.0, 0.0, -9.81])
    projective.advance(x, vel, 1 / 24, forces, [])
    # the exact step's matrix, not projective dynamics' (none factorised)
    assert projective._pd_key is None and projective.report.steps == 1


def test_a_damped_cloth_falls_alike_with_either_step():
    """A sheet pinned along an edge, damped, falling under gravity: the preview's step
    (projective) and the bake's (quasi-Newton) take the far edge down one path, within 10 cm
    of a 1 m fall (the projective step is approximate: 7.5 cm apart at the end), and stretch
    it alike."""
    v, f, pins, far = _sheet(15, 9)
    cond = SimulationConditions(pins=tuple(pins.tolist()), damping=0.5, frames=25)
    runs = {
        kind: simulate_cloth(v, f, cond, settings=RigSettings(cloth_step=kind), want_rig=False)
        for kind in ("quasi-newton", "projective")
    }
    a, b = (runs[k].positions for k in ("quasi-newton", "projective"))
    assert a[-1, far, 2].mean() < v[far, 2].mean() - 0.3  # it fell
    path = [p[:, far, 2].mean(1) for p in (a, b)]
    assert np.abs(path[0] - path[1]).max() < 0.1
    strain = [runs[k].info["edge_strain_max"] for k in ("quasi-newton", "projective")]
    assert strain[1] < 1.5 * strain[0] + 1e-3


def test_the_isotropic_band_solve_is_the_matrixs_solve():
    from scipy import sparse

    from neurok_core.rigspace import band

    rng = np.random.default_rng(5)
    v, f, free, lap = pinned_sheet_laplacian(20, 12)
    spd = lap + sparse.eye(len(v)) * 0.3 + bending_matrix(v, f)
    coo = spd.tocoo()
    idx = np.flatnonzero(free)
    dense = spd.toarray()[np.ix_(idx, idx)]
    rhs = rng.normal(size=(len(idx), 3))
    system = band.NodeSystem(free, np.stack([coo.row, coo.col], 1), dims=1)
    system.factor(coo.row, coo.col, coo.data)
    assert system._band is not None
    want = np.linalg.solve(dense, rhs)
    np.testing.assert_allclose(system.solve(rhs), want, rtol=1e-9, atol=1e-12)
    order = idx[system.order]  # the node of each row
    local = np.searchsorted(idx, order)
    np.testing.assert_allclose(system.solve_ordered(rhs[local]), want[local], atol=1e-12)


@pytest.mark.parametrize("rows", [None, "some"])
def test_many_frames_embed_as_each_frame_alone(rows):
    """A curved sheet on a coarser simulation mesh (rim vertices off its triangles): the
    vertices of a stack of frames are each frame's own."""
    v, f, _, _ = _sheet(60, 40)
    v[:, 2] += 0.05 * np.sin(5 * v[:, 0])
    mesh = cloth.sim_mesh(v, f)
    assert mesh.offset.any() and not mesh.identity
    rng = np.random.default_rng(6)
    frames = mesh.nodes[None] + rng.normal(scale=0.02, size=(4, *mesh.nodes.shape))
    pick = None
    if rows is not None:  # some rows, an offset one among them twice
        pick = np.sort(rng.choice(len(v), 300, replace=False))
        pick = np.r_[
            pick, np.flatnonzero(mesh.offset)[:1], pick[:1], np.flatnonzero(mesh.offset)[:1]
        ]
    many = mesh.embed(frames, pick)
    for t in range(4):
        np.testing.assert_allclose(many[t], mesh.embed(frames[t], pick), atol=1e-12)
    np.testing.assert_allclose(mesh.embed(mesh.nodes), v, atol=0.5 * np.sqrt(0.6 / 600))


def test_a_drag_that_keeps_its_nodes_but_not_its_weights_gets_its_own_matrix(monkeypatch):
    """Two drags on the corners of one triangle, one after the other: the drag's k w w^T is
    in the projective step's matrix, so the second drag is not stepped with the first's."""
    monkeypatch.setattr(cloth, "CONVERGED", 1e-12)
    monkeypatch.setattr(cloth, "SETTLED", 0.0)
    monkeypatch.setattr(cloth_projective, "CONVERGED", 1e-12)
    v, (exact, projective) = _steps(damping=0.3)
    x, vel = v.copy(), np.zeros_like(v)
    forces = exact.m[:, None] * np.array([0.0, 0.0, -9.81])
    nodes, target = np.array([20, 21, 26]), np.array([0.8, 0.3, 0.9])
    for weights in ([0.8, 0.1, 0.1], [0.1, 0.1, 0.8]):
        drags = [(nodes, np.array(weights), 30.0, target)]
        want, _ = exact.advance(x.copy(), vel.copy(), 1 / 48, forces, drags)
        got, _ = projective.advance(x.copy(), vel.copy(), 1 / 48, forces, drags)
        assert np.abs(got - want).max() < 1e-6
    assert projective.report.factorisations == 2


@pytest.mark.parametrize("edge", ["low-y", "high-y"])
def test_the_cloth_rig_replays_a_hemmed_sheet_at_rest_and_in_motion(edge):
    """A sheet with a hem folded up 90 degrees along one edge (still a cloth): each node's
    bone turns with a triangle it is a corner of (an edge of that triangle as its tangent), so
    the rig replays the rest shape exactly and the motion within a cell."""
    from neurok_core.rigspace.cloth_simulate import node_rig
    from neurok_core.sheets import is_cloth

    v, f, pins, _ = _sheet(15, 9)
    if edge == "low-y":
        up = v[:, 1] < 0.075 + 1e-9
        v[up, 2] = 1 + (0.075 - v[up, 1])
        v[up, 1] = 0.075
    else:
        up = v[:, 1] > 0.525 - 1e-9
        v[up, 2] = 1 + (v[up, 1] - 0.525)
        v[up, 1] = 0.525
    assert is_cloth(v, f)
    mesh = cloth.sim_mesh(v, f)
    rest = node_rig(mesh, mesh.nodes[None], np.zeros(len(mesh.nodes), bool))
    np.testing.assert_allclose(rest.skin(v, 0), v, atol=1e-9)
    cond = SimulationConditions(pins=tuple(pins.tolist()), damping=3.0, frames=6)
    result = simulate_cloth(v, f, cond, settings=RigSettings())
    for t in (0, 5):
        np.testing.assert_allclose(result.rig.skin(v, t), result.positions[t], atol=1e-5)


@pytest.mark.parametrize("kind", ["quasi-newton", "projective"])
def test_a_cloth_pinned_everywhere_stays_at_rest(kind):
    v, f, _, _ = _sheet(7, 5)
    cond = SimulationConditions(pins=tuple(range(len(v))), damping=0.5, frames=4)
    result = simulate_cloth(v, f, cond, settings=RigSettings(cloth_step=kind))
    np.testing.assert_allclose(result.positions, np.broadcast_to(v, result.positions.shape))
    assert result.rig is not None and result.rig.num_frames == 4
