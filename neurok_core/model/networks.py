"""The three transformers of NeuROK (method.md "Model"): E_cond, E_VAE and D.

All points live in the normalised frame of the rest shape (centred on its bounding-box centre,
longest side 1). Shapes: B batch, P surface points, Q query points, T latent tokens, C width,
k latent size. The leading batch dims of the shape tokens, z and the query points broadcast
against each other, so one shape code (B = 1) can decode a batch of latents.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from .config import ModelConfig
from .layers import (
    CrossAttentionBlock,
    FourierEmbedding,
    KLBottleneck,
    LayerNorm,
    SelfAttentionBlock,
)


class ShapeCode(NamedTuple):
    """What E_cond extracts from a rest shape M0.

    tokens: (B, T, C) shape tokens that condition E_VAE and D.
    mu_cond: (B, k) mean of the prior p(z | M0) = N(mu_cond, I).
    centers: (B, nb, 3) the bone centres of a skinned decoder (farthest-point samples of the
        rest points), None otherwise.
    """

    tokens: Tensor
    mu_cond: Tensor
    centers: Tensor | None = None


def _blocks(config: ModelConfig, count: int) -> nn.ModuleList:
    return nn.ModuleList(
        SelfAttentionBlock(
            config.width, heads=config.heads, dim_head=config.dim_head, ff_mult=config.ff_mult
        )
        for _ in range(count)
    )


def _cross(config: ModelConfig) -> CrossAttentionBlock:
    return CrossAttentionBlock(
        config.width,
        config.width,
        heads=config.heads,
        dim_head=config.dim_head,
        ff_mult=config.ff_mult,
    )


class ShapeEncoder(nn.Module):
    """E_cond: a Perceiver over rest-shape surface points -> :class:`ShapeCode`.

    T learnable latent tokens cross-attend to the Fourier-embedded points, then
    ``encoder_layers`` self-attention blocks refine them; ``mu_cond`` is a linear read-out of the
    mean token. rest_points: (B, P, 3) -> tokens (B, T, C), mu_cond (B, k).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed = FourierEmbedding(num_frequencies=config.fourier_frequencies)
        self.point_proj = nn.Linear(self.embed.out_dim, config.width)
        self.latents = nn.Parameter(0.02 * torch.randn(config.num_latents, config.width))
        self.cross = _cross(config)
        self.layers = _blocks(config, config.encoder_layers)
        self.norm = LayerNorm(config.width)
        self.to_mu_cond = nn.Linear(config.width, config.latent_dim)

    def forward(self, rest_points: Tensor) -> ShapeCode:
        context = self.point_proj(self.embed(rest_points))  # (B, P, C)
        x = self.cross(self.latents.expand(*context.shape[:-2], -1, -1), context)  # (B, T, C)
        for block in self.layers:
            x = block(x)
        tokens = self.norm(x)  # (B, T, C)
        return ShapeCode(tokens=tokens, mu_cond=self.to_mu_cond(tokens.mean(dim=-2)))


class PosteriorEncoder(nn.Module):
    """E_VAE: a Perceiver over the points and their deformation -> features of q(z | phi, M0).

    Per-point input ``[gamma(x0), gamma(x0 + phi), phi]`` (gamma = Fourier embedding). The queries
    are the shape tokens plus a learned offset (so the posterior is conditioned on M0); after the
    cross-attention and ``encoder_layers`` self-attention blocks the mean token feeds a
    :class:`KLBottleneck`.
    rest_points, deformation: (B, P, 3); shape_tokens: (B, T, C) -> features (B, C).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed = FourierEmbedding(num_frequencies=config.fourier_frequencies)
        self.point_proj = nn.Linear(2 * self.embed.out_dim + 3, config.width)
        self.query_offset = nn.Parameter(torch.zeros(config.num_latents, config.width))
        self.cross = _cross(config)
        self.layers = _blocks(config, config.encoder_layers)
        self.norm = LayerNorm(config.width)
        self.bottleneck = KLBottleneck(config.width, config.latent_dim)

    def forward(self, rest_points: Tensor, deformation: Tensor, shape_tokens: Tensor) -> Tensor:
        features = torch.cat(
            (self.embed(rest_points), self.embed(rest_points + deformation), deformation), dim=-1
        )  # (B, P, 2 (3 + 6F) + 3)
        context = self.point_proj(features)  # (B, P, C)
        x = self.cross(shape_tokens + self.query_offset, context)  # (B, T, C)
        for block in self.layers:
            x = block(x)
        return self.norm(x).mean(dim=-2)  # (B, C)


class DeformationDecoder(nn.Module):
    """D: ``(z, shape tokens, query points) -> raw per-point deformation``.

    ``h = tokens + Linear(z)`` (z added to every shape token), ``decoder_layers`` self-attention
    blocks over h, then each Fourier-embedded query point cross-attends to h independently of the
    other queries (so any point set can be queried) and a linear head gives ``output_dim``
    channels: 8 for a raw dual quaternion (see ``dualquat.dq_from_raw``) or 3 for a displacement.
    The head starts at zero, so an untrained decoder outputs the identity deformation.
    z: (B, k); shape_tokens: (B, T, C); query_points: (B, Q, 3) -> (B, Q, output_dim).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.z_proj = nn.Linear(config.latent_dim, config.width)
        self.layers = _blocks(config, config.decoder_layers)
        self.norm_tokens = LayerNorm(config.width)
        self.embed = FourierEmbedding(num_frequencies=config.fourier_frequencies)
        self.query_proj = nn.Linear(self.embed.out_dim, config.width)
        self.cross = _cross(config)
        self.norm_out = LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.output_dim)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def tokens(self, z: Tensor, shape_tokens: Tensor) -> Tensor:
        """The latent-conditioned tokens (B, T, C) that every query point attends to."""
        h = shape_tokens + self.z_proj(z)[..., None, :]  # (B, T, C)
        for block in self.layers:
            h = block(h)
        return self.norm_tokens(h)

    def field(self, tokens: Tensor, query_points: Tensor) -> Tensor:
        """Raw per-point output (B, Q, output_dim) at ``query_points`` (B, Q, 3)."""
        x = self.query_proj(self.embed(query_points))  # (B, Q, C)
        x = self.cross(x, tokens)  # (B, Q, C)
        return self.head(self.norm_out(x))

    def forward(self, z: Tensor, shape_tokens: Tensor, query_points: Tensor) -> Tensor:
        return self.field(self.tokens(z, shape_tokens), query_points)
