# SPDX-License-Identifier: GPL-3.0-or-later
"""NeuROK Blender extension entry point: re-exports the add-on's register/unregister, and its
scripting API as ``api`` (``neurok_blender.api``, imported on first use)."""

from .neurok_blender import register, unregister

__all__ = ["api", "register", "unregister"]


def __getattr__(name: str):
    if name == "api":
        from .neurok_blender import api

        return api
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
