"""The projected Newton step of the rig space (``neurok_core.rigspace.newton_step``): its
rotations and their curvature against finite differences, rigid parts kept exactly rigid, the
same motion as the midpoint step where both apply, an undamped run's energy, and which runs
take it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mesh_pieces import box_mesh
from scipy.spatial.transform import Rotation
from test_rigspace import _laptop, _pushed_lid

from neurok_core.dynamics import InitialVelocity, SimulationConditions
from neurok_core.metrics import rigid_fit_residual
from neurok_core.rigspace import RigSettings, build_rig_space, simulate_rig
from neurok_core.rigspace.energies import Linear
from neurok_core.rigspace.newton_step import ProjectedNewton, rodrigues
from neurok_core.rigspace.simulate import rigid_coordinates, use_newton

RNG = np.random.default_rng(7)


def test_rodrigues_is_the_rotation_of_its_vector():
    phi = np.concatenate([RNG.normal(size=(20, 3)), 1e-10 * RNG.normal(size=(3, 3))])
    np.testing.assert_allclose(rodrigues(phi), Rotation.from_rotvec(phi).as_matrix(), atol=1e-13)


def _free_box_step(load):
    v, f = box_mesh((0.4, 0.3, 0.2), (0.0, 0.0, 0.0))
    space = build_rig_space(v, f, mass=1.0, pins=(), elastic=False, settings=RigSettings())
    step = ProjectedNewton(
        space, [load(space)], lambda t: [], rigid=rigid_coordinates(space), damping=0.1, zeta=1.0
    )
    return space, step


def test_the_retraction_curvature_is_the_second_derivative_along_a_turn():
    """For a linear energy (its Hessian zero) the second derivative of E(exp([phi]x) F) is
    the curvature term alone: S - tr(S) I (module docstring), at a turned state."""
    space, step = _free_box_step(
        lambda s: Linear(s.gravity_moment + RNG.normal(size=4 * s.num_bones), RNG.normal(size=3))
    )
    energy = step.energies[0]
    y = step._retract(space.rest(), np.r_[RNG.normal(size=3), RNG.normal(size=3)])
    grad = energy(y, False)[1].reshape(-1)
    curvature = step._curvature(y, grad, project=False)[0]

    def along(phi):
        return energy(step._retract(y, np.r_[phi, 0.0, 0.0, 0.0]), False)[0]

    e, fd = 1e-4, np.zeros((3, 3))
    for i in range(3):
        for j in range(3):
            a, b = np.eye(3)[i] * e, np.eye(3)[j] * e
            fd[i, j] = (along(a + b) - along(a - b) - along(b - a) + along(-a - b)) / (4 * e * e)
    np.testing.assert_allclose(fd, curvature, atol=1e-6 * np.abs(curvature).max())
    # the tangent's turns are the derivative of the retraction
    basis = step._tangent(y)
    for a in range(3):
        d = (step._retract(y, 1e-6 * np.eye(6)[a]) - step._retract(y, -1e-6 * np.eye(6)[a])) / 2e-6
        np.testing.assert_allclose(d.reshape(-1), basis[:, a], atol=1e-8)


def test_a_lid_closes_the_same_with_both_steps_and_stays_exactly_rigid():
    v, f, _, lid, cond = _pushed_lid()
    runs = {s: simulate_rig(v, f, cond, settings=RigSettings(step=s)) for s in ("midpoint", "auto")}
    newton, midpoint = runs["auto"], runs["midpoint"]
    assert newton.info["backward_euler_steps"] < newton.info["substeps"]  # BDF2 mostly
    assert newton.info["rigidity_residual"] < 1e-12  # rotations, not a stiff energy
    x, ref = newton.positions.astype(np.float64), midpoint.positions.astype(np.float64)
    assert rigid_fit_residual(v[lid], x[:, lid]).max() < 1e-6 * 0.3
    # the same motion to a few per cent of the size (the steps damp differently)
    assert np.linalg.norm(x - ref, axis=2).mean(1).max() < 0.05 * 0.3
    assert x[-1, lid, 2].min() > 0.02 - 0.01 * 0.3  # on the base, not through it


def test_an_undamped_spinning_body_keeps_its_energy_and_its_shape():
    """Backward Euler and BDF2 take energy; the step gives it back."""
    v, f = box_mesh((1.0, 0.5, 0.2), (0.0, 0.0, 0.0))
    cond = SimulationConditions(
        velocities=(InitialVelocity((0.0, 0.0, 1.0), vertex=0),),
        gravity=(0, 0, 0),
        frames=241,
    )
    result = simulate_rig(v, f, cond, settings=RigSettings(step="newton"))
    assert result.info["backward_euler_steps"] < result.info["substeps"]  # BDF2 mostly
    # the kick is the same rigid motion whichever step (not a shear of the bone's F, which
    # the exact rotation would drop at its first step)
    midpoint = simulate_rig(v, f, dataclasses.replace(cond, frames=2))
    assert result.energy[0] == pytest.approx(midpoint.energy[0], rel=1e-9)
    e = result.energy
    assert np.abs(e - e[0]).max() / e[0] < 0.01
    assert rigid_fit_residual(v, result.positions.astype(np.float64)).max() < 1e-6


def test_a_free_fall_by_the_newton_step_falls_as_far_as_gravity_says():
    """Its first step is ramped up (backward Euler on an eighth, then BDF2): one backward
    Euler step at frame rate would leave the fall 0.5% long after a second."""
    v, f = box_mesh((1.0, 1.0, 1.0), (0.0, 0.0, 0.0))
    for damping in (0.0, 1e-6):
        cond = SimulationConditions(frames=25, damping=damping)
        fall = simulate_rig(v, f, cond, settings=RigSettings(step="newton"))
        drop = v[:, 2].mean() - fall.positions[-1, :, 2].mean()
        assert drop == pytest.approx(0.5 * 9.81 * 1.0**2, rel=1e-3)


def test_an_undamped_springy_lid_keeps_its_energy_through_its_turning_points():
    """A lid on a 1 Hz spring (the user's stiffness), kicked, no gravity, 10 s, by the
    Newton step: at each turning point its kinetic energy is too small to give back what the
    step took, so the positions are lifted up the spring instead (``_lift``)."""
    v, f, nb = _laptop()
    lid = np.arange(nb, len(v))
    edge = int(lid[np.argmax(v[lid, 2])])
    cond = SimulationConditions(
        velocities=(InitialVelocity((0.0, -0.3, 0.0), vertex=edge),),
        pins=tuple(range(nb)),
        gravity=(0, 0, 0),
        stiffness=1.0,
        frames=121,
        fps=12.0,
    )
    result = simulate_rig(v, f, cond, settings=RigSettings(step="newton"))
    e = result.energy
    assert np.abs(e - e[0]).max() / e[0] < 0.01
    x = result.positions.astype(np.float64)
    assert np.ptp(x[:, edge, 1]) > 0.02  # it swings
    assert rigid_fit_residual(v[lid], x[:, lid]).max() < 1e-6 * 0.3


@pytest.mark.parametrize(
    ("damping", "elastic", "expected"),
    [(0.5, False, True), (0.0, False, False), (0.5, True, False)],
)
def test_which_runs_take_the_newton_step(damping, elastic, expected):
    """By default: a damped run with a rigid part (one bone)."""
    v, f = box_mesh((1.0, 0.05, 0.05), (0.0, 0.0, 0.0)) if elastic else _laptop()[:2]
    settings = RigSettings()
    space = build_rig_space(v, f, mass=1.0, pins=(), elastic=elastic, settings=settings)
    cond = SimulationConditions(damping=damping)
    assert use_newton(space, cond, settings) is expected
    assert use_newton(space, cond, RigSettings(step="midpoint")) is False
    assert use_newton(space, cond, RigSettings(step="newton")) is True


def test_the_step_benchmark_runs_both_steps_on_a_scene_and_they_agree():
    """``training.benchmarks.bench_steps`` (the figures of docs/experiments/rig_speed.md):
    the bottle's cap by both steps, the same motion to 5% of its size, no halving."""
    from training.benchmarks.bench_steps import run

    midpoint, newton = run("bottle_cap", ["midpoint", "newton"], undamped=False)
    assert (midpoint["step"], newton["step"]) == ("midpoint", "newton")
    assert midpoint["off"] is None and newton["off"] < 0.05
    assert newton["halvings"] == 0 and newton["steps"] > 0 and newton["motion"] > 0.05
