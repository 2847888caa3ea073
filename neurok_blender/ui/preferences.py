# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on preferences' layout: engine interpreter and dependencies, device, checkpoint."""

from ..engine import registry
from .progress import draw_job
from .status import engine_status_line


def draw_preferences(prefs, layout, context) -> None:
    col = layout.column()
    col.use_property_split = True
    col.prop(prefs, "python_path")
    row = col.row()
    row.label(text="" if prefs.python_path else "Empty: Blender's own Python")
    if not draw_job(col, registry.INSTALL):
        col.operator("neurok.install_dependencies", icon="IMPORT")
    col.prop(prefs, "device")
    col.prop(prefs, "checkpoint")
    col.prop(prefs, "max_vertices")
    col.prop(prefs, "time_limit")
    box = layout.box()
    if not draw_job(box, registry.PROBE):
        icon, text = engine_status_line()
        row = box.row()
        row.label(text=f"Engine: {text}", icon=icon)
        row.operator("neurok.check_engine", icon="FILE_REFRESH")
