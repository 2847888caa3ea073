"""Euler-Lagrange dynamics in reduced coordinates: exact identities and known physics (float64)."""

import math
from functools import partial

import pytest
import torch
from torch.func import jacfwd

from neurok_core.dynamics import (
    Anchor,
    Drag,
    Force,
    InitialVelocity,
    LatentMap,
    MechanicalSystem,
    SimulationConditions,
    Wind,
    coriolis,
    equations_of_motion,
    initial_velocity,
    mass_metric,
    point_kinematics,
    simulate,
)
from neurok_core.dynamics.loads import build_loads
from neurok_core.dynamics.settings import DEFAULT_SETTINGS, DynamicsSettings
from neurok_core.dynamics.system import decoder_kinematics, derivative_errors, restrict
from neurok_core.errors import ConditionError, SimulationError

F64 = torch.float64
G = 9.81


@pytest.fixture(autouse=True)
def _one_thread():
    """These tensors are tiny: a second thread only adds synchronisation (and stalls when the
    cores are shared), so run single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- decoders whose physics is known ------------------------------------------------------------
RADII = torch.linspace(0.1, 1.0, 10, dtype=F64)  # a bar of 10 equal masses hinged at the origin
TIP = Anchor(vertex=9)


def pendulum_decode(q):
    """The bar rotated by q[0] about the y axis; q = 0 hangs straight down."""
    basis = torch.zeros(2, 10, 3, dtype=F64)
    basis[0, :, 0], basis[1, :, 2] = RADII, -RADII
    sin_cos = torch.cos(q.expand(2) - torch.tensor([math.pi / 2, 0.0], dtype=F64))  # (2,)
    return (sin_cos @ basis.reshape(2, 30)).view(10, 3)


def pendulum_kinematics(q, v):
    s, c = torch.sin(q[0]), torch.cos(q[0])
    zero = torch.zeros((), dtype=F64)
    x = RADII[:, None] * torch.stack([s, zero, -c])
    jac = (RADII[:, None] * torch.stack([c, zero, s]))[..., None]
    bias = RADII[:, None] * torch.stack([-s, zero, c]) * v[0] ** 2
    return x, jac, bias


def pendulum(analytic: bool = True) -> MechanicalSystem:
    return MechanicalSystem(
        decode_points=pendulum_decode,
        point_weights=torch.ones(10, dtype=F64),
        num_coords=1,
        dtype=F64,
        kinematics=pendulum_kinematics if analytic else None,
    )


def pendulum_period(mass: float = 1.0) -> float:
    inertia = float((RADII**2).sum()) * mass / 10
    arm = float(RADII.mean())
    return 2 * math.pi * math.sqrt(inertia / (mass * G * arm))


FLAP_X = torch.linspace(0.0, 1.0, 6, dtype=F64)
PLATE = torch.stack(
    [FLAP_X.repeat(2), torch.tensor([0.0] * 6 + [0.5] * 6, dtype=F64), torch.zeros(12, dtype=F64)],
    1,
)  # (12, 3); vertex 0 at the origin is the pinned one
ARM = (PLATE[:, 0] - 0.5).clamp_min(0.0)  # lever of the flap points (x > 0.5) about the hinge


def flap_decode(q):
    """Two dof: q0 lifts the whole plate (moves the pin), q1 turns the flap x > 0.5 down."""
    lift = torch.zeros(12, 3, dtype=F64)
    lift[:, 2] = 1.0
    turn = torch.cos(q[1:].expand(2) - torch.tensor([0.0, math.pi / 2], dtype=F64))  # (cos, sin)
    flap = torch.stack([ARM * (turn[0] - 1), torch.zeros_like(ARM), -ARM * turn[1]], 1)
    return PLATE + q[0] * lift + flap


def flap_kinematics(q, v):
    c, s = torch.cos(q[1]), torch.sin(q[1])
    zero = torch.zeros_like(ARM)
    x = PLATE + torch.stack([ARM * (c - 1), zero, q[0] - ARM * s], 1)
    jac = torch.zeros(12, 3, 2, dtype=F64)
    jac[:, 2, 0] = 1.0
    jac[:, 0, 1], jac[:, 2, 1] = -ARM * s, -ARM * c
    bias = torch.stack([-ARM * c, zero, ARM * s], 1) * v[1] ** 2
    return x, jac, bias


def flap(analytic: bool = True) -> MechanicalSystem:
    return MechanicalSystem(
        flap_decode,
        torch.ones(12, dtype=F64),
        2,
        dtype=F64,
        kinematics=flap_kinematics if analytic else None,
    )


def translation(direction, latent=None) -> MechanicalSystem:
    """The plate sliding rigidly along ``direction`` by q[0] metres."""
    d = torch.tensor(direction, dtype=F64)

    def decode(q):
        return PLATE + q[0] * d

    def kinematics(q, v):
        return decode(q), d.expand(12, 3)[..., None].clone(), torch.zeros(12, 3, dtype=F64)

    return MechanicalSystem(
        decode, torch.ones(12, dtype=F64), 1, latent, F64, kinematics=kinematics
    )


def mlp_decoder(points: int, kq: int, seed: int, hidden: int = 24):
    """A random smooth nonlinear map q -> (points, 3), a stand-in for the network."""
    gen = torch.Generator().manual_seed(seed)
    rest = torch.rand(points, 3, generator=gen, dtype=F64)
    w1 = torch.randn(kq, hidden, generator=gen, dtype=F64)
    b1 = 0.3 * torch.randn(hidden, generator=gen, dtype=F64)
    w2 = 0.1 * torch.randn(hidden, points * 3, generator=gen, dtype=F64)

    def decode(q):
        return rest + (torch.tanh(q @ w1 + b1) @ w2).view(points, 3)

    return decode


def mlp_system(points=40, kq=3, seed=0, latent=None) -> MechanicalSystem:
    weights = 0.5 + torch.rand(points, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return MechanicalSystem(mlp_decoder(points, kq, seed), weights, kq, latent=latent, dtype=F64)


def rest_kinematics(system):
    zero = torch.zeros(system.num_coords, dtype=F64)
    return point_kinematics(system, zero, zero)


def crossing_period(traj) -> float:
    """Mean period from the downward zero crossings of q[0] (linear interpolation)."""
    q, t = traj.q[:, 0].tolist(), traj.times.tolist()
    times = [
        t[i] + q[i] * (t[i + 1] - t[i]) / (q[i] - q[i + 1])
        for i in range(len(q) - 1)
        if q[i] > 0 >= q[i + 1]
    ]
    assert len(times) >= 4, "fewer than 4 crossings"
    return (times[-1] - times[0]) / (len(times) - 1)


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


def test_coriolis_from_nested_jvp_equals_christoffel_contraction():
    system = mlp_system(points=30, kq=3, seed=1)
    masses = system.point_weights
    decode = system.decode_points

    def metric(q):
        jac = jacfwd(decode)(q)  # (S, 3, kq)
        return torch.einsum("sak,s,sal->kl", jac, masses, jac)

    gen = torch.Generator().manual_seed(2)
    for _ in range(3):
        q = torch.randn(3, generator=gen, dtype=F64)
        v = torch.randn(3, generator=gen, dtype=F64)
        d_metric = jacfwd(metric)(q)  # (kq, kq, kq): [i, j, k] = d_k G_ij
        christoffel = 0.5 * (d_metric + d_metric.permute(0, 2, 1) - d_metric.permute(2, 0, 1))
        expected = torch.einsum("ijk,j,k->i", christoffel, v, v)
        got = coriolis(point_kinematics(system, q, v), masses)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(mass_metric(point_kinematics(system, q, v), masses), metric(q))


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


def test_right_hand_side_solves_the_euler_lagrange_equations():
    """Plug q'' from equations_of_motion into d/dt dL/dq' - dL/dq computed by autograd."""
    system = mlp_system(points=25, kq=3, seed=3)
    cond = SimulationConditions(gravity=(0.3, -1.0, -9.81), stiffness=1.2)
    loads = build_loads(system, cond, {}, rest_kinematics(system), DEFAULT_SETTINGS)
    masses, rest, g = loads.masses, loads.rest_points, loads.gravity
    w2 = loads.stiffness_omega**2

    def lagrangian(q, v):
        x = system.decode_points(q)
        jac = jacfwd(system.decode_points)(q)
        metric = torch.einsum("sak,s,sal->kl", jac, masses, jac) + loads.ridge * torch.eye(3)
        dx = x - rest
        potential = -(masses * (dx @ g)).sum() + 0.5 * w2 * (masses * (dx * dx).sum(1)).sum()
        return 0.5 * v @ metric @ v - potential

    dl_dv = jacfwd(lagrangian, argnums=1)
    gen = torch.Generator().manual_seed(4)
    q = 0.5 * torch.randn(3, generator=gen, dtype=F64)
    v = torch.randn(3, generator=gen, dtype=F64)
    motion = equations_of_motion(point_kinematics(system, q, v), loads, q, v, 0, 0.0)
    a = motion.qddot
    # d/dt dL/dv = (d^2L/dv dv) a + (d^2L/dv dq) v
    residual = (
        jacfwd(dl_dv, argnums=1)(q, v) @ a
        + jacfwd(dl_dv, argnums=0)(q, v) @ v
        - jacfwd(lagrangian, argnums=0)(q, v)
    )
    scale = float(jacfwd(lagrangian, argnums=0)(q, v).norm())  # the size of the terms
    assert scale > 1.0
    torch.testing.assert_close(residual, torch.zeros(3, dtype=F64), atol=1e-9 * scale, rtol=0)
    assert motion.power == 0.0


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


