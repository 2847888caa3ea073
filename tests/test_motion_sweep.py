"""The motion sweep: family selection and one real simulated drag per sequence."""

import json

import numpy as np
import pytest

from neurok_core.sequence import save_sequence
from training.data.registry import all_families
from training.eval import motion_sweep


def test_sequences_takes_the_first_of_every_family(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    for name in ("a1_00", "a1_01", "bike_00", "bike_01", "bike_02"):
        (flat / f"{name}.npz").touch()
    nested = tmp_path / "nested"
    for family in ("door", "fan"):
        (nested / family).mkdir(parents=True)
        for i in range(3):
            (nested / family / f"{family}_{i:05d}.npz").touch()
    picked = motion_sweep.sequences([str(flat), str(nested)], 2)
    assert [p.name for p in picked] == [
        "a1_00.npz", "a1_01.npz", "bike_00.npz", "bike_01.npz",
        "door_00000.npz", "door_00001.npz", "fan_00000.npz", "fan_00001.npz",
    ]  # fmt: skip


def test_a_drag_run_reports_its_miss_and_shape_score(tmp_path):
    seq = all_families()["door"].generate(np.random.default_rng(0), 8)
    save_sequence(seq, tmp_path / "data" / "door" / "door_00000.npz")
    out = tmp_path / "sweep.json"
    args = ["--data", str(tmp_path / "data"), "--runs", "drag", "--frames", "6"]
    assert motion_sweep.main([*args, "--out", str(out)]) == 0
    (record,) = json.loads(out.read_text())["records"]
    assert record["run"] == "drag" and "error" not in record
    assert np.isfinite(record["miss"]) and record["miss"] >= 0
    assert np.isfinite(record["shape"]) and record["shape"] >= 0  # doors have part labels


def test_space_settings_are_overridden_and_bad_ones_refused(tmp_path):
    seq = all_families()["door"].generate(np.random.default_rng(0), 8)
    save_sequence(seq, tmp_path / "data" / "door" / "door_00000.npz")
    args = ["--data", str(tmp_path / "data"), "--runs", "drag", "--frames", "6"]
    out = tmp_path / "sweep.json"
    assert motion_sweep.main([*args, "--space", "rest_steps=0", "--out", str(out)]) == 0
    (record,) = json.loads(out.read_text())["records"]
    assert "error" not in record and np.isfinite(record["miss"])
    with pytest.raises(SystemExit, match="--space 'rest_step=0'"):
        motion_sweep.main([*args, "--space", "rest_step=0"])
