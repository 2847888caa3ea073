# SPDX-License-Identifier: GPL-3.0-or-later
"""How to start the engine: which Python, with which import path.

The engine is ``<python> -m neurok_core.worker``. ``neurok_core`` ships inside the extension, so
its folder (the extension root) goes first on ``PYTHONPATH``; when the engine runs on Blender's own
Python, the dependency folder that "Install dependencies" fills (torch, scipy, ...) follows it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

EXTENSION_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds neurok_core/


class EngineSetupError(Exception):
    """The engine cannot be started as configured; the message says what to change."""


@dataclass(frozen=True)
class EngineCommand:
    """python: the interpreter; deps_dir: an extra import folder (None for none)."""

    python: str
    extension_root: str = str(EXTENSION_ROOT)
    deps_dir: str | None = None

    def argv(self, *args: str) -> list[str]:
        return [self.python, "-m", "neurok_core.worker", *args]

    def env(self) -> dict[str, str]:
        """The child's environment: ours plus the import path and unbuffered output."""
        env = dict(os.environ)
        paths = [self.extension_root]
        if self.deps_dir:
            paths.append(self.deps_dir)
        if env.get("PYTHONPATH"):
            paths.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(paths)
        env["PYTHONUNBUFFERED"] = "1"
        if self.python != sys.executable:
            env.pop("PYTHONHOME", None)  # Blender's own home would break another Python
        return env


def resolve_python(setting: str) -> str:
    """The interpreter for a preference value ('' = Blender's own Python); checked to exist."""
    if not setting.strip():
        return sys.executable
    path = Path(os.path.expanduser(setting.strip()))
    if path.is_dir():
        for candidate in ("bin/python3", "bin/python", "python.exe", "Scripts/python.exe"):
            if (path / candidate).is_file():
                path = path / candidate
                break
    if not path.is_file():
        raise EngineSetupError(
            f"the engine interpreter {setting!r} does not exist; choose a Python executable in"
            " the add-on preferences (empty = Blender's own Python)"
        )
    if not os.access(path, os.X_OK):
        raise EngineSetupError(f"the engine interpreter {str(path)!r} is not executable")
    return str(path)


_TAGS: dict[tuple[str, float], str] = {}


def python_tag(python: str) -> str:
    """'py3.11' for the interpreter ``python`` (asked once per file version, cached)."""
    if python == sys.executable:
        return f"py{sys.version_info[0]}.{sys.version_info[1]}"
    key = (python, os.path.getmtime(python))
    if key not in _TAGS:
        try:
            out = subprocess.run(
                [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineSetupError(f"the engine interpreter {python!r} cannot run: {exc}") from None
        if out.returncode != 0 or not out.stdout.strip():
            raise EngineSetupError(
                f"the engine interpreter {python!r} is not a working Python"
                f" ({(out.stderr or out.stdout).strip()[-200:]})"
            )
        _TAGS[key] = "py" + out.stdout.strip()
    return _TAGS[key]


def engine_command(python_setting: str, deps_root: str | os.PathLike | None) -> EngineCommand:
    """The engine command for the preferences; the dependency folder of that Python if any.

    deps_root: the folder "Install dependencies" installs into, one subfolder per Python version
    (``<deps_root>/py3.11``), so a dependency set never meets an interpreter it was not built for.
    """
    python = resolve_python(python_setting)
    deps_dir = None
    root = Path(deps_root) if deps_root is not None else None
    if root is not None and root.is_dir() and any(root.iterdir()):
        try:
            candidate = root / python_tag(python)
        except EngineSetupError:
            candidate = None  # let the engine run fail with its own, more precise message
        if candidate is not None and candidate.is_dir() and any(candidate.iterdir()):
            deps_dir = str(candidate)
    return EngineCommand(python=python, deps_dir=deps_dir)
