"""Small reusable transformer blocks of the NeuROK networks (in the style of perceiver-pytorch and
3DShape2VecSet).

Attention is written with plain matmul + softmax on purpose: PyTorch's fused scaled-dot-product
attention kernel on the CPU has no forward-mode AD, and the dynamics differentiate the decoder with
``torch.func.jvp`` / ``jacfwd`` (design section 7). Every block accepts any leading dims, and the
leading dims of queries and context broadcast against each other (one shape code can serve a batch
of latents).
"""

from __future__ import annotations

import math

import torch
import torch.autograd.forward_ad as fwAD
from torch import Tensor, nn


class FourierEmbedding(nn.Module):
    """Positional embedding of 3D points, ``(..., 3) -> (..., 3 + 6 F)``.

    ``gamma(p) = [p, sin(2^0 pi p), ..., sin(2^(F-1) pi p), cos(2^0 pi p), ..., cos(2^(F-1) pi p)]``
    (per coordinate), as in 3DShape2VecSet (Zhang et al., SIGGRAPH 2023) and NeRF.
    """

    def __init__(self, *, num_frequencies: int) -> None:
        super().__init__()
        frequencies = (2.0 ** torch.arange(num_frequencies)) * math.pi
        # Derived from the config, so not part of the checkpoint.
        self.register_buffer("frequencies", frequencies, persistent=False)
        self.out_dim = 3 * (1 + 2 * num_frequencies)

    def forward(self, points: Tensor) -> Tensor:
        scaled = (points[..., None] * self.frequencies).flatten(-2)  # (..., 3F)
        return torch.cat((points, torch.sin(scaled), torch.cos(scaled)), dim=-1)


def _forward_ad_active(*tensors: Tensor) -> bool:
    """Whether any tensor carries a forward-mode tangent or is inside a ``torch.func`` transform.

    ``torch.func`` wraps the tensors it traces; where that check is unavailable (its module is
    private), assume a transform may be active so the exact path is taken.
    """
    is_wrapped = getattr(getattr(torch._C, "_functorch", None), "is_functorch_wrapped_tensor", None)
    for t in tensors:
        if is_wrapped is None or is_wrapped(t) or fwAD.unpack_dual(t).tangent is not None:
            return True
    return False


class LayerNorm(nn.Module):
    """Layer normalisation over the last dim, ``(x - mean) / sqrt(var + eps) * weight + bias``.

    PyTorch's fused layer-norm kernel returns wrong second-order forward-mode derivatives (nested
    ``torch.func.jvp``; pytorch/pytorch issue 196700), and the dynamics need exactly those
    (``D^2F[v, v]``). So whenever forward-mode AD or a ``torch.func`` transform is active the norm
    is written with elementary ops, whose derivatives of every order are right; otherwise (training,
    reverse-mode inference) the fused kernel is used, which makes a training step about 25% faster.
    Both compute the same function. Same parameters and state-dict keys as ``nn.LayerNorm``.
    """

    def __init__(self, dim: int, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor) -> Tensor:
        if not _forward_ad_active(x, self.weight, self.bias):
            return nn.functional.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)
        centred = x - x.mean(dim=-1, keepdim=True)
        variance = (centred * centred).mean(dim=-1, keepdim=True)
        return centred * torch.rsqrt(variance + self.eps) * self.weight + self.bias


class Attention(nn.Module):
    """Multi-head attention ``softmax(Q K^T / sqrt(d)) V`` (Vaswani et al. 2017).

    Self-attention when ``context`` is omitted, cross-attention otherwise.
    x: (..., N, query_dim); context: (..., M, context_dim) -> (..., N, query_dim).
    """

    def __init__(
        self, query_dim: int, context_dim: int | None = None, *, heads: int, dim_head: int
    ) -> None:
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head**-0.5
        self.to_q = nn.Linear(query_dim, inner, bias=False)
        self.to_kv = nn.Linear(context_dim or query_dim, 2 * inner, bias=False)
        self.to_out = nn.Linear(inner, query_dim)

    def _split(self, x: Tensor) -> Tensor:
        return x.unflatten(-1, (self.heads, -1)).transpose(-2, -3)  # (..., h, N, d)

    def forward(self, x: Tensor, context: Tensor | None = None) -> Tensor:
        context = x if context is None else context
        q = self._split(self.to_q(x))  # (..., h, N, d)
        k, v = (self._split(t) for t in self.to_kv(context).chunk(2, dim=-1))  # (..., h, M, d)
        weights = torch.softmax((q @ k.transpose(-1, -2)) * self.scale, dim=-1)  # (..., h, N, M)
        out = (weights @ v).transpose(-2, -3).flatten(-2)  # (..., N, h d)
        return self.to_out(out)


