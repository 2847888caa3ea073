"""Recording evaluation tables in a checkpoint's config (training.eval.record)."""

import json
import shutil

import pytest

from neurok_core.checkpoint import checkpoint_info, load_checkpoint
from training.eval.record import main as record_main


def _report(sha, methods, dataset="val", command="python -m training.eval.evaluate --data val"):
    checkpoints = {"neurok": {"path": "ckpt", "weights_sha256": sha}} if "neurok" in methods else {}
    summary = {
        m: {"all": {"targets": 2, "chamfer_l1": 0.0123456789, "chamfer_l2": 1e-3, "iou": None}}
        for m in methods
    }
    return {
        "command": command,
        "checkpoints": checkpoints,
        "settings": {"max_per_family": 1},
        "seconds": 3.0,
        "datasets": [{"name": dataset, "summary": summary}],
    }


@pytest.fixture
def checkpoint(tiny_checkpoint, tmp_path):
    return shutil.copytree(tiny_checkpoint, tmp_path / "ckpt")


def test_tables_of_the_checkpoint_and_its_ablations_land_in_its_config(checkpoint, tmp_path):
    sha = checkpoint_info(checkpoint)["weights_sha256"]
    main = tmp_path / "main.json"
    main.write_text(json.dumps(_report(sha, ["neurok", "rigid"])))
    ablations = tmp_path / "ablations.json"
    ablations.write_text(json.dumps(_report(None, ["displacement"], command="python -m x")))
    assert record_main(["--checkpoint", str(checkpoint), str(main), str(ablations)]) == 0
    evaluation = checkpoint_info(checkpoint)["metrics"]["evaluation"]
    assert set(evaluation["tables"]["val"]) == {"neurok", "rigid", "displacement"}
    row = evaluation["tables"]["val"]["neurok"]["all"]
    assert row == {"chamfer_l1": 0.01235, "chamfer_l2": 0.001, "iou": None, "targets": 2}
    assert [s["command"] for s in evaluation["sources"]] == [
        "python -m training.eval.evaluate --data val",
        "python -m x",
    ]
    load_checkpoint(checkpoint)  # the weights still match the config


def test_a_table_of_other_weights_or_a_row_given_twice_is_refused(checkpoint, tmp_path, capsys):
    before = (checkpoint / "config.json").read_text()
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps(_report("0" * 64, ["neurok"])))
    assert record_main(["--checkpoint", str(checkpoint), str(foreign)]) == 2
    assert "other weights" in capsys.readouterr().err
    only_ablation = tmp_path / "ablation.json"
    only_ablation.write_text(json.dumps(_report(None, ["displacement"])))
    assert record_main(["--checkpoint", str(checkpoint), str(only_ablation)]) == 2
    assert "none of the files" in capsys.readouterr().err
    sha = checkpoint_info(checkpoint)["weights_sha256"]
    main = tmp_path / "main.json"
    main.write_text(json.dumps(_report(sha, ["neurok", "rigid"])))
    again = tmp_path / "again.json"
    again.write_text(json.dumps(_report(None, ["rigid"])))
    assert record_main(["--checkpoint", str(checkpoint), str(main), str(again)]) == 2
    assert "in both" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert record_main(["--checkpoint", str(checkpoint), str(broken)]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert (checkpoint / "config.json").read_text() == before  # nothing written
