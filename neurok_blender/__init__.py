# SPDX-License-Identifier: GPL-3.0-or-later
"""NeuROK add-on: everything that imports bpy. Never imports torch (Blender's Python has none)."""

import bpy  # noqa: F401  (the add-on only runs inside Blender)

from . import registration


def register() -> None:
    registration.register()


def unregister() -> None:
    registration.unregister()
