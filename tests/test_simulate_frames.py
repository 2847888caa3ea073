"""simulate() hands every frame to the caller in order, as the result holds them, and a caller
that stops the run stops the integration."""

import numpy as np

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


def test_frames_arrive_in_order_and_match_the_result(tiny_slab_space):
    seen = []

    def on_frame(index, positions, energy):
        seen.append((index, positions.copy(), energy))

    result = simulate(tiny_slab_space, _conditions(tiny_slab_space), on_frame=on_frame)
    assert [i for i, _, _ in seen] == list(range(12))
    np.testing.assert_array_equal(np.stack([p for _, p, _ in seen]), result.positions)
    np.testing.assert_allclose([e for _, _, e in seen], result.energy)
    assert not result.info["cancelled"]
    assert np.abs(result.positions[-1] - result.positions[0]).max() > 1e-4  # it moved


def test_a_caller_that_stops_stops_the_run(tiny_slab_space):
    def on_frame(index, positions, energy):
        return index < 3  # stop after frame 3

    result = simulate(tiny_slab_space, _conditions(tiny_slab_space, 48), on_frame=on_frame)
    assert result.info["cancelled"]
    assert len(result.positions) == 4 and len(result.q) == 4
