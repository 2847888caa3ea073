"""The `neurok` command line: simulate with the local model and with the exact decoder."""

import numpy as np
import pytest
import torch
import trimesh
from conftest import flag_mesh

from neurok_core.checkpoint import save_checkpoint
from neurok_core.cli import main
from neurok_core.model import build_model
from neurok_core.pc2 import read_pc2
from neurok_core.results import load_result
from neurok_core.rig import BoneRig


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
        "--dynamics",
        "latent",  # the learned space's local model and its exact decoder
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


def test_simulate_writes_a_rig_with_a_model_with_bones(tmp_path, tiny_skinned_checkpoint, capsys):
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    common = ["simulate", str(tmp_path / "slab.obj"), "--checkpoint", str(tiny_skinned_checkpoint)]
    common += ["--dynamics", "latent"]  # the model's own bones
    common += ["--force", "0:0,0,1:1.0:0-3", "--frames", "5", "--no-gravity", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "anim.npz")]) == 0
    assert main([*common, "--out", str(tmp_path / "rig.json")]) == 0
    assert "a rig of" in capsys.readouterr().out
    result = load_result(tmp_path / "anim.npz")
    rig = BoneRig.load_json(tmp_path / "rig.json")
    vertices = result.positions[0].astype(np.float64)
    assert np.abs(result.positions[-1] - vertices).max() > 1e-4  # it moved
    for t in range(5):  # the JSON rig plays the .npz result's vertices back
        np.testing.assert_allclose(rig.skin(vertices, t), result.positions[t], atol=1e-4)
    np.testing.assert_allclose(result.rig.translations, rig.translations, atol=1e-8)


def test_a_rig_from_a_model_without_bones_is_refused(tmp_path, tiny_checkpoint, capsys):
    trimesh.creation.box().export(tmp_path / "box.obj")
    code = main(
        ["simulate", str(tmp_path / "box.obj"), "--checkpoint", str(tiny_checkpoint)]
        + ["--dynamics", "latent", "--frames", "3", "--quiet", "--out", str(tmp_path / "rig.json")]
    )
    assert code == 2 and "needs a model with bones" in capsys.readouterr().err
    assert not (tmp_path / "rig.json").exists()


BAD_SIMULATE = [
    (["--force", "0:0,0,1:abc"], "--force strength (newtons): expected a number, got 'abc'"),
    (["--force", "0:0,0,1:5:x-y"], "--force start frame (START-END): expected a whole number"),
    (["--drag", "0:0,0,1:z"], "--drag frame: expected a whole number, got 'z'"),
    (["--pin", "abc"], "--pin (vertex indices V1,V2,...): expected a whole number, got 'abc'"),
    (["--force", "-1:0,0,1:5"], "vertex must be >= 0, got -1"),  # not taken for an option
    (["--frames", "-5"], "frames must be between 1 and 100000, got -5"),
    (["--frames", "0"], "frames must be between 1 and 100000, got 0"),
]


