"""``NeuROKModel``: the conditional VAE of method.md over per-point dual-quaternion deformations.

Shapes: B batch, P surface points, Q query points, T tokens, C width, k latent size. All points are
in the normalised frame of the rest shape (centred on its bounding-box centre, longest side 1).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from ..dualquat import dq_apply, dq_from_raw
from .bones import (
    SkinnedDecoder,
    blend_bones,
    bone_disagreement,
    farthest_point_centers,
    own_part_mask,
    part_inconsistency,
    skin_entropy,
)
from .config import LossConfig, ModelConfig
from .layers import gaussian_kl, reparameterize, standard_normal
from .losses import knn_indices, rigidity_error, squared_error_sum
from .networks import DeformationDecoder, PosteriorEncoder, ShapeCode, ShapeEncoder

DEFAULT_LOSS = LossConfig()


class NeuROKModel(nn.Module):
    """E_cond, E_VAE and D of NeuROK (Geng et al. 2026) with the training loss.

    - ``encode_shape(M0 points)`` -> :class:`ShapeCode` (tokens, mu_cond); prior N(mu_cond, I).
    - ``encode_posterior(M0 points, Mt points, code)`` -> (mu, logvar) of q(z | phi, M0).
    - ``decode(z, code, query points)`` -> unit dual quaternions (or displacements), and
      ``deform`` -> the deformed query points.

    ``forward`` is :meth:`loss`, so that ``DistributedDataParallel(model)(rest, deformed)`` works.
    Every method is differentiable in forward and reverse mode (``torch.func.jvp``/``jacfwd``
    through ``deform`` with respect to z, nested too: ``D^2F[v, v]`` by forward-over-forward).
    The model has no dropout or batch statistics, so train and eval mode compute the same thing.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.shape_encoder = ShapeEncoder(config)
        self.posterior_encoder = PosteriorEncoder(config)
        self.decoder = (
            SkinnedDecoder(config)
            if config.deformation == "skinned"
            else DeformationDecoder(config)
        )

    # ------------------------------------------------------------------ encoders
    @property
    def skinned(self) -> bool:
        """Whether the decoder blends bone motions (design section 10)."""
        return self.config.deformation == "skinned"

    def encode_shape(self, rest_points: Tensor) -> ShapeCode:
        """E_cond: rest_points (B, P, 3) -> ShapeCode(tokens (B, T, C), mu_cond (B, k)), with
        the bone centres (B, nb, 3) of a skinned decoder."""
        code = self.shape_encoder(rest_points)
        if self.skinned:
            code = code._replace(centers=farthest_point_centers(rest_points, self.config.bones))
        return code

    def encode_posterior(
        self, rest_points: Tensor, deformed_points: Tensor, shape: ShapeCode
    ) -> tuple[Tensor, Tensor]:
        """E_VAE: (B, P, 3) corresponding rest / deformed points -> mu, logvar, each (B, k)."""
        features = self.posterior_encoder(
            rest_points, deformed_points - rest_points, shape.tokens
        )  # (B, C)
        return self.posterior_encoder.bottleneck.distribution(features)

    # ------------------------------------------------------------------ decoder
    def decode(self, z: Tensor, shape: ShapeCode, query_points: Tensor) -> Tensor:
        """D: z (B, k), query_points (B, Q, 3) -> unit dual quaternions (B, Q, 8) mapping each
        query point to its deformed position, or displacements (B, Q, 3) in the ablation.

        Leading dims broadcast: a code with B = 1 decodes a batch of z.
        """
        if self.skinned:
            return self.decoder(z, shape.tokens, shape.centers, query_points)  # (B, Q, 8)
        raw = self.decoder(z, shape.tokens, query_points)  # (B, Q, output_dim)
        return dq_from_raw(raw) if self.config.deformation == "dualquat" else raw

    def bones(self, z: Tensor, shape: ShapeCode) -> Tensor:
        """A skinned decoder's world-frame bone motions (B, nb, 8) in the state z (B, k)."""
        return self.decoder.bones(z, shape.tokens, shape.centers)

    def skin_weights(
        self, shape: ShapeCode, query_points: Tensor, own: Tensor | None = None
    ) -> Tensor:
        """A skinned decoder's skinning weights (B, Q, nb) at query_points (B, Q, 3); ``own``
        (B, Q, nb) bool: the bones each point may blend (None: all)."""
        return self.decoder.weights(shape.tokens, shape.centers, query_points, own)

    def deform(self, z: Tensor, shape: ShapeCode, query_points: Tensor) -> Tensor:
        """Deformed positions (B, Q, 3) of ``query_points`` (B, Q, 3) in the state ``z`` (B, k)."""
        out = self.decode(z, shape, query_points)
        if self.config.rigid_motions:
            return dq_apply(out, query_points)
        return query_points + out

    # ------------------------------------------------------------------ prior
    def sample_prior(
        self, shape: ShapeCode, n: int, generator: torch.Generator | None = None
    ) -> Tensor:
        """``n`` latents per shape from p(z | M0) = N(mu_cond, I): (B, n, k)."""
        mu = shape.mu_cond  # (B, k)
        return mu[..., None, :] + standard_normal(mu, (*mu.shape[:-1], n, mu.shape[-1]), generator)

    # ------------------------------------------------------------------ training
    def loss(
        self,
        rest_points: Tensor,
        deformed_points: Tensor,
        *,
        neighbors: Tensor | None = None,
        parts: Tensor | None = None,
        islands: Tensor | None = None,
        sample: bool = True,
        generator: torch.Generator | None = None,
        loss_config: LossConfig = DEFAULT_LOSS,
    ) -> dict[str, Tensor]:
        """The CVAE loss on corresponding surface points of M0 and M_t.

        rest_points, deformed_points: (B, P, 3) (point p of M_t is where point p of M0 went).
        neighbors: (B, P, K) indices of each point's K nearest other rest points, for the
        rigidity term (computed here with ``torch.cdist`` + ``topk`` when None).
        parts: (B, P) int64 rigid part of each point (-1: none), for the skinned decoder's
        part-consistency and agreement terms (none when None).
        islands: (B, P) int64 loose part (connected faces) of each point: a skinned decoder's
        point then blends only the bones placed on its own loose part, as the kinematic space
        does at inference (None: all bones).
        sample: draw z from the posterior (training) or take its mean (validation).
        loss_config: the loss's weights and settings (a training run's own).

        With ``x_p`` the true and ``y_p = F(z)(x0_p)`` the predicted deformed points,
        ``z ~ q = N(mu_post, diag sigma^2)`` and the prior ``p = N(mu_cond, I)``::

            recon    = mean_b sum_p |y_p - x_p|^2
            rigidity = mean_b sum_p 1/K sum_{j in N(p)} |dq_p(x0_j) - x_j|^2  (dual quaternions)
            prior_rigidity = the same with x_j = dq'_j(x0_j), dq' = F(z') at z' ~ p (training only)
            kl       = mean_b 1/2 sum_j (sigma_j^2 + (mu_post_j - mu_cond_j)^2 - 1 - log sigma_j^2)
            entropy  = mean_b -sum_p sum_b w_pb log w_pb      (skinned decoder only)
            parts    = mean_b sum_p |w_p - mean_{part(p)} w|^2 (skinned, labelled points)
            agree    = mean_b bone_disagreement(bones(z)) (skinned, labelled points)
            prior_agree = the same at z' ~ p (training only)
            loss     = recon + rigidity_weight * rigidity + kl_weight * kl
                       + prior_rigidity_weight * prior_rigidity
                       + skin_entropy_weight * entropy + skin_part_weight * parts
                       + part_agreement_weight * agree + prior_agreement_weight * prior_agree

        The reconstruction is summed over the points (the squared 2-norm of the deformation
        field, as the paper writes it), not averaged: averaging made the posterior collapse.
        Returns a dict of scalars: ``loss``, ``recon``, ``rigidity``, ``prior_rigidity``, ``kl``,
        ``skin_entropy``, ``skin_parts``, ``agree``, ``prior_agree`` and ``rmse`` (root mean
        squared per-point error, for logging).
        """
        cfg, w = self.config, loss_config
        shape = self.encode_shape(rest_points)
        mu, logvar = self.encode_posterior(rest_points, deformed_points, shape)  # (B, k) each
        z = reparameterize(mu, logvar, generator=generator) if sample else mu  # (B, k)
        entropy = mu.new_zeros(())
        part_term = mu.new_zeros(())
        agree = mu.new_zeros(())
        prior_agree = mu.new_zeros(())
        if self.skinned:
            with torch.no_grad():  # each bone centre is one of the rest points
                centre_index = torch.cdist(shape.centers, rest_points).argmin(-1)  # (B, nb)
            own = None
            if islands is not None:
                own = own_part_mask(islands, torch.gather(islands, 1, centre_index))
            weights = self.skin_weights(shape, rest_points, own)  # (B, P, nb)
            entropy = skin_entropy(weights).mean()
            if parts is not None and w.skin_part_weight > 0:
                part_term = part_inconsistency(weights, parts).mean()
            bones = self.bones(z, shape)  # (B, nb, 8)
            out = blend_bones(bones, weights)  # (B, P, 8)
            if parts is not None:
                bone_parts = torch.gather(parts, 1, centre_index)  # (B, nb)
                if w.part_agreement_weight > 0:
                    agree = bone_disagreement(bones, rest_points, parts, bone_parts).mean()
                if sample and w.prior_agreement_weight > 0:
                    z_prior = shape.mu_cond + standard_normal(mu, mu.shape, generator)  # (B, k)
                    prior_bones = self.bones(z_prior, shape)  # (B, nb, 8)
                    prior_agree = bone_disagreement(
                        prior_bones, rest_points, parts, bone_parts
                    ).mean()
        else:
            out = self.decode(z, shape, rest_points)  # (B, P, 8) or (B, P, 3)
        if cfg.rigid_motions:
            predicted = dq_apply(out, rest_points)  # (B, P, 3)
        else:
            predicted = rest_points + out
        recon = squared_error_sum(predicted, deformed_points).mean()
        rigidity = recon.new_zeros(())
        if cfg.rigid_motions and w.rigidity_neighbors > 0:
            if neighbors is None:
                neighbors = knn_indices(rest_points, w.rigidity_neighbors)  # (B, P, K)
            rigidity = rigidity_error(out, rest_points, deformed_points, neighbors).mean()
        prior_rigidity = recon.new_zeros(())
        if sample and w.prior_rigidity_weight > 0:  # (dual quaternions: ModelConfig)
            # the field's own rigidity at a prior sample: its points' motions are the targets
            z_prior = shape.mu_cond + standard_normal(mu, mu.shape, generator)  # (B, k)
            if self.skinned:
                field = blend_bones(self.bones(z_prior, shape), weights)  # (B, P, 8)
            else:
                field = self.decode(z_prior, shape, rest_points)  # (B, P, 8)
            own = dq_apply(field, rest_points)  # (B, P, 3)
            if neighbors is None:
                neighbors = knn_indices(rest_points, w.rigidity_neighbors or 8)
            prior_rigidity = rigidity_error(
                field, rest_points, own, neighbors, robust=w.prior_rigidity_robust
            ).mean()
        kl = gaussian_kl(mu, logvar, shape.mu_cond).mean()
        total = (
            recon
            + w.rigidity_weight * rigidity
            + w.prior_rigidity_weight * prior_rigidity
            + w.kl_weight * kl
            + w.skin_entropy_weight * entropy
            + w.skin_part_weight * part_term
            + w.part_agreement_weight * agree
            + w.prior_agreement_weight * prior_agree
        )
        rmse = torch.sqrt(recon.detach() / rest_points.shape[-2])
        return {
            "loss": total,
            "recon": recon,
            "rigidity": rigidity,
            "prior_rigidity": prior_rigidity,
            "kl": kl,
            "skin_entropy": entropy,
            "skin_parts": part_term,
            "agree": agree,
            "prior_agree": prior_agree,
            "rmse": rmse,
        }

    def forward(self, rest_points: Tensor, deformed_points: Tensor, **kwargs) -> dict[str, Tensor]:
        """Same as :meth:`loss` (the entry point for ``DistributedDataParallel``)."""
        return self.loss(rest_points, deformed_points, **kwargs)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
