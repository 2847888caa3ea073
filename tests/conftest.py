"""Shared test helpers."""

import importlib.util
import os
from pathlib import Path

import pytest

# Helper modules with asserts, rewritten like the tests' own (before any test imports them).
pytest.register_assert_rewrite("bounds", "dynamics_systems")

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


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
    """A tiny, randomly initialised checkpoint whose decoder moves things (Blender tests)."""
    torch = pytest.importorskip("torch")
    from neurok_core.checkpoint import save_checkpoint
    from neurok_core.model import build_model

    torch.manual_seed(0)
    model = build_model("tiny")
    with torch.no_grad():  # a decoder that moves (a fresh one decodes to the identity)
        model.decoder.head.weight.normal_(0.0, 0.1)
    return save_checkpoint(model, tmp_path_factory.mktemp("checkpoint") / "tiny")


@pytest.fixture(scope="session")
def tiny_skinned_checkpoint(tmp_path_factory):
    """A tiny, randomly initialised checkpoint of the skinned decoder (bones) whose bones move
    (a fresh one decodes to the identity): rig tests."""
    torch = pytest.importorskip("torch")
    from neurok_core.checkpoint import save_checkpoint
    from neurok_core.model import NeuROKModel
    from neurok_core.model.config import ModelConfig

    torch.manual_seed(0)
    model = NeuROKModel(ModelConfig.preset("tiny", deformation="skinned"))
    with torch.no_grad():
        model.decoder.head.weight.normal_(0.0, 0.2)
        model.decoder.head.bias.normal_(0.0, 0.05)
        model.decoder.skin.to_point.weight.normal_(0.0, 0.5)
    return save_checkpoint(model, tmp_path_factory.mktemp("checkpoint") / "tiny_skinned")


@pytest.fixture(scope="session")
def tiny_slab_space():
    """The kinematic space of a subdivided 0.4 x 0.2 x 0.05 m slab under a tiny float64 model
    with random weights whose decoder moves things (pin clamp and local-model tests)."""
    torch = pytest.importorskip("torch")
    import numpy as np
    import trimesh

    from neurok_core.model import build_model
    from neurok_core.space import SpaceSettings, build_space

    torch.manual_seed(0)
    model = build_model("tiny").double()
    with torch.no_grad():  # a fresh decoder decodes to the identity
        model.decoder.head.weight.normal_(0.0, 0.1)
        model.decoder.head.bias.normal_(0.0, 0.02)
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide().subdivide()
    settings = SpaceSettings(
        dynamics_points=64, skinning_points=256, subspace_samples=16, rest_steps=40
    )
    return build_space(
        model.eval(), np.asarray(mesh.vertices), np.asarray(mesh.faces), settings=settings
    )


def flag_mesh(width: float = 0.42, height: float = 0.27, edge: float = 0.03):
    """A flag: a sheet in the XZ plane (x along its width, z up), about ``edge`` m between
    vertices. Returns (vertices (N, 3), faces (F, 3), its pole edge's vertices (x = 0), its
    free bottom corner's vertex)."""
    import numpy as np

    cols, rows = round(width / edge) + 1, round(height / edge) + 1
    x, z = np.meshgrid(np.linspace(0, width, cols), np.linspace(0, height, rows))
    vertices = np.stack([x.ravel(), np.zeros(x.size), z.ravel()], 1)
    idx = np.arange(rows * cols).reshape(rows, cols)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:]
    faces = np.concatenate([np.stack([a, c, b], 1), np.stack([a, d.ravel(), c], 1)])
    return vertices, faces, idx[:, 0].copy(), int(idx[0, -1])
