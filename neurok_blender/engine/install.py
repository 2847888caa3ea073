# SPDX-License-Identifier: GPL-3.0-or-later
"""Install the engine's dependencies with pip into a folder of the extension's user directory.

``pip install --target <deps_root>/<py3.11>.partial ...`` runs as a child process; its output
becomes progress; on success the folder is renamed to ``<deps_root>/py3.11`` (so a failed or
cancelled install never leaves a half-filled folder on the engine's import path). On a machine
without an NVIDIA GPU (Linux, Windows) torch comes from PyTorch's CPU wheel index: the default
wheel there bundles CUDA (gigabytes the machine cannot use). Every version comes from the lock
(``constraints.txt``, the versions the tests passed on).
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

from .job import Job
from .lock import LOCK

TORCH_VERSION = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
REQUIREMENTS = (
    "numpy>=1.24",
    "scipy>=1.11",
    "trimesh>=4.0",
    "safetensors>=0.4",
    "libigl>=2.5",
    "numba>=0.60",
)
EXPECTED_PACKAGES = 24  # torch, its dependencies and ours: only scales the progress bar

NETWORK_ERRORS = (
    "NewConnectionError",
    "ProxyError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "getaddrinfo failed",
    "SSLError",
)


def has_nvidia_gpu() -> bool:
    """True where NVIDIA's driver tool is on PATH (the CUDA wheel of torch is useful there)."""
    return shutil.which("nvidia-smi") is not None


def pip_argv(
    python: str, target: str | Path, *, cpu_only: bool, platform: str = sys.platform
) -> list[str]:
    """The pip command line that installs torch and the engine's requirements into ``target``."""
    torch = f"torch=={TORCH_VERSION}"
    index: list[str] = []
    if cpu_only and platform != "darwin":
        torch += "+cpu"
        index = ["--extra-index-url", TORCH_CPU_INDEX]
    return [
        python,
        "-m",
        "pip",
        "install",
        "--target",
        str(target),
        "--upgrade",
        "--no-input",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        "--retries",
        "2",
        "--timeout",
        "20",
        *index,
        "--constraint",
        str(LOCK),
        torch,
        *REQUIREMENTS,
    ]


_COLLECTING = re.compile(r"^\s*Collecting (\S+)")
_DOWNLOADING = re.compile(r"^\s*Downloading (\S+?)(?: \((.+)\))?\s*$")


class InstallJob(Job):
    """pip as a job: ``result`` = {"target": folder} once installed."""

    title = "Installing dependencies"

    def __init__(self, folder: str | Path, deps_dir: str | Path):
        super().__init__(folder)
        self.deps_dir = Path(deps_dir)
        self.staging = self.deps_dir.with_name(self.deps_dir.name + ".partial")
        self.collected = 0

    def start_pip(self, python: str, *, cpu_only: bool, env: dict[str, str]) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.parent.mkdir(parents=True, exist_ok=True)
        env = dict(env, PYTHONUNBUFFERED="1")
        self.start(pip_argv(python, self.staging, cpu_only=cpu_only), env=env)

    def handle_text(self, line: str) -> None:
        if match := _COLLECTING.match(line):
            self.collected += 1
            self.status = f"collecting {match.group(1)}"
            self.fraction = max(self.fraction, 0.75 * min(self.collected / EXPECTED_PACKAGES, 1))
        elif match := _DOWNLOADING.match(line):
            name = match.group(1).rsplit("/", 1)[-1].split("-")[0]
            size = f" ({match.group(2)})" if match.group(2) else ""
            self.status = f"downloading {name}{size}"
        elif line.startswith("Installing collected packages"):
            self.status = "installing packages"
            self.fraction = max(self.fraction, 0.8)

    def finish(self, code: int) -> None:
        if code == 0:
            shutil.rmtree(self.deps_dir, ignore_errors=True)
            self.staging.rename(self.deps_dir)
            self.result = {"target": str(self.deps_dir)}
            return
        shutil.rmtree(self.staging, ignore_errors=True)
        assert self.process is not None
        lines = self.process.stderr_tail(200) + self.process.text_lines
        text = "\n".join(lines)
        if "No module named pip" in text:
            self.error = (
                f"{self.process.argv[0]} has no pip; run '{self.process.argv[0]} -m ensurepip'"
                " once, or choose an engine interpreter that has pip"
            )
        elif any(sign in text for sign in NETWORK_ERRORS):
            self.error = (
                "cannot reach the package index (offline, or a proxy or firewall blocks it);"
                " connect to the internet and try again, or choose an engine interpreter that"
                " already has torch"
            )
        else:
            errors = [line for line in lines if line.startswith("ERROR")]
            detail = (errors or lines or [""])[-1].strip()[-300:]
            self.error = f"pip failed ({code}): {detail}" if detail else f"pip failed ({code})"

    def cleanup(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        super().cleanup()
