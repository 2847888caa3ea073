"""Quaternion and dual-quaternion math against scipy, algebraic identities and AD checks."""

import numpy as np
import pytest
import torch
from bounds import assert_within
from scipy.spatial.transform import Rotation
from torch.testing import assert_close

from neurok_core import dualquat as dq

D = torch.float64


def random_rotations(n: int, seed: int) -> Rotation:
    return Rotation.random(n, random_state=seed)


def scipy_to_quat(rot: Rotation) -> torch.Tensor:
    xyzw = rot.as_quat()  # scipy stores scalar last
    return torch.tensor(np.concatenate([xyzw[:, 3:], xyzw[:, :3]], axis=1), dtype=D)


def same_up_to_sign(a: torch.Tensor, b: torch.Tensor) -> None:
    sign = torch.sign((a * b).sum(-1, keepdim=True))
    assert_close(a, sign * b)


def random_dqs(
    n: int, seed: int, *, scale: float = 1.0
) -> tuple[torch.Tensor, Rotation, torch.Tensor]:
    rot = random_rotations(n, seed)
    t = torch.tensor(np.random.default_rng(seed).normal(size=(n, 3)) * scale, dtype=D)
    return dq.dq_from_rt(scipy_to_quat(rot), t), rot, t


# ------------------------------------------------------------------------------ quaternions


def test_quat_to_matrix_matches_scipy():
    rot = random_rotations(64, 0)
    assert_close(dq.quat_to_matrix(scipy_to_quat(rot)), torch.tensor(rot.as_matrix(), dtype=D))


def test_matrix_to_quat_matches_scipy_on_all_branches():
    angles = np.array([0.0, 1e-9, 0.3, np.pi / 2, np.pi - 1e-6, np.pi])
    axes = np.eye(3)
    rotvecs = [a * ax for a in angles for ax in axes]  # near pi: x, y or z dominates
    rotvecs += [np.pi * np.array([1.0, 1.0, 0.0]) / np.sqrt(2), np.pi * np.ones(3) / np.sqrt(3)]
    rot = Rotation.concatenate([Rotation.from_rotvec(rotvecs), random_rotations(200, 1)])
    R = torch.tensor(rot.as_matrix(), dtype=D)
    q = dq.matrix_to_quat(R)
    same_up_to_sign(q, scipy_to_quat(rot))
    assert_within(q[:, 0], above=0, what="quaternions' w")
    assert_close(q.norm(dim=-1), torch.ones(len(q), dtype=D))
    # Every branch of Shepperd's method was taken.
    squares = torch.stack(
        [1 + R[:, 0, 0] + R[:, 1, 1] + R[:, 2, 2]]
        + [1 + 2 * R[:, i, i] - R.diagonal(dim1=1, dim2=2).sum(-1) for i in range(3)],
        dim=-1,
    )
    assert set(squares.argmax(-1).tolist()) == {0, 1, 2, 3}
    assert_close(dq.quat_to_matrix(q), R)


def test_matrix_to_quat_gradient_is_finite_at_special_rotations():
    rot = Rotation.from_rotvec([[0, 0, 0], [np.pi, 0, 0], [0, np.pi, 0], [0, 0, np.pi]])
    R = torch.tensor(rot.as_matrix(), dtype=D, requires_grad=True)
    q = dq.matrix_to_quat(R)
    (g,) = torch.autograd.grad(q.sum(), R)
    assert torch.isfinite(g).all()


def test_quat_apply_matches_scipy_and_broadcasts():
    rot = random_rotations(16, 2)
    pts = np.random.default_rng(2).normal(size=(16, 3))
    out = dq.quat_apply(scipy_to_quat(rot), torch.tensor(pts, dtype=D))
    assert_close(out, torch.tensor(rot.apply(pts), dtype=D))
    many = torch.randn(16, 5, 3, dtype=D)
    out = dq.quat_apply(scipy_to_quat(rot)[:, None], many)
    assert out.shape == (16, 5, 3)
    assert_close(out[:, 2], dq.quat_apply(scipy_to_quat(rot), many[:, 2]))


def test_quat_mul_composes_rotations():
    a, b = random_rotations(8, 3), random_rotations(8, 4)
    same_up_to_sign(dq.quat_mul(scipy_to_quat(a), scipy_to_quat(b)), scipy_to_quat(a * b))


# ------------------------------------------------------------------------- dual quaternions


def test_dq_apply_is_rotation_plus_translation():
    d, rot, t = random_dqs(32, 5)
    pts = np.random.default_rng(5).normal(size=(32, 3))
    expected = torch.tensor(rot.apply(pts), dtype=D) + t
    assert_close(dq.dq_apply(d, torch.tensor(pts, dtype=D)), expected)
    R = torch.tensor(rot.as_matrix(), dtype=D)
    assert_close(dq.dq_apply(dq.dq_from_matrix(R, t), torch.tensor(pts, dtype=D)), expected)


