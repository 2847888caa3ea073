"""The evaluation command: target choice, baselines, tables, and a real end-to-end run on tiny
sequences with a small (randomly initialised) checkpoint."""

import hashlib
import json
import shlex
from dataclasses import replace

import numpy as np
import pytest
import torch
import trimesh

from neurok_core.checkpoint import save_checkpoint
from neurok_core.geometry import sample_surface_points
from neurok_core.ik import chamfer_loss
from neurok_core.metrics import compare_meshes, edge_strain
from neurok_core.model import build_model
from neurok_core.sequence import Sequence4D, load_sequence, save_sequence
from training.eval.baselines import (
    BaselineSettings,
    best_rotations,
    fit_baseline,
    start_rotations,
)
from training.eval.evaluate import main
from training.eval.ik import family_of, select_sequences, target_frames
from training.eval.motion import key_vertex, run_simulation, standard_conditions
from training.eval.report import format_table, summarize, summarize_motion

FAST = BaselineSettings(steps=60, restarts=3, points=256)


def rotation(axis, angle) -> np.ndarray:
    return trimesh.transformations.rotation_matrix(angle, axis)[:3, :3]


def slab() -> tuple[np.ndarray, np.ndarray]:
    mesh = trimesh.creation.box((0.4, 0.1, 0.04)).subdivide().subdivide()
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def bent(vertices: np.ndarray, angle: float) -> np.ndarray:
    """The half x > 0 of the slab turned by ``angle`` about the y axis through the origin."""
    out = vertices.copy()
    right = vertices[:, 0] > 0
    out[right] = vertices[right] @ rotation([0, 1, 0], angle).T
    return out


def surface(vertices, faces, count=1024, seed=1):
    return sample_surface_points(vertices, faces, count, np.random.default_rng(seed))


def mean_strain(rest, fitted, faces) -> float:
    return float(edge_strain(rest, fitted[None], faces)[0])


def cd_l1(rest, fitted, faces, target) -> float:
    return compare_meshes(rest, fitted, faces, target, faces, closed=False, samples=4000)[
        "chamfer_l1"
    ]


# --------------------------------------------------------------------------------------------
# Choice of sequences and targets


def test_targets_spread_over_the_sequence_without_the_rest_frame():
    assert target_frames(34, 4) == [8, 16, 25, 33]
    assert target_frames(3, 4) == [1, 2]
    assert target_frames(2, 4) == [1]


def test_families_are_capped_evenly_and_deterministically(tmp_path):
    items = [("a", tmp_path / f"a_{i}.npz") for i in range(9)] + [("b", tmp_path / "b_0.npz")]
    picked = select_sequences(items, 3)
    assert [p.name for _, p in picked] == ["a_0.npz", "a_4.npz", "a_8.npz", "b_0.npz"]
    assert select_sequences(items, None) == items
    assert family_of(tmp_path / "door" / "door_00003.npz", tmp_path) == "door"
    assert family_of(tmp_path / "kuka_iiwa_01.npz", tmp_path) == "kuka_iiwa"


# --------------------------------------------------------------------------------------------
# Baselines


