"""The local quadratic model of the decoder (neurok_core.dynamics.local) against the decoder
itself: same kinematics at the expansion point, cubic error away from it, same motion."""

import numpy as np
import pytest
import torch

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.local import LocalQuadratic, supports_hessian
from neurok_core.dynamics.settings import DEFAULT_SETTINGS
from neurok_core.simulate import build_system, simulate


@pytest.fixture(scope="module")
def space(tiny_slab_space):
    return tiny_slab_space


def _conditions(space, pinned: bool) -> SimulationConditions:
    v = space.vertices
    tip = int(np.argmax(v[:, 0]))
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    return SimulationConditions(
        forces=(Force(direction=(0, 0, 1), strength=0.5, vertex=tip, end_frame=6),),
        pins=pins if pinned else (),
        gravity=(0.0, 0.0, 0.0),  # no free fall: a motion that stays comparable
        frames=12,
        fps=24,
    )


@pytest.mark.parametrize("pinned", [False, True])
def test_model_is_exact_at_its_centre_and_cubic_away(space, pinned):
    system, _ = build_system(space, _conditions(space, pinned))
    hook = system.kinematics
    assert supports_hessian(hook)
    kq = system.num_coords
    q0 = torch.linspace(-0.2, 0.3, kq, dtype=torch.float64)
    local = LocalQuadratic(hook, dtype=system.dtype, device=system.device, size=0.4)
    local.expand(q0)
    v = torch.linspace(0.5, -0.4, kq, dtype=torch.float64)
    for got, want in zip(local(q0, v), hook(q0, v), strict=True):
        torch.testing.assert_close(got, want, atol=1e-10, rtol=1e-8)
    d = torch.linspace(1.0, -1.0, kq, dtype=torch.float64)
    d = d / d.norm()
    errors = []
    for s in (0.2, 0.1, 0.05):
        x_model = local(q0 + s * d, v)[0]
        x_true = hook(q0 + s * d, v)[0]
        errors.append(float((x_model - x_true).norm(dim=1).max()))
    assert errors[0] > 1e-8  # the decoder is not quadratic...
    assert errors[1] < errors[0] / 5 and errors[2] < errors[1] / 5  # ...but the error is cubic


@pytest.mark.parametrize("pinned", [False, True])
def test_local_model_moves_like_the_decoder(space, pinned, capsys):
    cond = _conditions(space, pinned)
    exact = simulate(space, cond, settings=DEFAULT_SETTINGS.with_overrides(local_model=False))
    local = simulate(space, cond)
    size = space.object_size
    motion = float(np.linalg.norm(exact.positions - exact.positions[0], axis=2).max()) / size
    diff = float(np.linalg.norm(local.positions - exact.positions, axis=2).max()) / size
    info = local.info
    with capsys.disabled():
        print(
            f"\n[local model, pinned={pinned}] motion {motion:.3f} sizes, difference "
            f"{diff:.2e} sizes; {info['expansions']} expansions + "
            f"{info['decoder_evaluations']} model evaluations vs "
            f"{exact.info['decoder_evaluations']} decoder evaluations; model error "
            f"{info['model_error']:.1e}"
        )
    assert motion > 0.01  # the scene moves
    assert info["expansions"] >= 2 and info["model_error"] > 0
    assert exact.info["expansions"] == 0
    # the same motion within a few per cent (the model's Hessian varies only along the last
    # move's direction between expansions, so D^2x is not exact off it)
    assert diff < 0.03 * motion
    if pinned:
        still = np.asarray(cond.pins)
        assert np.abs(local.positions[:, still] - local.positions[0, still]).max() < 1e-6
    # energy minus work stays balanced (the model's re-expansions are booked, not leaked)
    assert info["energy_balance_error"] <= 0.05 * info["energy_range"] + 1e-9


class _Hook:
    """x(q) = (sin q0, cos q1, q0 q1) for one point, with its exact J and Hessian; ``poison``
    makes the next Hessian NaN."""

    poison = False
    has_hessian = True

    def __call__(self, q, qdot):
        x, jac, hess = self.hessian(q)
        return x, jac, (hess @ qdot) @ qdot

    def hessian(self, q):
        a, b = float(q[0]), float(q[1])
        x = torch.tensor([[np.sin(a), np.cos(b), a * b]], dtype=torch.float64)
        jac = torch.tensor([[[np.cos(a), 0.0], [0.0, -np.sin(b)], [b, a]]], dtype=torch.float64)
        hess = torch.zeros(1, 3, 2, 2, dtype=torch.float64)
        hess[0, 0, 0, 0] = -np.sin(a)
        hess[0, 1, 1, 1] = -np.cos(b)
        hess[0, 2, 0, 1] = hess[0, 2, 1, 0] = 1.0
        if self.poison:
            hess = hess * float("nan")
        return x, jac, hess