def test_dq_to_rt_round_trip_and_identity():
    d, rot, t = random_dqs(32, 6)
    q, t2 = dq.dq_to_rt(d)
    same_up_to_sign(q, scipy_to_quat(rot))
    assert_close(t2, t)
    # A non-unit DQ reads as the motion of its normalisation.
    q3, t3 = dq.dq_to_rt(3.0 * d)
    assert_close(q3, q)
    assert_close(t3, t)
    ident = dq.dq_identity((2, 3), dtype=D)
    assert ident.shape == (2, 3, 8)
    pts = torch.randn(2, 3, 3, dtype=D)
    assert_close(dq.dq_apply(ident, pts), pts)


def test_dq_composition_equals_transform_composition():
    a, rot_a, t_a = random_dqs(16, 7)
    b, rot_b, t_b = random_dqs(16, 8)
    pts = torch.randn(16, 3, dtype=D)
    ab = dq.dq_mul(a, b)
    assert_close(dq.dq_apply(ab, pts), dq.dq_apply(a, dq.dq_apply(b, pts)))
    q, t = dq.dq_to_rt(ab)
    same_up_to_sign(q, scipy_to_quat(rot_a * rot_b))
    assert_close(t, torch.tensor(rot_a.apply(t_b.numpy()), dtype=D) + t_a)
    # The conjugate is the inverse of a unit DQ.
    assert_close(dq.dq_mul(a, dq.dq_conj(a)), dq.dq_identity((16,), dtype=D))
    assert_close(dq.dq_apply(dq.dq_conj(a), dq.dq_apply(a, pts)), pts)


def test_dq_normalize_is_idempotent_and_makes_dual_orthogonal():
    raw = torch.randn(64, 8, dtype=D) * 3
    n = dq.dq_normalize(raw)
    assert_close(n[:, :4].norm(dim=-1), torch.ones(64, dtype=D))
    assert_close((n[:, :4] * n[:, 4:]).sum(-1), torch.zeros(64, dtype=D))
    assert_close(dq.dq_normalize(n), n)
    # Scaling does not change the normalised DQ, and a unit DQ is left as it is.
    assert_close(dq.dq_normalize(2.5 * raw), n)
    d, _, _ = random_dqs(8, 9)
    assert_close(dq.dq_normalize(d), d)


def test_dq_from_raw_zero_is_identity_and_always_unit():
    assert_close(dq.dq_from_raw(torch.zeros(4, 8, dtype=D)), dq.dq_identity((4,), dtype=D))
    out = dq.dq_from_raw(torch.randn(10, 8, dtype=D))
    assert_close(out[:, :4].norm(dim=-1), torch.ones(10, dtype=D))
    # Degenerate input (real part exactly cancelled) stays finite, gradients too.
    raw = torch.tensor([[-1.0, 0, 0, 0, 0.1, 0.2, 0.3, 0.4]], dtype=D, requires_grad=True)
    out = dq.dq_from_raw(raw)
    (g,) = torch.autograd.grad(out.sum(), raw)
    assert torch.isfinite(out).all() and torch.isfinite(g).all()


def test_dq_blend_single_and_linear_translation():
    d, rot, t = random_dqs(5, 10)
    assert_close(dq.dq_blend(d[:, None], torch.ones(5, 1, dtype=D)), d)
    # Same rotation, two translations: the blend moves the translation linearly.
    q = scipy_to_quat(rot)
    t2 = t + torch.tensor([0.5, -1.0, 2.0], dtype=D)
    pair = torch.stack([dq.dq_from_rt(q, t), dq.dq_from_rt(q, t2)], dim=1)  # (5, 2, 8)
    for s in (0.0, 0.25, 0.7, 1.0):
        w = torch.tensor([1 - s, s], dtype=D).expand(5, 2)
        q_b, t_b = dq.dq_to_rt(dq.dq_blend(pair, w))
        same_up_to_sign(q_b, q)
        assert_close(t_b, (1 - s) * t + s * t2)


def test_dq_blend_handles_antipodal_representations():
    d, _, _ = random_dqs(12, 11, scale=0.3)
    dqs = d.reshape(3, 4, 8)
    w = torch.rand(3, 4, dtype=D) + 0.1
    flips = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=D)[:, None]
    flipped = dqs * flips
    a, b = dq.dq_blend(dqs, w), dq.dq_blend(flipped, w)
    same_up_to_sign(a, b)
    pts = torch.randn(3, 3, dtype=D)
    assert_close(dq.dq_apply(a, pts), dq.dq_apply(b, pts))
    # Without the hemisphere fix a naive sum of +q and -q would cancel; here it does not.
    two = torch.stack([d[0], -d[0]])[None]  # (1, 2, 8)
    assert_close(
        dq.dq_apply(dq.dq_blend(two, torch.ones(1, 2, dtype=D)), pts[:1]),
        dq.dq_apply(d[:1], pts[:1]),
    )


