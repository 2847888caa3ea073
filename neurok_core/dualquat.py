"""Quaternions and dual quaternions in torch, batched over any leading dimensions.

Conventions
-----------
- A quaternion is a ``(..., 4)`` tensor ``(w, x, y, z)`` (scalar first), Hamilton product.
- A dual quaternion (DQ) is a ``(..., 8)`` tensor: real part ``(w, x, y, z)`` then dual part
  ``(w, x, y, z)``, i.e. ``q = r + eps d`` with ``eps^2 = 0``.
- The unit DQ of the rigid motion ``p -> R p + t`` (rotation quaternion ``r``, translation ``t``) is
  ``r + eps * 0.5 * (0, t) * r``, and ``t = 2 * vec(d * conj(r))`` recovers the translation.
- ``dq_mul(a, b)`` is the motion "first ``b``, then ``a``" (like ``R_a @ R_b``).

References: L. Kavan, S. Collins, J. Zara, C. O'Sullivan, "Skinning with Dual Quaternions"
(I3D 2007) and "Geometric Skinning with Approximate Dual Quaternion Blending" (ACM TOG 2008).

Every function works in float32 and float64 and is differentiable in reverse and forward mode
(``torch.func.jvp``/``jacfwd``, nested): no in-place writes, no Python branching on values, and
square roots are guarded so that their derivatives never turn into NaN.
"""

from __future__ import annotations

import torch
from torch import Tensor

_EPS = 1e-12


def _product_table(kind: str) -> Tensor:
    """The constant (16, n) table T with ``a * b = (a outer b).reshape(16) @ T``."""
    table = torch.zeros(4, 4, 4, dtype=torch.float64)
    # Hamilton product: (a0 b0 - a.b, a0 b + b0 a + a x b), components (w, x, y, z).
    signs = {
        (0, 0): (0, 1), (1, 1): (0, -1), (2, 2): (0, -1), (3, 3): (0, -1),
        (0, 1): (1, 1), (1, 0): (1, 1), (2, 3): (1, 1), (3, 2): (1, -1),
        (0, 2): (2, 1), (2, 0): (2, 1), (3, 1): (2, 1), (1, 3): (2, -1),
        (0, 3): (3, 1), (3, 0): (3, 1), (1, 2): (3, 1), (2, 1): (3, -1),
    }  # fmt: skip
    for (i, j), (out, sign) in signs.items():
        table[i, j, out] = sign
    if kind == "cross":  # a x b of 3-vectors = vector part of (0, a)(0, b)
        return table[1:, 1:, 1:].reshape(9, 3)
    return table.reshape(16, 4)


_QUAT_TABLE = _product_table("quat")
_CROSS_TABLE = _product_table("cross")


def _bilinear(a: Tensor, b: Tensor, table: Tensor) -> Tensor:
    """``sum_jk a_j b_k T[j k, i]`` in three tensor ops (cheap under forward-mode AD and vmap,
    where each elementwise op on a component view costs far more than one small matmul)."""
    a, b = torch.broadcast_tensors(a, b)
    outer = (a[..., :, None] * b[..., None, :]).flatten(-2)  # (..., n * n)
    return outer @ table.to(device=outer.device, dtype=outer.dtype)


def _cross(a: Tensor, b: Tensor) -> Tensor:
    """Cross product of ``(..., 3)`` vectors."""
    return _bilinear(a, b, _CROSS_TABLE)


def _safe_norm(x: Tensor, eps: float = _EPS) -> Tensor:
    """Euclidean norm over the last dim, ``(..., n) -> (..., 1)``, with a finite derivative at 0."""
    return torch.sqrt(torch.clamp((x * x).sum(-1, keepdim=True), min=eps * eps))


# --------------------------------------------------------------------------------------------
# Quaternions
# --------------------------------------------------------------------------------------------


def quat_mul(a: Tensor, b: Tensor) -> Tensor:
    """Hamilton product ``a * b`` of ``(..., 4)`` quaternions (leading dims broadcast).

    ``(a0, a) (b0, b) = (a0 b0 - a . b,  a0 b + b0 a + a x b)``, evaluated as one bilinear form.
    """
    return _bilinear(a, b, _QUAT_TABLE)


