"""Loads: stiffness, damping, initial velocities, forces, wind, and pins refused by the dynamics."""

import math

import pytest
import torch
from bounds import assert_within
from dynamics_systems import (
    F64,
    TIP,
    _one_thread,  # noqa: F401  (an autouse fixture)
    crossing_period,
    flap,
    mlp_system,
    pendulum,
    rest_kinematics,
)

from neurok_core.dynamics import (
    Anchor,
    Force,
    InitialVelocity,
    SimulationConditions,
    Wind,
    initial_velocity,
    mass_metric,
    simulate,
)
from neurok_core.dynamics.loads import build_loads
from neurok_core.dynamics.settings import DEFAULT_SETTINGS
from neurok_core.errors import ConditionError


def test_stiffness_is_a_frequency_in_hertz():
    cond = SimulationConditions(frames=61, fps=30, gravity=(0, 0, 0), stiffness=2.0, mass=7.0)
    traj = simulate(pendulum(), cond, {}, q0=torch.tensor([0.02], dtype=F64))
    assert abs(crossing_period(traj) * 2.0 - 1) < 0.01


def test_damping_decreases_energy():
    cond = SimulationConditions(frames=91, fps=30, damping=0.5)
    traj = simulate(pendulum(), cond, {}, q0=torch.tensor([math.radians(60)], dtype=F64))
    e = traj.energy
    assert_within(e[1:], below=e[:-1] + 1e-9 * e[0], what="energy vs the frame before's")
    assert float(e[-1]) < 0.5 * float(e[0])
    # the energy balance holds: what was lost is the work of the damping (to the integration
    # error; frames inside multi-frame steps are interpolated)
    torch.testing.assert_close(e - traj.work, e[:1].expand(91), rtol=0, atol=2e-3 * float(e[0]))
    assert float(traj.steps_per_frame[1:].min()) < 1  # slow motion: several frames per step


def test_initial_velocity_by_least_squares():
    system = pendulum()
    rest = rest_kinematics(system)
    cond = SimulationConditions(velocities=(InitialVelocity((2.0, 0.0, 5.0), vertex=9),))
    loads = build_loads(system, cond, {TIP: 9}, rest, DEFAULT_SETTINGS)
    # the tip can only move along x at rest: q' = 2 / radius
    torch.testing.assert_close(
        initial_velocity(cond, {TIP: 9}, rest, loads), torch.tensor([2.0], dtype=F64)
    )
    plate = flap()
    rest = rest_kinematics(plate)
    uniform = SimulationConditions(velocities=(InitialVelocity((0.0, 0.0, 1.5)),))
    loads = build_loads(plate, uniform, {}, rest, DEFAULT_SETTINGS)
    torch.testing.assert_close(
        initial_velocity(uniform, {}, rest, loads), torch.tensor([1.5, 0.0], dtype=F64)
    )
    # one point velocity for two dof: the least kinetic energy solution that meets it
    tip = SimulationConditions(velocities=(InitialVelocity((0.0, 0.0, -1.0), vertex=11),))
    loads = build_loads(plate, tip, {Anchor(vertex=11): 11}, rest, DEFAULT_SETTINGS)
    qd = initial_velocity(tip, {Anchor(vertex=11): 11}, rest, loads)
    torch.testing.assert_close(rest.jac[11] @ qd, torch.tensor([0.0, 0.0, -1.0], dtype=F64))
    metric = mass_metric(rest, loads.masses)
    other = torch.tensor([0.5, 1.0], dtype=F64)  # moves the tip not at all at rest
    for step in (-0.1, 0.1):
        alt = qd + step * other
        torch.testing.assert_close(rest.jac[11] @ alt, rest.jac[11] @ qd)
        assert float(alt @ metric @ alt) > float(qd @ metric @ qd)


def test_force_pushes_the_loaded_point_along_the_force():
    system = mlp_system(points=40, kq=3, seed=7)
    direction = torch.tensor([1.0, 2.0, -0.5], dtype=F64)
    cond = SimulationConditions(
        forces=(Force(direction=tuple(direction.tolist()), strength=5.0, vertex=5, end_frame=10),),
        gravity=(0, 0, 0),
        frames=13,
        fps=24,
    )
    traj = simulate(system, cond, {Anchor(vertex=5): 5})
    rest = system.decode_points(traj.q[0])
    moved = system.decode_points(traj.q[3])[5] - rest[5]
    assert float(moved @ direction) > 0
    # energy balance: the kinetic energy gained is the work of the force
    balance = traj.energy - traj.work  # zero for the exact motion
    assert float(balance.abs().max()) < 1e-3 * float(traj.work.max())
    assert float(traj.work[-1]) > 0


def test_wind_pushes_the_object_downwind():
    cond = SimulationConditions(winds=(Wind((1.0, 0.0, 0.0), 3.0, end_frame=6),), frames=7, fps=24)
    traj = simulate(pendulum(), cond, {})
    assert float(traj.q[-1, 0]) > 0.01


def test_the_dynamics_refuse_pins():
    """Pins are held by clamping the kinematics around them (``neurok_core.simulate``); the
    dynamics themselves have no way to hold them and say so instead of letting them move."""
    cond = SimulationConditions(pins=(0,), frames=5, fps=24).validate(12)
    with pytest.raises(ConditionError, match="do not hold pins.*neurok_core.simulate.simulate"):
        simulate(flap(), cond, {Anchor(vertex=0): 0})
