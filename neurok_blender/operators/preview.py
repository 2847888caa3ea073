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
    _session = None  # the preview this operator drives (a newer start makes its own)

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
        self._session = live_preview.session()
        if bpy.app.background or context.window is None:
            return {"FINISHED"}  # headless: the caller ticks (``live_preview.tick``)
        wm = context.window_manager
        self._timer = wm.event_timer_add(live_preview.POLL, window=context.window)
        live_preview.keep_timer(wm, self._timer)  # removed with the preview however it ends
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def invoke(self, context, event):
        return self.execute(context)

    def modal(self, context, event):
        if live_preview.session() is not self._session:  # stopped (the button, its object gone)
            self._end(context)
            return {"CANCELLED"}
        if event.type == "ESC" and event.value == "PRESS":
            live_preview.stop()
            self._end(context)
            return {"CANCELLED"}
        if event.type == "TIMER" and event.timer is self._timer:
            try:
                live_preview.tick(context)
            except Exception as exc:  # noqa: BLE001  (never leave a broken preview running)
                live_preview.stop()
                self._timer = None  # removed with it
                self.report({"ERROR"}, f"Live Preview stopped: {type(exc).__name__}: {exc}")
                return {"CANCELLED"}
        return {"PASS_THROUGH"}  # gizmos, handles and everything else work as usual

    def cancel(self, context):
        if live_preview.session() is self._session:
            live_preview.stop()
        self._timer = None

    def _end(self, context) -> None:
        self._timer = None  # (``live_preview.stop`` removed it)