def test_stiffness_is_a_frequency_in_hertz():
    cond = SimulationConditions(frames=61, fps=30, gravity=(0, 0, 0), stiffness=2.0, mass=7.0)
    traj = simulate(pendulum(), cond, {}, q0=torch.tensor([0.02], dtype=F64))
    assert abs(crossing_period(traj) * 2.0 - 1) < 0.01


def test_damping_decreases_energy():
    cond = SimulationConditions(frames=91, fps=30, damping=0.5)
    traj = simulate(pendulum(), cond, {}, q0=torch.tensor([math.radians(60)], dtype=F64))
    e = traj.energy
    assert bool((e[1:] <= e[:-1] + 1e-9 * e[0]).all())
    assert float(e[-1]) < 0.5 * float(e[0])
    # the energy balance holds: what was lost is the work of the damping (to the integration
    # error; frames inside multi-frame steps are interpolated)
    torch.testing.assert_close(e - traj.work, e[:1].expand(91), rtol=0, atol=2e-3 * float(e[0]))
    assert float(traj.steps_per_frame[1:].min()) < 1  # slow motion: several frames per step


def test_initial_velocity_by_least_squares():
    system = pendulum()
    rest = rest_kinematics(system)
    cond = SimulationConditions(velocities=(InitialVelocity((2.0, 0.0, 5.0), vertex=9),))
    loads = build_loads(system, cond, {TIP: 9}, rest, DEFAULT_SETTINGS)
    # the tip can only move along x at rest: q' = 2 / radius
    torch.testing.assert_close(
        initial_velocity(cond, {TIP: 9}, rest, loads), torch.tensor([2.0], dtype=F64)
    )
    plate = flap()
    rest = rest_kinematics(plate)
    uniform = SimulationConditions(velocities=(InitialVelocity((0.0, 0.0, 1.5)),))
    loads = build_loads(plate, uniform, {}, rest, DEFAULT_SETTINGS)
    torch.testing.assert_close(
        initial_velocity(uniform, {}, rest, loads), torch.tensor([1.5, 0.0], dtype=F64)
    )
    # one point velocity for two dof: the least kinetic energy solution that meets it
    tip = SimulationConditions(velocities=(InitialVelocity((0.0, 0.0, -1.0), vertex=11),))
    loads = build_loads(plate, tip, {Anchor(vertex=11): 11}, rest, DEFAULT_SETTINGS)
    qd = initial_velocity(tip, {Anchor(vertex=11): 11}, rest, loads)
    torch.testing.assert_close(rest.jac[11] @ qd, torch.tensor([0.0, 0.0, -1.0], dtype=F64))
    metric = mass_metric(rest, loads.masses)
    other = torch.tensor([0.5, 1.0], dtype=F64)  # moves the tip not at all at rest
    for step in (-0.1, 0.1):
        alt = qd + step * other
        torch.testing.assert_close(rest.jac[11] @ alt, rest.jac[11] @ qd)
        assert float(alt @ metric @ alt) > float(qd @ metric @ qd)


