# SPDX-License-Identifier: GPL-3.0-or-later
"""The one ordered list of classes the add-on registers (unregistered in reverse), and the two
root properties: ``Object.neurok`` and ``Scene.neurok``."""

import bpy

from . import cache_files, live_preview, operators, properties, structure_draw, ui
from .engine import registry
from .engine.server import remove_stale_folders
from .gizmos import NEUROK_GGT_conditions
from .operators.engine import cancel_warm_up
from .paths import engine_dir
from .preferences import NeuROKPreferences

CLASSES = (
    *properties.CLASSES,
    NeuROKPreferences,
    *operators.CLASSES,
    *ui.CLASSES,
    NEUROK_GGT_conditions,
)


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    try:  # engine folders of past sessions that ended without disabling the add-on
        remove_stale_folders(engine_dir())
    except (OSError, ValueError):
        pass
    bpy.types.Object.neurok = bpy.props.PointerProperty(type=properties.NeuROKObjectSettings)
    bpy.types.Scene.neurok = bpy.props.PointerProperty(type=properties.NeuROKSceneSettings)
    cache_files.register()
    structure_draw.register()


def unregister() -> None:
    structure_draw.unregister()
    cache_files.unregister()
    live_preview.stop()  # its engine and its drawing
    cancel_warm_up()
    registry.cancel_all()  # never leave an engine process behind
    del bpy.types.Scene.neurok
    del bpy.types.Object.neurok
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