def quat_conj(q: Tensor) -> Tensor:
    """Conjugate ``(w, -x, -y, -z)`` of ``(..., 4)`` quaternions (the inverse of a unit one)."""
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def quat_normalize(q: Tensor, eps: float = _EPS) -> Tensor:
    """``q / |q|`` for ``(..., 4)`` quaternions; the norm is clamped at ``eps``."""
    return q / _safe_norm(q, eps)


def quat_to_matrix(q: Tensor) -> Tensor:
    """Rotation matrices ``(..., 3, 3)`` of unit quaternions ``(..., 4)`` (``R p = q p q*``).

    Non-unit input is normalised first.
    """
    w, x, y, z = quat_normalize(q).unbind(-1)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = (
        torch.stack((1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy)), dim=-1),
        torch.stack((2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx)), dim=-1),
        torch.stack((2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)), dim=-1),
    )
    return torch.stack(rows, dim=-2)


def matrix_to_quat(R: Tensor) -> Tensor:
    """Unit quaternions ``(..., 4)`` with ``w >= 0`` of rotation matrices ``(..., 3, 3)``.

    Shepperd's method: from ``4 w^2 = 1 + tr R``, ``4 x^2 = 1 + R00 - R11 - R22`` (and likewise
    for ``y``, ``z``) the largest component is taken from its square root and the other three from
    the off-diagonal sums/differences divided by it, so every branch is well conditioned
    (S. W. Shepperd, "Quaternion from rotation matrix", J. Guidance and Control 1978). All four
    candidates are computed and the best one is selected per matrix without Python branching.
    The selected radicand is at least 1 (the squares sum to 4), so clamping every radicand at 0.1
    keeps all four candidates finite (and their derivatives free of NaN) without changing the
    selected one.
    """
    r00, r01, r02 = R[..., 0, 0], R[..., 0, 1], R[..., 0, 2]
    r10, r11, r12 = R[..., 1, 0], R[..., 1, 1], R[..., 1, 2]
    r20, r21, r22 = R[..., 2, 0], R[..., 2, 1], R[..., 2, 2]
    squares4 = torch.stack(
        (
            1 + r00 + r11 + r22,
            1 + r00 - r11 - r22,
            1 - r00 + r11 - r22,
            1 - r00 - r11 + r22,
        ),
        dim=-1,
    )  # (..., 4) = 4 * (w^2, x^2, y^2, z^2)
    s = 2.0 * torch.sqrt(torch.clamp(squares4, min=0.1))  # (..., 4) = 4 * |component|
    sw, sx, sy, sz = s.unbind(-1)
    cand_w = torch.stack((sw / 4, (r21 - r12) / sw, (r02 - r20) / sw, (r10 - r01) / sw), dim=-1)
    cand_x = torch.stack(((r21 - r12) / sx, sx / 4, (r01 + r10) / sx, (r02 + r20) / sx), dim=-1)
    cand_y = torch.stack(((r02 - r20) / sy, (r01 + r10) / sy, sy / 4, (r12 + r21) / sy), dim=-1)
    cand_z = torch.stack(((r10 - r01) / sz, (r02 + r20) / sz, (r12 + r21) / sz, sz / 4), dim=-1)
    cands = torch.stack((cand_w, cand_x, cand_y, cand_z), dim=-2)  # (..., 4 candidates, 4)
    best = squares4.argmax(dim=-1)  # (...)
    index = best[..., None, None].expand(*best.shape, 1, 4)
    q = torch.gather(cands, -2, index).squeeze(-2)  # (..., 4)
    q = torch.where(q[..., :1] < 0, -q, q)
    return quat_normalize(q)


def quat_apply(q: Tensor, points: Tensor) -> Tensor:
    """Rotate ``points`` ``(..., 3)`` by unit quaternions ``q`` ``(..., 4)`` (dims broadcast).

    ``q p q* = p + 2 w (v x p) + 2 v x (v x p)`` with ``q = (w, v)``.
    """
    w, v = q[..., :1], q[..., 1:]
    vxp = _cross(v, points)
    return points + 2.0 * w * vxp + 2.0 * _cross(v, vxp)


# --------------------------------------------------------------------------------------------
# Dual quaternions
# --------------------------------------------------------------------------------------------


