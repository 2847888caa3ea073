"""The `neurok` command line: simulate with the local model and with the exact decoder."""

import numpy as np
import torch
import trimesh

from neurok_core.checkpoint import save_checkpoint
from neurok_core.cli import main
from neurok_core.model import build_model
from neurok_core.pc2 import read_pc2
from neurok_core.results import load_result


def test_simulate_local_and_exact(tmp_path, capsys):
    torch.manual_seed(0)
    model = build_model("tiny")
    with torch.no_grad():  # a decoder that moves (a fresh one decodes to the identity)
        model.decoder.head.weight.normal_(0.0, 0.1)
    ckpt = save_checkpoint(model, tmp_path / "tiny")
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    common = [
        "simulate",
        str(tmp_path / "slab.obj"),
        "--checkpoint",
        str(ckpt),
        "--force",
        "0:0,0,1:1.0:0-3",
        "--frames",
        "6",
        "--no-gravity",
        "--quiet",
    ]
    assert main([*common, "--out", str(tmp_path / "local.npz")]) == 0
    assert main([*common, "--exact-kinematics", "--out", str(tmp_path / "exact.npz")]) == 0
    assert main([*common, "--out", str(tmp_path / "local.pc2")]) == 0
    local = load_result(tmp_path / "local.npz")
    exact = load_result(tmp_path / "exact.npz")
    assert local.positions.shape == (6, len(mesh.vertices), 3)
    assert local.info["expansions"] >= 1 and exact.info["expansions"] == 0
    motion = np.abs(exact.positions - exact.positions[0]).max()
    assert motion > 1e-3
    assert np.abs(local.positions - exact.positions).max() < 0.05 * motion + 1e-6
    np.testing.assert_allclose(read_pc2(tmp_path / "local.pc2").frames, local.positions, atol=1e-6)
