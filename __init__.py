# SPDX-License-Identifier: GPL-3.0-or-later
"""NeuROK Blender extension entry point: only re-exports the add-on's register/unregister."""

from .neurok_blender import register, unregister

__all__ = ["register", "unregister"]
