# SPDX-License-Identifier: GPL-3.0-or-later
"""The one ordered list of classes the add-on registers (unregistered in reverse)."""

import bpy

CLASSES: tuple = ()


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)


def unregister() -> None:
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
