"""Scenario: draw the sidebar and the preferences with a recording layout."""

from __future__ import annotations

from pathlib import Path

import bpy
from bl_helpers import (
    activate,
    add_grid,
    addon,
    empty_scene,
    op_exists,
    prefs,
    scenario,
    synthetic_frames,
)


class RecordingLayout:
    """Stands in for UILayout: records what a draw method lays out and checks that every
    property and operator it names exists (a typo would only show in a real UI otherwise)."""

    def __init__(self, log):
        self.log = log
        self.use_property_split = False
        self.active = True
        self.enabled = True
        self.scale_y = 1.0

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.log)

    row = column = box = split = _child

    def label(self, *, text="", icon="NONE", **kwargs):
        self.log["labels"].append(text)

    def prop(self, data, name, **kwargs):
        if name not in data.bl_rna.properties:
            self.log["errors"].append(f"no property {name!r} on {data.bl_rna.identifier}")
        self.log["props"].append(name)

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        self.prop(data, name)
        if search_name not in search_data.bl_rna.properties:
            self.log["errors"].append(f"no collection {search_name!r}")

    def operator(self, idname, **kwargs):
        if not op_exists(idname):
            self.log["errors"].append(f"no operator {idname!r}")
        self.log["operators"].append(idname)
        props = bpy.ops
        for part in idname.split("."):
            props = getattr(props, part)
        return _OperatorProps(props.get_rna_type(), self.log)

    def operator_menu_enum(self, idname, prop, **kwargs):
        self.operator(idname)
        rna = getattr(getattr(bpy.ops, idname.split(".")[0]), idname.split(".")[1]).get_rna_type()
        if prop not in rna.properties:
            self.log["errors"].append(f"operator {idname} has no enum {prop!r}")

    def progress(self, *, factor=0.0, type="BAR", text=""):
        self.log["progress"].append((round(factor, 3), text))


class _OperatorProps:
    def __init__(self, rna, log):
        object.__setattr__(self, "_rna", rna)
        object.__setattr__(self, "_log", log)

    def __setattr__(self, name, value):
        if name not in self._rna.properties:
            self._log["errors"].append(f"operator {self._rna.identifier} has no {name!r}")


def _draw_all() -> dict:
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    for cls in (
        bpy.types.NEUROK_PT_main,
        bpy.types.NEUROK_PT_conditions,
        bpy.types.NEUROK_PT_physics,
        bpy.types.NEUROK_PT_output,
    ):
        if hasattr(cls, "poll") and not cls.poll(bpy.context):
            continue
        cls.draw(_PanelStandIn(log), bpy.context)
    return log


class _PanelStandIn:
    def __init__(self, log):
        self.layout = RecordingLayout(log)

    def __getattr__(self, name):  # the panel's own helpers (draw_row, ...) as plain functions
        for cls in (
            bpy.types.NEUROK_PT_main,
            bpy.types.NEUROK_PT_conditions,
            bpy.types.NEUROK_PT_output,
        ):
            if hasattr(cls, name):
                return getattr(cls, name)
        raise AttributeError(name)


@scenario
def panels(params) -> dict:
    """Draw the sidebar and the preferences in each state with a recording layout."""
    empty_scene()
    out = {}
    activate(None)
    out["nothing"] = _draw_all()
    sheet = add_grid("Sheet", 4, 4)
    sheet.vertex_groups.new(name="Pin")
    out["mesh"] = _draw_all()
    for op in (bpy.ops.neurok.add_force, bpy.ops.neurok.add_drag, bpy.ops.neurok.add_velocity):
        activate(sheet)
        op()
        out[f"active_{bpy.context.active_object.neurok.condition.kind}"] = _draw_all()
    bake = addon("neurok_blender.bake")
    frames = synthetic_frames(sheet, 12, 0.1)
    bake.bake(sheet, frames, 1, "SHAPE_KEYS")
    activate(sheet)
    out["results"] = _draw_all()
    sheet.neurok.results.frames_on_barrier = 6  # of 12: the last motion left the learned shapes
    sheet.neurok.results.edge_strain = 0.12  # and stretched the mesh: a doubtful result
    out["results_pressed"] = _draw_all()
    # a running simulation: a progress bar with a cancel button instead of Simulate
    job_module = addon("neurok_blender.engine.job")
    registry = addon("neurok_blender.engine.registry")
    job = job_module.SimulationJob(Path(params["tmp"]) / "job", 12)
    job.fraction, job.status = 0.4, "frame 3 of 12"
    registry.start(registry.SIMULATE, job)
    out["running"] = _draw_all()
    registry.end(registry.SIMULATE, job)
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    ui_prefs = addon("neurok_blender.ui.preferences")
    ui_prefs.draw_preferences(prefs(), RecordingLayout(log), bpy.context)
    out["preferences"] = log
    return out
