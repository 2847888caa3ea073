"""Second-order Taylor-mode ("jet") evaluation of the decoder: x(q), dx/dq and D^2x(q)[v, v].

The dynamics need, at every right-hand side, the tracked points x(q) (S, 3), their Jacobian
J = dx/dq (S, 3, kq) and the second directional derivative D^2x(q)[v, v] (S, 3) along v = q'
(design section 7). ``torch.func`` gives them exactly but costs tens of times a forward on the
CPU; here the same numbers come from one batched forward of plain tensor ops that propagates,
for every intermediate y(q),

    y,   dy/dq_i (i < kq),   D^2y[v, v]

(truncated Taylor arithmetic of order two; Griewank & Walther, "Evaluating Derivatives", 2nd ed.
2008, chapter 13), with Dy[v] = sum_i v_i dy/dq_i formed where a rule needs it. A :class:`Jet`
stacks them in one tensor of leading size kq + 2, so every linear layer is a single matmul over
value and derivatives together. The rules used:

- linear maps L: apply L to every slot (the bias to the value only);
- bilinear maps y = B(a, b) (products, matmuls, quaternion products):
  dy_i = B(da_i, b) + B(a, db_i),  D^2y = B(D^2a, b) + 2 B(Da[v], Db[v]) + B(a, D^2b);
- elementwise y = f(a): dy_i = f'(a) da_i,  D^2y = f''(a) Da[v]^2 + f'(a) D^2a;
- softmax s(a) over the last dim: ds = s (da - <s, da>), and with g = Da[v] - <s, Da[v]>,
  D^2s = s (g^2 - <s, g^2> + D^2a - <s, D^2a>).

Inputs that do not depend on q (query-point embeddings, shape tokens, rest inverses) stay plain
tensors and cost one ordinary forward. Everything runs under ``torch.no_grad``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from ..dualquat import _EPS, dq_apply, dq_identity, dq_mul
from .bones import SkinnedDecoder, about_centers
from .layers import Attention, CrossAttentionBlock, FeedForward, LayerNorm, SelfAttentionBlock
from .networks import DeformationDecoder

if TYPE_CHECKING:
    from ..space import KinematicSpace


class Jet:
    """A value with its first derivatives along kq coordinates and its second along directions.

    data: (kq + 1 + m, *shape): ``data[0]`` the value y, ``data[1 : kq + 1]`` dy/dq_i and
    ``data[kq + 1 :]`` D^2y[v_a, v_a] for the m directions v_a; v: (kq,) one direction (m = 1)
    or (m, kq) several (e.g. e_i and e_i + e_j, whose second derivatives give the whole Hessian
    by polarisation). Dy[v] is formed from the tangents where a nonlinear rule needs it (cheaper
    than carrying it through every matmul).
    """

    __slots__ = ("data", "v")

    def __init__(self, data: Tensor, v: Tensor) -> None:
        self.data = data
        self.v = v

    def like(self, data: Tensor) -> Jet:
        """A jet with the same directions v."""
        return Jet(data, self.v)

    @property
    def m(self) -> int:
        """Number of second-order directions."""
        return 1 if self.v.ndim == 1 else int(self.v.shape[0])

    @property
    def value(self) -> Tensor:
        return self.data[0]

    @property
    def tangents(self) -> Tensor:
        """(kq, *shape) dy/dq_i."""
        return self.data[1 : self.data.shape[0] - self.m]

    @property
    def dirs(self) -> Tensor:
        """(m, *shape) Dy[v_a] for every direction."""
        return _along(self.v.reshape(-1, self.v.shape[-1]), self.tangents)

    @property
    def seconds(self) -> Tensor:
        """(m, *shape) D^2y[v_a, v_a]."""
        return self.data[self.data.shape[0] - self.m :]

    @property
    def direction(self) -> Tensor:
        """Dy[v]: (*shape) for one direction v (kq,), (m, *shape) for v (m, kq)."""
        d = self.dirs
        return d[0] if self.v.ndim == 1 else d

    @property
    def second(self) -> Tensor:
        """D^2y[v, v]: (*shape) for one direction v (kq,), (m, *shape) for v (m, kq)."""
        return self.data[-1] if self.v.ndim == 1 else self.seconds


Value = Jet | Tensor


def _along(v: Tensor, tangents: Tensor) -> Tensor:
    """sum_i v_i tangents[i] as one matmul: v (kq,) -> (*shape); v (m, kq) -> (m, *shape)."""
    out = v @ tangents.reshape(tangents.shape[0], -1)
    return out.view(*v.shape[:-1], *tangents.shape[1:])


def affine_input(value: Tensor, basis: Tensor, v: Tensor) -> Jet:
    """The jet of y(q) = value + basis @ (q - q0) at q0, whose second derivative is zero.

    value: (n,); basis: (n, kq); v: (kq,) the direction of the second derivative, or (m, kq)
    several.
    """
    m = 1 if v.ndim == 1 else v.shape[0]
    zeros = value.new_zeros(m, value.shape[0])
    return Jet(torch.cat((value[None], basis.T, zeros)), v)


def structural(x: Value, fn: Callable[[Tensor], Tensor]) -> Value:
    """Apply a linear reshaping / slicing / scaling op (one that only uses negative dims) to a
    jet or a tensor."""
    return x.like(fn(x.data)) if isinstance(x, Jet) else fn(x)


def _lift(a: Jet, ndim: int) -> Jet:
    """``a`` with singleton dims after the slot dim so that its value has ``ndim`` dims
    (so it broadcasts like the value against operands of more dims)."""
    extra = ndim - a.value.ndim
    if extra <= 0:
        return a
    return a.like(a.data.reshape(a.data.shape[0], *([1] * extra), *a.value.shape))


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape two shapes broadcast to. (``torch.broadcast_shapes`` goes through PyTorch's
    reference implementations, whose first use imports sympy: about a second per process.)"""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b, strict=True):
        if x != y and 1 not in (x, y):
            raise ValueError(f"shapes {a} and {b} do not broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def add(a: Value, b: Value) -> Value:
    """a + b; a constant only shifts the value (broadcast like the tensors)."""
    if isinstance(a, Jet) and isinstance(b, Jet):
        return a.like(a.data + b.data)
    if isinstance(b, Jet):
        a, b = b, a
    if not isinstance(a, Jet):
        return a + b
    shape = _broadcast(a.value.shape, b.shape)
    out = _lift(a, len(shape)).data.expand(a.data.shape[0], *shape).clone()
    out[0].add_(b)
    return a.like(out)


def linear(x: Value, layer: nn.Linear) -> Value:
    """``layer(x)``: the weight on every slot, the bias on the value only."""
    if not isinstance(x, Jet):
        return layer(x)
    out = F.linear(x.data, layer.weight)  # (kq + 2, ..., out)
    if layer.bias is not None:
        out[0].add_(layer.bias)
    return x.like(out)


def bilinear(a: Value, b: Value, fn: Callable[[Tensor, Tensor], Tensor]) -> Value:
    """y = fn(a, b) for fn bilinear and broadcasting over leading dims (the module docstring's
    product rule). Either argument may be a constant tensor, making y linear in the other."""
    if not isinstance(a, Jet) and not isinstance(b, Jet):
        return fn(a, b)
    if not isinstance(b, Jet):
        return a.like(fn(_lift(a, b.ndim).data, b))
    if not isinstance(a, Jet):
        return b.like(fn(a, _lift(b, a.ndim).data))
    ndim = max(a.value.ndim, b.value.ndim)
    a, b = _lift(a, ndim), _lift(b, ndim)
    out = fn(a.data, b.value)  # (kq + 2, ...): value, da_i b, D^2a b
    out[1:].add_(fn(a.value, b.data[1:]))  # + a db_i, a D^2b
    out[-a.m :].add_(fn(a.dirs, b.dirs), alpha=2.0)
    return a.like(out)


def mul(a: Value, b: Value) -> Value:
    """Elementwise a * b (broadcasting)."""
    return bilinear(a, b, torch.mul)


def matmul(a: Value, b: Value) -> Value:
    """a @ b (batched, broadcasting)."""
    return bilinear(a, b, torch.matmul)


def square(a: Jet) -> Jet:
    """a * a elementwise: d(a^2) = 2 a da, D^2(a^2) = 2 a D^2a + 2 Da[v]^2."""
    out = 2.0 * a.value * a.data  # (kq + 2, ...)
    out[0] = a.value * a.value
    out[-a.m :].add_(2.0 * a.dirs.square())
    return a.like(out)


def pointwise(a: Jet, f0: Tensor, f1: Tensor, f2: Tensor) -> Jet:
    """y = f(a) elementwise, given f(a), f'(a) and f''(a) at the value (chain rule)."""
    out = a.data * f1  # (kq + 2, ...)
    out[0] = f0
    out[-a.m :].addcmul_(a.dirs.square_(), f2)
    return a.like(out)


def gelu(a: Value) -> Value:
    """Exact GELU f(x) = x Phi(x) (Hendrycks & Gimpel 2016), as ``nn.GELU()``:
    f' = Phi + x phi, f'' = phi (2 - x^2) with phi, Phi the standard normal pdf and cdf."""
    if not isinstance(a, Jet):
        return F.gelu(a)
    x = a.value  # (in-place steps below: each temporary costs as much as the arithmetic)
    cdf = torch.erf(x * (0.5**0.5)).add_(1.0).mul_(0.5)
    x2 = x * x
    pdf = torch.exp(x2 * -0.5).mul_((2.0 * math.pi) ** -0.5)
    f1 = torch.addcmul(cdf, x, pdf)
    return pointwise(a, x * cdf, f1, x2.neg_().add_(2.0).mul_(pdf))


def softmax(a: Value) -> Value:
    """Softmax over the last dim (see the module docstring for the derivative rules)."""
    if not isinstance(a, Jet):
        return torch.softmax(a, dim=-1)
    s = torch.softmax(a.value, dim=-1)  # (..., M)
    d = a.data[1:]  # (kq + 1, ..., M)
    out = torch.empty_like(a.data)
    out[0] = s
    centred = d - (s * d).sum(-1, keepdim=True)  # da - <s, da>
    torch.mul(centred, s, out=out[1:])
    kq = a.data.shape[0] - 1 - a.m
    g2 = _along(a.v.reshape(-1, kq), centred[:kq]).square_()  # (m, ...) g^2, g = Da[v] - <s, Da[v]>
    out[-a.m :].add_(g2.sub_((s * g2).sum(-1, keepdim=True)).mul_(s))
    return a.like(out)


# --------------------------------------------------------------------------------------------
# Transformer blocks (neurok_core.model.layers) on jets
# --------------------------------------------------------------------------------------------


def layer_norm(x: Value, norm: LayerNorm) -> Value:
    """:class:`LayerNorm`: ``y = c r * weight + bias`` with c = x - mean x, r = (var + eps)^-1/2,
    var = mean c^2 over the last dim. With m_s = mean(c_0 c_s) per slot (m_0 = var):
    dr_i = -r^3 m_i, D^2r = -r^3 (m_D2 + mean(Dc[v]^2)) + 3 r^5 (sum_i v_i m_i)^2, and
    dy_i = dc_i r + c dr_i, D^2y = D^2c r + 2 Dc[v] Dr[v] + c D^2r (product rule)."""
    if not isinstance(x, Jet):
        return norm(x)
    c = x.data - x.data.mean(-1, keepdim=True)  # (kq + 2, ..., C)
    c0 = c[0]
    m2, kq = x.m, x.data.shape[0] - 1 - x.m
    v = x.v.reshape(-1, kq)
    dcv = _along(v, c[1 : kq + 1])  # (m, ..., C) Dc[v]
    m = (c * c0).mean(-1, keepdim=True)  # (kq + 2, ..., 1)
    r = (m[0] + norm.eps).rsqrt()  # (..., 1)
    r3 = r * r * r
    dr = m[1:] * -r3  # (kq + 1, ..., 1): dr_i, and a first part of D^2r
    mv = _along(v, m[1 : kq + 1])  # (m, ..., 1) D var[v] / 2
    dr[-m2:].add_(3.0 * r3 * r * r * mv * mv - r3 * (dcv * dcv).mean(-1, keepdim=True))
    out = c * r  # (kq + 2, ..., C)
    out[1:].addcmul_(c0, dr)
    out[-m2:].addcmul_(dcv, mv * (-2.0 * r3))
    out *= norm.weight
    out[0].add_(norm.bias)
    return x.like(out)


def _split_heads(attn: Attention, t: Tensor) -> Tensor:
    return t.unflatten(-1, (attn.heads, -1)).transpose(-2, -3)  # (..., h, N, d)


def attend(attn: Attention, queries: Value, context: Value) -> Value:
    """:class:`Attention` ``softmax(Q K^T / sqrt(d)) V`` from the projected queries
    (..., h, N, d) and the context (..., M, context_dim), jets or constants."""
    kv = linear(context, attn.to_kv)
    k = structural(kv, lambda t: _split_heads(attn, t[..., : t.shape[-1] // 2]).mT)
    v = structural(kv, lambda t: _split_heads(attn, t[..., t.shape[-1] // 2 :]))  # (..., h, M, d)
    scores = structural(matmul(queries, k), lambda t: t * attn.scale)  # (..., h, N, M)
    out = matmul(softmax(scores), v)  # (..., h, N, d)
    out = structural(out, lambda t: t.transpose(-2, -3).flatten(-2))  # (..., N, h d)
    return linear(out, attn.to_out)


def attention(attn: Attention, x: Value, context: Value | None = None) -> Value:
    """:class:`Attention` with jets or constants (self-attention when context is None)."""
    queries = structural(linear(x, attn.to_q), lambda t: _split_heads(attn, t))
    return attend(attn, queries, x if context is None else context)


def feed_forward(ff: FeedForward, x: Value) -> Value:
    """:class:`FeedForward` ``Linear -> GELU -> Linear``."""
    first, act, second = ff.net
    if not isinstance(act, nn.GELU) or act.approximate != "none":
        raise TypeError(f"jets support the exact GELU feed-forward only, got {act!r}")
    return linear(gelu(linear(x, first)), second)


def self_block(block: SelfAttentionBlock, x: Value) -> Value:
    """:class:`SelfAttentionBlock`: ``x += Attn(LN x); x += FF(LN x)``."""
    x = add(x, attention(block.attn, layer_norm(x, block.norm_attn)))
    return add(x, feed_forward(block.ff, layer_norm(x, block.norm_ff)))


def cross_block(
    block: CrossAttentionBlock, x: Value, context: Value, *, queries: Tensor | None = None
) -> Value:
    """:class:`CrossAttentionBlock`: ``x += Attn(LN x, LN c); x += FF(LN x)``. ``queries``: the
    attention's projected queries of a constant x, when already known (:func:`field_queries`)."""
    context = layer_norm(context, block.norm_context)
    if queries is None:
        attended = attention(block.attn, layer_norm(x, block.norm_query), context)
    else:
        attended = attend(block.attn, queries, context)
    x = add(x, attended)
    return add(x, feed_forward(block.ff, layer_norm(x, block.norm_ff)))


def decoder_tokens(decoder: DeformationDecoder, z: Jet, shape_tokens: Tensor) -> Jet:
    """:meth:`DeformationDecoder.tokens` on jets: z (k,) jet, shape_tokens (T, C) -> (T, C)."""
    h = add(linear(z, decoder.z_proj), shape_tokens)  # (T, C): z added to every token
    for block in decoder.layers:
        h = self_block(block, h)
    return layer_norm(h, decoder.norm_tokens)


def field_queries(decoder: DeformationDecoder, points: Tensor) -> tuple[Tensor, Tensor]:
    """What the field computes from the query points alone: the embedded queries (Q, C) and
    their projected attention queries (h, Q, d)."""
    x = decoder.query_proj(decoder.embed(points))  # (Q, C)
    cross = decoder.cross
    return x, _split_heads(cross.attn, cross.attn.to_q(cross.norm_query(x)))


def decoder_field(
    decoder: DeformationDecoder, tokens: Jet, embedded: Tensor, queries: Tensor
) -> Jet:
    """:meth:`DeformationDecoder.field` on jets from :func:`field_queries`' constants:
    tokens (T, C) jet -> raw output (Q, output_dim) jet."""
    x = cross_block(decoder.cross, embedded, tokens, queries=queries)  # (Q, C)
    return linear(layer_norm(x, decoder.norm_out), decoder.head)


def bone_field(decoder: SkinnedDecoder, tokens: Jet, embedded: Tensor, queries: Tensor) -> Jet:
    """:meth:`SkinnedDecoder.bone_raw` on jets from :func:`field_queries`' constants at the bone
    centres: tokens (T, C) jet -> raw bone output (nb, 8) jet."""
    x = cross_block(decoder.cross, embedded, tokens, queries=queries)  # (nb, C)
    for block in decoder.bone_layers:
        x = self_block(block, x)
    return linear(layer_norm(x, decoder.norm_out), decoder.head)


def bone_world_maps(centers: Tensor, rest_inverse: Tensor) -> Tensor:
    """The constant linear maps A (nb, 8, 8), row convention ``n @ A_b``, that take a bone's
    motion about its centre n to its corrected world motion ``T(c) n T(-c) B_b(z_rest)^-1``
    (dual-quaternion products by constants are linear). centers: (nb, 3); rest_inverse: (nb, 8)."""
    eye = torch.eye(8, dtype=centers.dtype, device=centers.device)  # rows e_j
    images = dq_mul(about_centers(eye[:, None], centers[None]), rest_inverse[None])  # (8, nb, 8)
    return images.transpose(0, 1).contiguous()  # (nb, 8 in, 8 out)


def blend_bone_jets(bones: Jet, weights: Tensor, pivot: Tensor) -> Jet:
    """:func:`bones.blend_bones` on jets: DLB of bone DQs (nb, 8) with constant weights (S, nb),
    each bone brought to the hemisphere of the point's pivot bone (its heaviest; the signs are
    piecewise constant, so they come from the value), then normalised -> (S, 8)."""
    real = bones.value[:, :4]  # (nb, 4)
    dots = real[pivot] @ real.T  # (S, nb)
    signed = torch.where(dots < 0, -weights, weights)
    return dq_normalize(structural(bones, lambda t: signed @ t))


# --------------------------------------------------------------------------------------------
# Dual quaternions (neurok_core.dualquat) on jets
# --------------------------------------------------------------------------------------------


def dq_normalize(dq: Jet) -> Jet:
    """``r' = r / |r|``, ``d' = d / |r| - r' (r' . d / |r|)`` (as :func:`dualquat.dq_normalize`,
    with |r| clamped at its eps: the derivatives vanish where the clamp is active)."""
    r = structural(dq, lambda t: t[..., :4])  # (..., 4)
    d = structural(dq, lambda t: t[..., 4:])
    sq = dq.like(square(r).data.sum(-1, keepdim=True))  # (..., 1) |r|^2
    active = sq.value > _EPS * _EPS
    u = sq.value.clamp(min=_EPS * _EPS)
    inv = u.rsqrt()  # 1 / |r|
    zero = torch.zeros_like(inv)
    inv_jet = pointwise(
        sq,
        inv,
        torch.where(active, -0.5 * inv / u, zero),
        torch.where(active, 0.75 * inv / u / u, zero),
    )
    r_unit = mul(r, inv_jet)
    d_scaled = mul(d, inv_jet)
    dot = structural(mul(r_unit, d_scaled), lambda t: t.sum(-1, keepdim=True))  # (..., 1)
    d_orth = add(d_scaled, structural(mul(dot, r_unit), torch.neg))
    return dq.like(torch.cat((r_unit.data, d_orth.data), dim=-1))


def dq_from_raw(raw: Jet) -> Jet:
    """:func:`dualquat.dq_from_raw`: normalize(identity + raw)."""
    return dq_normalize(add(raw, dq_identity(dtype=raw.data.dtype, device=raw.data.device)))


def motion_quadratic_form(points: Tensor, rest_inverse: Tensor) -> Tensor:
    """The symmetric B (Q, 3, 8, 8) with ``dq_apply(dq_mul(n, rest_inverse), p) = p + n^T B n``.

    For constant points and rest inverses the moved point is a homogeneous quadratic form of
    the (unit) DQ n: ``dq_mul(., rest_inverse)`` is linear and ``dq_apply(m, p) - p =
    2 w (v x p) + 2 v x (v x p) + 2 (r_w d_v - d_w r_v + r_v x d_v)`` is quadratic in m = (r, d)
    (:func:`dualquat.dq_apply`). B is read off by polarisation, exactly:
    ``B_jk = (f(e_j + e_k) - f(e_j) - f(e_k)) / 2`` with f(n) = n^T B n.
    points: (Q, 3); rest_inverse: (Q, 8).
    """
    eye = torch.eye(8, dtype=points.dtype, device=points.device)

    def form(n: Tensor) -> Tensor:
        return dq_apply(dq_mul(n[..., None, :], rest_inverse), points) - points

    single = form(eye)  # (8, Q, 3) f(e_j)
    pairs = form(eye[:, None] + eye[None])  # (8, 8, Q, 3) f(e_j + e_k)
    B = 0.5 * (pairs - single[:, None] - single[None])  # (8, 8, Q, 3)
    B = 0.5 * (B + B.transpose(0, 1))  # symmetric to the last bit (the rules rely on it)
    return B.permute(2, 3, 0, 1).contiguous()  # (Q, 3, 8, 8)


def quadratic(n: Jet, form: Tensor) -> Jet:
    """y_c = n^T B_c n for a jet n (..., 8) and symmetric constant B (..., 3, 8, 8):
    dy = 2 n^T B dn, D^2y = 2 n^T B D^2n + 2 Dn[v]^T B Dn[v]."""
    bn = (form @ n.value[..., None, :, None])[..., 0]  # (..., 3, 8) B n
    out = 2.0 * (n.data[..., None, :] * bn).sum(-1)  # (kq + 2, ..., 3)
    out[0].mul_(0.5)
    dn = n.dirs  # (m, ..., 8)
    out[-n.m :].add_(2.0 * (dn[..., None, :] * (form @ dn[..., None, :, None])[..., 0]).sum(-1))
    return n.like(out)


# --------------------------------------------------------------------------------------------
# The kinematic space's tracked points
# --------------------------------------------------------------------------------------------


class DecoderKinematics:
    """x(q), J = dx/dq and D^2x(q)[q', q'] of fixed tracked points, world units (metres).

    x(q) = invert(deform_points(z_rest + W q, points, rest_inverse)) as in
    :meth:`KinematicSpace.deform_points`: the decoder, the rest correction
    D(z) o D(z_rest)^-1 (or + the rest displacement) and the normalisation
    x_world = x_n / scale + center (so J and D^2x are divided by scale).
    What does not depend on q (the embedded queries, the motion's quadratic form) is computed
    once here; the model must not change afterwards.
    space: the kinematic space; points: (S, 3) normalised; rest_inverse: (S, 8) or (S, 3).
    Calling it with q, qdot (kq,) (the space's dtype and device) returns x (S, 3),
    J (S, 3, kq) and D^2x[q', q'] (S, 3) in the space's dtype: the ``kinematics`` hook of
    :class:`~neurok_core.dynamics.MechanicalSystem`.
    directions: optional (k, m) latent directions of the coordinates, z = z_rest + directions q,
    instead of the space's W (e.g. the identity for the Jacobian with respect to the whole
    latent); the pass carries one tangent per direction, so its cost grows with m.
    """

    def __init__(
        self,
        space: KinematicSpace,
        points: Tensor,
        rest_inverse: Tensor,
        *,
        directions: Tensor | None = None,
    ) -> None:
        self.space = space
        self.points, self.rest_inverse = points, rest_inverse
        self.directions = space.W if directions is None else directions  # (k, kq)
        decoder = space.model.decoder
        norm = space.normalization
        center = points.new_tensor(norm.center.tolist())
        with torch.no_grad():
            if space.skinned:  # the network runs at the bones; the points only blend them
                centers = space.shape.centers[0]  # (nb, 3)
                self.embedded, self.queries = field_queries(decoder, centers)  # (nb, C), ...
                self.bone_maps = bone_world_maps(centers, space.bone_rest_inverse)
                self.weights, self.pivot = rest_inverse, rest_inverse.argmax(-1)  # (S, nb), (S,)
                identity = torch.zeros_like(points[:, :1]).expand(-1, 8).clone()
                identity[:, 0] = 1.0
                self.form = motion_quadratic_form(points, identity) / norm.scale
                self.offset = points / norm.scale + center  # (S, 3) world
            elif space.dualquat:
                self.embedded, self.queries = field_queries(decoder, points)  # (S, C), (h, S, d)
                self.form = motion_quadratic_form(points, rest_inverse) / norm.scale
                self.offset = points / norm.scale + center  # (S, 3) world
            else:
                self.embedded, self.queries = field_queries(decoder, points)
                self.form = None
                self.offset = (points + rest_inverse) / norm.scale + center

    has_hessian = True  # (dynamics.system.HessianKinematics)

    def restricted(self, basis: Tensor) -> DecoderKinematics:
        """The same points in the coordinates r of q = basis @ r; basis (kq, r) of this
        object's coordinates (e.g. without the directions that barely move the object): r
        tangents, not kq."""
        return DecoderKinematics(
            self.space, self.points, self.rest_inverse, directions=self.directions @ basis
        )

    def __call__(self, q: Tensor, qdot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        kq = self.directions.shape[1]
        if tuple(q.shape) != (kq,) or tuple(qdot.shape) != (kq,):
            raise ValueError(
                f"q and qdot must be ({kq},), got {tuple(q.shape)} and {tuple(qdot.shape)}"
            )
        return self._pass(q, qdot)

    def hessian(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x (S, 3), J (S, 3, kq) and the Hessian H (S, 3, kq, kq) = d^2x/dq_i dq_j at q, from
        one pass with the kq (kq + 1) / 2 second-order directions e_i and e_i + e_j:
        H_ii = D^2x[e_i, e_i], H_ij = (D^2x[e_i + e_j] - D^2x[e_i] - D^2x[e_j]) / 2."""
        kq = self.directions.shape[1]
        if tuple(q.shape) != (kq,):
            raise ValueError(f"q must be ({kq},), got {tuple(q.shape)}")
        iu, ju = torch.triu_indices(kq, kq, offset=1, device=q.device)
        x, jac, sec = self._pass(q, self._hessian_directions(q))  # sec: (m, S, 3)
        diag = sec[:kq]  # (kq, S, 3)
        hess = x.new_zeros(kq, kq, *x.shape)
        hess[torch.arange(kq), torch.arange(kq)] = diag
        off = 0.5 * (sec[kq:] - diag[iu] - diag[ju])
        hess[iu, ju] = off
        hess[ju, iu] = off
        return x, jac, hess.permute(2, 3, 0, 1)  # (S, 3, kq, kq)

    @staticmethod
    def _hessian_directions(q: Tensor) -> Tensor:
        """(kq + kq (kq - 1) / 2, kq): e_i, then e_i + e_j for i < j."""
        kq = q.shape[0]
        eye = torch.eye(kq, dtype=q.dtype, device=q.device)
        iu, ju = torch.triu_indices(kq, kq, offset=1, device=q.device)
        return torch.cat((eye, eye[iu] + eye[ju]))

    def _to_world(self, t: Tensor) -> Tensor:
        """Bone DQs about their centres (..., nb, 8) -> corrected world motions (row maps)."""
        return (t[..., None, :] @ self.bone_maps)[..., 0, :]

    def hessian_tokens(self, q: Tensor) -> Tensor:
        """The first part of :meth:`hessian`'s pass alone: the latent tokens' jets (T, C),
        which do not depend on the tracked points (what that part costs)."""
        with torch.no_grad():
            return self._tokens(q, self._hessian_directions(q)).data

    def _tokens(self, q: Tensor, v: Tensor) -> Jet:
        space = self.space
        z = affine_input(space.z_rest + self.directions @ q, self.directions, v)  # (k,) jet
        return decoder_tokens(space.model.decoder, z, space.shape.tokens[0])  # (T, C)

    def _pass(self, q: Tensor, v: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        space, decoder = self.space, self.space.model.decoder
        with torch.no_grad():
            tokens = self._tokens(q, v)
            if space.skinned:
                raw = bone_field(decoder, tokens, self.embedded, self.queries)  # (nb, 8)
                bones = structural(dq_from_raw(raw), self._to_world)  # (nb, 8) world
                moved = quadratic(blend_bone_jets(bones, self.weights, self.pivot), self.form)
                return moved.value + self.offset, moved.tangents.permute(1, 2, 0), moved.second
            raw = decoder_field(decoder, tokens, self.embedded, self.queries)  # (S, 8 | 3)
            if self.form is not None:
                moved = quadratic(dq_from_raw(raw), self.form)  # (S, 3), world units
            else:
                moved = structural(raw, lambda t: t / space.normalization.scale)
            x = moved.value + self.offset  # (S, 3)
            return x, moved.tangents.permute(1, 2, 0), moved.second  # J: (S, 3, kq)
