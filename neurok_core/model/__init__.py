"""The NeuROK networks: a conditional VAE of transformers over dual-quaternion deformations.

Public API: :class:`ModelConfig` (+ ``PRESETS``), :class:`LossConfig` (+ ``LOSS_PRESETS``),
:class:`NeuROKModel`, :class:`ShapeCode`, and :func:`build_model`.
"""

from .config import LOSS_PRESETS, PRESETS, LossConfig, ModelConfig
from .cvae import NeuROKModel
from .networks import ShapeCode


def build_model(config: ModelConfig | str = "default") -> NeuROKModel:
    """A freshly initialised :class:`NeuROKModel` from a config or a preset name."""
    if isinstance(config, str):
        config = ModelConfig.preset(config)
    return NeuROKModel(config)


__all__ = [
    "LOSS_PRESETS",
    "PRESETS",
    "LossConfig",
    "ModelConfig",
    "NeuROKModel",
    "ShapeCode",
    "build_model",
]
