"""``ModelConfig``: the architecture of the NeuROK CVAE; ``LossConfig``: how it is trained.

The model config is stored in every checkpoint (``to_dict``) and alone rebuilds the model
(``from_dict``), as nanoGPT's ``GPTConfig`` does. The loss settings are the training's: a
training run records them in the checkpoint's training section. Both have named presets.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

DEFORMATIONS = ("dualquat", "displacement", "skinned")


def _check_non_negative(owner: str, name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{owner}.{name} must be a finite number >= 0, got {value!r}")
    if value < 0:
        raise ValueError(f"{owner}.{name} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Architecture of E_cond, E_VAE and D (method.md "Model").

    width: token / feature width C of every transformer block.
    heads: attention heads; ``width`` must be divisible by it (head size = width // heads).
    num_latents: T, learnable latent tokens of the shape encoder (the shape code is (T, C)).
    encoder_layers: self-attention blocks after the cross-attention in each encoder.
    decoder_layers: self-attention blocks over the shape tokens (+ z) in the decoder.
    latent_dim: k, the size of the VAE latent z.
    fourier_frequencies: F, octaves of the positional embedding (frequencies 2^i pi, i < F).
    ff_mult: hidden width of the feed-forward layers as a multiple of ``width``.
    num_points: P, surface points per shape in training (and the default sample count).
    deformation: ``"skinned"`` (the part-aware space of design section 10: ``bones`` rigid
        motions blended onto the points by rest-shape skinning weights), ``"dualquat"`` (a
        per-point rigid motion field, the paper's decoder) or ``"displacement"`` (per-point
        offset, the "no dual quaternions" ablation).
    bones: B, the skinned decoder's bones, at farthest-point centres of the rest samples.
    bone_layers: self-attention blocks among the bone tokens (skinned).
    bone_sigma: initial width (normalised units) of the Gaussian proximity term of the
        skinning weights; it is learned.
    bone_sigma_min: a floor under that width, ``sigma^2 = exp(2 s) + sigma_min^2`` with the
        learned s: the blend between neighbouring bones stays smooth (0: no floor).
    """

    width: int = 96
    heads: int = 4
    num_latents: int = 16
    encoder_layers: int = 2
    decoder_layers: int = 4
    latent_dim: int = 16
    fourier_frequencies: int = 6
    ff_mult: int = 4
    num_points: int = 384
    deformation: str = "dualquat"
    bones: int = 32
    bone_layers: int = 1
    bone_sigma: float = 0.08
    bone_sigma_min: float = 0.0

    def __post_init__(self) -> None:
        positive = (
            "width",
            "heads",
            "num_latents",
            "latent_dim",
            "fourier_frequencies",
            "ff_mult",
            "num_points",
            "bones",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        for name in ("encoder_layers", "decoder_layers", "bone_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(
                    f"ModelConfig.{name} must be a non-negative integer, got {value!r}"
                )
        if self.width % self.heads:
            raise ValueError(
                f"ModelConfig.width ({self.width}) must be divisible by heads ({self.heads})"
            )
        if self.deformation not in DEFORMATIONS:
            raise ValueError(
                f"ModelConfig.deformation must be one of {DEFORMATIONS}, got {self.deformation!r}"
            )
        for name in ("bone_sigma", "bone_sigma_min"):
            _check_non_negative("ModelConfig", name, getattr(self, name))
        if not self.bone_sigma > 0:
            raise ValueError(f"ModelConfig.bone_sigma must be > 0, got {self.bone_sigma!r}")
        if self.deformation == "skinned" and self.bones > self.num_points:
            raise ValueError(
                f"ModelConfig.bones ({self.bones}) must not exceed num_points ({self.num_points})"
            )

    @property
    def dim_head(self) -> int:
        return self.width // self.heads

    @property
    def rigid_motions(self) -> bool:
        """Whether the decoder gives each point a rigid motion (a unit dual quaternion)."""
        return self.deformation in ("dualquat", "skinned")

    @property
    def output_dim(self) -> int:
        """Channels of the decoder's per-point output: 8 (dual quaternion) or 3 (displacement)."""
        return 8 if self.rigid_motions else 3

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """The named preset (``"tiny"``, ``"default"``) with optional field overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown model preset {name!r}; choose one of {sorted(PRESETS)}")
        return dataclasses.replace(PRESETS[name], **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error (missing ones take defaults).
        The loss settings older checkpoints kept here (``LOSS_KEYS``) are left out."""
        if not isinstance(data, dict):
            raise ValueError(f"a model config must be a dict, got {type(data).__name__}")
        data = {k: v for k, v in data.items() if k not in LOSS_KEYS}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"unknown model config keys {unknown}; known keys are {sorted(known)} "
                "(was this written by a newer version of NeuROK?)"
            )
        return cls(**data)


