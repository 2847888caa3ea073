"""The mechanical system: automatic and analytic derivatives, the derivative check, subspaces."""

from functools import partial

import pytest
import torch
from dynamics_systems import (
    F64,
    _one_thread,  # noqa: F401  (an autouse fixture)
    flap,
    mlp_system,
    pendulum,
    saturating_decode,
    saturating_kinematics,
)

from neurok_core.dynamics import (
    MechanicalSystem,
    SimulationConditions,
    point_kinematics,
    simulate,
)
from neurok_core.dynamics.system import decoder_kinematics, derivative_errors, restrict
from neurok_core.errors import SimulationError


# -- exact identities ---------------------------------------------------------------------------
def test_analytic_kinematics_match_automatic_derivatives():
    q1, v1 = torch.tensor([0.7], dtype=F64), torch.tensor([-1.3], dtype=F64)
    q2, v2 = torch.tensor([0.2, -0.4], dtype=F64), torch.tensor([0.5, 2.0], dtype=F64)
    ones = torch.ones(10, dtype=F64)
    saturating = MechanicalSystem(
        saturating_decode, ones, 1, dtype=F64, kinematics=saturating_kinematics
    )
    for system, q, v in ((pendulum(), q1, v1), (flap(), q2, v2), (saturating, q1, v1)):
        auto = point_kinematics(
            MechanicalSystem(
                system.decode_points, system.point_weights, system.num_coords, dtype=F64
            ),
            q,
            v,
        )
        mine = point_kinematics(system, q, v)
        for a, b in ((auto.x, mine.x), (auto.jac, mine.jac), (auto.bias, mine.bias)):
            torch.testing.assert_close(a, b)


def test_compiled_kinematics_agree():
    """decoder_kinematics wrapped by torch.compile is a drop-in MechanicalSystem.kinematics."""
    system = mlp_system(points=20, kq=3, seed=1)
    fast = torch.compile(
        partial(decoder_kinematics, system.decode_points), backend="aot_eager", dynamic=False
    )
    compiled = MechanicalSystem(
        system.decode_points, system.point_weights, 3, dtype=F64, kinematics=fast
    )
    q = torch.tensor([0.1, -0.2, 0.3], dtype=F64)
    v = torch.tensor([1.0, 0.5, -0.3], dtype=F64)
    a, b = point_kinematics(compiled, q, v), point_kinematics(system, q, v)
    for x, y in ((a.x, b.x), (a.jac, b.jac), (a.bias, b.bias)):
        torch.testing.assert_close(x, y)


def test_wrong_second_derivatives_are_refused():
    """torch's fused layer_norm has a wrong nested JVP (pytorch issue 196700): caught before
    simulating; the same norm written with elementary ops passes."""
    gen = torch.Generator().manual_seed(8)
    rest = torch.rand(30, 3, generator=gen, dtype=F64)
    w1 = torch.randn(2, 16, generator=gen, dtype=F64)
    b1 = torch.randn(16, generator=gen, dtype=F64)
    w2 = 0.1 * torch.randn(16, 90, generator=gen, dtype=F64)

    def elementary_norm(h):
        c = h - h.mean(-1, keepdim=True)
        return c * torch.rsqrt((c * c).mean(-1, keepdim=True) + 1e-5)

    def decoder(norm):
        return lambda q: rest + (norm(q @ w1 + b1) @ w2).view(30, 3)

    weights = torch.ones(30, dtype=F64)
    fused = MechanicalSystem(
        decoder(lambda h: torch.nn.functional.layer_norm(h, (16,))), weights, 2, dtype=F64
    )
    plain = MechanicalSystem(decoder(elementary_norm), weights, 2, dtype=F64)
    direction = torch.tensor([0.3, -1.0], dtype=F64)
    zero = torch.zeros(2, dtype=F64)
    assert (
        max(derivative_errors(plain, zero, direction)) < 2e-3
    )  # finite-difference truncation only
    assert derivative_errors(fused, zero, direction)[1] > 0.05
    cond = SimulationConditions(frames=3)
    with pytest.raises(SimulationError, match="derivatives are wrong.*layer_norm"):
        simulate(fused, cond, {})
    assert simulate(plain, cond, {}).num_frames == 3


