"""training.eval.articulation: the moving part's rotation in the ground truth, in the model's
reconstruction and in its prior draws, measured exactly where the answer is known."""

import json

import numpy as np
import pytest
import trimesh
from test_evaluate import bent, slab

from neurok_core.sequence import Sequence4D, load_sequence, save_sequence
from training.eval.articulation import main, moving_part, rotation_angle


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A slab hinged at its middle, bent up to 0.9 rad (articulated), and a waving sheet."""
    root = tmp_path_factory.mktemp("articulation_data")
    v, f = slab()
    frames = np.stack([bent(v, a) for a in np.linspace(0, 0.9, 5)]).astype(np.float32)
    hinge = Sequence4D(frames, f.astype(np.int32), (v[:, 0] > 0).astype(np.int32), True,
                       "articulated", "test", "hinge_0")  # fmt: skip
    save_sequence(hinge, root / "hinge" / "hinge_0.npz")
    unlabelled = Sequence4D(frames, f.astype(np.int32), np.full(len(v), -1, np.int32), True,
                            "articulated", "test", "box_0")  # fmt: skip
    save_sequence(unlabelled, root / "box" / "box_0.npz")  # articulated, but no parts: skipped
    (root / "broken").mkdir()
    (root / "broken" / "broken_0.npz").write_bytes(b"not a sequence")  # reported and skipped
    sheet = np.stack([v + [0.0, 0.0, 0.01 * k] for k in range(3)]).astype(np.float32)
    cloth = Sequence4D(sheet, f.astype(np.int32), np.full(len(v), -1, np.int32), False, "cloth",
                       "test", "sheet_0")  # fmt: skip
    save_sequence(cloth, root / "sheet" / "sheet_0.npz")
    return root


def test_rotation_angle_of_a_known_turn_and_the_moving_part():
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(50, 3))
    turn = trimesh.transformations.rotation_matrix(np.radians(40.0), [1.0, 2.0, -0.5])[:3, :3]
    assert rotation_angle(pts, pts @ turn.T + [0.3, -1.0, 2.0]) == pytest.approx(40.0, abs=1e-6)
    assert rotation_angle(pts, pts) == pytest.approx(0.0, abs=1e-5)
    v, f = slab()
    frames = np.stack([bent(v, a) for a in (0.0, 0.3, 0.6)]).astype(np.float32)
    seq = Sequence4D(frames, f, (v[:, 0] > 0).astype(np.int32), True, "articulated", "t", "h")
    np.testing.assert_array_equal(moving_part(seq), v[:, 0] > 0)
    one_part = Sequence4D(frames, f, np.zeros(len(v), np.int32), True, "articulated", "t", "h")
    assert moving_part(one_part) is None


def test_end_to_end_on_tiny_data(tiny_checkpoint, data, tmp_path, capsys):
    out = tmp_path / "art.json"
    assert main(["--data", str(data), "--checkpoint", str(tiny_checkpoint), "--samples", "4",
                 "--out", str(out)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    printed = captured.out
    # only the hinge counts: the box has no labelled parts, the sheet is cloth, and the broken
    # file is reported and skipped
    assert "| hinge | 1 |" in printed and "| box" not in printed and "sheet" not in printed
    assert "broken_0.npz" in captured.err and "1 sequence(s) skipped" in printed
    result = json.loads(out.read_text())
    (record,) = result["records"]
    seq = load_sequence(data / "hinge" / "hinge_0.npz")
    assert record["frame"] == len(seq.vertices) - 1  # the hinge bends most at the end
    assert record["truth"] == pytest.approx(np.degrees(0.9), abs=1e-3)
    assert 0.0 <= record["in_subspace"] <= 1.0 + 1e-9 and record["error"] > 0
    assert record["prior_max"] >= record["prior_median"] >= 0
    assert 0 <= record["field"] <= 180
    assert result["summary"]["hinge"]["sequences"] == 1 and len(result["skipped"]) == 1
    from neurok_core.api import NeuROK
    from neurok_core.dynamics.barrier import prior_radius

    k = NeuROK.load(tiny_checkpoint, device="cpu").model.config.latent_dim
    assert record["barrier_radius"] >= prior_radius(k, 0.99)  # the ball, or the rest's distance


def test_no_articulated_sequence_is_a_clear_error(tiny_checkpoint, tmp_path, capsys):
    v, f = slab()
    frames = np.stack([v, v + 0.01]).astype(np.float32)
    seq = Sequence4D(frames, f.astype(np.int32), np.full(len(v), -1, np.int32), True, "elastic",
                     "t", "blob_0")  # fmt: skip
    save_sequence(seq, tmp_path / "blob" / "blob_0.npz")
    assert main(["--data", str(tmp_path), "--checkpoint", str(tiny_checkpoint)]) == 2
    assert "no articulated sequence" in capsys.readouterr().err


def test_a_part_too_small_for_the_field_and_space_settings(tiny_checkpoint, tmp_path, capsys):
    """A moving part whose faces hold fewer than three E_VAE samples (the slab's end cap, a few
    percent of its area, with 8 samples) has no field turn: the record says None, the table "-",
    and the rest is still measured; --space reaches the kinematic space, a bad one is refused."""
    v, f = slab()
    frames = np.stack([bent(v, a) for a in np.linspace(0, 0.9, 4)]).astype(np.float32)
    cap = (v[:, 0] > 0.199).astype(np.int32)
    seq = Sequence4D(frames, f.astype(np.int32), cap, True, "articulated", "t", "cap_0")
    save_sequence(seq, tmp_path / "data" / "cap" / "cap_0.npz")
    out = tmp_path / "art.json"
    args = ["--data", str(tmp_path / "data"), "--checkpoint", str(tiny_checkpoint), "--samples",
            "4", "--points", "8", "--out", str(out)]  # fmt: skip
    assert main(args + ["--space", "skin_clearance=0.05"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| cap"))
    assert row.startswith("| cap | 1 | 52 | ") and row.split(" | ")[4] == "-"  # the field cell
    result = json.loads(out.read_text())
    (record,) = result["records"]
    assert record["field"] is None and result["summary"]["cap"]["field"] is None
    assert record["truth"] == pytest.approx(np.degrees(0.9), abs=1e-3)
    assert np.isfinite(record["reconstructed"]) and result["space"] == ["skin_clearance=0.05"]
    with pytest.raises(SystemExit):
        main(args + ["--space", "skin_clearance=-1"])
    assert "skin_clearance must be >= 0" in capsys.readouterr().err