def dq_identity(
    shape: tuple[int, ...] | torch.Size = (),
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """The identity motion as a ``(*shape, 8)`` dual quaternion ``(1, 0, 0, 0, 0, 0, 0, 0)``."""
    dq = torch.zeros(*shape, 8, dtype=dtype, device=device)
    return dq + torch.eye(1, 8, dtype=dq.dtype, device=dq.device)[0]


def dq_from_rt(rotation: Tensor, translation: Tensor) -> Tensor:
    """Unit DQ ``(..., 8)`` of ``p -> R(rotation) p + translation``.

    rotation: ``(..., 4)`` unit quaternion; translation: ``(..., 3)``. Dual part
    ``d = 0.5 (0, t) r``.
    """
    pure = torch.cat((torch.zeros_like(translation[..., :1]), translation), dim=-1)  # (..., 4)
    dual = 0.5 * quat_mul(pure, rotation)  # (..., 4)
    real, dual = torch.broadcast_tensors(rotation, dual)
    return torch.cat((real, dual), dim=-1)


def dq_to_rt(dq: Tensor) -> tuple[Tensor, Tensor]:
    """Rotation quaternion ``(..., 4)`` and translation ``(..., 3)`` of a DQ ``(..., 8)``.

    ``t = 2 vec(d r*) / |r|^2`` and ``r / |r|``: exact for unit DQs; for a non-unit one it is the
    motion of its normalisation (:func:`dq_normalize`).
    """
    r, d = dq[..., :4], dq[..., 4:]
    sq = torch.clamp((r * r).sum(-1, keepdim=True), min=_EPS * _EPS)  # (..., 1)
    t = 2.0 * quat_mul(d, quat_conj(r))[..., 1:] / sq  # (..., 3)
    return quat_normalize(r), t


def dq_from_matrix(R: Tensor, t: Tensor) -> Tensor:
    """Unit DQ ``(..., 8)`` of ``p -> R p + t``; R: ``(..., 3, 3)`` rotation, t: ``(..., 3)``."""
    return dq_from_rt(matrix_to_quat(R), t)


def dq_mul(a: Tensor, b: Tensor) -> Tensor:
    """Product ``a b`` of ``(..., 8)`` DQs: the motion "first ``b``, then ``a``".

    ``(ar + eps ad)(br + eps bd) = ar br + eps (ar bd + ad br)``.
    """
    ar, ad = a[..., :4], a[..., 4:]
    br, bd = b[..., :4], b[..., 4:]
    return torch.cat((quat_mul(ar, br), quat_mul(ar, bd) + quat_mul(ad, br)), dim=-1)


def dq_conj(dq: Tensor) -> Tensor:
    """Quaternion conjugate of both parts, ``r* + eps d*``: the inverse motion of a unit DQ."""
    return torch.cat((quat_conj(dq[..., :4]), quat_conj(dq[..., 4:])), dim=-1)


def dq_normalize(dq: Tensor, eps: float = _EPS) -> Tensor:
    """Project ``(..., 8)`` DQs onto unit DQs: ``|r| = 1`` and ``r . d = 0``.

    Division by the dual norm ``|q| = |r| + eps (r . d) / |r|`` gives
    ``r' = r / |r|`` and ``d' = d / |r| - r' (r' . d / |r|)`` (Kavan et al. 2008, section 3).
    ``|r|`` is clamped at ``eps``.
    """
    r, d = dq[..., :4], dq[..., 4:]
    norm = _safe_norm(r, eps)  # (..., 1)
    r_unit = r / norm
    d_scaled = d / norm
    d_orth = d_scaled - (r_unit * d_scaled).sum(-1, keepdim=True) * r_unit
    return torch.cat((r_unit, d_orth), dim=-1)


def dq_apply(dq: Tensor, points: Tensor) -> Tensor:
    """Move ``points`` ``(..., 3)`` by unit DQs ``(..., 8)`` (leading dims broadcast).

    ``p' = R p + t`` with ``R p = r p r*`` and
    ``t = 2 vec(d r*) = 2 (r_w d_v - d_w r_v + r_v x d_v)``.
    The DQ is assumed to be unit (see :func:`dq_normalize`); nothing is renormalised here.
    """
    r, d = dq[..., :4], dq[..., 4:]
    rw, rv = r[..., :1], r[..., 1:]
    dw, dv = d[..., :1], d[..., 1:]
    translation = 2.0 * (rw * dv - dw * rv + _cross(rv, dv))  # (..., 3)
    return quat_apply(r, points) + translation


def dq_blend(dqs: Tensor, weights: Tensor) -> Tensor:
    """Dual-quaternion linear blending (DLB) of ``K`` DQs: ``(..., K, 8), (..., K) -> (..., 8)``.

    ``DLB(w; q_1..q_K) = b / |b|`` with ``b = sum_k w_k s_k q_k`` (Kavan, Collins, Zara,
    O'Sullivan, "Skinning with Dual Quaternions", I3D 2007, and ACM TOG 2008, eq. 4), normalised
    with :func:`dq_normalize`. ``q`` and ``-q`` are the same motion, so each DQ is first brought to
    the hemisphere of the heaviest-weighted one: ``s_k = sign(r_k . r_pivot)`` (``+1`` at 0).
    Weights should be non-negative and not all zero (they need not sum to one). The signs are
    piecewise constant, so the result is differentiable wherever no ``r_k . r_pivot`` is 0.
    """
    dqs, w8 = torch.broadcast_tensors(dqs, weights[..., None])
    w = w8[..., 0]  # (..., K)
    pivot_index = w.argmax(dim=-1, keepdim=True)  # (..., 1)
    index = pivot_index[..., None].expand(*pivot_index.shape, 4)  # (..., 1, 4)
    pivot = torch.gather(dqs[..., :4], -2, index)  # (..., 1, 4)
    dots = (dqs[..., :4] * pivot).sum(-1)  # (..., K)
    signed = torch.where(dots < 0, -w, w)  # (..., K)
    blended = (signed[..., None] * dqs).sum(-2)  # (..., 8)
    return dq_normalize(blended)


def dq_skin(
    motions: Tensor, index: Tensor, weights: Tensor, pivot: Tensor, points: Tensor
) -> Tensor:
    """Dual-quaternion skinning in one pass: ``dq_apply(dq_blend(motions[index], weights),
    points)`` with the hemisphere pivots known in advance.

    motions: (B, Q, 8) unit DQs of Q skinning points; index: (N, K) the skinning points of each
    of N points, weights (N, K) their weights; pivot: (N,) the skinning point each point's signs
    refer to (its heaviest-weighted one: weights are constant, so this is computed once);
    points: (N, 3). Returns (B, N, 3).

    The blended b = (r, d) is not normalised: for p' = R p + t with the unit DQ b / |b|,
    R p = ((w^2 - |v|^2) p + 2 (v . p) v + 2 w v x p) / |r|^2 with r = (w, v), and
    t = 2 vec(d' r'^*) = 2 (w d_v - d_w v + v x d_v) / |r|^2 (the part of d' along r' that
    normalisation removes has vec(r' r'^*) = 0, so it never moves a point). The same result
    as blending, normalising and applying wherever |r| >= eps (``tests/test_dualquat.py``), in
    a fraction of the elementwise passes over the points.
    """
    gathered = motions[:, index]  # (B, N, K, 8)
    pivots = motions[:, pivot]  # (B, N, 8)
    dots = (gathered[..., :4] @ pivots[..., :4, None])[..., 0]  # (B, N, K)
    signed = torch.where(dots < 0, -weights, weights)
    b = (signed[..., None, :] @ gathered)[..., 0, :]  # (B, N, 8)
    w, v, dw, dv = b[..., :1], b[..., 1:4], b[..., 4:5], b[..., 5:8]
    vv = (v * v).sum(-1, keepdim=True)
    norm2 = (w * w + vv).clamp(min=_EPS * _EPS)
    p = points.expand_as(v)
    rotated = (w * w - vv) * p + (2.0 * (v * p).sum(-1, keepdim=True)) * v
    rotated = rotated + (2.0 * w) * torch.linalg.cross(v, p)
    moved = rotated + 2.0 * (w * dv - dw * v + torch.linalg.cross(v, dv))
    return moved / norm2


def dq_from_raw(raw: Tensor) -> Tensor:
    """Unit DQ ``(..., 8)`` from an unconstrained ``(..., 8)`` network output.

    ``dq = normalize(identity + raw)``: a zero output is the identity motion, and small outputs are
    small motions (``raw[..., 1:4] ~ half the rotation vector``, ``raw[..., 5:8] ~ t / 2``).
    """
    return dq_normalize(raw + dq_identity(dtype=raw.dtype, device=raw.device))
