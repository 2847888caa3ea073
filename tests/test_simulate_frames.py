"""simulate() hands every frame to the caller in order, as the result holds them, and a caller
that stops the run stops the integration."""

import dataclasses

import numpy as np
import pytest
import torch
from bounds import assert_within

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.simulate import simulate


def _conditions(space, frames=12):
    v = space.vertices
    tip = int(np.argmax(v[:, 0]))
    return SimulationConditions(
        forces=(Force(direction=(0, 0, 1), strength=0.5, vertex=tip, end_frame=6),),
        gravity=(0.0, 0.0, 0.0),
        frames=frames,
        fps=24,
    )


def test_frames_are_the_states_in_order(tiny_slab_space):
    """Every frame is handed over in order; the first is the rest shape, pinned vertices stay
    exactly at rest, the pushed tip rises along the push, and a shorter run is the same run's
    first frames (frame i is the state at t = i / fps, whatever the length of the run)."""
    space = tiny_slab_space
    v = space.vertices
    tip = int(np.argmax(v[:, 0]))
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    cond = dataclasses.replace(_conditions(space), pins=pins)
    seen, handed = [], []
    result = simulate(space, cond, on_frame=lambda i, p, e: (seen.append(i), handed.append(p)))
    assert seen == list(range(12)) and not result.info["cancelled"]
    np.testing.assert_array_equal(np.stack(handed), result.positions)
    np.testing.assert_allclose(result.positions[0], v, atol=1e-6)
    np.testing.assert_array_equal(
        result.positions[:, list(pins)], np.repeat(v[None, list(pins)], 12, 0).astype(np.float32)
    )
    rise = result.positions[:7, tip, 2] - v[tip, 2]  # the push (+z) lasts frames 0-6
    assert rise[1] > 1e-6 and rise[6] > 1e-4
    assert_within(np.diff(rise), above=-1e-7, strict=True, what="tip's rise per frame")
    short = simulate(space, dataclasses.replace(cond, frames=8))
    np.testing.assert_allclose(short.positions, result.positions[:8], atol=1e-6)


def test_a_caller_that_stops_stops_the_run(tiny_slab_space):
    def on_frame(index, positions, energy):
        return index < 3  # stop after frame 3

    result = simulate(tiny_slab_space, _conditions(tiny_slab_space, 48), on_frame=on_frame)
    assert result.info["cancelled"]
    assert len(result.positions) == 4 and len(result.q) == 4


def test_frames_on_barrier_counts_the_states_the_dynamics_barrier_pushes_back(tiny_slab_space):
    """``frames_on_barrier`` counts the frames whose state lies more than BARRIER_MARGIN outside
    the ball of the barrier the dynamics use (built here from the system's own latent map,
    float64): none for the object left at rest, some for a push hard enough to reach the
    limits of the space."""
    from neurok_core.dynamics.barrier import PriorBarrier
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS
    from neurok_core.simulate import BARRIER_MARGIN, build_system

    space = tiny_slab_space
    still = simulate(space, SimulationConditions(gravity=(0.0, 0.0, 0.0), frames=6, fps=24))
    assert still.info["frames_on_barrier"] == 0
    tip = int(np.argmax(space.vertices[:, 0]))
    hard = SimulationConditions(
        forces=(Force(direction=(0, 0, 1), strength=200.0, vertex=tip, end_frame=4),),
        gravity=(0.0, 0.0, 0.0),
        frames=8,
        fps=24,
    )
    result = simulate(space, hard)
    system, _ = build_system(space, hard)
    barrier = PriorBarrier.build(system.latent, DEFAULT_SETTINGS.barrier.prior_mass, 1.0)
    excess = [barrier.excess(torch.as_tensor(q, dtype=torch.float64)) for q in result.q]
    assert result.info["frames_on_barrier"] == sum(e > BARRIER_MARGIN for e in excess) > 0
    assert result.info["max_latent_distance"] == pytest.approx(barrier.radius + max(excess))
    # the edge strain the engine reports is the mesh's own: none at rest, the metric's in motion
    from neurok_core.metrics import edge_strain

    assert still.info["edge_strain_max"] == pytest.approx(0.0, abs=1e-6)
    strain = edge_strain(space.vertices, result.positions, space.faces)  # (T,) every edge
    assert result.info["edge_strain_frame"] == int(np.argmax(strain))
    assert result.info["edge_strain_max"] == pytest.approx(float(strain.max()), rel=1e-4)
