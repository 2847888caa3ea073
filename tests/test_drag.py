"""Drag handles: bounded hands, unreachable and reachable targets."""

import math

import pytest
import torch
from dynamics_systems import (
    F64,
    TIP,
    _one_thread,  # noqa: F401  (an autouse fixture)
    pendulum,
    pendulum_decode,
    saturating_decode,
    saturating_kinematics,
)

from neurok_core.dynamics import (
    Drag,
    MechanicalSystem,
    SimulationConditions,
    simulate,
)
from neurok_core.dynamics.settings import DEFAULT_SETTINGS


# -- drag handles and pins ----------------------------------------------------------------------
def test_a_hand_pushes_boundedly_where_the_point_barely_moves():
    """The hand's damped solve: along the direction the point moves freely it takes the
    point's acceleration almost exactly; along one it barely moves (a singular value 1e-3 of
    the largest) its push stays within 1 / (2 drag_weak) of the free direction's gain, where
    the old damping of 1e-3 gave 500 times."""
    from neurok_core.dynamics.drag import DragHandle, hand_acceleration

    jac = torch.tensor([[[1.0, 0.0], [0.0, 1e-3], [0.0, 0.0]]], dtype=F64)  # (1, 3, 2)
    zero = torch.zeros(1, 3, dtype=F64)
    target = torch.tensor([0.5, 1.0, 0.0], dtype=F64)

    def push(weak: float) -> torch.Tensor:
        hand = DragHandle(row=0, target=target, start_frame=0, frame=2, omega=1.0, weak=weak)
        path = hand.plan(zero[0], zero[0], fps=24.0, arrival=0.5)
        # after the path's arrival the goal holds at the target: desired = w^2 (target - p)
        return hand_acceleration(
            [(hand, path)], 1.0, zero, zero, jac, zero, torch.eye(2, dtype=F64),
            torch.zeros(2, dtype=F64),
        )  # fmt: skip

    weak = DEFAULT_SETTINGS.drag.weak
    got = push(weak)
    mu = weak * 1.0  # times the largest singular value
    assert float(got[0]) == pytest.approx(0.5 / (1.0 + mu**2), rel=1e-9)
    assert float(got[1]) == pytest.approx(1e-3 / (1e-6 + mu**2), rel=1e-9)
    assert float(got[1]) <= 1.0 / (2.0 * weak)
    assert float(push(1e-3)[1]) == pytest.approx(500.0, rel=1e-3)  # what it used to be


def test_a_drag_toward_an_unreachable_target_stops_at_the_nearest_shape_without_blowing_up():
    """The tip's velocity term D^2x[q', q'] grows with the square of the speed where the map
    saturates; a hand that cancelled all of it drove the state ever faster and blew up within
    7 frames. Compensated only up to ``drag_bias_cap`` times the task's accelerations, the run
    finishes and the tip ends where the object comes nearest the target (0.5 rad). (This toy
    has no prior barrier: the hand keeps pushing q along a direction the tip no longer feels,
    and q ends near 6e5, under the blow-up limit; a drag twice as fast reaches it. A learned
    model's barrier bounds the latent.)"""
    angle = math.radians(60)
    target = (math.sin(angle), 0.0, -math.cos(angle))
    system = MechanicalSystem(
        saturating_decode,
        torch.ones(10, dtype=F64),
        1,
        dtype=F64,
        kinematics=saturating_kinematics,
    )
    cond = SimulationConditions(
        drags=(Drag(target=target, frame=20, vertex=9),), frames=30, fps=30, damping=0.0
    )
    traj = simulate(system, cond, {TIP: 9})
    nearest = 2.0 * math.sin((angle - 0.5) / 2.0)  # chord from 0.5 rad to the target's angle
    assert traj.drag_errors[0] == pytest.approx(nearest, abs=0.01)
    assert bool(torch.isfinite(traj.energy).all())


def test_drag_reaches_a_reachable_target_then_releases():
    angle = math.radians(60)
    target = (math.sin(angle), 0.0, -math.cos(angle))  # where the tip is at 60 degrees
    cond = SimulationConditions(
        drags=(Drag(target=target, frame=20, vertex=9),), frames=46, fps=30, damping=0.0
    )
    traj = simulate(pendulum(analytic=False), cond, {TIP: 9})
    tip = pendulum_decode(traj.q[20])[9]
    size = 1.0
    assert float((tip - torch.tensor(target, dtype=F64)).norm()) < 0.02 * size
    assert traj.drag_errors[0] < 0.02 * size
    # released: gravity swings it back down through the rest position
    assert float(traj.q[45, 0]) < angle - 0.5