def test_dq_blend_broadcasts_weights_over_leading_dims():
    d, _, _ = random_dqs(4, 12, scale=0.2)
    w = torch.rand(6, 4, dtype=D)
    out = dq.dq_blend(d, w)  # (4, 8) with (6, 4) -> (6, 8)
    assert out.shape == (6, 8)
    assert_close(out[2], dq.dq_blend(d, w[2]))


def test_float32_works():
    raw = torch.randn(7, 8) * 0.1
    out = dq.dq_apply(dq.dq_from_raw(raw), torch.randn(7, 3))
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    assert dq.dq_identity((2,)).dtype == torch.get_default_dtype()


# --------------------------------------------------------------------------- differentiation


def _functions():
    torch.manual_seed(0)
    raw = 0.3 * torch.randn(3, 8, dtype=D)
    pts = torch.randn(3, 3, dtype=D)
    unit = dq.dq_from_raw(0.5 * torch.randn(2, 4, 8, dtype=D))
    w = torch.rand(2, 4, dtype=D) + 0.1
    return {
        "dq_from_raw": (dq.dq_from_raw, (raw,)),
        "dq_apply": (lambda a, b: dq.dq_apply(dq.dq_normalize(a), b), (raw + 0.5, pts)),
        "dq_blend": (dq.dq_blend, (unit, w)),
        "matrix_to_quat": (dq.matrix_to_quat, (dq.quat_to_matrix(raw[:, :4] + 1.0),)),
    }


@pytest.mark.parametrize("name", ["dq_from_raw", "dq_apply", "dq_blend", "matrix_to_quat"])
def test_gradcheck_reverse_and_forward(name):
    fn, args = _functions()[name]
    args = tuple(a.clone().requires_grad_(True) for a in args)
    assert torch.autograd.gradcheck(fn, args, check_forward_ad=True)


@pytest.mark.parametrize("name", ["dq_from_raw", "dq_apply", "dq_blend"])
def test_jvp_matches_finite_differences_and_jacfwd_matches_jacrev(name):
    fn, args = _functions()[name]
    gen = torch.Generator().manual_seed(1)
    tangents = tuple(torch.randn(a.shape, dtype=D, generator=gen) for a in args)
    _, jvp = torch.func.jvp(fn, args, tangents)
    h = 1e-6
    plus = fn(*(a + h * v for a, v in zip(args, tangents, strict=True)))
    minus = fn(*(a - h * v for a, v in zip(args, tangents, strict=True)))
    assert_close(jvp, (plus - minus) / (2 * h), rtol=1e-6, atol=1e-7)

    # Second directional derivative by nested forward mode against finite differences of the JVP.
    def dir_deriv(*xs):
        return torch.func.jvp(fn, xs, tangents)[1]

    _, second = torch.func.jvp(dir_deriv, args, tangents)
    h2 = 1e-4
    fd2 = (
        dir_deriv(*(a + h2 * v for a, v in zip(args, tangents, strict=True)))
        - dir_deriv(*(a - h2 * v for a, v in zip(args, tangents, strict=True)))
    ) / (2 * h2)
    assert_close(second, fd2, rtol=1e-5, atol=1e-6)
    argnums = tuple(range(len(args)))
    for jf, jr in zip(
        torch.func.jacfwd(fn, argnums=argnums)(*args),
        torch.func.jacrev(fn, argnums=argnums)(*args),
        strict=True,
    ):
        assert_close(jf, jr)


def test_dq_skin_equals_blend_then_apply():
    """The one-pass skinning gives what blending, normalising and applying give, with random
    rotations (any angle), neighbours in either hemisphere and unequal weights."""
    gen = torch.Generator().manual_seed(5)
    d, _, _ = random_dqs(30, 21, scale=0.5)
    signs = torch.where(torch.rand(30, generator=gen, dtype=D) < 0.5, -1.0, 1.0)
    motions = torch.stack([d * signs[:, None], d.flip(0)])  # (B=2, Q=30, 8)
    index = torch.randint(0, 30, (50, 4), generator=gen)  # (N, K)
    weights = torch.rand(50, 4, generator=gen, dtype=D) + 0.05
    pivot = index.gather(1, weights.argmax(1, keepdim=True))[:, 0]
    points = torch.randn(50, 3, generator=gen, dtype=D)
    want = dq.dq_apply(dq.dq_blend(motions[:, index], weights[None]), points[None])
    got = dq.dq_skin(motions, index, weights[None], pivot, points[None])
    assert_close(got, want, atol=1e-12, rtol=1e-10)