def test_a_strongly_curved_decoder_is_not_taken_for_wrong_derivatives():
    """Central differences are off by O(step^2) on a strongly curved decoder: the check measures
    a failing direction again with Richardson extrapolation, which brings a right derivative's
    error down by one to two orders of magnitude, while a wrong one (fused layer_norm) stays
    refused."""
    gen = torch.Generator().manual_seed(9)
    rest = torch.rand(30, 3, generator=gen, dtype=F64)
    w = torch.randn(2, 30, generator=gen, dtype=F64)
    phase = torch.rand(30, generator=gen, dtype=F64) * 6.0
    axis = torch.randn(30, 3, generator=gen, dtype=F64)

    def decode(q):  # small, fast oscillations of each point: large third and fourth derivatives
        return rest + 0.006 * torch.sin(40.0 * (q @ w) + phase)[:, None] * axis

    curved = MechanicalSystem(decode, torch.ones(30, dtype=F64), 2, dtype=F64)
    zero = torch.zeros(2, dtype=F64)
    gen_directions = torch.Generator().manual_seed(0)  # those of check_derivatives
    for direction in torch.randn(3, 2, generator=gen_directions, dtype=F64):
        plain = derivative_errors(curved, zero, direction)
        richardson = derivative_errors(curved, zero, direction, extrapolate=True)
        assert max(plain) > 0.04  # what the plain differences alone would refuse
        assert max(richardson) < 0.1 * max(plain) and max(richardson) < 0.005
    assert simulate(curved, SimulationConditions(frames=2), {}).num_frames == 2

    w1 = torch.randn(2, 16, generator=gen, dtype=F64)
    b1 = torch.randn(16, generator=gen, dtype=F64)
    w2 = 0.1 * torch.randn(16, 90, generator=gen, dtype=F64)
    fused = MechanicalSystem(
        lambda q: rest + (torch.nn.functional.layer_norm(q @ w1 + b1, (16,)) @ w2).view(30, 3),
        torch.ones(30, dtype=F64),
        2,
        dtype=F64,
    )
    assert (
        derivative_errors(fused, zero, torch.tensor([1.0, 0.4], dtype=F64), extrapolate=True)[1]
        > 0.05
    )
    with pytest.raises(SimulationError, match="derivatives are wrong"):
        simulate(fused, SimulationConditions(frames=2), {})


def test_restricted_system_matches_the_full_one():
    basis = torch.tensor([[0.6], [0.8]], dtype=F64)  # q = basis r
    r, rdot = torch.tensor([0.3], dtype=F64), torch.tensor([-1.1], dtype=F64)
    for analytic in (True, False):
        small = restrict(flap(analytic), basis)
        assert small.num_coords == 1
        got = point_kinematics(small, r, rdot)
        want = point_kinematics(flap(), basis @ r, basis @ rdot)
        torch.testing.assert_close(got.x, want.x)
        torch.testing.assert_close(got.jac, want.jac @ basis)
        torch.testing.assert_close(got.bias, want.bias)
    with pytest.raises(ValueError, match="basis"):
        restrict(flap(), torch.zeros(3, 1, dtype=F64))


def test_a_direction_below_float32_rounding_is_not_taken_for_wrong_derivatives():
    """A float32 object four sizes from the origin whose one direction moves it by 1e-6 of its
    size per unit (as the one direction a pin clamp can leave): over the largest difference
    step its points move less than the rounding of their positions, so the differences are
    rounding alone, and the check does not refuse it for them. A derivative 10% off in a
    direction that moves the object visibly is still refused."""
    f32 = torch.float32
    gen = torch.Generator().manual_seed(10)
    rest = torch.rand(30, 3, generator=gen, dtype=F64).to(f32) + 4.0  # (30, 3), size about 1
    axis = torch.randn(30, 3, generator=gen, dtype=F64).to(f32)

    def system(scale: float, wrong: float = 1.0) -> MechanicalSystem:
        def kinematics(q, v):  # x = rest + scale tanh(q) axis, and its derivatives by hand
            t = torch.tanh(q[0].to(f32))
            x = rest + scale * t * axis
            jac = (wrong * scale * (1.0 - t * t) * axis)[..., None]  # (30, 3, 1)
            bias = scale * (-2.0 * t * (1.0 - t * t)) * v[0].to(f32) ** 2 * axis
            return x, jac, bias

        def decode(q):
            return rest + scale * torch.tanh(q[0].to(f32)) * axis

        weights = torch.ones(30, dtype=F64)
        return MechanicalSystem(decode, weights, 1, dtype=f32, kinematics=kinematics)

    zero, one = torch.zeros(1, dtype=F64), torch.ones(1, dtype=F64)
    still = system(1e-6)
    assert max(derivative_errors(still, zero, one)) < 0.02
    assert simulate(still, SimulationConditions(frames=2, gravity=(0, 0, 0)), {}).num_frames == 2
    assert max(derivative_errors(system(1e-2), zero, one)) < 0.01
    assert derivative_errors(system(1e-2, wrong=1.1), zero, one)[0] > 0.05
    with pytest.raises(SimulationError, match="derivatives are wrong"):
        simulate(system(1e-2, wrong=1.1), SimulationConditions(frames=2), {})
