"""The integrator: known periods, energy drift, step control, blow-ups and cancelling."""

import math

import pytest
import torch
from dynamics_systems import (
    F64,
    PLATE,
    _one_thread,  # noqa: F401  (an autouse fixture)
    crossing_period,
    pendulum,
    pendulum_period,
    translation,
)

from neurok_core.dynamics import (
    Anchor,
    Force,
    MechanicalSystem,
    SimulationConditions,
    simulate,
)
from neurok_core.dynamics.settings import DynamicsSettings
from neurok_core.errors import ConditionError, SimulationError


# -- the pendulum -------------------------------------------------------------------------------
def test_pendulum_small_amplitude_period_through_automatic_derivatives():
    cond = SimulationConditions(frames=145, fps=24)  # 6 s, 3.5 periods
    traj = simulate(pendulum(analytic=False), cond, {}, q0=torch.tensor([0.05], dtype=F64))
    assert traj.q.shape == (145, 1) and not traj.cancelled
    assert abs(crossing_period(traj) / pendulum_period() - 1) < 0.01
    assert float(traj.relative_drift().max()) < 0.01
    assert traj.evaluations <= 4 * 144 + 1  # one RK4 step per frame suffices here


@pytest.mark.parametrize("amplitude_deg", [5.0, 90.0])
def test_pendulum_energy_drift_over_ten_seconds(amplitude_deg):
    cond = SimulationConditions(frames=301, fps=30, mass=2.0)
    q0 = torch.tensor([math.radians(amplitude_deg)], dtype=F64)
    traj = simulate(pendulum(), cond, {}, q0=q0)
    assert float(traj.relative_drift().max()) < 0.01
    torch.testing.assert_close(traj.times[-1], torch.tensor(10.0, dtype=F64))
    # the swing stays within its amplitude (energy is not created)
    assert float(traj.q.abs().max()) <= q0.item() * (1 + 1e-3)


# -- failures and control -----------------------------------------------------------------------
def test_absurd_force_stops_with_a_clear_error():
    cond = SimulationConditions(forces=(Force((0, 0, 1), 1e15, vertex=3),), frames=10)
    # refused before any work, with the strength that would pass
    with pytest.raises(ConditionError, match="times its size in one frame.*lower their total"):
        simulate(translation((0, 0, 1)), cond, {Anchor(vertex=3): 3})
    # without that check, the step control stops it as a blow-up
    unchecked = DynamicsSettings().with_overrides(max_load_sizes_per_frame=math.inf)
    with pytest.raises(SimulationError, match="blew up between frames 0 and 1.*object sizes"):
        simulate(translation((0, 0, 1)), cond, {Anchor(vertex=3): 3}, settings=unchecked)


def test_decoder_nan_stops_with_a_clear_error():
    def fragile(q):  # undefined beyond q = 0.3
        bad = torch.where(q[0] < 0.3, 0.0, float("nan"))
        return PLATE + q[0] * torch.tensor([0.0, 0.0, 1.0], dtype=F64) + bad

    system = MechanicalSystem(fragile, torch.ones(12, dtype=F64), 1, dtype=F64)
    cond = SimulationConditions(gravity=(0, 0, 9.81), frames=30, fps=24)
    few_retries = DynamicsSettings().with_overrides(max_refinements=2)
    with pytest.raises(SimulationError, match=r"NaN or infinite, even with \d+ integration steps"):
        simulate(system, cond, {}, settings=few_retries)


def test_cancel_returns_the_frames_so_far():
    seen = []

    def on_frame(index, q, energy):
        seen.append((index, float(q[0]), energy))
        return index < 5

    cond = SimulationConditions(frames=50, fps=24)
    traj = simulate(pendulum(), cond, {}, q0=torch.tensor([0.3], dtype=F64), on_frame=on_frame)
    assert traj.cancelled and traj.num_frames == 6
    assert [s[0] for s in seen] == list(range(6))
    assert seen[3][1] == float(traj.q[3, 0]) and seen[3][2] == float(traj.energy[3])


def test_step_control_asks_for_the_substeps_the_rk4_error_calls_for():
    """A frame's energy-balance error falls as n^-4 with n substeps: a rejected frame is redone
    with the n that brings it to 0.3 of the limit (one more at least, twice at most); after an
    accepted frame the next starts from the n that would have put this one there (never more,
    at least half), and a frame at 1/32 of the limit or under halves n or doubles the frames."""
    from neurok_core.dynamics.steps import Step, next_step, refined

    def step(k, n, ratio):
        return Step(state=None, frames=k, substeps=n, residual=ratio * 1e-3, limit=1e-3)

    assert refined(step(1, 4, 1.5)) == math.ceil(4 * (1.5 / 0.3) ** 0.25) == 6
    assert refined(step(1, 4, 1.01)) == 6  # (1.01 / 0.3)^(1/4) = 1.35
    assert refined(step(1, 4, 100.0)) == 8  # at most twice
    assert refined(step(1, 1, 1.0001)) == 2  # at least one more
    assert next_step(step(1, 8, 0.3)) == (1, 8)
    assert next_step(step(1, 8, 0.9)) == (1, 8)  # never more
    assert next_step(step(1, 8, 0.05)) == (1, math.ceil(8 * (0.05 / 0.3) ** 0.25)) == (1, 6)
    assert next_step(step(1, 8, 0.032)) == (1, 5)
    assert next_step(step(1, 8, 0.01)) == (1, 4)  # under 1/32: half
    assert next_step(step(1, 1, 0.01)) == (2, 1)  # one step a frame: two frames a step
    assert next_step(step(2, 1, 0.01)) == (4, 1)
    assert next_step(step(2, 1, 0.5)) == (2, 1)