class FeedForward(nn.Module):
    """Position-wise MLP ``Linear -> GELU -> Linear``, (..., dim) -> (..., dim)."""

    def __init__(self, dim: int, *, mult: int = 4) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim, mult * dim), nn.GELU(), nn.Linear(mult * dim, dim))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class SelfAttentionBlock(nn.Module):
    """Pre-norm residual block ``x += Attn(LN x); x += FF(LN x)``, (..., N, dim) -> same."""

    def __init__(self, dim: int, *, heads: int, dim_head: int, ff_mult: int) -> None:
        super().__init__()
        self.norm_attn = LayerNorm(dim)
        self.attn = Attention(dim, heads=heads, dim_head=dim_head)
        self.norm_ff = LayerNorm(dim)
        self.ff = FeedForward(dim, mult=ff_mult)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm_attn(x))
        return x + self.ff(self.norm_ff(x))


class CrossAttentionBlock(nn.Module):
    """Pre-norm residual cross-attention ``x += Attn(LN x, LN c); x += FF(LN x)``.

    x: (..., N, query_dim); context: (..., M, context_dim) -> (..., N, query_dim).
    """

    def __init__(
        self, query_dim: int, context_dim: int, *, heads: int, dim_head: int, ff_mult: int
    ) -> None:
        super().__init__()
        self.norm_query = LayerNorm(query_dim)
        self.norm_context = LayerNorm(context_dim)
        self.attn = Attention(query_dim, context_dim, heads=heads, dim_head=dim_head)
        self.norm_ff = LayerNorm(query_dim)
        self.ff = FeedForward(query_dim, mult=ff_mult)

    def forward(self, x: Tensor, context: Tensor) -> Tensor:
        x = x + self.attn(self.norm_query(x), self.norm_context(context))
        return x + self.ff(self.norm_ff(x))


def gaussian_kl(mu: Tensor, logvar: Tensor, prior_mean: Tensor | None = None) -> Tensor:
    """``KL(N(mu, diag exp(logvar)) || N(prior_mean, I))``, summed over k: (..., k) -> (...).

    ``KL = 1/2 sum_j (sigma_j^2 + (mu_j - m_j)^2 - 1 - log sigma_j^2)`` (Kingma & Welling 2014,
    appendix B, with a shifted prior mean ``m``; ``m = 0`` when ``prior_mean`` is None).
    """
    diff = mu if prior_mean is None else mu - prior_mean
    return 0.5 * (logvar.exp() + diff * diff - 1.0 - logvar).sum(-1)


def reparameterize(
    mu: Tensor, logvar: Tensor, *, generator: torch.Generator | None = None
) -> Tensor:
    """A sample ``z = mu + exp(logvar / 2) * eps``, ``eps ~ N(0, I)``, (..., k) -> (..., k).

    The noise is drawn on the generator's device (if given) and moved to ``mu``'s.
    """
    return mu + torch.exp(0.5 * logvar) * standard_normal(mu, mu.shape, generator)


def standard_normal(
    like: Tensor, shape: tuple[int, ...] | torch.Size, generator: torch.Generator | None = None
) -> Tensor:
    """``N(0, I)`` noise of ``shape`` with ``like``'s dtype and device, drawn with ``generator``
    on the generator's own device (so a CPU generator also seeds GPU models)."""
    device = like.device if generator is None else generator.device
    eps = torch.randn(shape, dtype=like.dtype, device=device, generator=generator)
    return eps.to(like.device)


class KLBottleneck(nn.Module):
    """Diagonal-Gaussian bottleneck: features (..., in_dim) -> ``(z, kl)``, z: (..., k), kl: (...).

    ``mu, logvar = Linear(features)``; ``z`` is a reparameterised sample (or ``mu`` when
    ``sample`` is false) and ``kl`` is :func:`gaussian_kl` against ``N(prior_mean, I)``.
    ``logvar`` is clamped to [-20, 10] so an untrained or diverging encoder cannot overflow exp.
    """

    def __init__(self, in_dim: int, latent_dim: int) -> None:
        super().__init__()
        self.to_params = nn.Linear(in_dim, 2 * latent_dim)

    def distribution(self, features: Tensor) -> tuple[Tensor, Tensor]:
        """``(mu, logvar)``, each (..., k)."""
        mu, logvar = self.to_params(features).chunk(2, dim=-1)
        return mu, torch.clamp(logvar, -20.0, 10.0)

    def forward(
        self,
        features: Tensor,
        prior_mean: Tensor | None = None,
        *,
        sample: bool = True,
        generator: torch.Generator | None = None,
    ) -> tuple[Tensor, Tensor]:
        mu, logvar = self.distribution(features)
        z = reparameterize(mu, logvar, generator=generator) if sample else mu
        return z, gaussian_kl(mu, logvar, prior_mean)
