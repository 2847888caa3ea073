"""Compute device selection: ``auto`` picks CUDA, then Apple MPS, then the CPU."""

from __future__ import annotations

from .errors import ConditionError

DEVICES = ("auto", "cpu", "cuda", "mps")


def select_device(name: str = "auto"):
    """Return a ``torch.device`` for ``name``; asking for a device that is absent is an error."""
    import torch

    name = (name or "auto").lower()
    if name.startswith("cuda:"):
        base = "cuda"
    else:
        base = name
    if base not in DEVICES:
        raise ConditionError(f"unknown device {name!r}: use one of {', '.join(DEVICES)}")
    if base == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if base == "cuda" and not torch.cuda.is_available():
        raise ConditionError("device 'cuda' was requested but no CUDA GPU is available; use 'auto'")
    if base == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ConditionError("device 'mps' was requested but Apple MPS is not available")
    return torch.device(name)


def describe_device(device) -> str:
    """A one-line description for status displays, e.g. ``cpu (2 threads)``."""
    import torch

    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    if device.type == "cpu":
        return f"cpu ({torch.get_num_threads()} threads)"
    return device.type
