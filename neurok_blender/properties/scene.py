# SPDX-License-Identifier: GPL-3.0-or-later
"""Scene-wide settings (``Scene.neurok``): how conditions show in the viewport."""

import bpy
from bpy.props import BoolProperty


class NeuROKSceneSettings(bpy.types.PropertyGroup):
    show_gizmos: BoolProperty(
        name="Gizmos",
        description="Show the strength arrows and handle gizmos of the active object's conditions",
        default=True,
    )