# -- invariants ---------------------------------------------------------------------------------
def test_rest_is_an_equilibrium():
    k, kq = 6, 4
    gen = torch.Generator().manual_seed(5)
    mean = torch.randn(k, generator=gen, dtype=F64)
    latent = LatentMap(
        rest=mean + 10.0 * torch.eye(k, dtype=F64)[0],  # outside the 99% ball on purpose
        basis=torch.randn(k, kq, generator=gen, dtype=F64),
        prior_mean=mean,
    )
    system = mlp_system(points=50, kq=kq, seed=6, latent=latent)
    cond = SimulationConditions(frames=120, fps=24, gravity=(0, 0, 0), stiffness=3.0, damping=0.1)
    traj = simulate(system, cond, {})
    rest = system.decode_points(torch.zeros(kq, dtype=F64))
    size = float((rest.max(0).values - rest.min(0).values).max())
    motion = max(float((system.decode_points(q) - rest).norm(dim=1).max()) for q in traj.q)
    assert motion < 1e-4 * size
    assert traj.num_frames == 120


def test_force_pushes_the_loaded_point_along_the_force():
    system = mlp_system(points=40, kq=3, seed=7)
    direction = torch.tensor([1.0, 2.0, -0.5], dtype=F64)
    cond = SimulationConditions(
        forces=(Force(direction=tuple(direction.tolist()), strength=5.0, vertex=5, end_frame=10),),
        gravity=(0, 0, 0),
        frames=13,
        fps=24,
    )
    traj = simulate(system, cond, {Anchor(vertex=5): 5})
    rest = system.decode_points(traj.q[0])
    moved = system.decode_points(traj.q[3])[5] - rest[5]
    assert float(moved @ direction) > 0
    # energy balance: the kinetic energy gained is the work of the force
    balance = traj.energy - traj.work  # zero for the exact motion
    assert float(balance.abs().max()) < 1e-3 * float(traj.work.max())
    assert float(traj.work[-1]) > 0


