# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit to Target: pose the active mesh into the shape of another mesh (inverse kinematics in
the rig space) and key the result at the current frame, as a rig pose or a shape key."""

from __future__ import annotations

import bpy

from ..engine import registry
from ..engine.command import EngineSetupError, engine_command
from ..engine.job import FitJob
from ..fit_bake import key_fit_pose, key_fit_shape
from ..fit_gather import FitGathered, gather_fit
from ..gather import GatherError
from ..paths import deps_root, new_job_dir
from ..preferences import engine_settings
from ..request import fit_report, load_frames
from ..rig_bake import RigError, load_rig
from ..scene_query import simulated_object
from .job_runner import EngineJobFlow, JobOperator
from .simulate import engine_free


class FitFlow(EngineJobFlow):
    """Gather, run the engine's fit, key it and report: the operator's steps, shared with the
    scripting API (``api.fit``). ``figures`` holds a finished fit's numbers."""

    bl_label = "Fit to Target"
    job_kind = registry.FIT
    figures: dict | None = None

    def subject(self, context):
        """The object fitted."""
        return simulated_object(context)

    def fit_target(self, obj):
        """The mesh it is fitted to (its NeuROK settings' target)."""
        return obj.neurok.fit_target

    def key_as(self, obj) -> str:
        return obj.neurok.fit_key_as

    def start_job(self, context):
        obj = self.subject(context)
        settings = engine_settings(context)
        try:
            if obj is None:  # (before reading its settings)
                raise GatherError("no active object: select the mesh to fit")
            gathered = gather_fit(context, obj, self.fit_target(obj), self.key_as(obj), settings)
            command = engine_command(settings.python, deps_root())
        except (GatherError, EngineSetupError) as exc:
            self.report({"ERROR"}, f"Fit to Target: {exc}")
            return None
        folder = new_job_dir()
        request_path = gathered.request.write(folder)
        job = FitJob(folder)
        self._gathered = gathered
        return self.run_on_engine(job, command, request_path)

    def job_done(self, context, job):
        gathered: FitGathered = self._gathered
        obj = self.live_mesh(gathered.object_name, gathered.object_uid, "nothing keyed")
        if obj is None:
            return {"CANCELLED"}
        try:
            if len(obj.data.vertices) != gathered.num_vertices:
                raise ValueError(
                    f"'{obj.name}' now has {len(obj.data.vertices)} vertices, the fitted mesh"
                    f" {gathered.num_vertices}: the mesh changed meanwhile; fit again"
                )
            n = gathered.num_vertices
            fitted = load_frames(job.result.get("frames") or job.folder / "fit.npy", 1, n)[0]
            if gathered.key_as == "RIG":
                rig = load_rig(job.result.get("rig") or job.folder / "rig.npz", 1, n)
                keyed = key_fit_pose(obj, rig, gathered.frame, gathered.size)
            else:
                keyed = key_fit_shape(obj, fitted, gathered.frame)
        except (ValueError, OSError, RigError) as exc:
            self.report({"ERROR"}, f"Fit to Target: {exc}")
            return {"CANCELLED"}
        seconds = float(job.result.get("seconds") or 0.0)
        info = job.result.get("info") or {}
        info = info if isinstance(info, dict) else {}
        registry.set_engine_status("ready", f"fitted in {seconds:.1f} s")
        self.figures = {**info, "total_seconds": seconds, "frame": gathered.frame, "keyed": keyed}
        message = fit_report(obj.name, gathered.target_name, seconds, info, keyed)
        if gathered.warnings:
            self.report({"WARNING"}, " ".join((message + ".", *gathered.warnings)))
        else:
            self.report({"INFO"}, message)
        return {"FINISHED"}


class NEUROK_OT_fit_to_target(FitFlow, JobOperator, bpy.types.Operator):
    """Pose the active mesh into the shape of its target mesh and key it at the current frame
    (as a pose of its NeuROK rig, or as a shape key)"""

    bl_idname = "neurok.fit_to_target"
    bl_label = "Fit to Target"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return engine_free(cls)
