"""Build the extension zip once per test session and run Blender scenarios in fresh processes.

bpy is one global Blender per process, so every scenario runs in its own Python with its own
``BLENDER_USER_RESOURCES`` (a temporary folder), installs the built zip with
``bpy.ops.extensions.package_install_files`` and writes what it observed as JSON; the tests
assert on that. Nothing here imports bpy (or torch) into the pytest process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = Path(__file__).with_name("scenarios.py")
_BUILT: dict[str, Path] = {}


def built_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The extension zip built by ``python -m tools.build`` (once per session)."""
    if "zip" not in _BUILT:
        if not _has_bpy():
            pytest.skip("the bpy module (Blender) is not installed")
        out = tmp_path_factory.mktemp("dist")
        proc = subprocess.run(
            [sys.executable, "-m", "tools.build", "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        _BUILT["zip"] = next(out.glob("neurok-*.zip"))
    return _BUILT["zip"]


def _has_bpy() -> bool:
    import importlib.util

    return importlib.util.find_spec("bpy") is not None


def run_scenario(
    name: str,
    tmp_path: Path,
    zip_path: Path,
    *,
    timeout: float = 300,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    **params,
) -> dict:
    """Run ``scenarios.py <name>`` in a fresh process; returns the JSON it wrote."""
    result = tmp_path / f"{name}.json"
    params = {**params, "zip": str(zip_path), "tmp": str(tmp_path), "result": str(result)}
    child_env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "blender_user"))
    child_env.pop("PYTHONPATH", None)  # the installed extension only, not the checkout
    child_env.update(env or {})
    for variable in unset:
        child_env.pop(variable, None)
    proc = subprocess.run(
        [sys.executable, str(SCENARIOS), name, json.dumps(params)],
        cwd=tmp_path,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0 and result.is_file(), (
        f"scenario {name} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    )
    return json.loads(result.read_text())


def run_engine_scenario(name: str, tmp_path: Path, zip_path: Path, timeout: float = 600) -> dict:
    """:func:`run_scenario` with a real engine on one thread, its own temporary folder and a
    checkpoint folder without a model (``params["checkpoint"]``: the rig space needs none)."""
    (tmp_path / "tmpdir").mkdir(exist_ok=True)
    (tmp_path / "no_model").mkdir(exist_ok=True)
    return run_scenario(
        name,
        tmp_path,
        zip_path,
        timeout=timeout,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tmp_path / "no_model"),
    )
