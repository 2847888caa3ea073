# SPDX-License-Identifier: GPL-3.0-or-later
"""Live Preview: turn the background preview of the active object on or off."""

from __future__ import annotations

import bpy

from .. import live_preview
from ..gather import GatherError, check_object
from ..preferences import engine_settings
from ..scene_query import simulated_object


class NEUROK_OT_live_preview(bpy.types.Operator):
    """Re-simulate the first frames in the background at every change (drag a gizmo, move a
    handle) and play them over the object; Esc or the button again stops. Nothing is baked"""

    bl_idname = "neurok.live_preview"
    bl_label = "Live Preview"
    bl_options = {"REGISTER"}

    _timer = None

    def execute(self, context):
        if live_preview.active():
            live_preview.stop()
            return {"FINISHED"}
        obj = simulated_object(context)
        try:
            check_object(obj, engine_settings(context).max_vertices)
        except GatherError as exc:
            self.report({"ERROR"}, f"Live Preview: {exc}")
            return {"CANCELLED"}
        live_preview.start(context, obj)
        if bpy.app.background or context.window is None:
            return {"FINISHED"}  # headless: the caller ticks (``live_preview.tick``)
        self._timer = context.window_manager.event_timer_add(
            live_preview.POLL, window=context.window
        )
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def invoke(self, context, event):
        return self.execute(context)

    def modal(self, context, event):
        if not live_preview.active():  # stopped by the button, or its object went away
            self._end(context)
            return {"CANCELLED"}
        if event.type == "ESC" and event.value == "PRESS":
            live_preview.stop()
            self._end(context)
            return {"CANCELLED"}
        if event.type == "TIMER" and event.timer is self._timer:
            live_preview.tick(context)
        return {"PASS_THROUGH"}  # gizmos, handles and everything else work as usual

    def cancel(self, context):
        live_preview.stop()
        self._end(context)

    def _end(self, context) -> None:
        if self._timer is not None:
            context.window_manager.event_timer_remove(self._timer)
            self._timer = None
