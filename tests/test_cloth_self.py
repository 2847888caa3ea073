"""A cloth's contact with itself (neurok_core.rigspace.cloth_self): the barrier's derivatives,
the line search's bound, and layers that stay apart in a run (the distances and their
gradients: tests/test_contact_kernels.py)."""

import numpy as np
import pytest

from neurok_core.dynamics import InitialVelocity, SimulationConditions
from neurok_core.metrics import self_crossings
from neurok_core.rigspace import cloth_self
from neurok_core.rigspace.cloth_self import SelfContact, barrier
from neurok_core.rigspace.cloth_simulate import simulate_cloth
from neurok_core.rigspace.space import RigSettings


def test_barrier_derivatives_match_finite_differences():
    d = np.linspace(0.05, 0.99, 40) * 0.01
    b, b1, b2 = barrier(d, 0.01, 3.0)
    eps = 1e-9
    bp, b1p, _ = barrier(d + eps, 0.01, 3.0)
    bm, b1m, _ = barrier(d - eps, 0.01, 3.0)
    np.testing.assert_allclose(b1, (bp - bm) / (2 * eps), rtol=1e-5)
    np.testing.assert_allclose(b2, (b1p - b1m) / (2 * eps), rtol=1e-5)
    assert (b > 0).all() and (b1 < 0).all() and (b2 > 0).all()
    assert barrier(np.array([0.01, 0.02]), 0.01, 3.0)[0].tolist() == [0.0, 0.0]


def _two_squares(gap: float, n: int = 6):
    """Two parallel n x n squares of 1 m, ``gap`` apart along z; (nodes, faces)."""
    g = np.linspace(0.0, 1.0, n)
    u, v = np.meshgrid(g, g, indexing="ij")
    flat = np.stack([u.ravel(), v.ravel(), np.zeros(n * n)], 1)
    quads = [
        (i * n + j, (i + 1) * n + j, (i + 1) * n + j + 1, i * n + j + 1)
        for i in range(n - 1)
        for j in range(n - 1)
    ]
    faces = np.array([t for a, b, c, d in quads for t in ((a, b, c), (a, c, d))])
    nodes = np.concatenate([flat, flat + [0.1, 0.05, gap]])
    return nodes, np.concatenate([faces, faces + n * n])


def test_line_search_bound_keeps_a_node_off_a_triangle():
    nodes, faces = _two_squares(0.05)
    contact = SelfContact(nodes, faces, dhat=0.01, kappa=1.0, exclude=0.3, skin=0.1)
    dx = np.zeros_like(nodes)
    dx[36:] = [0.0, 0.0, -0.2]  # the upper square straight through the lower one
    t = contact.max_step(nodes, dx)
    assert 0.0 < t < 0.25  # it would meet the lower square at 0.25
    gap = (nodes + t * dx)[36:, 2].min()
    assert gap >= cloth_self.ETA * 0.05 * 0.99
    # sideways (no closing) the step is whole
    side = np.zeros_like(nodes)
    side[36:] = [0.05, 0.0, 0.0]
    assert contact.max_step(nodes, side) == 1.0


def test_a_dropped_layer_stays_on_the_other():
    """A square dropped flat onto another pinned one 5 cm below rests on it (in a run; with the
    layers' contact off it falls through: the test can fail)."""
    nodes, faces = _two_squares(0.05)
    out = {}
    for on in (True, False):
        cond = SimulationConditions(
            pins=tuple(range(36)), mass=0.2, damping=1.0, frames=24, self_collision=on
        )
        result = simulate_cloth(nodes, faces, cond, settings=RigSettings(), want_rig=False)
        x = result.positions.astype(np.float64)
        out[on] = (x[-1, 36:, 2].min(), sum(self_crossings(f, faces) > 0 for f in x))
    lowest, crossing = out[True]
    assert lowest > 0.0 and crossing == 0
    assert out[False][0] < -0.05  # without it the upper square falls through


def test_layer_friction_gradient_matches_finite_differences():
    nodes, faces = _two_squares(0.004)
    contact = SelfContact(
        nodes, faces, dhat=0.01, kappa=1.0, exclude=0.3, skin=0.1, friction=0.5, slip=1e-3
    )
    contact.begin(nodes)  # the upper square pressed on the lower one
    assert contact.lagged is not None and len(contact.lagged[0])
    rng = np.random.default_rng(1)
    # slid a little (inside and beyond the slip), within the barrier's reach
    x = nodes.copy()
    x[36:, :2] += rng.normal(scale=1e-3, size=(36, 2))
    value, grad = contact(x)
    step = rng.normal(size=x.shape)
    eps = 1e-7
    fd = (contact(x + eps * step)[0] - contact(x - eps * step)[0]) / (2 * eps)
    np.testing.assert_allclose((grad * step).sum(), fd, rtol=1e-5)
    # friction opposes the slide: the upper square's force points back
    slide = np.zeros_like(x)
    slide[36:, 0] = 1e-3
    assert (contact(nodes + slide)[1][36:, 0]).sum() > 0


@pytest.mark.parametrize("friction", [0.0, 0.5])
def test_a_layer_sliding_on_another_is_held_by_friction(friction):
    """A square landing on a pinned one while sliding at 1 m/s: with friction it stops within
    a few centimetres, without it slides on (the test can fail)."""
    nodes, faces = _two_squares(0.12)
    n = len(nodes) // 2
    cond = SimulationConditions(
        pins=tuple(range(n)),
        mass=0.2,
        damping=0.1,
        frames=18,
        friction=friction,
        velocities=(InitialVelocity((0.0, 1.0, 0.0)),),
    )
    result = simulate_cloth(
        nodes, faces, cond, settings=RigSettings(cloth_self_contact=True), want_rig=False
    )
    x = result.positions.astype(np.float64)
    slid = x[-1, n:, 1].mean() - x[0, n:, 1].mean()
    assert all(self_crossings(f, faces) == 0 for f in x)
    if friction:
        assert slid < 0.3
    else:
        assert slid > 0.5
