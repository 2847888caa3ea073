"""Rigid bones as exact coordinates (neurok_core.rigspace.rigid): the tangent maps, the
constraint forces' share of the Jacobian and the springs' Jacobian on the rigid unknowns
against finite differences and the dense matrices; a run keeps its bones rigid."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.rigspace import RigSettings, build_rig_space, simulate_rig
from neurok_core.rigspace.energies import flat_kron
from neurok_core.rigspace.rigid import RigidCoordinates, exp_rotations
from neurok_core.rigspace.simulate import _stretch


def _sheet(nx=21, ny=11):
    xs, ys = np.meshgrid(np.linspace(0, 0.6, nx), np.linspace(0, 0.3, ny), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    f = np.concatenate([np.stack([a, a + ny, a + 1], 1), np.stack([a + 1, a + ny, a + ny + 1], 1)])
    return v, f


def _turned_state(space, rng, angle=0.3):
    """A state with every moving bone turned by a random rotation and shifted."""
    q = space.rest()
    for b in np.flatnonzero(~space.fixed):
        r = Rotation.from_rotvec(rng.normal(size=3) * angle).as_matrix()
        q[b, :3, :] = r.T
        q[b, 3, :] += rng.normal(size=3) * 0.01
    return q


@pytest.fixture(scope="module")
def sheet_space():
    v, f = _sheet()
    pins = np.flatnonzero(v[:, 0] < 1e-9)
    return build_rig_space(v, f, mass=1.0, pins=pins), v, f


def test_rotations_are_orthonormal_and_match_scipy():
    phi = np.random.default_rng(0).normal(size=(20, 3)) * np.r_[[1e-10] * 3 + [1.0] * 57].reshape(
        20, 3
    )
    r = exp_rotations(phi)
    np.testing.assert_allclose(r, Rotation.from_rotvec(phi).as_matrix(), atol=1e-12)


def test_the_tangent_is_the_derivative_of_the_retraction(sheet_space):
    space, _, _ = sheet_space
    rc = RigidCoordinates(space)
    rng = np.random.default_rng(1)
    q = _turned_state(space, rng)
    axes = rc.axes(q)
    tan = rc.tangent(q, axes)
    xi = rng.normal(size=rc.dim)
    eps = 1e-6
    fd = (rc.retract(q, eps * xi, axes) - rc.retract(q, -eps * xi, axes)).reshape(-1) / (2 * eps)
    np.testing.assert_allclose(tan @ xi, fd, atol=1e-8)
    # the retraction keeps every moving bone a rotation
    f = np.swapaxes(rc.retract(q, xi, axes)[rc.live, :3, :], 1, 2)
    np.testing.assert_allclose(
        np.swapaxes(f, 1, 2) @ f, np.broadcast_to(np.eye(3), f.shape), atol=1e-12
    )


@pytest.mark.parametrize("midpoint", [False, True])
def test_the_curvature_is_the_derivative_of_the_test_directions(sheet_space, midpoint):
    """d(test(q1(xi))^T g)/d xi at fixed g against central differences."""
    space, _, _ = sheet_space
    rc = RigidCoordinates(space)
    rng = np.random.default_rng(2)
    q0 = _turned_state(space, rng)
    q1 = _turned_state(space, rng, 0.1) if midpoint else q0
    axes = rc.axes(q1)
    g = rng.normal(size=12 * space.num_bones)

    def tested(xi):
        moved = rc.retract(q1, xi, axes)
        if midpoint:
            return rc.tangent(0.5 * (q0 + moved), axes, midpoint=True).T @ g
        return rc.tangent(moved, axes).T @ g

    y = 0.5 * (q0 + q1) if midpoint else None
    curv = rc.curvature(q1, axes, g, y)
    eps = 1e-6
    for c in range(rc.dim):
        if rc.shift[c]:
            continue
        xi = np.zeros(rc.dim)
        xi[c] = eps
        fd = (tested(xi) - tested(-xi)) / (2 * eps)
        turns = ~rc.shift
        np.testing.assert_allclose(curv[turns, c], fd[turns], atol=1e-6 * np.abs(g).max())


@pytest.mark.parametrize("discrete", [False, True])
def test_the_springs_jacobian_on_the_rigid_unknowns_is_the_dense_ones(sheet_space, discrete):
    space, _, _ = sheet_space
    springs = _stretch(space, RigSettings(), 2 * np.pi * 40, 1.0)
    rc = RigidCoordinates(space)
    rng = np.random.default_rng(3)
    q0 = _turned_state(space, rng, 0.2)
    y = 0.5 * (q0 + _turned_state(space, rng, 0.2))
    test = rc.tangent(y, midpoint=True)
    tan = rc.tangent(y)
    if discrete:
        dense = springs.discrete_gradient(q0, y, True)[1]
        mine = springs.tangent_jacobian(q0, y, test, tan, rc.live)
    else:
        dense = springs(y, True)[2]
        mine = springs.tangent_jacobian(None, y, test, tan, rc.live)
    want = test.T @ dense @ tan
    np.testing.assert_allclose(mine, want, atol=1e-9 * np.abs(want).max())


def test_projected_velocities_are_rigid_and_kept(sheet_space):
    space, _, _ = sheet_space
    rc = RigidCoordinates(space)
    rng = np.random.default_rng(4)
    q = _turned_state(space, rng)
    mass = flat_kron(space.moments)
    v = rc.project(q, rng.normal(size=q.shape), mass, 1e-12)
    again = rc.project(q, v, mass, 1e-12)
    np.testing.assert_allclose(again, v, atol=1e-5 * np.abs(v).max())
    f = np.swapaxes(q[rc.live, :3, :], 1, 2)
    fd = np.swapaxes(v[rc.live, :3, :], 1, 2)
    skew = fd @ np.swapaxes(f, 1, 2)  # F' F^T of a turning rotation is skew
    np.testing.assert_allclose(skew + np.swapaxes(skew, 1, 2), 0.0, atol=1e-8)


def test_a_run_with_rigid_bones_keeps_them_rigid_and_the_flag_unstretched(sheet_space):
    _, v, f = sheet_space
    pins = tuple(int(i) for i in np.flatnonzero(v[:, 0] < 1e-9))
    tip = int(np.argmax(v[:, 0] + v[:, 1]))
    cond = SimulationConditions(
        frames=24,
        pins=pins,
        damping=0.5,
        forces=(Force(direction=(0, 0, 1), strength=2.0, vertex=tip, end_frame=6),),
    )
    result = simulate_rig(v, f, cond, settings=RigSettings(rigid_bones=True))
    assert result.info["rigidity_residual"] < 1e-9
    assert result.info["edge_strain_max"] < 0.05
    assert (result.positions[:, list(pins)] == result.positions[0, list(pins)]).all()
    assert np.abs(result.positions[-1] - v).max() > 0.05  # it moved
