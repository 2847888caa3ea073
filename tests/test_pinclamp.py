"""Pins held by clamping the kinematics (neurok_core.pinclamp), on a small real model."""

import numpy as np
import pytest
import torch

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.system import derivative_errors, point_kinematics
from neurok_core.pinclamp import PinClamp
from neurok_core.simulate import build_system, simulate


@pytest.fixture(scope="module")
def space(tiny_slab_space):
    return tiny_slab_space


def test_clamp_weights():
    v = np.array([[0, 0, 0], [0, 1, 0], [1, 0, 0], [5, 0, 0]], dtype=float)
    clamp = PinClamp.build(v, pins=(0, 1), tracked=(0, 1), size=1.0)
    c = clamp.weights(v)  # (4, 2)
    np.testing.assert_allclose(c[0], [1, 0])  # each tracked pin cancels its own motion
    np.testing.assert_allclose(c[1], [0, 1])
    assert 0 < c[2].sum() < 1 and c[2, 0] > c[2, 1]  # blended, nearer pin weighs more
    assert c[3].sum() < 1e-100  # far away: the learned motion is untouched


def test_pinned_vertices_stay_exactly_and_the_rest_moves(space):
    v = space.vertices
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    tip = int(np.argmax(v[:, 0]))
    cond = SimulationConditions(
        pins=pins,
        forces=(Force(direction=(0, 0, 1), strength=2.0, vertex=tip, end_frame=4),),
        frames=8,
        fps=24,
    )
    system, rows = build_system(space, cond)
    zero = torch.zeros(system.num_coords, dtype=torch.float64)
    q = torch.full_like(zero, 0.8)
    kin = point_kinematics(system, q, torch.ones_like(zero))
    pin_rows = [r for a, r in rows.items() if a.vertex in pins]
    assert len(pin_rows) > 0
    assert (
        float(
            kin.x[pin_rows]
            .sub(torch.as_tensor(v[list(a.vertex for a in rows if a.vertex in pins)]))
            .abs()
            .max()
        )
        < 1e-9
    )
    assert (
        float(kin.jac[pin_rows].abs().max()) < 1e-9 and float(kin.bias[pin_rows].abs().max()) < 1e-9
    )
    # the clamped kinematics' derivatives are the derivatives of the clamped positions
    e1, e2 = derivative_errors(system, q, torch.ones_like(zero))
    assert e1 < 1e-4 and e2 < 1e-4
    result = simulate(space, cond)
    assert result.info["pins"] == "clamped"
    motion = np.linalg.norm(result.positions - result.positions[:1], axis=2)  # (T, N)
    assert motion[:, list(pins)].max() == 0.0
    assert motion[:, tip].max() > 10 * 1e-6
