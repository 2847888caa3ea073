"""Shared test helpers."""

import importlib.util
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def blender_ext_script() -> Path:
    """Blender's own extension tool (validate/build), shipped inside the bpy wheel."""
    spec = importlib.util.find_spec("bpy")
    if spec is None or spec.origin is None:
        pytest.skip("the bpy module (Blender) is not installed")
    base = Path(spec.origin).parent
    hits = sorted(base.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    assert hits, f"blender_ext.py not found under {base}"
    return hits[-1]


def pytest_configure(config):
    """One torch thread: the tests run small tensors, where a second OpenMP thread costs more
    than it gains (and thrashes badly when the machine is busy)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)
