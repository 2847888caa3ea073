"""The decoder's Taylor-mode forward against torch.func (jacfwd, nested jvp), float64."""

import numpy as np
import pytest
import torch
import trimesh

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.system import point_kinematics
from neurok_core.model import ModelConfig, build_model, jets
from neurok_core.simulate import build_system
from neurok_core.space import SpaceSettings, build_space

SETTINGS = SpaceSettings(
    dynamics_points=48, skinning_points=128, subspace_samples=16, rest_steps=20
)
TOL = {"atol": 1e-10, "rtol": 1e-8}


def _model(deformation: str):
    torch.manual_seed(0)
    m = build_model(ModelConfig.preset("tiny", deformation=deformation)).double()
    with torch.no_grad():  # a decoder that moves things (a fresh one decodes to the identity)
        m.decoder.head.weight.normal_(0.0, 0.1)
        m.decoder.head.bias.normal_(0.0, 0.02)
        if deformation == "skinned":  # skinning weights modulated by the rest shape too
            m.decoder.skin.to_point.weight.normal_(0.0, 0.5)
    return m.eval()


@pytest.fixture(scope="module")
def slab():
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


@pytest.fixture(scope="module", params=["skinned", "dualquat", "displacement"])
def space(request, slab):
    return build_space(_model(request.param), *slab, settings=SETTINGS)


def _autodiff(fn, x: torch.Tensor, v: torch.Tensor):
    """Reference value, Jacobian (out..., n) and D^2 fn[v, v] by torch.func."""
    jac = torch.func.jacfwd(fn)(x)

    def directional(p):
        return torch.func.jvp(fn, (p,), (v,))[1]

    return fn(x), jac, torch.func.jvp(directional, (x,), (v,))[1]


def _check(jet_fn, fn, x, v):
    value, jac, second = _autodiff(fn, x, v)
    with torch.no_grad():
        out = jet_fn(jets.affine_input(x, torch.eye(len(x), dtype=x.dtype), v))
    torch.testing.assert_close(out.value, value, **TOL)
    torch.testing.assert_close(torch.movedim(out.tangents, 0, -1), jac, **TOL)
    torch.testing.assert_close(out.direction, jac @ v, **TOL)
    torch.testing.assert_close(out.second, second, **TOL)


def test_elementary_rules_match_autodiff():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(12, dtype=torch.float64, generator=gen)
    v = torch.randn(12, dtype=torch.float64, generator=gen)
    const = torch.randn(3, 4, dtype=torch.float64, generator=gen)

    def as_matrix(t):
        return t.unflatten(-1, (3, 4))

    def soft(t):
        return torch.softmax(as_matrix(t) * as_matrix(t).flip(-1), dim=-1)

    _check(
        lambda j: jets.softmax(
            jets.mul(
                jets.structural(j, as_matrix), jets.structural(j, lambda t: as_matrix(t).flip(-1))
            )
        ),
        soft,
        x,
        v,
    )
    _check(jets.gelu, torch.nn.functional.gelu, 3 * x, v)
    _check(
        lambda j: jets.matmul(
            jets.structural(j, as_matrix),
            jets.structural(j, lambda t: as_matrix(t).transpose(-1, -2)),
        ),
        lambda t: as_matrix(t) @ as_matrix(t).T,
        x,
        v,
    )
    _check(
        lambda j: jets.add(
            jets.matmul(const, jets.structural(j, lambda t: as_matrix(t).mT)), const[:, 0]
        ),
        lambda t: const @ as_matrix(t).mT + const[:, 0],
        x,
        v,
    )


def test_dual_quaternion_rules_match_autodiff():
    from neurok_core import dualquat

    gen = torch.Generator().manual_seed(2)
    raw = 0.3 * torch.randn(5 * 8, dtype=torch.float64, generator=gen)
    v = torch.randn(5 * 8, dtype=torch.float64, generator=gen)
    points = torch.randn(5, 3, dtype=torch.float64, generator=gen)
    rest_inverse = dualquat.dq_from_raw(0.3 * torch.randn(5, 8, dtype=torch.float64, generator=gen))
    form = jets.motion_quadratic_form(points, rest_inverse)  # (5, 3, 8, 8)
    torch.testing.assert_close(form, form.transpose(-1, -2), atol=0, rtol=0)

    def reference(t):
        dq = dualquat.dq_from_raw(t.unflatten(-1, (5, 8)))
        return dualquat.dq_apply(dualquat.dq_mul(dq, rest_inverse), points) - points

    def jet_fn(j):
        return jets.quadratic(
            jets.dq_from_raw(jets.structural(j, lambda t: t.unflatten(-1, (5, 8)))), form
        )

    _check(jet_fn, reference, raw, v)