def test_wind_pushes_the_object_downwind():
    cond = SimulationConditions(winds=(Wind((1.0, 0.0, 0.0), 3.0, end_frame=6),), frames=7, fps=24)
    traj = simulate(pendulum(), cond, {})
    assert float(traj.q[-1, 0]) > 0.01


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

    weak = DEFAULT_SETTINGS.drag_weak
    got = push(weak)
    mu = weak * 1.0  # times the largest singular value
    assert float(got[0]) == pytest.approx(0.5 / (1.0 + mu**2), rel=1e-9)
    assert float(got[1]) == pytest.approx(1e-3 / (1e-6 + mu**2), rel=1e-9)
    assert float(got[1]) <= 1.0 / (2.0 * weak)
    assert float(push(1e-3)[1]) == pytest.approx(500.0, rel=1e-3)  # what it used to be


def saturating_decode(q):
    """The bar turned by 0.5 tanh(2 q): the tip can never pass 0.5 rad, and the further q goes
    the less the tip moves (a strongly curved map, like a decoder near the edge of what it
    learned)."""
    return pendulum_decode(0.5 * torch.tanh(2.0 * q))


def saturating_kinematics(q, v):
    """x, J and D^2x[v, v] of ``saturating_decode`` by hand (phi = tanh(2q) / 2)."""
    t = torch.tanh(2.0 * q[0])
    phi, d1 = 0.5 * t, 1.0 - t * t  # phi and phi'
    d2 = -4.0 * t * d1  # phi''
    s, c, zero = torch.sin(phi), torch.cos(phi), torch.zeros((), dtype=F64)
    x = RADII[:, None] * torch.stack([s, zero, -c])
    dx = RADII[:, None] * torch.stack([c, zero, s])  # dx / dphi
    ddx = RADII[:, None] * torch.stack([-s, zero, c])
    return x, (dx * d1)[..., None], (ddx * d1 * d1 + dx * d2) * v[0] ** 2


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


def test_the_dynamics_refuse_pins():
    """Pins are held by clamping the kinematics around them (``neurok_core.simulate``); the
    dynamics themselves have no way to hold them and say so instead of letting them move."""
    cond = SimulationConditions(pins=(0,), frames=5, fps=24).validate(12)
    with pytest.raises(ConditionError, match="do not hold pins.*neurok_core.simulate.simulate"):
        simulate(flap(), cond, {Anchor(vertex=0): 0})


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


# -- failures and control -----------------------------------------------------------------------
def test_absurd_force_stops_with_a_clear_error():
    cond = SimulationConditions(forces=(Force((0, 0, 1), 1e15, vertex=3),), frames=10)
    # refused before any work, with the strength that would pass
    with pytest.raises(ConditionError, match="times its size in one frame.*lower their total"):
        simulate(translation((0, 0, 1)), cond, {Anchor(vertex=3): 3})
    # without that check, the step control stops it as a blow-up
    unchecked = DynamicsSettings(max_load_sizes_per_frame=math.inf)
    with pytest.raises(SimulationError, match="blew up between frames 0 and 1.*object sizes"):
        simulate(translation((0, 0, 1)), cond, {Anchor(vertex=3): 3}, settings=unchecked)


def test_decoder_nan_stops_with_a_clear_error():
    def fragile(q):  # undefined beyond q = 0.3
        bad = torch.where(q[0] < 0.3, 0.0, float("nan"))
        return PLATE + q[0] * torch.tensor([0.0, 0.0, 1.0], dtype=F64) + bad

    system = MechanicalSystem(fragile, torch.ones(12, dtype=F64), 1, dtype=F64)
    cond = SimulationConditions(gravity=(0, 0, 9.81), frames=30, fps=24)
    few_retries = DynamicsSettings(max_refinements=2)
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
