"""Shared test helpers."""

import importlib.util
import os
import sys
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


@pytest.fixture(autouse=True)
def _torch_threads():
    """Keep torch tests deterministic-ish and polite on a 2-core machine."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    yield
