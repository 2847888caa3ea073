"""The shape-keeping springs (neurok_core.dynamics.shapekeep): pairs, forces, frequency, and
their effect on motions that stretch the object against motions that keep it isometric."""

import math

import numpy as np
import pytest
import torch
from dynamics_systems import crossing_period, pendulum

from neurok_core.dynamics import MechanicalSystem, SimulationConditions, simulate
from neurok_core.dynamics.loads import build_loads
from neurok_core.dynamics.settings import DEFAULT_SETTINGS
from neurok_core.dynamics.shapekeep import (
    build_edge_springs,
    neighbour_pairs,
    numpy_energy_and_forces,
)
from neurok_core.dynamics.system import point_kinematics

F64 = torch.float64
SPRINGS = DEFAULT_SETTINGS.with_overrides(shape_keeping_hz=3.0)


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_pairs_join_nearest_points_of_one_group_only():
    pts = np.array([[0, 0, 0], [1, 0, 0], [2, 0, 0], [0.1, 0, 0], [5, 0, 0]], dtype=float)
    groups = np.array([0, 0, 0, 1, 1])
    pairs = neighbour_pairs(pts, groups, 1)
    assert {tuple(p) for p in pairs} == {(0, 1), (1, 2), (3, 4)}  # 0-3 are closest: no pair
    assert (neighbour_pairs(pts, np.array([0, 1, 2, 3, 4]), 3)).shape == (0, 2)


def test_forces_are_minus_the_gradient_and_vanish_under_rigid_motion():
    gen = torch.Generator().manual_seed(0)
    rest = torch.rand(30, 3, generator=gen, dtype=F64)
    pairs = torch.as_tensor(neighbour_pairs(rest.numpy(), np.zeros(30, int), 4))
    masses = torch.rand(30, generator=gen, dtype=F64) + 0.5
    jac = torch.randn(30, 3, 2, generator=gen, dtype=F64)
    metric = torch.einsum("s,sik,sil->kl", masses, jac, jac)
    springs = build_edge_springs(pairs, rest, masses, jac, metric, 2.0)
    x = (rest + 0.05 * torch.randn(30, 3, generator=gen, dtype=F64)).requires_grad_(True)
    energy, forces = springs.energy_and_forces(x.detach())
    length = (x[springs.a] - x[springs.b]).norm(dim=1)
    v = 0.5 * (springs.stiffness * (length - springs.rest_length) ** 2).sum()
    (grad,) = torch.autograd.grad(v, x)
    torch.testing.assert_close(forces, -grad)
    assert energy == pytest.approx(float(v.detach()), rel=1e-12) and energy > 0
    e_np, f_np = numpy_energy_and_forces(springs.as_numpy(), x.detach().numpy())
    assert e_np == pytest.approx(energy, rel=1e-12)
    np.testing.assert_allclose(f_np, forces.numpy(), rtol=1e-10, atol=1e-14)
    angle = 0.8
    rot = torch.tensor(
        [[math.cos(angle), -math.sin(angle), 0], [math.sin(angle), math.cos(angle), 0], [0, 0, 1]],
        dtype=F64,
    )
    energy, forces = springs.energy_and_forces(rest @ rot.T + torch.tensor([1.0, 2.0, 3.0]))
    assert energy < 1e-20 and float(forces.abs().max()) < 1e-12


def test_the_frequency_is_that_of_one_point_on_its_springs():
    """One free point of mass m joined to a fixed one: k = omega^2 m / 2 per end-share, and the
    reduced frequency in q (the point moving along the spring) is sqrt(k / m)."""
    rest = torch.tensor([[0.0, 0, 0], [1.0, 0, 0]], dtype=F64)
    masses = torch.tensor([2.0, 2.0], dtype=F64)
    jac = torch.zeros(2, 3, 1, dtype=F64)
    jac[1, 0, 0] = 1.0  # q moves the second point along the spring
    metric = torch.tensor([[2.0]], dtype=F64)
    springs = build_edge_springs(torch.tensor([[0, 1]]), rest, masses, jac, metric, 1.5)
    omega = 2 * math.pi * 1.5
    assert float(springs.stiffness[0]) == pytest.approx(omega**2 * 2.0)
    assert springs.omega == pytest.approx(omega)
    assert build_edge_springs(torch.tensor([[0, 1]]), rest, masses, jac, metric, 0.0) is None


# a plate of 4 x 3 points whose one coordinate stretches it along x
PLATE = torch.stack(torch.meshgrid(torch.arange(4.0), torch.arange(3.0), indexing="ij"), -1)
PLATE = torch.cat([PLATE.reshape(-1, 2), torch.zeros(12, 1)], 1).to(F64) * 0.2


def stretch_decode(q):
    scale = torch.stack([1 + q[0], torch.ones_like(q[0]), torch.ones_like(q[0])])
    return PLATE * scale


def stretcher() -> MechanicalSystem:
    return MechanicalSystem(stretch_decode, torch.ones(12, dtype=F64), 1, dtype=F64)


def test_springs_resist_stretching_at_their_frequency_and_keep_the_energy():
    cond = SimulationConditions(frames=121, fps=24, gravity=(0, 0, 0))
    system = stretcher()
    zero = torch.zeros(1, dtype=F64)
    loads = build_loads(system, cond, {}, point_kinematics(system, zero, zero), SPRINGS)
    assert loads.springs is not None and loads.springs.omega > 0
    free = simulate(system, cond, {}, q0=torch.tensor([0.02], dtype=F64))
    assert float(free.q[-1, 0]) == pytest.approx(0.02)  # nothing holds a stretch without springs
    held = simulate(system, cond, {}, q0=torch.tensor([0.02], dtype=F64), settings=SPRINGS)
    period = crossing_period(held)
    assert period == pytest.approx(2 * math.pi / loads.springs.omega, rel=0.02)
    assert float(held.relative_drift().max()) < 0.01
    assert float(held.q.abs().max()) <= 0.02 * (1 + 1e-3)


def test_springs_leave_an_isometric_motion_unchanged():
    cond = SimulationConditions(frames=49, fps=24)
    q0 = torch.tensor([0.6], dtype=F64)
    plain = simulate(pendulum(), cond, {}, q0=q0)
    kept = simulate(pendulum(), cond, {}, q0=q0, settings=SPRINGS)
    torch.testing.assert_close(kept.q, plain.q, atol=1e-9, rtol=0)
