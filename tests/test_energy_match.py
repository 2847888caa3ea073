"""Undamped motion of a learned model keeps its energy across re-expansions of the local model
(integrator: ``local_energy_match``), the design's drift limit of 1%."""

import numpy as np

from neurok_core.dynamics import InitialVelocity, SimulationConditions
from neurok_core.dynamics.settings import DEFAULT_SETTINGS
from neurok_core.metrics import energy_drift
from neurok_core.simulate import simulate


def test_undamped_motion_keeps_its_energy_across_re_expansions(tiny_slab_space, capsys):
    space = tiny_slab_space
    tip = int(np.argmax(space.vertices[:, 0]))
    cond = SimulationConditions(
        velocities=(InitialVelocity((0.0, 0.0, 1.0), vertex=tip),),
        gravity=(0.0, 0.0, 0.0),
        stiffness=2.0,
        damping=0.0,
        frames=72,
        fps=24,
    )
    matched = simulate(space, cond)
    booked = simulate(
        space, cond, settings=DEFAULT_SETTINGS.with_overrides(local_energy_match=False)
    )
    drift, drift_booked = energy_drift(matched.energy), energy_drift(booked.energy)
    with capsys.disabled():
        print(
            f"\n[energy match] {matched.info['expansions']} re-expansions: drift {drift:.2e} "
            f"(booked jumps {matched.info['model_energy_jumps']:.1e} J); without the match "
            f"drift {drift_booked:.2e} (jumps {booked.info['model_energy_jumps']:.1e} J)"
        )
    assert matched.info["expansions"] >= 5  # the motion crosses many trusted radii
    assert drift < 0.01
    energy = float(np.abs(matched.energy).max())
    assert matched.info["model_energy_jumps"] < 1e-9 * energy  # nothing left to book
    # (that the matched model still moves like the decoder: tests/test_local_model.py)
