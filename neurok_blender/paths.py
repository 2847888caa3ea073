# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the add-on keeps its files: the extension's user folder (dependencies, caches)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import bpy

# The add-on's own package: "bl_ext.<repository>.neurok" when installed as an extension.
ADDON_PACKAGE = __package__.rpartition(".")[0] or __package__


def user_dir(*parts: str) -> Path:
    """A folder under the extension's user directory (kept across updates), created if needed."""
    sub = "/".join(parts)
    try:
        path = bpy.utils.extension_path_user(ADDON_PACKAGE, path=sub, create=True)
    except ValueError:  # not installed as an extension (a development checkout)
        path = Path(tempfile.gettempdir()) / "neurok-user" / sub
        path.mkdir(parents=True, exist_ok=True)
    return Path(path)


def deps_root() -> Path:
    """Where "Install dependencies" puts the engine's packages (one subfolder per Python)."""
    return user_dir("deps")


def space_cache_dir() -> Path:
    """The engine's cache of kinematic spaces (rebuilding one is the slow part of a run)."""
    return user_dir("cache")


def engine_dir() -> Path:
    """Where warm engines keep their folders (stderr), one each."""
    return user_dir("engine")


def new_job_dir() -> Path:
    """A fresh temporary folder for one worker run (request, mesh, frames, stderr)."""
    return Path(tempfile.mkdtemp(prefix="neurok-"))
