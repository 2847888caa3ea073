# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the installable extension zip with Blender's own builder, and check what it holds.

    .venv/bin/python -m tools.build --out dist/

runs ``blender_ext.py build`` (shipped inside the ``bpy`` wheel; ``--blender-ext`` or the
``NEUROK_BLENDER_EXT`` environment variable point at another copy) on the repository root, then
checks that the zip is the add-on as it is on disk: ``__init__.py``, the manifest, the licence and
the ``neurok_blender`` and ``neurok_core`` packages whole (the engine with its weights), and
nothing else. What stays out (``tools/``, ``training/``, ``tests/``, ...) is written once, as
``[build] paths_exclude_pattern`` in ``blender_manifest.toml``.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_FILES = ("__init__.py", "blender_manifest.toml", "LICENSE")
SHIPPED_PACKAGES = ("neurok_blender", "neurok_core")  # shipped whole


def find_blender_ext() -> Path:
    """Blender's extension tool: $NEUROK_BLENDER_EXT, else the copy inside the bpy wheel."""
    if os.environ.get("NEUROK_BLENDER_EXT"):
        return Path(os.environ["NEUROK_BLENDER_EXT"])
    spec = importlib.util.find_spec("bpy")
    if spec is None or spec.origin is None:
        raise SystemExit(
            "Blender's extension builder not found: install the bpy module (pip install"
            " bpy==5.0.1) or pass --blender-ext path/to/blender_ext.py"
        )
    hits = sorted(Path(spec.origin).parent.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not hits:
        raise SystemExit(f"blender_ext.py not found under {Path(spec.origin).parent}")
    return hits[-1]


def zip_name(root: Path = ROOT) -> str:
    manifest = tomllib.loads((root / "blender_manifest.toml").read_text(encoding="utf-8"))
    return f"{manifest['id']}-{manifest['version']}.zip"


def _is_junk(relative: str) -> bool:
    """Byte code and hidden files, which the builder drops from any folder."""
    parts = relative.split("/")
    return "__pycache__" in parts or relative.endswith(".pyc") or parts[-1].startswith(".")


def addon_files(root: Path = ROOT) -> set[str]:
    """The files that make the add-on, as on disk (zip names, '/'-separated)."""
    names = {name for name in SHIPPED_FILES if (root / name).is_file()}
    for package in SHIPPED_PACKAGES:
        for path in (root / package).rglob("*"):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and not _is_junk(relative):
                names.add(relative)
    return names


def check_zip(path: Path, root: Path = ROOT) -> list[str]:
    """The zip's file names; raises SystemExit unless it holds exactly the add-on."""
    with zipfile.ZipFile(path) as archive:
        names = [n for n in archive.namelist() if not n.endswith("/")]
    expected = addon_files(root)
    extra, missing = sorted(set(names) - expected), sorted(expected - set(names))
    if extra:
        raise SystemExit(
            f"{path} holds files that are not the add-on: {', '.join(extra[:10])}; keep them out"
            " with [build] paths_exclude_pattern in blender_manifest.toml"
        )
    if missing:
        raise SystemExit(
            f"{path} lacks files of the add-on: {', '.join(missing[:10])}; the add-on's packages"
            f" ship whole ({', '.join(SHIPPED_PACKAGES)}): move what must not ship out of them"
        )
    return names


def build(out_dir: str | Path, *, blender_ext: Path | None = None, root: Path = ROOT) -> Path:
    """Build ``<out_dir>/neurok-<version>.zip``; returns its path."""
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / zip_name(root)
    tool = blender_ext or find_blender_ext()
    proc = subprocess.run(
        [sys.executable, str(tool), "build", "--source-dir", str(root)]
        + ["--output-filepath", str(target)],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not target.is_file():
        raise SystemExit(f"Blender's builder failed:\n{proc.stdout}{proc.stderr}")
    check_zip(target, root)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.build", description=__doc__)
    parser.add_argument("--out", default="dist", help="output folder (default: dist)")
    parser.add_argument("--blender-ext", type=Path, default=None, help="Blender's blender_ext.py")
    args = parser.parse_args(argv)
    path = build(args.out, blender_ext=args.blender_ext)
    size = path.stat().st_size / 1e6
    print(f"built {path} ({size:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
