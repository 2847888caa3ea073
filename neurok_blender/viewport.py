# SPDX-License-Identifier: GPL-3.0-or-later
"""The 3D viewport's shared bits: a draw handler that is added and removed once, and asking
the areas that show the add-on's state to redraw."""

from __future__ import annotations

import bpy


class ViewportDrawing:
    """``callback()`` drawn in every 3D viewport (``POST_VIEW``, world space) while added."""

    def __init__(self, callback):
        self.callback = callback
        self.handle = None

    def add(self) -> None:
        if self.handle is None:
            self.handle = bpy.types.SpaceView3D.draw_handler_add(
                self.callback, (), "WINDOW", "POST_VIEW"
            )

    def remove(self) -> None:
        if self.handle is not None:
            bpy.types.SpaceView3D.draw_handler_remove(self.handle, "WINDOW")
            self.handle = None


def tag_redraw(context, area_types=frozenset({"VIEW_3D"})) -> None:
    """Ask every area of ``area_types`` in every window to redraw."""
    wm = context.window_manager
    if wm is None:
        return
    for window in wm.windows:
        for area in window.screen.areas:
            if area.type in area_types:
                area.tag_redraw()