def test_nearest_chamfer_equals_the_dense_chamfer_and_its_gradient():
    gen = torch.Generator().manual_seed(0)
    a = torch.rand((3, 50, 3), generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.rand((1, 70, 3), generator=gen, dtype=torch.float64)
    d = torch.cdist(a, b.expand(3, -1, -1)) ** 2  # (B, P, Q)
    expected = 0.5 * (d.min(dim=2).values.mean(1) + d.min(dim=1).values.mean(1))
    value = chamfer_loss(a, b)
    torch.testing.assert_close(value, expected)
    (g_expected,) = torch.autograd.grad(expected.sum(), a)
    (g_value,) = torch.autograd.grad(value.sum(), a)
    torch.testing.assert_close(g_value, g_expected)


def test_start_rotations_and_local_rotations_are_proper():
    starts = start_rotations(5, seed=0)
    eye = torch.eye(3, dtype=torch.float64).expand(5, 3, 3)
    torch.testing.assert_close(starts[0], eye[0])
    torch.testing.assert_close(starts @ starts.transpose(1, 2), eye)
    angles = torch.arccos(((starts.diagonal(dim1=1, dim2=2).sum(-1) - 1) / 2).clamp(-1, 1))
    torch.testing.assert_close(angles[-1], torch.tensor(np.pi / 2, dtype=torch.float64))
    # Edges of two vertices turned rigidly: the local step finds exactly that rotation.
    rot = torch.as_tensor(rotation([1, 2, 3], 0.7))
    rest_edges = torch.randn((6, 3), dtype=torch.float64)
    owner = torch.tensor([0, 0, 0, 1, 1, 1])
    found = best_rotations(rest_edges, (rest_edges @ rot.T)[None], owner, 2)  # (1, 2, 3, 3)
    torch.testing.assert_close(found[0], rot.expand(2, 3, 3))


def test_rigid_baseline_recovers_a_rigid_motion():
    v, f = slab()
    target = v @ rotation([0.3, 0.5, 1.0], 0.4).T + np.array([0.05, 0.02, 0.0])
    fit = fit_baseline("rigid", v, f, surface(target, f), FAST)
    unchanged = fit_baseline("unchanged", v, f, surface(target, f), FAST)
    np.testing.assert_array_equal(unchanged.vertices, v)
    assert cd_l1(v, fit.vertices, f, target) < 0.2 * cd_l1(v, v, f, target)
    assert fit.loss < 0.2 * unchanged.loss


@pytest.mark.parametrize("max_control", [2048, 60])
def test_arap_baseline_follows_a_bend_that_a_rigid_motion_cannot(max_control):
    """All vertices optimised, and a control set of 60 blended onto the 386 vertices."""
    v, f = slab()
    target = bent(v, 0.8)
    settings = BaselineSettings(steps=60, restarts=3, points=256, max_control=max_control)
    arap = fit_baseline("per_vertex_arap", v, f, surface(target, f), settings)
    rigid = fit_baseline("rigid", v, f, surface(target, f), settings)
    err_arap, err_rigid = cd_l1(v, arap.vertices, f, target), cd_l1(v, rigid.vertices, f, target)
    assert err_arap < 0.6 * err_rigid, (err_arap, err_rigid)
    # The regulariser keeps the edges: far less strain than the same fit without it.
    free = fit_baseline(
        "per_vertex_arap", v, f, surface(target, f), replace(settings, arap_weight=0)
    )
    assert mean_strain(v, arap.vertices, f) < 0.5 * mean_strain(v, free.vertices, f)


# --------------------------------------------------------------------------------------------
# Tables


def test_summary_means_and_table_cells():
    def record(category, l1, iou):
        return {"category": category, "methods": {"m": {"chamfer_l1": l1, "chamfer_l2": l1 / 10,
                                                         "iou": iou}}}  # fmt: skip

    records = [record("cloth", 0.1, None), record("cloth", 0.3, None), record("elastic", 0.2, 0.5)]
    summary = summarize(records, ["m"])
    assert summary["m"]["cloth"]["chamfer_l1"] == pytest.approx(0.2)
    assert summary["m"]["cloth"]["iou"] is None
    assert summary["m"]["all"]["chamfer_l1"] == pytest.approx(0.2)
    assert summary["m"]["all"]["iou"] == pytest.approx(0.5)
    assert summary["m"]["all"]["targets"] == 3 and summary["m"]["all"]["iou_targets"] == 1
    table = format_table(summary, ["m"], "title")
    assert "cloth (2)" in table and "all (3)" in table
    assert " 0.2000 2.00e-02      - " in table  # cloth: no IoU for open sequences
    assert table.splitlines()[-1].split()[0] == "m"


def test_motion_summary_leaves_out_runs_stopped_by_the_time_limit():
    def record(drift, timed_out):
        run = {"energy_drift": drift, "timed_out": timed_out}
        return {"category": "elastic", "ground_truth": {}, "methods": {"m": {"undamped": run}}}

    summary = summarize_motion([record(0.01, False), record(0.5, True), record(0.03, False)], "m")
    assert summary["elastic"]["energy_drift"] == pytest.approx(0.02)
    assert summary["elastic"]["energy_drift_count"] == 2 and summary["all"]["sequences"] == 3
    assert summary["elastic"]["drag_alignment"] is None


# --------------------------------------------------------------------------------------------
# End to end


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    torch.manual_seed(0)
    model = build_model("tiny")
    with torch.no_grad():  # a decoder that moves (a fresh one decodes to the identity)
        model.decoder.head.weight.normal_(0.0, 0.1)
    run = tmp_path_factory.mktemp("run")
    (run / "metrics.jsonl").write_text(
        "\n".join(
            json.dumps(
                {
                    "step": s,
                    "loss": 1.0 / s,
                    "recon": 1.0 / s,
                    "kl": 1.0,
                    "rmse": 0.1,
                    "samples_per_s": 50.0,
                    "lr": 1e-3,
                }
            )
            for s in (1, 2, 3)
        )  # fmt: skip
    )
    return save_checkpoint(model, run / "checkpoint")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two families: a hinged slab (articulated, closed, two parts) and a waving sheet (cloth)."""
    root = tmp_path_factory.mktemp("data")
    v, f = slab()
    frames = np.stack([bent(v, a) for a in np.linspace(0, 0.9, 5)]).astype(np.float32)
    parts = (v[:, 0] > 0).astype(np.int32)
    save_sequence(
        Sequence4D(frames, f.astype(np.int32), parts, True, "articulated", "test", "hinge_0"),
        root / "hinge" / "hinge_0.npz",
    )
    xs, ys = np.meshgrid(np.linspace(0, 0.5, 8), np.linspace(0, 0.3, 6), indexing="ij")
    sheet = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    i, j = np.meshgrid(np.arange(7), np.arange(5), indexing="ij")
    a = (i * 6 + j).ravel()
    faces = np.concatenate([np.stack([a, a + 6, a + 1], 1), np.stack([a + 1, a + 6, a + 7], 1)])
    waves = [sheet + [0, 0, 0.05 * k] * np.sin(3 * sheet[:, :1]) for k in range(4)]
    save_sequence(
        Sequence4D(np.stack(waves).astype(np.float32), faces.astype(np.int32),
                   np.full(len(sheet), -1, np.int32), False, "cloth", "test", "sheet_0"),
        root / "sheet" / "sheet_0.npz",
    )  # fmt: skip
    return root


def test_end_to_end_on_tiny_data(checkpoint, data, tmp_path, capsys):
    out = tmp_path / "results.json"
    figures = tmp_path / "figures"
    argv = [
        "--data", str(data), "--checkpoint", str(checkpoint), "--ablation",
        f"other={checkpoint}", "--out", str(out), "--figures", str(figures), "--targets", "2",
        "--samples", "3000", "--ik-steps", "3", "--ik-restarts", "2", "--ik-points", "64",
        "--target-points", "128", "--motion-frames", "3", "--motion-per-category", "1",
        "--figure-examples", "1", "--cache-dir", str(tmp_path / "cache"), "--quiet",
        "--motion-runs", "force,undamped",  # drags are slow to integrate: tested on their own
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "articulated (2)" in printed and "cloth (2)" in printed and "all (4)" in printed
    report = json.loads(out.read_text())
    methods = ["neurok", "no_reduction", "rig", "rig_no_prior", "other", "unchanged", "rigid"]
    methods.append("per_vertex_arap")
    assert report["settings"]["methods"] == methods
    assert report["command"] == "python -m training.eval.evaluate " + shlex.join(argv)
    ckpt = report["checkpoints"]["neurok"]
    weights = (checkpoint / "model.safetensors").read_bytes()
    assert ckpt["weights_sha256"] == hashlib.sha256(weights).hexdigest()
    (section,) = report["datasets"]
    assert section["sequences"] == 2 and len(section["targets"]) == 4
    for record in section["targets"]:
        assert set(record["methods"]) == set(methods)
        for score in record["methods"].values():
            assert np.isfinite([score["chamfer_l1"], score["chamfer_l2"], score["fit_loss"]]).all()
            assert score["seconds"] >= 0
            assert (score["iou"] is not None) == (record["category"] == "articulated")
        # The unchanged row is M0 itself, scored by the metric of design section 6.
        seq = load_sequence(data / record["family"] / f"{record['sequence']}.npz")
        expected = compare_meshes(
            seq.vertices[0], seq.vertices[0], seq.faces, seq.vertices[record["frame"]],
            seq.faces, closed=seq.closed, samples=3000,
        )  # fmt: skip
        for metric, value in expected.items():
            assert record["methods"]["unchanged"][metric] == pytest.approx(value, abs=0)
    summary = section["summary"]["unchanged"]["all"]
    mean = np.mean([r["methods"]["unchanged"]["chamfer_l1"] for r in section["targets"]])
    assert summary["chamfer_l1"] == pytest.approx(mean)
    seconds = np.mean([r["methods"]["rig"]["seconds"] for r in section["targets"]])
    assert section["summary"]["rig"]["all"]["seconds"] == pytest.approx(seconds)
    # The sampling floor (each target against itself) is below every method's score.
    from training.eval.floor import floors

    lines = floors(report)
    assert len(lines) == 3 and lines[-1].startswith("data0 all (4): floor")
    floor = float(lines[-1].split("floor ")[1].split()[0])
    assert 0 < floor < section["summary"]["rig_no_prior"]["all"]["chamfer_l1"] + 1e-4
    # The bones' rigid motions hold the bent slab's shape: closer than leaving it unchanged.
    for record in section["targets"]:
        assert (
            record["methods"]["rig_no_prior"]["chamfer_l1"]
            < (record["methods"]["unchanged"]["chamfer_l1"])
        )
    motion = {m["category"]: m for m in section["motion"]}
    assert set(motion) == {"articulated", "cloth"}
    hinge = motion["articulated"]["methods"]["neurok"]
    assert hinge["force"]["frames"] == 3 and "part_rigidity" in hinge["force"]
    assert motion["articulated"]["ground_truth"]["part_rigidity"]["max"] < 1e-5
    assert "edge_strain" in motion["cloth"]["methods"]["neurok"]["force"]
    assert hinge["undamped"]["energy_drift"] < 0.05
    names = sorted(p.name for p in figures.glob("*.png"))
    assert names == [
        "energy_data0.png", "ik_data0.png", "motion_data0.png", "training_neurok.png",
        "training_other.png",
    ]  # fmt: skip


def test_standard_conditions_come_from_the_ground_truth(data):
    seq = load_sequence(data / "hinge" / "hinge_0.npz")
    vertex, frame, u = key_vertex(seq)
    moved = np.linalg.norm(seq.vertices - seq.vertices[0], axis=-1)  # (T, N)
    assert moved[frame, vertex] == moved.max() and frame == seq.num_frames - 1
    runs = standard_conditions(seq, 10)
    (drag,) = runs["drag"].drags
    np.testing.assert_allclose(drag.target, seq.vertices[frame, vertex])
    assert (drag.vertex, drag.frame) == (vertex, 6)
    (push,) = runs["force"].forces
    assert push.vertex == vertex and push.end_frame == 5 and push.strength == 10.0
    np.testing.assert_allclose(push.direction, u)
    assert runs["force"].gravity == (0.0, 0.0, -9.81) and runs["undamped"].gravity == (0, 0, 0)
    assert runs["undamped"].damping == 0 and runs["damped"].damping > 0
    size = float((seq.vertices[0].max(0) - seq.vertices[0].min(0)).max())
    np.testing.assert_allclose(runs["undamped"].velocities[0].velocity, size * u, rtol=1e-6)


def test_a_slow_simulation_is_stopped_and_scored_on_its_frames(checkpoint, data):
    """A run far longer than its time limit (2,000 frames of the waving sheet's drag scene)."""
    import dataclasses

    from neurok_core.api import NeuROK

    seq = load_sequence(data / "sheet" / "sheet_0.npz")
    space = NeuROK.load(checkpoint, device="cpu").space(seq.vertices[0], seq.faces, cache_dir=False)
    cond = dataclasses.replace(standard_conditions(seq, 24)["drag"], frames=2000)
    result, info = run_simulation(space, cond, timeout=1.0)
    # stopped at its limit (not before it) with most of the frames left to do; how soon after
    # the limit it stops is a speed figure, not a property
    assert info["timed_out"] and info["seconds"] >= 1.0 and 1 <= info["frames"] < 2000
    assert info["frames"] >= 1 and result.positions.shape == (info["frames"], 48, 3)
    np.testing.assert_allclose(result.positions[0], seq.vertices[0], atol=1e-6)


def test_bad_inputs_fail_with_a_clear_message(checkpoint, data, tmp_path, capsys):
    common = ["--out", str(tmp_path / "r.json"), "--no-motion", "--quiet"]
    assert main(["--data", str(tmp_path / "nope"), "--checkpoint", str(checkpoint), *common]) == 2
    assert "no such data folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["--data", str(tmp_path / "empty"), "--checkpoint", str(checkpoint), *common]) == 2
    assert "no sequences found" in capsys.readouterr().err
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    assert main(["--data", str(data), "--checkpoint", str(broken), *common]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    args = ["--data", str(data), "--checkpoint", str(checkpoint), *common]
    assert main([*args, "--methods", "neurok,magic"]) == 2
    assert "unknown method(s) magic" in capsys.readouterr().err
    assert main([*args, "--ablation", "rigid=" + str(checkpoint)]) == 2
    assert "taken by other rows" in capsys.readouterr().err
    assert main([*args, "--motion-methods", "rigid"]) == 2
    assert "--motion-methods: unknown rigid" in capsys.readouterr().err
    assert main([*args, "--motion-runs", "force,jump"]) == 2
    assert "--motion-runs: unknown jump" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*args, "--ablation", "no-equals-sign"])
    assert exc.value.code == 2
    assert not (tmp_path / "r.json").exists()


def test_the_ik_dev_summary_is_the_mean_against_the_baseline():
    from training.eval.ik_dev import dev_sequences, summary

    paths = dev_sequences()
    assert len(paths) == 28 and len(set(paths)) == 28
    assert not any(p.stem.endswith("_00000") for p in paths)  # the IK table's sequences
    fits = {
        "data/val/door/door_00001.npz:5": {"cd": 0.002, "iou": 0.9, "s": 1.0, "floor": 0.001},
        "data/val/door/door_00001.npz:9": {"cd": 0.004, "iou": 0.7, "s": 3.0, "floor": 0.001},
        "data/unseen/scissors/scissors_00001.npz:5": {"cd": 0.001, "iou": None, "s": 2.0},
    }
    baseline = {k: {"cd": 2 * v["cd"], "iou": None, "s": 0.0} for k, v in fits.items()}
    lines = summary(fits, baseline)
    assert lines[0].startswith("val       2 targets  CD-L1 0.0030 / baseline 0.0060 = 0.50x")
    assert "IoU 0.800" in lines[0] and "s 2.00 (max 3.00)" in lines[0]
    assert lines[0].endswith("floor 0.0010: above it 0.0020 / 0.0050")
    assert lines[1].startswith("unseen    1 targets") and "IoU nan" in lines[1]
    assert "floor" not in lines[1]  # (no floor recorded)
