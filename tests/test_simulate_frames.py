"""simulate() hands every frame to the caller in order, as the result holds them, and a caller
that stops the run stops the integration."""

import dataclasses

import numpy as np
import torch

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.pinning import pinned_subspace
from neurok_core.simulate import pin_clamp, simulate


def _conditions(space, frames=12):
    v = space.vertices
    tip = int(np.argmax(v[:, 0]))
    return SimulationConditions(
        forces=(Force(direction=(0, 0, 1), strength=0.5, vertex=tip, end_frame=6),),
        gravity=(0.0, 0.0, 0.0),
        frames=frames,
        fps=24,
    )


def test_frames_are_the_decoded_states_in_order(tiny_slab_space):
    """Each frame is the clamped decoding of its state: the skinned vertices minus the tracked
    pins' motion blended out (pins decoded in the same pass as the skinning points), pinned
    vertices exactly at rest; recomputed here from the result's q the long way round."""
    space = tiny_slab_space
    v = space.vertices
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    cond = dataclasses.replace(_conditions(space), pins=pins)
    seen = []
    result = simulate(space, cond, on_frame=lambda i, p, e: seen.append(i))
    assert seen == list(range(12)) and not result.info["cancelled"]
    assert np.abs(result.positions[-1] - result.positions[0]).max() > 1e-4  # it moved
    np.testing.assert_array_equal(
        result.positions[:, list(pins)], np.repeat(v[None, list(pins)], 12, 0).astype(np.float32)
    )

    sub, _ = pinned_subspace(space, pins)
    clamp, tracked = pin_clamp(sub, cond)
    points, inverse = sub.tracked_points(clamp.pins)
    idx, vals = clamp.sparse(v)
    for i in (5, 11):
        with torch.no_grad():
            z = sub.latent(torch.as_tensor(result.q[i], dtype=sub.dtype))[None]
            verts = sub.decode_vertices(z)[0]
            moved = sub.normalization.invert(sub.deform_points(z, points, inverse))[0]
        disp = (moved - torch.as_tensor(clamp.pins, dtype=sub.dtype)).numpy()
        want = verts.numpy() - (vals[..., None] * disp[idx]).sum(1)
        want[list(pins)] = v[list(pins)]
        np.testing.assert_allclose(result.positions[i], want, atol=1e-5)


def test_a_caller_that_stops_stops_the_run(tiny_slab_space):
    def on_frame(index, positions, energy):
        return index < 3  # stop after frame 3

    result = simulate(tiny_slab_space, _conditions(tiny_slab_space, 48), on_frame=on_frame)
    assert result.info["cancelled"]
    assert len(result.positions) == 4 and len(result.q) == 4
