"""The engine worker as a real subprocess: request/response, cancel, crashes, malformed input."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
import trimesh
from conftest import ROOT

from neurok_core.checkpoint import save_checkpoint
from neurok_core.model import build_model
from neurok_core.results import load_result
from neurok_core.rig import BoneRig


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = build_model("tiny")
    with torch.no_grad():  # a decoder that moves (a fresh one decodes to the identity)
        model.decoder.head.weight.normal_(0.0, 0.1)
    return save_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "tiny")


def write_request(folder, checkpoint, *, frames=4, vertices=None, faces=None, **extra):
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    v = np.asarray(mesh.vertices if vertices is None else vertices, dtype=np.float32)
    f = np.asarray(mesh.faces if faces is None else faces, dtype=np.int32)
    np.savez(folder / "mesh.npz", vertices=v, faces=f)
    request = {
        "protocol": 1,
        "mesh": "mesh.npz",
        "conditions": {
            "forces": [
                {
                    "direction": [0, 0, 1],
                    "strength": 2.0,
                    "vertex": 0,
                    "start_frame": 0,
                    "end_frame": None,
                    "point": None,
                }
            ],
            "gravity": [0, 0, 0],
            "frames": frames,
            "fps": 24,
        },
        "checkpoint": str(checkpoint),
        "device": "cpu",
        "cache_dir": "cache",
        "output": {"frames": "frames.npy", "result": "result.npz", "pc2": "anim.pc2"},
    }
    request.update(extra)
    path = folder / "request.json"
    path.write_text(json.dumps(request))
    return path, v


def start(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "neurok_core.worker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kw,
    )


def run(args, timeout=600):
    proc = start(args)
    out, err = proc.communicate(timeout=timeout)
    lines = [json.loads(line) for line in out.splitlines()]
    return proc.returncode, lines, err


def test_full_request(tmp_path, checkpoint):
    """A request in the learned space: the model is loaded, the mesh's kinematic space built
    and cached, every output written."""
    request, rest = write_request(tmp_path, checkpoint, dynamics="latent")
    code, lines, err = run(["--request", str(request)])
    assert code == 0, (lines, err)
    kinds = [m["type"] for m in lines]
    assert kinds[-1] == "done" and "error" not in kinds
    assert [m["index"] for m in lines if m["type"] == "frame"] == [0, 1, 2, 3]
    done = lines[-1]
    frames = np.load(done["frames"])
    assert frames.shape == (4, len(rest), 3)
    np.testing.assert_array_equal(frames[0], rest)
    assert np.abs(frames[-1] - rest).max() > 0  # the force moved it
    result = load_result(done["result"])
    np.testing.assert_allclose(result.positions, frames)
    assert result.conditions["frames"] == 4
    assert (tmp_path / "anim.pc2").stat().st_size == 32 + frames.size * 4
    assert list((tmp_path / "cache").glob("space-*.npz")), "the kinematic space is cached"


def test_a_request_does_not_import_sympy(tmp_path, checkpoint):
    """PyTorch's symbolic-shape machinery (sympy, about a second to import) is not needed to
    simulate: a request in a fresh interpreter must not load it (it once came in through
    torch.broadcast_shapes in the decoder's jets)."""
    request, _ = write_request(tmp_path, checkpoint, dynamics="latent")
    code = (
        "import sys, json\n"
        "from neurok_core.worker import read_request, run_request\n"
        f"run_request(read_request({str(request)!r}))\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'sympy')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_probe(checkpoint):
    code, lines, _ = run(["--probe", "--checkpoint", str(checkpoint), "--device", "cpu"])
    assert code == 0 and lines[0]["type"] == "probe" and lines[0]["ok"]
    assert lines[0]["protocol"] == 1


def test_rig_request_writes_the_bones_without_decoding_vertices(tmp_path, tiny_skinned_checkpoint):
    output = {"frames": None, "result": "result.npz", "rig": "rig.npz"}
    request, rest = write_request(
        tmp_path, tiny_skinned_checkpoint, output=output, dynamics="latent"
    )
    code, lines, err = run(["--request", str(request)])
    assert code == 0, (lines, err)
    done = lines[-1]
    assert done["frames"] is None and done["rig"].endswith("rig.npz")
    assert [m["index"] for m in lines if m["type"] == "frame"] == [0, 1, 2, 3]
    with np.load(done["rig"]) as data:
        rig = BoneRig.from_arrays(data)
    assert rig.rotations.shape[:1] == (4,) and rig.vertex_bones.shape[0] == len(rest)
    assert load_result(done["result"]).positions is None
    assert not (tmp_path / "frames.npy").exists()


def test_rig_request_of_a_model_without_bones_is_refused(tmp_path, checkpoint):
    output = {"frames": "frames.npy", "rig": "rig.npz"}
    request, _ = write_request(tmp_path, checkpoint, output=output, dynamics="latent")
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and lines[-1]["kind"] == "ConditionError"
    assert "bones" in lines[-1]["message"]
    request, _ = write_request(
        tmp_path, checkpoint, output={"frames": None, "rig": "r.npz", "pc2": "a.pc2"}
    )
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and "'pc2' output needs the 'frames'" in lines[-1]["message"]


def test_a_rig_space_request_loads_no_model(tmp_path, capsys, monkeypatch):
    """A request in the rig space, the default (it names no dynamics), runs without a model
    (here a checkpoint folder without one, and loading any model fails): the rig comes back
    (linear blend), it plays the frames, and the info has the figures of the warning; with
    the rig alone asked for, no frames are written."""
    from neurok_core.api import NeuROK
    from neurok_core.worker import read_request, run_request

    def load(*args, **kwargs):
        raise AssertionError("a rig-space request loaded a model")

    monkeypatch.setattr(NeuROK, "load", load)
    (tmp_path / "no_model").mkdir()
    output = {"frames": "frames.npy", "result": "result.npz", "rig": "rig.npz"}
    request, rest = write_request(tmp_path, tmp_path / "no_model", output=output)
    assert "dynamics" not in json.loads(request.read_text())
    done = run_request(read_request(request))
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert "load" not in {m.get("stage") for m in lines}
    assert [m["index"] for m in lines if m["type"] == "frame"] == [0, 1, 2, 3]
    assert done["info"]["dynamics"] == "rig"
    frames = np.load(done["frames"])
    assert np.abs(frames[-1] - rest).max() > 1e-4  # the force moved it
    with np.load(done["rig"]) as data:
        rig = BoneRig.from_arrays(data)
    assert rig.blend == "lbs" and rig.vertex_bones.shape[0] == len(rest)
    for t in range(4):
        np.testing.assert_allclose(rig.skin(rest, t), frames[t], atol=1e-5)
    assert load_result(done["result"]).rig is not None
    info = done["info"]
    assert info["edge_strain_max"] < 1e-6 and info["penetration_max"] == 0.0
    assert info["integration"] == "complete"
    alone = tmp_path / "alone"
    alone.mkdir()
    request, _ = write_request(alone, tmp_path / "no_model", output={"rig": "rig.npz"})
    done = run_request(read_request(request))
    assert done["frames"] is None and not (alone / "frames.npy").exists()
    with np.load(done["rig"]) as data:
        np.testing.assert_allclose(BoneRig.from_arrays(data).translations, rig.translations)


def test_malformed_requests(tmp_path, checkpoint):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    code, lines, err = run(["--request", str(bad)])
    assert (
        code == 2
        and lines[-1]["kind"] == "RequestError"
        and "not valid JSON" in lines[-1]["message"]
    )
    assert "Traceback" not in err
    request, _ = write_request(tmp_path, checkpoint, protocol=99)
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and "protocol" in lines[-1]["message"]
    request, _ = write_request(tmp_path, checkpoint, dynamics="verlet")
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and lines[-1]["kind"] == "RequestError"
    assert "'dynamics' must be one of latent, rig" in lines[-1]["message"]


@pytest.mark.parametrize("dynamics", ["rig", "latent"])
def test_bad_inputs_come_back_as_plain_messages(tmp_path, checkpoint, dynamics):
    # A vertex index out of range in the conditions.
    request, _ = write_request(tmp_path, checkpoint, dynamics=dynamics)
    data = json.loads(request.read_text())
    data["conditions"]["forces"][0]["vertex"] = 10_000
    request.write_text(json.dumps(data))
    code, lines, err = run(["--request", str(request)])
    assert code == 2 and lines[-1]["kind"] == "ConditionError", lines
    assert "10000" in lines[-1]["message"] and "Traceback" not in err
    # A mesh with NaN.
    request, _ = write_request(
        tmp_path, checkpoint, vertices=np.full((8, 3), np.nan), faces=[[0, 1, 2]], dynamics=dynamics
    )
    code, lines, err = run(["--request", str(request)])
    assert code == 2 and lines[-1]["kind"] == "MeshError" and "Traceback" not in err, lines
    assert not (tmp_path / "frames.npy").exists()
    if dynamics == "rig":
        return
    # A corrupt checkpoint, which the learned space loads (the rig space, the default, does not).
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    request, _ = write_request(tmp_path, broken, dynamics="latent")
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and lines[-1]["kind"] == "CheckpointError"
    assert not (tmp_path / "result.npz").exists()


def test_cancel_midway_leaves_no_result(tmp_path, checkpoint):
    request, _ = write_request(tmp_path, checkpoint, frames=400)
    proc = start(["--request", str(request)])
    deadline = time.time() + 600
    while time.time() < deadline:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()
        if json.loads(line)["type"] == "frame":
            break
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    assert not (tmp_path / "result.npz").exists()
    assert not (tmp_path / "anim.pc2").exists()
    assert np.load(tmp_path / "frames.npy", mmap_mode="r")[0].shape[1] == 3


def test_a_killed_worker_leaves_the_frames_it_reported_and_no_result(tmp_path, checkpoint):
    """Killed mid-run (as Blender's cancel or a crash does), the worker leaves each frame it
    reported on disk (frames.npy is written frame by frame) and no result file, not a half one."""
    request, rest = write_request(tmp_path, checkpoint, frames=400)
    proc = start(["--request", str(request)])
    try:
        reported = []
        while len(reported) < 2:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            message = json.loads(line)
            if message["type"] == "frame":
                reported.append(message["index"])
    finally:
        proc.kill()
        proc.communicate(timeout=60)
    assert reported == [0, 1]
    frames = np.load(tmp_path / "frames.npy", mmap_mode="r")
    assert frames.shape == (400, len(rest), 3)
    np.testing.assert_array_equal(frames[0], rest)  # the first frame is the rest shape
    assert np.isfinite(frames[1]).all() and np.abs(frames[1]).max() > 0
    assert not (tmp_path / "result.npz").exists()


def _answer(proc) -> list[dict]:
    """The lines of one answer of a serving worker, up to its done or error line."""
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, "the serving worker closed stdout"
        lines.append(json.loads(line))
        if lines[-1]["type"] in ("done", "error"):
            return lines


def test_serving_worker_answers_requests_until_stdin_closes(tmp_path, checkpoint):
    first, second, bad, rig = (tmp_path / name for name in ("first", "second", "bad", "rig"))
    for folder in (first, second, bad, rig):
        folder.mkdir()
    # the learned space: what a serving worker keeps is its model and kinematic spaces
    req1, rest = write_request(first, checkpoint, dynamics="latent")
    req2, _ = write_request(second, checkpoint, frames=6, dynamics="latent")
    req3, _ = write_request(bad, checkpoint)
    (bad / "mesh.npz").unlink()
    req4, _ = write_request(rig, tmp_path / "no_model")  # the rig space: no model needed
    proc = start(["--serve"], stdin=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline()) == {"type": "ready", "protocol": 1}
        answers = []
        for line in (
            json.dumps({"request": str(req1)}),
            "not json",
            json.dumps({"request": str(req3)}),
            json.dumps({"request": str(req2)}),
            json.dumps({"request": str(req4)}),
        ):
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answers.append(_answer(proc))
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0  # stdin closed: it ends by itself
    finally:
        proc.kill()
    done1, malformed, missing, done2, done4 = (a[-1] for a in answers)
    assert done1["type"] == "done" and done2["type"] == "done"
    assert done4["type"] == "done" and done4["info"]["dynamics"] == "rig", done4
    assert np.load(done4["frames"]).shape == (4, len(rest), 3)
    assert malformed["kind"] == "RequestError" and "request" in malformed["message"]
    assert missing["kind"] == "MeshError" and "does not exist" in missing["message"]
    frames1, frames2 = np.load(done1["frames"]), np.load(done2["frames"])
    assert frames1.shape == (4, len(rest), 3) and frames2.shape == (6, len(rest), 3)
    # the second request on the same mesh found its kinematic space in memory: the same start
    np.testing.assert_allclose(frames2[:4], frames1, atol=1e-6)
    statuses = [m.get("message") for m in answers[3] if m["type"] == "status"]
    assert not any("encoding" in (s or "") for s in statuses), statuses


def test_serving_worker_ends_when_idle(checkpoint):
    proc = start(["--serve", "--idle-exit", "0.5"], stdin=subprocess.PIPE)
    try:
        assert json.loads(proc.stdout.readline())["type"] == "ready"
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def test_serving_worker_refuses_a_bad_idle_time():
    code, _, err = run(["--serve", "--idle-exit", "-1"], timeout=60)
    assert code == 2 and "positive number of seconds" in err


def test_a_scene_request_simulates_its_objects_together(tmp_path):
    """``"task": "scene"``: two boxes, one thrown at the other (no gravity), one static box
    as a collider; each moving object gets its own frames and rig, and the hit box moves."""
    boxes = {}
    for name, x in (("hit", -0.3), ("still", 0.0), ("wall", 0.6)):
        mesh = trimesh.creation.box((0.2, 0.2, 0.2)).subdivide()
        np.savez(
            tmp_path / f"{name}.npz",
            vertices=np.asarray(mesh.vertices + [x, 0.0, 0.0], dtype=np.float32),
            faces=np.asarray(mesh.faces, dtype=np.int32),
        )
        boxes[name] = mesh.vertices + [x, 0.0, 0.0]
    scene = {"frames": 12, "fps": 24.0, "gravity": [0.0, 0.0, 0.0], "friction": 0.0}
    objects = [
        {
            "name": "hit",
            "mesh": "hit.npz",
            "conditions": {"velocities": [{"velocity": [2.0, 0.0, 0.0]}], "mass": 1.0},
            "output": {"frames": "hit.npy", "rig": "hit_rig.npz"},
        },
        {"name": "still", "mesh": "still.npz", "conditions": {}, "output": {"frames": "s.npy"}},
        {"name": "wall", "mesh": "wall.npz", "conditions": {}, "static": True},
    ]
    request = tmp_path / "request.json"
    request.write_text(
        json.dumps({"protocol": 1, "task": "scene", "conditions": scene, "objects": objects})
    )
    code, lines, err = run(["--request", str(request)])
    assert code == 0, err
    done = lines[-1]
    assert done["type"] == "done" and set(done["objects"]) == {"hit", "still"}
    hit, still = np.load(tmp_path / "hit.npy"), np.load(tmp_path / "s.npy")
    assert hit.shape == (12, len(boxes["hit"]), 3) and still.shape == hit.shape
    assert still[-1, :, 0].mean() > 0.05  # the hit box passed its motion on
    with np.load(tmp_path / "hit_rig.npz") as data:
        rig = BoneRig.from_arrays(data)
    np.testing.assert_allclose(rig.skin(boxes["hit"], 11), hit[11], atol=1e-4)
    objects[0]["output"] = {}
    request.write_text(
        json.dumps({"protocol": 1, "task": "scene", "conditions": scene, "objects": objects})
    )
    code, lines, _ = run(["--request", str(request)])
    assert code == 2 and "'hit': 'output' names no" in lines[-1]["message"]


def test_a_serving_worker_checks_each_mesh_it_has_not_seen():
    """A warm worker checks a mesh once, by its arrays as they came: the same numbers in
    another shape or type, or not numbers at all, are checked (and refused) again."""
    from neurok_core.errors import MeshError
    from neurok_core.worker import Warm

    warm = Warm()
    v = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    f = np.array([[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]])
    warm.validate_mesh(v, f)
    warm.validate_mesh(v, f)  # seen: not checked again
    assert len(warm.valid_meshes) == 1
    for bad_v, bad_f in (
        (v.reshape(3, 4), f),
        (v, f.reshape(6, 2)),
        (v, f + 0.4),
        (np.array([["a", "b", "c"]] * 4), f),
    ):
        with pytest.raises(MeshError):
            warm.validate_mesh(bad_v, bad_f)
