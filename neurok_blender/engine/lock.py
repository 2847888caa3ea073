# SPDX-License-Identifier: GPL-3.0-or-later
"""The lock: exact versions of every dependency, per Python (``constraints.txt`` beside this file).

pip reads the file itself (``-c``); this module reads it for the checks: ``pins`` gives the
versions that apply to one Python, ``installed`` what an environment holds, and
``python -m neurok_blender.engine.lock`` compares the two for the running interpreter (the last
step of ``tests/setup.sh``: a fresh set-up installs exactly the lock). No bpy, no torch.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

LOCK = Path(__file__).with_name("constraints.txt")
_LINE = re.compile(
    r'^(?P<name>[A-Za-z0-9._-]+)==(?P<version>[^;\s]+)\s*(?:;\s*python_version\s*==\s*"(?P<py>[\d.]+)")?$'
)


def normalise(name: str) -> str:
    """A distribution's name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(python: str | None = None, path: Path = LOCK) -> dict[str, str]:
    """name -> exact version for Python ``python`` ('3.11'; default: the running one)."""
    python = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    out: dict[str, str] = {}
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        found = _LINE.match(line)
        if found is None:
            raise ValueError(
                f"{path.name}:{number}: not 'name==version[; python_version == \"X.Y\"]'"
            )
        if found["py"] in (None, python):
            out[normalise(found["name"])] = found["version"]
    return out


def installed() -> dict[str, str]:
    """name -> version of every distribution in this environment (local labels dropped)."""
    return {
        normalise(d.metadata["Name"]): d.version.split("+")[0]
        for d in metadata.distributions()
        if d.metadata["Name"]
    }


def differences(locked: dict[str, str], found: dict[str, str], ignore=("neurok",)) -> list[str]:
    """What an environment holds that the lock does not say, and the other way round."""
    out = []
    for name in sorted(set(locked) | set(found)):
        if name in ignore:
            continue
        if name not in found:
            out.append(f"{name}: locked {locked[name]}, not installed")
        elif name not in locked:
            out.append(f"{name}: {found[name]} installed, not in the lock")
        elif locked[name] != found[name]:
            out.append(f"{name}: {found[name]} installed, locked {locked[name]}")
    return out


def pinned_pythons(path: Path = LOCK) -> set[str]:
    """The Python versions ('3.11', ...) the lock has pins of their own for."""
    return set(re.findall(r'python_version\s*==\s*"([\d.]+)"', path.read_text()))


def main() -> int:
    """Exit 1 if a locked distribution is missing or at another version, or if the lock has no
    pins for this Python; one not in the lock is reported (a hand install, torch's CUDA
    libraries where pip took that build) without failing."""
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if python not in pinned_pythons():
        print(
            f"lock: {LOCK.name} has no pins for Python {python} (it has "
            f"{', '.join(sorted(pinned_pythons()))}): use one of those",
            file=sys.stderr,
        )
        return 1
    diff = differences(pins(python), installed(), ignore=("neurok", "setuptools", "wheel"))
    wrong = [line for line in diff if "not in the lock" not in line]
    for line in diff:
        print(f"lock: {line}", file=sys.stderr)
    if wrong:
        print(f"lock: this environment does not match {LOCK.name}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
