"""The prior barrier: the latent held inside the prior, an inelastic stop in damped scenes."""

import pytest
import torch
from dynamics_systems import (
    F64,
    _one_thread,  # noqa: F401  (an autouse fixture)
    translation,
)

from neurok_core.dynamics import (
    Force,
    InitialVelocity,
    LatentMap,
    SimulationConditions,
    simulate,
)


def test_prior_barrier_holds_the_latent_inside_the_prior():
    k = 4
    zeros = torch.zeros(k, dtype=F64)
    latent = LatentMap(rest=zeros, basis=torch.eye(k, 1, dtype=F64), prior_mean=zeros)
    push = Force(direction=(1, 0, 0), strength=5.0, vertex=0)
    cond = SimulationConditions(forces=(push,), gravity=(0, 0, 0), frames=49, fps=24)
    held = simulate(translation((1, 0, 0), latent), cond, {push.anchor: 0})
    free = simulate(translation((1, 0, 0)), cond, {push.anchor: 0})
    radius = 3.6437  # chi.ppf(0.99, 4)
    assert float(free.q.max()) > 8.0
    assert float(held.q.max()) < radius + 2.0


@pytest.mark.parametrize("damping", [0.0, 1e-6])
def test_damped_scenes_meet_the_barrier_as_an_inelastic_stop(damping, capsys):
    """Thrown outward, the state comes back off the barrier as fast as it went (undamped: an
    elastic barrier, energy conserved) or far slower (a damped scene: the barrier damps its
    contact at half of critical), with the energy balance E - W holding either way."""
    k = 4
    zeros = torch.zeros(k, dtype=F64)
    latent = LatentMap(rest=zeros, basis=torch.eye(k, 1, dtype=F64), prior_mean=zeros)
    throw = InitialVelocity((3.0, 0.0, 0.0))
    cond = SimulationConditions(
        velocities=(throw,), gravity=(0, 0, 0), damping=damping, frames=73, fps=24
    )
    traj = simulate(translation((1, 0, 0), latent), cond, {})
    speed_in = float(traj.qdot[0, 0])
    assert speed_in > 2.9 and float(traj.q.max()) > 3.6437  # reached the barrier (chi 99%, k=4)
    speed_out = -float(traj.qdot[-1, 0])  # long after the bounce, back inside the ball
    with capsys.disabled():
        print(f"\n[barrier, damping {damping:g}] back at {speed_out / speed_in:.3f} of the speed")
    assert float(traj.q[-1, 0]) < 3.6437 and speed_out > 0
    balance = traj.energy - traj.work
    assert float((balance - balance[0]).abs().max()) < 1e-3 * float(traj.energy[0])
    if damping == 0.0:
        assert speed_out == pytest.approx(speed_in, rel=1e-3)
        assert float(traj.energy[-1]) == pytest.approx(float(traj.energy[0]), rel=1e-3)
    else:
        assert speed_out < 0.5 * speed_in  # most of the normal energy taken by the stop
