"""Engines that fail (crash, killed, missing torch, cancelled) give a clear message in Blender
and leave the scene, the processes and the temporary files as they were."""

import subprocess
import sys
from pathlib import Path

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_worker_failures(tmp_path, zip_path):
    bare = tmp_path / "bare_venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    (tmp_path / "tmpdir").mkdir()
    out = run_scenario(
        "worker_failures",
        tmp_path,
        zip_path,
        env={"TMPDIR": str(tmp_path / "tmpdir")},
        bare_python=str(bare / "bin" / "python"),
        base_python=str(Path(sys.base_prefix) / "bin" / "python3"),
    )
    expected = {
        "crash": "stopped unexpectedly (exit status 1): RuntimeError: boom in the decoder",
        "killed": "stopped from outside (killed by signal 9 (SIGKILL))",
        "engine_error": "checkpoint /x has no config.json",
        "silent_exit": "finished without a result",
        "isolated": "cannot import neurok_core",
        "bare_venv": "cannot import numpy",
    }
    for case, words in expected.items():
        got = out[case]
        assert got["status"] == "ERROR", (case, got)
        assert words in got["message"], (case, got["message"])
        assert "Traceback" not in got["message"]
        assert got["untouched"], case
    assert "install the engine's dependencies" in out["bare_venv"]["message"]
    assert out["cancel_seen"], out
    assert out["cancel"]["status"] == "CANCELLED" and out["cancel"]["untouched"]
    assert out["cancel"]["seconds"] < 15
    assert out["cancel_pid_alive"] is False
    assert out["leftover_job_dirs"] == []
    assert out["jobs_left"] == []
