"""The NumPy right-hand side (neurok_core.dynamics.fastrhs) against the PyTorch one
(lagrangian.equations_of_motion), every load switched on (the shape-keeping springs too)."""

import numpy as np
import pytest
import torch

from neurok_core.dynamics.barrier import PriorBarrier
from neurok_core.dynamics.drag import DragHandle
from neurok_core.dynamics.fastrhs import NumpyDynamics
from neurok_core.dynamics.lagrangian import equations_of_motion, state_energies
from neurok_core.dynamics.loads import Loads, TimedForces
from neurok_core.dynamics.shapekeep import build_edge_springs, neighbour_pairs
from neurok_core.dynamics.system import PointKinematics

F64 = dict(dtype=torch.float64)


def _loads(gen, s: int, kq: int, k: int, barrier_outside: bool) -> Loads:
    rest = torch.randn(s, 3, generator=gen, **F64)
    latent_rest = torch.randn(k, generator=gen, **F64)
    basis = torch.linalg.qr(torch.randn(k, kq, generator=gen, **F64))[0]
    mean = torch.zeros(k, **F64)
    radius = float(latent_rest.norm()) * (0.5 if barrier_outside else 3.0)
    timed = TimedForces(
        rows=torch.tensor([3, s - 1]),
        vectors=torch.tensor([[0.0, 0.0, 2.0], [1.0, -1.0, 0.5]], **F64),
        start=torch.tensor([0, 2]),
        end=torch.tensor([5, 9]),
    )
    wind = TimedForces(
        rows=torch.tensor([0]),
        vectors=torch.tensor([[0.3, 0.1, 0.0]], **F64),
        start=torch.tensor([1]),
        end=torch.tensor([7]),
    )
    masses = torch.rand(s, generator=gen, **F64) + 0.1
    pairs = torch.as_tensor(neighbour_pairs(rest.numpy(), (torch.arange(s) % 2).numpy(), 3))
    jac0 = torch.randn(s, 3, kq, generator=gen, **F64)
    springs = build_edge_springs(
        pairs, rest, masses, jac0, torch.einsum("s,sik,sil->kl", masses, jac0, jac0), 2.0
    )
    return Loads(
        masses=masses,
        rest_points=rest,
        total_mass=float(masses.sum()),
        size=1.0,
        gravity=torch.tensor([0.0, 0.0, -9.81], **F64),
        stiffness_omega=3.0,
        damping=0.7,
        forces=timed,
        winds=wind,
        barrier=PriorBarrier(latent_rest, basis, mean, radius, strength=5.0, damping_ratio=0.5),
        ridge=1e-3,
        energy_scale=1.0,
        springs=springs,
    )


@pytest.mark.parametrize("outside", [False, True])
@pytest.mark.parametrize("hand", [False, True])
def test_numpy_rhs_equals_torch(outside, hand):
    gen = torch.Generator().manual_seed(3)
    s, kq, k = 40, 4, 9
    loads = _loads(gen, s, kq, k, outside)
    kin = PointKinematics(
        x=loads.rest_points + 0.1 * torch.randn(s, 3, generator=gen, **F64),
        jac=torch.randn(s, 3, kq, generator=gen, **F64),
        bias=torch.randn(s, 3, generator=gen, **F64),
    )
    q = torch.randn(kq, generator=gen, **F64)
    qdot = torch.randn(kq, generator=gen, **F64)
    hands = []
    if hand:
        handle = DragHandle(
            row=7,
            target=torch.tensor([0.5, 0.2, 0.1], **F64),
            start_frame=2,
            frame=10,
            omega=8.0,
            weak=0.03,
        )
        path = handle.plan(kin.x[7], torch.zeros(3, **F64), fps=24.0, arrival=0.8)
        hands = [(handle, path)]
    fast = NumpyDynamics(loads)
    for frame in (0, 3, 8):
        t = frame / 24.0 + 0.01
        ref = equations_of_motion(kin, loads, q, qdot, frame, t, hands)
        qddot, power, kinetic, potential, _ = fast.motion(
            kin.x.numpy(),
            kin.jac.numpy(),
            kin.bias.numpy(),
            q.numpy(),
            qdot.numpy(),
            frame,
            t,
            hands,
        )
        np.testing.assert_allclose(qddot, ref.qddot.numpy(), rtol=1e-10, atol=1e-12)
        for got, want in ((power, ref.power), (kinetic, ref.kinetic), (potential, ref.potential)):
            assert got == pytest.approx(want, rel=1e-10, abs=1e-12)
        energies = fast.energies(kin.x.numpy(), kin.jac.numpy(), q.numpy(), qdot.numpy(), frame)
        want = state_energies(kin, loads, q, qdot, frame)
        np.testing.assert_allclose(energies, want, rtol=1e-10, atol=1e-12)
    assert fast.excess(q.numpy()) == pytest.approx(loads.barrier.excess(q), abs=1e-12)
    assert (fast.excess(np.zeros(kq)) > 0) == outside  # the rest latent is outside its ball
    assert (fast.excess(q.numpy()) > 0) == outside  # and so is the state evaluated


@pytest.mark.parametrize("bad", ["indefinite", "nan"])
def test_a_bad_metric_gives_nan_not_an_exception(bad):
    gen = torch.Generator().manual_seed(0)
    loads = _loads(gen, 10, 3, 5, barrier_outside=False)
    jac = np.zeros((10, 3, 3))
    if bad == "indefinite":
        loads = Loads(**{**loads.__dict__, "ridge": -1.0})  # G = 0 - I: not positive definite
    else:
        jac[4, 1, 2] = np.nan
    fast = NumpyDynamics(loads)
    zeros = np.zeros((10, 3))
    qddot, power, *_ = fast.motion(zeros, jac, zeros, np.zeros(3), np.ones(3), 0, 0.0)
    assert np.isnan(qddot).all() and np.isnan(power)