def test_simulate_refuses_bad_arguments_with_messages(tmp_path):
    """Each bad argument gives one line naming it (no traceback), before any work: the mesh
    file does not even exist here, and the checkpoint is never loaded."""
    import subprocess
    import sys

    mesh = trimesh.creation.box()
    mesh.export(tmp_path / "box.obj")
    base = [sys.executable, "-m", "neurok_core.cli", "simulate", str(tmp_path / "box.obj")]
    cases = [(extra + ["--out", str(tmp_path / "a.npz")], want) for extra, want in BAD_SIMULATE]
    cases += [
        (["--out", str(tmp_path / "missing" / "a.npz")], "does not exist; create it"),
        (["--out", str(tmp_path / "a.txt")], "must end in .npz or .pc2 or .json, not .txt"),
    ]
    for extra, want in cases:
        proc = subprocess.run(base + extra, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (extra, proc.stderr)
        assert want in proc.stderr and "Traceback" not in proc.stderr, (extra, proc.stderr)
    assert not (tmp_path / "missing").exists() and not (tmp_path / "a.txt").exists()


def test_ik_checks_its_output_before_fitting(tmp_path, capsys):
    mesh = trimesh.creation.box()
    mesh.export(tmp_path / "box.obj")
    box = str(tmp_path / "box.obj")
    # a checkpoint that does not exist: the output is refused before it would be loaded
    for out, want in (
        (tmp_path / "missing" / "fit.obj", "does not exist"),
        (tmp_path / "fit.xyz", "must end in .obj"),
    ):
        args = ["ik", box, box, "--out", str(out), "--checkpoint", str(tmp_path / "none")]
        assert main(args) == 2
        assert want in capsys.readouterr().err


def test_point_clouds_and_truncated_weights_say_what_is_wrong(tmp_path, capsys):
    import shutil

    from neurok_core.api import default_checkpoint

    cloud = tmp_path / "points.ply"
    cloud.write_text(
        "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\nproperty float y\n"
        "property float z\nend_header\n0 0 0\n1 0 0\n0 1 0\n"
    )
    assert main(["simulate", str(cloud), "--out", str(tmp_path / "a.npz")]) == 2
    assert "3 vertices but no faces" in capsys.readouterr().err
    broken = tmp_path / "broken"
    shutil.copytree(default_checkpoint(), broken)
    with open(broken / "model.safetensors", "r+b") as fh:
        fh.truncate(1000)
    assert main(["info", "--checkpoint", str(broken)]) == 2
    assert "does not match the checksum" in capsys.readouterr().err
    assert main(["info"]) == 0  # the intact bundled one is described


def test_simulate_in_the_rig_space_needs_no_model(tmp_path, capsys, monkeypatch):
    """The rig space, the default (``--dynamics rig`` says it again), loads no checkpoint (a
    missing one is never read, and loading any model fails here) and writes a result whose rig
    (linear blend) plays its vertices back, and the rig alone as JSON."""
    from neurok_core.api import NeuROK

    def load(*args, **kwargs):
        raise AssertionError("a rig-space run loaded a model")

    monkeypatch.setattr(NeuROK, "load", classmethod(load))
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    common = ["simulate", str(tmp_path / "slab.obj")]
    common += ["--checkpoint", str(tmp_path / "missing"), "--force", "0:0,0,1:20.0:0-3"]
    common += ["--frames", "5", "--no-gravity", "--quiet"]
    assert main([*common, "--out", str(tmp_path / "anim.npz")]) == 0
    assert main([*common, "--dynamics", "rig", "--out", str(tmp_path / "rig.json")]) == 0
    assert main([*common, "--out", str(tmp_path / "anim.pc2")]) == 0
    out = capsys.readouterr().out
    assert out.count("rig space of 1 bones") == 3 and "warning" not in out
    result = load_result(tmp_path / "anim.npz")
    rig = BoneRig.load_json(tmp_path / "rig.json")
    assert rig.blend == "lbs" and result.info["dynamics"] == "rig"
    rest = result.positions[0].astype(np.float64)
    assert np.abs(result.positions[-1] - rest).max() > 1e-3  # it moved
    for t in range(5):
        np.testing.assert_allclose(rig.skin(rest, t), result.positions[t], atol=1e-5)
    np.testing.assert_allclose(read_pc2(tmp_path / "anim.pc2").frames, result.positions, atol=1e-6)
    assert result.info["edge_strain_max"] < 1e-6 and result.info["penetration_max"] == 0.0
    assert result.info["integration"] == "complete"


def test_refusals_come_before_the_model_is_loaded(tmp_path, capsys, monkeypatch):
    """Everything the mesh and the arguments decide is refused, with the dynamics' own message,
    before ``NeuROK.load``: the loader raises here, and a run in the learned space that passes
    every check reaches it (so the spy is on the path). The loads beyond the learned space's
    reach are its own refusals: asked for explicitly, as the loading is."""
    from neurok_core.api import NeuROK

    class Loaded(Exception):
        pass

    def load(*args, **kwargs):
        raise Loaded

    monkeypatch.setattr(NeuROK, "load", classmethod(load))
    ball = trimesh.creation.icosphere(subdivisions=2, radius=0.1)
    ball.export(tmp_path / "ball.obj")
    bad = tmp_path / "nan.obj"
    bad.write_text("v 0 0 0\nv 1 0 0\nv nan 1 0\nf 1 2 3\n")
    loose = tmp_path / "loose.obj"
    loose.write_text((tmp_path / "ball.obj").read_text() + "v 5 5 5\n")
    n = len(ball.vertices)
    cases = [
        ([], "--force 0:0,0,1:1e3", "lower their total strength below"),  # 4.3 sizes a frame
        ([], "--ground 0", "the object starts 0.1 m inside the ground"),
        ([], "--velocity 0:100,0,0", "an initial velocity of 100 m/s"),
        ([], f"--force {n}:0,0,1:1", f"but the mesh has {n} vertices"),
        ([], "--stiffness nan", "stiffness (Hz) must be finite"),
        ([], "--pin-below nan", "--pin-below: expected a finite height"),
        ([], f"--pin 0-{n - 1}", "expected a whole number"),
        ([str(bad)], "", "NaN or infinite coordinates"),
        ([str(loose)], f"--force {n}:0,0,1:1", f"force on vertex {n}, which no face uses"),
    ]
    for mesh, extra, want in cases:
        args = ["simulate", *(mesh or [str(tmp_path / "ball.obj")]), "--dynamics", "latent"]
        args += extra.split()
        assert main([*args, "--frames", "4", "--quiet", "--out", str(tmp_path / "a.pc2")]) == 2
        err = capsys.readouterr().err
        assert want in err and len(err.strip().splitlines()) == 1, (extra, err)
    # the rig space, the default, refuses the same (but the learned space's reach) before its
    # space is built
    import neurok_core.rigspace.simulate

    def build_rig_space(*args, **kwargs):
        raise AssertionError("the rig space was built")

    monkeypatch.setattr(neurok_core.rigspace.simulate, "build_rig_space", build_rig_space)
    for mesh, extra, want in cases[1:2] + cases[3:]:
        args = ["simulate", *(mesh or [str(tmp_path / "ball.obj")]), *extra.split()]
        assert main([*args, "--frames", "4", "--quiet", "--out", str(tmp_path / "a.pc2")]) == 2
        err = capsys.readouterr().err
        assert want in err and len(err.strip().splitlines()) == 1, (extra, err)
    with pytest.raises(Loaded):  # what passes the checks goes on to load the model
        main(
            ["simulate", str(loose), "--dynamics", "latent", "--force", "0:0,0,1:5"]
            + ["--out", str(tmp_path / "a.pc2")]
        )


def test_the_summary_warns_when_a_rig_space_motion_is_likely_implausible(tmp_path, capsys):
    """The CLI prints Simulate's warning under its summary: never for a 1 m cube under gravity
    and a 10 N push (the extension's out-of-the-box case) or a pinned flag under gravity; for a
    flag whose corner is dragged 5 m away from its pole, which stretches it far beyond a cloth's
    5%, a warning line that says so."""
    trimesh.creation.box((1.0, 1.0, 1.0)).export(tmp_path / "cube.obj")
    args = ["simulate", str(tmp_path / "cube.obj"), "--force", "0:0,0,1:10", "--frames", "24"]
    assert main([*args, "--quiet", "--out", str(tmp_path / "cube.npz")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote ") and "warning" not in out
    info = load_result(tmp_path / "cube.npz").info
    assert info["edge_strain_max"] < 1e-6 and info["penetration_max"] == 0.0
    vertices, faces, pins, corner = flag_mesh()
    trimesh.Trimesh(vertices, faces, process=False).export(tmp_path / "flag.obj")
    flag = ["simulate", str(tmp_path / "flag.obj"), "--pin", ",".join(map(str, pins))]
    flag += ["--mass", "0.2", "--damping", "0.8", "--frames", "24", "--quiet"]
    assert main([*flag, "--out", str(tmp_path / "hangs.npz")]) == 0
    assert "warning" not in capsys.readouterr().out
    hangs = load_result(tmp_path / "hangs.npz")
    assert hangs.info["edge_strain_max"] < 0.02 and hangs.info["self_collision"] is False
    # --self-collision: the cloth's layers kept apart (the conditions and the run say so)
    assert main([*flag, "--self-collision", "--out", str(tmp_path / "apart.npz")]) == 0
    assert "warning" not in capsys.readouterr().out
    apart = load_result(tmp_path / "apart.npz")
    assert apart.info["self_collision"] is True and apart.conditions["self_collision"] is True
    # --no-self-collision: off over a conditions file that asks for it
    (tmp_path / "layers.json").write_text('{"self_collision": true}')
    on_file = [*flag, "--conditions", str(tmp_path / "layers.json")]
    assert main([*on_file, "--no-self-collision", "--out", str(tmp_path / "through.npz")]) == 0
    assert "warning" not in capsys.readouterr().out
    assert load_result(tmp_path / "through.npz").info["self_collision"] is False
    far = ",".join(f"{c:g}" for c in vertices[corner] + (5.0, 0.0, 0.0))
    assert main([*flag, "--drag", f"{corner}:{far}:12", "--out", str(tmp_path / "torn.npz")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    info = load_result(tmp_path / "torn.npz").info
    assert info["edge_strain_max"] > 0.05
    assert len(lines) == 2 and lines[0].startswith("wrote ")
    assert lines[1].startswith("warning: In the rig space the mesh stretched by")
    assert (
        f"{info['edge_strain_max']:.0%} on average by frame {info['edge_strain_frame']}"
        in (lines[1])
    )
    assert "likely implausible" in lines[1]


def _summary(out: str) -> tuple[float, dict[str, float]]:
    """(total seconds, {part: seconds}) of the summary line ``... 1.23 s (read 0.01, ...)``."""
    import re

    found = re.search(r"([0-9.]+) s \(((?:[a-z]+ [0-9.]+(?:, )?)+)\)", out)
    assert found, out
    parts = dict(part.split(" ") for part in found.group(2).split(", "))
    return float(found.group(1)), {name: float(value) for name, value in parts.items()}


@pytest.mark.parametrize("dynamics", ["rig", "latent"])
def test_the_summary_gives_the_total_time_and_its_parts(
    tmp_path, capsys, dynamics, tiny_checkpoint
):
    """The summary's total is the run's wall time, and its parts (the rig space's build
    counted as "space", though it runs inside its simulation) add up to it."""
    import time

    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    args = ["simulate", str(tmp_path / "slab.obj"), "--out", str(tmp_path / "a.npz")]
    args += [
        "--frames",
        "4",
        "--quiet",
        "--dynamics",
        dynamics,
        "--checkpoint",
        str(tiny_checkpoint),
    ]
    assert main(args) == 0  # once first: the modules a first run imports are not its work
    capsys.readouterr()
    started = time.monotonic()
    assert main(args) == 0
    wall = time.monotonic() - started
    total, parts = _summary(capsys.readouterr().out)
    want = ["read", "space", "simulate", "write"]
    if dynamics == "latent":
        want.insert(1, "load")
    assert list(parts) == want
    assert total <= wall + 0.01 and total >= 0.8 * wall - 0.05, (total, wall)
    assert abs(sum(parts.values()) - total) <= 0.01 * len(parts) + 0.01, (total, parts)


def test_a_run_stopped_by_the_time_limit_writes_the_frames_it_finished(tmp_path, capsys):
    """A limit that passes mid-run: the frames so far are written, the message says how many,
    and the exit status is still an error (the run did not finish)."""
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    out = tmp_path / "a.npz"
    args = ["simulate", str(tmp_path / "slab.obj"), "--out", str(out), "--frames", "100000"]
    assert main([*args, "--quiet", "--time-limit", "2", "--force", "0:0,0,1:5:0-3"]) == 2
    err = capsys.readouterr().err
    assert "stopped at the time limit of 2 s" in err, err
    written = np.load(out)["positions"]
    assert 2 <= len(written) < 100000 and f"holds its first {len(written)} frames" in err, err
    assert np.isfinite(written).all() and written.shape[1] == len(mesh.vertices)


def test_the_time_limit_stops_a_rig_space_run_inside_its_first_frame(tmp_path, capsys):
    """--time-limit is checked before every implicit step of the rig space: a limit that has
    passed before the first frame is done stops the run there, with nothing written."""
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    out = tmp_path / "a.npz"
    args = ["simulate", str(tmp_path / "slab.obj"), "--out", str(out), "--frames", "4"]
    assert main([*args, "--quiet", "--time-limit", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "stopped at the time limit" in err and "after frame 0 of 3" in err
    assert not out.exists()
