# SPDX-License-Identifier: GPL-3.0-or-later
"""Add-on preferences (the engine: interpreter, dependencies, device, checkpoint, limits) and
the one function that turns them into a typed value for the rest of the add-on."""

from __future__ import annotations

from dataclasses import dataclass

import bpy
from bpy.props import EnumProperty, IntProperty, StringProperty

from .paths import ADDON_PACKAGE

DEVICE_ITEMS = (
    ("AUTO", "Auto", "CUDA if available, then Apple MPS, else the CPU"),
    ("CPU", "CPU", "Always the CPU"),
    ("CUDA", "CUDA", "An NVIDIA GPU"),
    ("MPS", "MPS", "Apple silicon GPU"),
)


@dataclass(frozen=True)
class EngineSettings:
    """python: '' for Blender's own; checkpoint: '' for the bundled default; device lower case."""

    python: str = ""
    device: str = "auto"
    checkpoint: str = ""
    max_vertices: int = 250_000
    time_limit: float = 3600.0


class NeuROKPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_PACKAGE

    python_path: StringProperty(
        name="Engine Python",
        description=(
            "Python that runs the engine (needs torch). Empty: Blender's own Python, with the"
            " dependencies from Install Dependencies"
        ),
        subtype="FILE_PATH",
        default="",
    )
    device: EnumProperty(name="Device", items=DEVICE_ITEMS, default="AUTO")
    checkpoint: StringProperty(
        name="Checkpoint",
        description="Folder of a trained NeuROK model. Empty: the model bundled with the add-on",
        subtype="DIR_PATH",
        default="",
    )
    max_vertices: IntProperty(
        name="Vertex Limit",
        description="Refuse to simulate meshes with more vertices than this",
        default=250_000,
        min=1,
    )

    time_limit: IntProperty(
        name="Time Limit",
        description=(
            "Seconds after which a job run to its end without the interface (background mode,"
            " scripts, render farms) stops with a message; 0: no limit. Interactive runs are"
            " cancelled with Esc"
        ),
        default=3600,
        min=0,
    )

    def draw(self, context):
        from .ui.preferences import draw_preferences

        draw_preferences(self, self.layout, context)


def preferences(context=None) -> NeuROKPreferences | None:
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_PACKAGE)
    return addon.preferences if addon is not None else None


def engine_settings(context=None) -> EngineSettings:
    """The preferences as a frozen value (defaults when the add-on's preferences are absent)."""
    prefs = preferences(context)
    if prefs is None:
        return EngineSettings()
    return EngineSettings(
        python=bpy.path.abspath(prefs.python_path) if prefs.python_path else "",
        device=prefs.device.lower(),
        checkpoint=bpy.path.abspath(prefs.checkpoint) if prefs.checkpoint else "",
        max_vertices=prefs.max_vertices,
        time_limit=float(prefs.time_limit),
    )
