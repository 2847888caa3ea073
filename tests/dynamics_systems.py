"""Systems whose physics is known, shared by the dynamics tests (pendulum, flap, translations,
small MLP decoders, a saturating decoder) and their helpers."""

import math

import pytest
import torch

from neurok_core.dynamics import (
    Anchor,
    MechanicalSystem,
    point_kinematics,
)

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
