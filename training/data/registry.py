"""The registry of data families: each family makes one random 4D sequence from a seed.

A family module registers its generator with ``@family(...)``; ``all_families()`` imports the
family modules and returns the registry. ``split`` is ``"train"`` for families used in training
and ``"unseen"`` for families held out to measure generalisation to unseen categories.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from neurok_core.sequence import Sequence4D

# Modules that define families; imported by all_families().
FAMILY_MODULES = (
    "training.data.articulated",
    "training.data.deformables",
)


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    split: str  # "train" (train/val) or "unseen" (held out from training)
    generate: Callable[[np.random.Generator, int], Sequence4D]  # (rng, frames) -> sequence
    description: str = ""


_REGISTRY: dict[str, Family] = {}


def family(name: str, *, category: str, split: str = "train", description: str = ""):
    """Decorator registering ``generate(rng, frames) -> Sequence4D`` as a data family."""
    if split not in ("train", "unseen"):
        raise ValueError(f"split must be 'train' or 'unseen', got {split!r}")

    def register(fn):
        if name in _REGISTRY and _REGISTRY[name].generate is not fn:
            raise ValueError(f"family {name!r} registered twice")
        _REGISTRY[name] = Family(name, category, split, fn, description or (fn.__doc__ or ""))
        return fn

    return register


def all_families() -> dict[str, Family]:
    """Import the family modules and return every registered family by name.

    A family module that does not exist (yet) is skipped; any other import error propagates.
    """
    for mod in FAMILY_MODULES:
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise
    return dict(sorted(_REGISTRY.items()))