def test_bad_expansions_change_nothing_and_rounding_does_not_shrink_the_radius():
    hook = _Hook()
    local = LocalQuadratic(hook, dtype=torch.float64, device=torch.device("cpu"), size=1.0)
    q = torch.tensor([0.3, -0.2], dtype=torch.float64)
    local.expand(q)
    radius, centre = local.radius, local.current
    assert 0 < radius < float("inf")
    local.expand(q + 1e-12, fresh=True)  # a move far below rounding: the radius stays
    assert local.radius == radius
    hook.poison = True
    with pytest.raises(FloatingPointError):
        local.expand(q + 0.01, fresh=True)
    assert local.radius == radius and local.current is not centre  # the last good expansion
    assert bool(np.isfinite(local.current.h0).all())
    # restoring an earlier expansion brings its model back exactly
    local.restore(centre)
    for got, want in zip(local(q, q), _Hook()(q, q), strict=True):
        torch.testing.assert_close(got, want)


def test_a_kept_expansion_near_the_state_serves_again_without_a_decoder_pass():
    hook = _Hook()
    calls = []
    hessian = hook.hessian
    hook.hessian = lambda q: calls.append(q) or hessian(q)
    local = LocalQuadratic(hook, dtype=torch.float64, device=torch.device("cpu"), size=1.0)
    q = torch.tensor([0.3, -0.2], dtype=torch.float64)
    local.expand(q)  # (with probes of the first radius)
    first, radius, n = local.current, local.radius, len(calls)
    far = q + torch.tensor([2.0 * radius, 0.0], dtype=torch.float64)
    local.expand(far)  # nothing kept near it: a new expansion
    assert local.current is not first and len(calls) == n + 1 and local.stats.expansions == 2
    r = local.radius
    near = q + torch.tensor([0.0, 0.4 * r], dtype=torch.float64)
    local.advance_frames(3)
    local.expand(near)  # within reuse * radius of the first: it comes back, no decoder pass
    assert local.current is first and len(calls) == n + 1 and local.stats.reuses == 1
    assert local.frames == 3  # the count to the next fresh (error-measuring) pass runs on
    local.expand(near, fresh=True)  # unless a fresh one is asked for
    assert local.current is not first and len(calls) == n + 2
    # only the most recently used are kept
    small = LocalQuadratic(hook, dtype=torch.float64, device=torch.device("cpu"), size=1.0)
    small.KEEP_BYTES = 1.0  # room for the minimum, 16
    small.expand(q)
    step = torch.tensor([3.0 * small.radius, 0.0], dtype=torch.float64)
    for i in range(1, 17):
        small.expand(q + i * step)
    assert small.stats.expansions == 17 and len(small._kept) == 16
    small.expand(q)  # the first one was dropped: a new pass
    assert small.stats.expansions == 18 and small.stats.reuses == 0
    off = LocalQuadratic(hook, dtype=torch.float64, device=torch.device("cpu"), size=1.0, reuse=0)
    off.expand(q)
    off.expand(q + torch.tensor([0.0, 0.1 * off.radius], dtype=torch.float64))
    assert off.stats.reuses == 0 and off.stats.expansions == 2


def test_cubic_model_is_a_consistent_mechanical_system():
    """With the cubic term (a third derivative known along the last move u), the model's J and
    D^2x[v, v] are the exact derivatives of its x, and its third derivative along u is the
    estimated one, in every direction."""
    from neurok_core.dynamics.local import Expansion

    rng = np.random.default_rng(0)
    s, kq = 7, 4

    def sym(a):
        return 0.5 * (a + np.swapaxes(a, -1, -2))

    u = rng.normal(size=kq)
    u /= np.linalg.norm(u)
    t = sym(rng.normal(size=(s, 3, kq, kq)))
    local = LocalQuadratic(None, dtype=torch.float64, device=torch.device("cpu"), size=1.0)
    local.restore(
        Expansion(
            rng.normal(size=kq),
            rng.normal(size=(s, 3)),
            rng.normal(size=(s, 3, kq)),
            sym(rng.normal(size=(s, 3, kq, kq))),
            u,
            t,
        )
    )
    q = local.current.q0 + 0.7 * rng.normal(size=kq)
    v = rng.normal(size=kq)
    x, jac, bias = local.model(q, v)

    def pos(p):
        return local.model(p, None)[0]

    h = 1e-5
    fd_jac = np.stack([(pos(q + h * e) - pos(q - h * e)) / (2 * h) for e in np.eye(kq)], -1)
    np.testing.assert_allclose(jac, fd_jac, atol=1e-8)
    h = 1e-4
    fd_bias = (pos(q + h * v) - 2 * x + pos(q - h * v)) / h**2
    np.testing.assert_allclose(bias, fd_bias, atol=1e-5 * np.abs(bias).max())
    a, e, q0 = rng.normal(size=kq), 1e-2, local.current.q0

    def second(p):  # D^2x[a, a] at p
        return (pos(p + e * a) - 2 * pos(p) + pos(p - e * a)) / e**2

    third = (second(q0 + e * u) - second(q0 - e * u)) / (2 * e)  # D^3x[u, a, a] at q0
    np.testing.assert_allclose(third, (t @ a) @ a, atol=1e-6)
