# SPDX-License-Identifier: GPL-3.0-or-later
"""Find Structure (the engine finds the active mesh's parts and joints) and Clear Structure."""

from __future__ import annotations

import json

import bpy

from ..engine import registry
from ..engine.command import EngineSetupError, engine_command
from ..engine.job import StructureJob
from ..gather import (
    GatherError,
    check_object,
    mesh_arrays,
    pinned_vertices,
    transform,
    world_matrix,
)
from ..paths import deps_root, new_job_dir
from ..preferences import engine_settings
from ..request import StructureRequest
from ..scene_query import simulated_object
from ..structure_data import clear_structure, has_structure, store_structure
from .job_runner import EngineJobFlow, JobOperator
from .simulate import engine_free


class StructureFlow(EngineJobFlow):
    """Gather the world-space mesh and its pins, run the engine's structure task, store it."""

    bl_label = "Find Structure"
    job_kind = registry.STRUCTURE

    def start_job(self, context):
        obj = simulated_object(context)
        settings = engine_settings(context)
        try:
            check_object(obj, settings.max_vertices)
            matrix = world_matrix(obj)
            local, faces = mesh_arrays(obj)
            pins = pinned_vertices(obj, obj.neurok.physics.pin_group)
            command = engine_command(settings.python, deps_root())
        except (GatherError, EngineSetupError) as exc:
            self.report({"ERROR"}, f"Find Structure: {exc}")
            return None
        request = StructureRequest(transform(matrix, local), faces, pins)
        folder = new_job_dir()
        job = StructureJob(folder)
        self._target = (obj.name, obj.session_uid, matrix, len(local))
        return self.run_on_engine(job, command, request.write(folder))

    def job_done(self, context, job):
        name, uid, matrix, count = self._target
        obj = self.live_mesh(name, uid, "nothing stored")
        if obj is None:
            return {"CANCELLED"}
        try:
            if len(obj.data.vertices) != count:
                raise ValueError(f"'{obj.name}' changed meanwhile: find it again")
            path = job.result.get("structure") or job.folder / "structure.json"
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            store_structure(obj.neurok.structure, data, matrix)
        except (ValueError, OSError, KeyError, TypeError) as exc:
            self.report({"ERROR"}, f"Find Structure: {exc}")
            return {"CANCELLED"}
        s = obj.neurok.structure
        types = ", ".join(sorted({j.type for j in s.joints})) or "no joints"
        self.report(
            {"INFO"}, f"'{obj.name}': {len(s.parts)} parts, {len(s.joints)} joints ({types})"
        )
        return {"FINISHED"}


class NEUROK_OT_find_structure(StructureFlow, JobOperator, bpy.types.Operator):
    """Find the active mesh's parts and the joints between them (fixed, hinge, slider, ball,
    contact) from its geometry and the bundled joint typer; edit them in the Structure panel,
    and Simulate holds them"""

    bl_idname = "neurok.find_structure"
    bl_label = "Find Structure"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return engine_free(cls)


class NEUROK_OT_clear_structure(bpy.types.Operator):
    """Forget the active mesh's structure: Simulate uses the joints its geometry gives"""

    bl_idname = "neurok.clear_structure"
    bl_label = "Clear Structure"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = simulated_object(context)
        return obj is not None and obj.type == "MESH" and has_structure(obj.neurok.structure)

    def execute(self, context):
        clear_structure(simulated_object(context).neurok.structure)
        return {"FINISHED"}
