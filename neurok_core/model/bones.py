"""The part-aware decoder (design section 10): a few rigid bone motions blended onto the points.

The latent moves B bones, placed at farthest-point centres of the rest shape's samples, each by a
rigid motion about its own centre; every point's dual quaternion is the dual-quaternion linear
blend (DLB; Kavan, Collins, Zara, O'Sullivan, ACM TOG 2008) of the bone motions with skinning
weights that depend on the rest shape only:

    x' = DLB_b(w_pb; T(c_b) D_b(z) T(-c_b)) x_p,
    w_pb = softmax_b( -|x_p - c_b|^2 / (2 sigma^2) + phi(x_p)^T A phi(c_b) / sqrt(C) ),

with T(c) the translation by c, D_b(z) the bone's motion about its centre (the head of a bone
token: the centre's Fourier embedding cross-attending to the z-conditioned shape tokens, then
self-attention among the bones), sigma a learned width and phi the rest-shape features of a point
(its embedding cross-attending to E_cond's shape tokens, without z). The modulation A starts at
zero and the bone head too, so an untrained decoder is the identity with Gaussian weights. A
rigid part whose points all follow one bone moves rigidly by construction.

Shapes: B batch, P/Q points, T tokens, C width, nb bones.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from ..dualquat import dq_apply, dq_blend, dq_from_raw, dq_from_rt, dq_mul
from .config import ModelConfig
from .layers import CrossAttentionBlock, FourierEmbedding, LayerNorm, SelfAttentionBlock
from .networks import DeformationDecoder


def farthest_point_centers(points: Tensor, count: int) -> Tensor:
    """``count`` farthest-point samples of ``points`` (..., P, 3) -> (..., count, 3).

    Deterministic: the first centre is the point farthest from the points' mean, each next one
    the point farthest from the centres so far (first index on ties). No gradient flows.
    """
    if not 1 <= count <= points.shape[-2]:
        raise ValueError(f"cannot place {count} bones on {points.shape[-2]} points")
    with torch.no_grad():
        flat = points.detach().reshape(-1, *points.shape[-2:])  # (B, P, 3)
        rows = torch.arange(flat.shape[0], device=flat.device)
        start = ((flat - flat.mean(-2, keepdim=True)) ** 2).sum(-1).argmax(-1)  # (B,)
        chosen = [start]
        dist = ((flat - flat[rows, start][:, None]) ** 2).sum(-1)  # (B, P)
        for _ in range(count - 1):
            nxt = dist.argmax(-1)
            chosen.append(nxt)
            dist = torch.minimum(dist, ((flat - flat[rows, nxt][:, None]) ** 2).sum(-1))
        index = torch.stack(chosen, -1)  # (B, count)
        centers = flat[rows[:, None], index]  # (B, count, 3)
    return centers.reshape(*points.shape[:-2], count, 3)


def translation_dq(offset: Tensor) -> Tensor:
    """Unit DQ (..., 8) of ``p -> p + offset`` for offsets (..., 3)."""
    identity = torch.zeros(*offset.shape[:-1], 4, dtype=offset.dtype, device=offset.device)
    identity[..., 0] = 1.0
    return dq_from_rt(identity, offset)


def about_centers(motions: Tensor, centers: Tensor) -> Tensor:
    """World DQs ``T(c) D T(-c)`` (..., nb, 8) of motions D (..., nb, 8) about centres c
    (..., nb, 3): ``x -> R (x - c) + c + t``."""
    return dq_mul(dq_mul(translation_dq(centers), motions), translation_dq(-centers))


def part_inconsistency(weights: Tensor, parts: Tensor) -> Tensor:
    """How far the points of each labelled part are from sharing one weight vector, per shape:
    ``sum_p |w_p - mean_{q in part(p)} w_q|^2`` over the labelled points (parts >= 0), (B,).
    A part whose points share their weights moves by one blended rigid motion.
    weights: (B, P, nb); parts: (B, P) int64, -1 for unlabelled points."""
    labelled = parts >= 0  # (B, P)
    ids = torch.where(labelled, parts, 0)
    num = int(ids.max()) + 1 if ids.numel() else 1
    mask = labelled.to(weights.dtype)[..., None]  # (B, P, 1)
    onehot = torch.nn.functional.one_hot(ids, num).to(weights.dtype) * mask  # (B, P, G)
    sums = onehot.transpose(1, 2) @ weights  # (B, G, nb)
    counts = onehot.sum(1)[..., None].clamp_min(1.0)  # (B, G, 1)
    means = onehot @ (sums / counts)  # (B, P, nb): each point's part mean
    return (((weights - means) ** 2).sum(-1) * mask[..., 0]).sum(-1)


def bone_disagreement(bones: Tensor, points: Tensor, parts: Tensor, bone_parts: Tensor) -> Tensor:
    """How far the bones placed on each labelled rigid part are from moving it alike, per shape:

        sum_p 1/|B_g| sum_{b in B_g} |T_b x_p - mean_{b' in B_g} T_b' x_p|^2,  g = part(p),

    over the labelled points (parts >= 0), B_g the bones whose centre lies on part g. Zero iff
    the bones of every part apply one rigid motion to its points (then any blend of them moves
    the part rigidly); a part with one bone or none costs nothing.
    bones: (B, nb, 8) unit world DQs; points: (B, P, 3); parts: (B, P) int64, -1 for unlabelled
    points; bone_parts: (B, nb) int64, the part of each bone's centre (-1: none)."""
    moved = dq_apply(bones[:, None, :, :], points[:, :, None, :])  # (B, P, nb, 3)
    same = (parts[:, :, None] == bone_parts[:, None, :]) & (parts[:, :, None] >= 0)  # (B, P, nb)
    mask = same.to(points.dtype)
    count = mask.sum(-1).clamp_min(1.0)  # (B, P)
    mean = (moved * mask[..., None]).sum(-2) / count[..., None]  # (B, P, 3)
    spread = ((moved - mean[:, :, None, :]) ** 2).sum(-1)  # (B, P, nb)
    return ((spread * mask).sum(-1) / count).sum(-1)


def own_part_mask(point_islands: Tensor, bone_islands: Tensor) -> Tensor:
    """Which bones (..., Q, nb) bool each point may blend: those placed on its own loose part
    (island), or all of them where its part holds none. point_islands: (..., Q) int64;
    bone_islands: (..., nb) int64."""
    own = point_islands[..., :, None] == bone_islands[..., None, :]  # (..., Q, nb)
    return own | ~own.any(dim=-1, keepdim=True)


def skin_entropy(weights: Tensor) -> Tensor:
    """Entropy of skinning weights (..., Q, nb) summed over the points: (...)."""
    return -(weights * torch.log(weights.clamp_min(1e-12))).sum(dim=(-1, -2))


class SkinningWeights(nn.Module):
    """Rest-shape skinning weights over the bones (the module docstring's w_pb).

    points: (..., Q, 3), centers: (..., nb, 3), shape_tokens: (..., T, C) -> (..., Q, nb).
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        width = config.width
        self.embed = FourierEmbedding(num_frequencies=config.fourier_frequencies)
        self.proj = nn.Linear(self.embed.out_dim, width)
        self.cross = CrossAttentionBlock(
            width, width, heads=config.heads, dim_head=config.dim_head, ff_mult=config.ff_mult
        )
        self.norm = LayerNorm(width)
        self.to_point = nn.Linear(width, width, bias=False)
        self.to_bone = nn.Linear(width, width, bias=False)
        nn.init.zeros_(self.to_point.weight)  # no modulation at first: Gaussian weights
        self.log_sigma = nn.Parameter(torch.tensor(math.log(config.bone_sigma)))
        self.sigma_min = float(config.bone_sigma_min)

    @property
    def sigma(self) -> Tensor:
        """The Gaussian's width: ``sqrt(exp(2 s) + sigma_min^2)`` with the learned s."""
        if self.sigma_min == 0.0:
            return torch.exp(self.log_sigma)
        return torch.sqrt(torch.exp(2.0 * self.log_sigma) + self.sigma_min**2)

    def features(self, points: Tensor, shape_tokens: Tensor) -> Tensor:
        """phi: the rest-shape features (..., Q, C) of points (..., Q, 3)."""
        return self.norm(self.cross(self.proj(self.embed(points)), shape_tokens))

    def logits(self, points: Tensor, centers: Tensor, shape_tokens: Tensor) -> Tensor:
        """Unnormalised log-weights (..., Q, nb)."""
        near = ((points[..., :, None, :] - centers[..., None, :, :]) ** 2).sum(-1)  # (..., Q, nb)
        sigma2 = self.sigma**2 if self.sigma_min else torch.exp(2.0 * self.log_sigma)
        fp = self.to_point(self.features(points, shape_tokens))  # (..., Q, C)
        fb = self.to_bone(self.features(centers, shape_tokens))  # (..., nb, C)
        modulation = fp @ fb.transpose(-1, -2) / math.sqrt(fp.shape[-1])  # (..., Q, nb)
        return modulation - near / (2.0 * sigma2)

    def forward(
        self, points: Tensor, centers: Tensor, shape_tokens: Tensor, own: Tensor | None = None
    ) -> Tensor:
        """Weights (..., Q, nb); ``own`` (..., Q, nb) bool limits each point to those bones
        (:func:`own_part_mask`)."""
        logits = self.logits(points, centers, shape_tokens)
        if own is not None:
            logits = logits.masked_fill(~own, float("-inf"))
        return torch.softmax(logits, dim=-1)


class SkinnedDecoder(DeformationDecoder):
    """D of the part-aware space: ``(z, shape tokens, centres, query points) -> unit DQs``.

    The z-conditioned tokens are those of :class:`DeformationDecoder` (z added to every shape
    token, self-attention); its query embedding, cross-attention, norm and zero-initialised head
    now serve the bone tokens (queries at the bone centres), with ``bone_layers`` self-attention
    blocks among the bones before the head.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__(config)
        self.bone_layers = nn.ModuleList(
            SelfAttentionBlock(
                config.width, heads=config.heads, dim_head=config.dim_head, ff_mult=config.ff_mult
            )
            for _ in range(config.bone_layers)
        )
        self.skin = SkinningWeights(config)

    def bone_raw(self, tokens: Tensor, centers: Tensor) -> Tensor:
        """Raw bone outputs (..., nb, 8) (motions about the centres) from tokens (..., T, C)."""
        x = self.cross(self.query_proj(self.embed(centers)), tokens)  # (..., nb, C)
        for block in self.bone_layers:
            x = block(x)
        return self.head(self.norm_out(x))

    def bones(self, z: Tensor, shape_tokens: Tensor, centers: Tensor) -> Tensor:
        """World-frame unit DQs (..., nb, 8) of the bones in the state z (..., k)."""
        raw = self.bone_raw(self.tokens(z, shape_tokens), centers)
        return about_centers(dq_from_raw(raw), centers.expand(*raw.shape[:-1], 3))

    def weights(
        self, shape_tokens: Tensor, centers: Tensor, points: Tensor, own: Tensor | None = None
    ) -> Tensor:
        """Skinning weights (..., Q, nb) of points (..., Q, 3): rest shape only, no z; ``own``
        (..., Q, nb) bool: the bones each point may blend (None: all)."""
        return self.skin(points, centers, shape_tokens, own)

    def forward(  # type: ignore[override]
        self, z: Tensor, shape_tokens: Tensor, centers: Tensor, query_points: Tensor
    ) -> Tensor:
        bones = self.bones(z, shape_tokens, centers)  # (B, nb, 8)
        weights = self.weights(shape_tokens, centers, query_points)  # (B, Q, nb)
        return blend_bones(bones, weights)


def blend_bones(bones: Tensor, weights: Tensor) -> Tensor:
    """Per-point unit DQs (..., Q, 8): DLB of bones (..., nb, 8) with weights (..., Q, nb)."""
    return dq_blend(bones[..., None, :, :], weights)