def test_layers_match_autodiff():
    model = _model("dualquat")
    decoder = model.decoder
    gen = torch.Generator().manual_seed(3)
    width = model.config.width
    x = torch.randn(4 * width, dtype=torch.float64, generator=gen)
    v = torch.randn(4 * width, dtype=torch.float64, generator=gen)
    block = decoder.layers[0]

    def shaped(t):
        return t.unflatten(-1, (4, width))

    _check(
        lambda j: jets.self_block(block, jets.structural(j, shaped)),
        lambda t: block(shaped(t)),
        x,
        v,
    )
    queries = torch.randn(6, width, dtype=torch.float64, generator=gen)
    _check(
        lambda j: jets.cross_block(decoder.cross, queries, jets.structural(j, shaped)),
        lambda t: decoder.cross(queries, shaped(t)),
        x,
        v,
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_point_kinematics_match_autodiff(space, seed):
    force = Force(direction=(0, 0, 1), strength=5.0, vertex=3, start_frame=0, end_frame=2)
    conditions = SimulationConditions(forces=(force,), gravity=(0, 0, -9.81), frames=4, fps=24)
    fast, _ = build_system(space, conditions, autodiff=False)
    exact, _ = build_system(space, conditions, autodiff=True)
    assert fast.kinematics is not None and exact.kinematics is None
    assert fast.num_points == SETTINGS.dynamics_points + 1  # the force's anchor is tracked
    gen = torch.Generator().manual_seed(seed)
    q = 0.7 * torch.randn(space.reduced_dims, dtype=torch.float64, generator=gen)
    v = torch.randn(space.reduced_dims, dtype=torch.float64, generator=gen)
    got = point_kinematics(fast, q, v)
    want = point_kinematics(exact, q, v)
    assert float(want.bias.abs().max()) > 1e-6  # the map is not affine in q
    torch.testing.assert_close(got.x, want.x, **TOL)
    torch.testing.assert_close(got.jac, want.jac, **TOL)
    torch.testing.assert_close(got.bias, want.bias, **TOL)
    still = point_kinematics(fast, q, torch.zeros_like(v))
    torch.testing.assert_close(still.bias, torch.zeros_like(still.bias), atol=0, rtol=0)
    with pytest.raises(ValueError, match="q and qdot"):
        fast.kinematics(q[:-1], v[:-1])


def test_restricted_pass_carries_only_the_subspace(space):
    """q = B r: the pass in r equals the full pass with J B, with r tangents instead of kq."""
    conditions = SimulationConditions(gravity=(0, 0, -9.81), frames=4, fps=24)
    system, _ = build_system(space, conditions, autodiff=False)
    gen = torch.Generator().manual_seed(3)
    kq = space.reduced_dims
    basis = torch.linalg.qr(torch.randn(kq, 1, dtype=torch.float64, generator=gen))[0]
    small = system.kinematics.restricted(basis.to(space.dtype))
    assert small.directions.shape == (space.W.shape[0], 1)
    r, rdot = torch.tensor([0.4], dtype=torch.float64), torch.tensor([0.9], dtype=torch.float64)
    x, jac, bias = small(r.to(space.dtype), rdot.to(space.dtype))
    fx, fjac, fbias = system.kinematics((basis @ r).to(space.dtype), (basis @ rdot).to(space.dtype))
    torch.testing.assert_close(x, fx, **TOL)
    torch.testing.assert_close(jac, fjac @ basis.to(space.dtype), **TOL)
    torch.testing.assert_close(bias, fbias, **TOL)


def test_hessian_pass_matches_autodiff(space):
    """One pass with several second-order directions gives the whole Hessian (float64)."""
    dk = jets.DecoderKinematics(space, space.dynamics_points, space.rest_inverse_dyn)
    kq = space.reduced_dims
    q = torch.linspace(-0.3, 0.4, kq, dtype=torch.float64)

    def decode(p):
        moved = space.deform_points(space.latent(p)[None], dk.points, dk.rest_inverse)[0]
        return space.normalization.invert(moved)

    x, jac, hess = dk.hessian(q)
    ref_x, ref_jac, _ = dk(q, torch.zeros_like(q))
    ref_hess = torch.func.jacfwd(torch.func.jacfwd(decode))(q)  # (S, 3, kq, kq)
    torch.testing.assert_close(x, ref_x, **TOL)
    torch.testing.assert_close(jac, ref_jac, **TOL)
    assert float(ref_hess.abs().max()) > 1e-3  # the test decoder really bends
    torch.testing.assert_close(hess, ref_hess, atol=1e-9, rtol=1e-7)
    # several directions at once agree with one direction at a time
    v = torch.randn(3, kq, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    many = dk._pass(q, v)[2]
    for a in range(3):
        torch.testing.assert_close(many[a], dk(q, v[a])[2], **TOL)
    # the pass's token part alone: the decoder's tokens and their derivatives along q
    tokens = dk.hessian_tokens(q)  # (1 + kq + m, T, C)
    shape = space.shape.tokens[0]
    with torch.no_grad():
        torch.testing.assert_close(
            tokens[0], space.model.decoder.tokens(space.latent(q), shape), **TOL
        )
    along = torch.func.jacfwd(lambda p: space.model.decoder.tokens(space.latent(p), shape))(q)
    torch.testing.assert_close(tokens[1 : kq + 1], along.permute(2, 0, 1), **TOL)


def test_broadcast_shapes_as_torch():
    for a, b in [((3, 4), (4,)), ((1, 4), (3, 1)), ((2, 1, 5), (7, 1)), ((), (3,)), ((5,), ())]:
        assert jets._broadcast(a, b) == tuple(torch.broadcast_shapes(a, b))
    with pytest.raises(ValueError):
        jets._broadcast((3, 4), (5,))
