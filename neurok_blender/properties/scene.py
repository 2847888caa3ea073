# SPDX-License-Identifier: GPL-3.0-or-later
"""Scene-wide settings (``Scene.neurok``): how conditions show in the viewport, and the live
preview's length."""

import bpy
from bpy.props import BoolProperty, IntProperty


class NeuROKSceneSettings(bpy.types.PropertyGroup):
    show_gizmos: BoolProperty(
        name="Gizmos",
        description="Show the strength arrows and handle gizmos of the active object's conditions",
        default=True,
    )
    preview_frames: IntProperty(
        name="Preview Frames",
        description=(
            "How many of the first frames the live preview simulates after each change (fewer"
            " update faster)"
        ),
        default=12,
        min=2,
        soft_max=120,
        max=1000,
    )
