"""Engines that fail (crash, killed, missing torch, cancelled) give a clear message in Blender
and leave the scene, the processes and the temporary files as they were."""

import os
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
        "not_python": "'/bin/false' exited at once (exit status 1) without a word: is it a Python",
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
    # the fake engine sleeps 60 s: a cancelled run ends before it, stopped rather than waited for
    assert out["cancel"]["seconds"] < 60
    assert out["cancel_pid_alive"] is False
    limited = out["time_limit"]
    assert limited["status"] == "ERROR" and limited["untouched"], limited
    assert "stopped at the time limit of 2 s" in limited["message"]
    assert 2 <= limited["seconds"] < 60  # not before the limit; the engine stopped, not waited for
    assert out["leftover_job_dirs"] == []
    assert out["jobs_left"] == []


def test_install_offline_and_check_engine(tmp_path, zip_path):
    bare = tmp_path / "bare_venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    dead = "http://127.0.0.1:9"  # nothing listens there: every download fails at once
    out = run_scenario(
        "engine_setup",
        tmp_path,
        zip_path,
        env={
            "PIP_CONFIG_FILE": os.devnull,  # no local mirrors from the machine's pip config
            "HTTPS_PROXY": dead,
            "HTTP_PROXY": dead,
            "https_proxy": dead,
            "http_proxy": dead,
            "PIP_RETRIES": "0",
        },
        unset=("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "NO_PROXY", "no_proxy"),
        bare_python=str(bare / "bin" / "python"),
    )
    status, message = out["install"]
    assert status == "ERROR" and "cannot reach the package index" in message, message
    assert out["deps_left"] == []  # the half-filled staging folder is gone
    assert out["status_after_install"] == "error"
    assert out["check_bare"][0] == "ERROR" and "cannot import numpy" in out["check_bare"][1]
    assert out["status_bare"][0] == "error" and "cannot import numpy" in out["status_bare"][1]
    assert out["check_fake"][0] == "FINISHED"
    assert out["status_fake"] == ["ready", "torch 2.13.0, cpu (2 threads)"]


def test_pip_command_picks_the_cpu_wheel_without_nvidia():
    from neurok_blender.engine.install import pip_argv

    cpu = pip_argv("py", "/deps", cpu_only=True, platform="linux")
    assert "torch==2.13.0+cpu" in cpu and "https://download.pytorch.org/whl/cpu" in cpu
    assert cpu[cpu.index("--target") + 1] == "/deps"
    gpu = pip_argv("py", "/deps", cpu_only=False, platform="linux")
    assert "torch==2.13.0" in gpu and "--extra-index-url" not in gpu
    mac = pip_argv("py", "/deps", cpu_only=True, platform="darwin")
    assert "torch==2.13.0" in mac and "--extra-index-url" not in mac
    for argv in (cpu, gpu, mac):
        assert {"numpy>=1.24", "scipy>=1.11", "trimesh>=4.0", "safetensors>=0.4"} <= set(argv)
