"""The Euler-Lagrange equations in reduced coordinates: exact identities (float64)."""

import torch
from dynamics_systems import (
    F64,
    _one_thread,  # noqa: F401  (an autouse fixture)
    mlp_system,
    rest_kinematics,
)
from torch.func import jacfwd

from neurok_core.dynamics import (
    LatentMap,
    SimulationConditions,
    coriolis,
    equations_of_motion,
    mass_metric,
    point_kinematics,
    simulate,
)
from neurok_core.dynamics.loads import build_loads
from neurok_core.dynamics.settings import DEFAULT_SETTINGS


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