PRESETS: dict[str, ModelConfig] = {
    # For tests: a few tens of thousands of parameters, milliseconds per step.
    "tiny": ModelConfig(
        width=24,
        heads=2,
        num_latents=8,
        encoder_layers=1,
        decoder_layers=1,
        latent_dim=8,
        fourier_frequencies=4,
        ff_mult=2,
        num_points=128,
        bones=8,
    ),
    # Trainable on a 2-core CPU in about an hour (see training/benchmarks/bench_model.py).
    "default": ModelConfig(),
    # The part-aware kinematic space (design section 10) at the default width.
    # Bones of one labelled rigid part agree (posterior and prior samples); blends stay wide.
    "skinned": ModelConfig(deformation="skinned", bone_sigma_min=0.05),
}


@dataclass(frozen=True, kw_only=True)
class LossConfig:
    """The weights and settings of the CVAE loss (``NeuROKModel.loss``): training only.

    kl_weight: lambda of the loss (0.01 in the paper).
    rigidity_neighbors: K nearest rest-shape neighbours each point's dual quaternion must also
        carry onto their deformed positions (0 disables the rigidity term).
    rigidity_weight: weight of that term relative to the reconstruction.
    skin_entropy_weight: weight of the skinning weights' entropy summed over the points (a
        sharpness term: 0 leaves the blend as wide as the data asks).
    skin_part_weight: weight of the part-consistency term: the points of one labelled rigid part
        should share one weight vector, so that the part moves by one blended rigid motion
        (rigid by construction); training pairs without labels do not take it.
    part_agreement_weight: weight of the bones' agreement inside each labelled rigid part at
        the posterior latent: every bone placed on a part, applied to the part's points, should
        move them as the part's other bones do (a part whose bones agree moves rigidly under
        any blend of them). Training pairs without labels do not take it.
    prior_agreement_weight: the same agreement at a latent drawn from the prior, where the
        dynamics move: the whole high-density region keeps labelled parts rigid while leaving
        them free to move as wholes (bones only, no reconstruction target).
    prior_rigidity_weight: weight of the same local rigidity measured on the decoder's own
        field at a latent drawn from the prior (no data: each point's rigid motion should carry
        its neighbours where their own motions take them), so that the whole high-density
        region, where the dynamics move, decodes to locally rigid, uncrumpled shapes and not
        only the latents of training frames (0: off). Dual
        quaternions only. The sample's mean, mu_cond, takes this term's gradient too, so it
        may also move the prior toward latents that decode rigidly (the KL term holds it to
        the posteriors). Kept, off, as a lever measured in ``docs/experiments/`` (parts stay
        more rigid but hardly move at this training budget).
    prior_rigidity_robust: 0: that term sums squared misfits d^2; c > 0: it sums the
        Charbonnier penalty sqrt(d^2 + c^2) - c (c in normalised units), which grows like |d|
        beyond c, so that a few neighbour pairs bent far apart (across a hinge or a crease) cost
        little against many slightly crumpled ones: it asks for piecewise rigid fields rather
        than for little motion.
    """

    kl_weight: float = 0.01
    rigidity_neighbors: int = 8
    rigidity_weight: float = 1.0
    prior_rigidity_weight: float = 0.0
    prior_rigidity_robust: float = 0.0
    skin_entropy_weight: float = 0.0
    skin_part_weight: float = 0.0
    part_agreement_weight: float = 0.0
    prior_agreement_weight: float = 0.0

    def __post_init__(self) -> None:
        n = self.rigidity_neighbors
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError(
                f"LossConfig.rigidity_neighbors must be a non-negative integer, got {n!r}"
            )
        for f in dataclasses.fields(self):
            if f.name != "rigidity_neighbors":
                _check_non_negative("LossConfig", f.name, getattr(self, f.name))

    def check(self, model: ModelConfig) -> None:
        """Refuse settings this model cannot be trained with (ValueError)."""
        if self.prior_rigidity_weight > 0 and not model.rigid_motions:
            raise ValueError("LossConfig.prior_rigidity_weight needs dual quaternions")
        if self.rigidity_neighbors >= model.num_points:
            raise ValueError(
                f"LossConfig.rigidity_neighbors ({self.rigidity_neighbors}) must be smaller "
                f"than the model's num_points ({model.num_points})"
            )
        if self.prior_rigidity_weight > 0 and model.num_points <= 8 and not self.rigidity_neighbors:
            raise ValueError("LossConfig.prior_rigidity_weight needs more than 8 points")

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> LossConfig:
        """The loss of the named model preset with optional field overrides."""
        if name not in LOSS_PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(LOSS_PRESETS)}")
        return dataclasses.replace(LOSS_PRESETS[name], **overrides)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LossConfig:
        """Inverse of :meth:`to_dict`, also from an older checkpoint's model config (its loss
        keys are taken, the others ignored)."""
        return cls(**{k: v for k, v in data.items() if k in LOSS_KEYS})


LOSS_KEYS = frozenset(f.name for f in dataclasses.fields(LossConfig))

LOSS_PRESETS: dict[str, LossConfig] = {
    "tiny": LossConfig(rigidity_neighbors=4),
    "default": LossConfig(),
    # Bones of one labelled rigid part agree (posterior and prior samples).
    "skinned": LossConfig(part_agreement_weight=1.0, prior_agreement_weight=1.0),
}
