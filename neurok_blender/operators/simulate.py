# SPDX-License-Identifier: GPL-3.0-or-later
"""Simulate (run the engine on the active object and bake), Cancel, Clear."""

from __future__ import annotations

import dataclasses

import bpy
from bpy.props import EnumProperty

from ..bake import BakeError, bake, check_bake, clear_results, has_results, results_owner
from ..bake_mode import resolved_bake_mode
from ..core import edge_strain, frames_on_barrier, penetration
from ..engine import registry
from ..engine.command import EngineSetupError, engine_command
from ..engine.job import SimulationJob
from ..gather import Gathered, GatherError, gather
from ..paths import deps_root, engine_dir, new_job_dir
from ..preferences import engine_settings
from ..request import load_frames, simulate_report
from ..rig_bake import load_rig
from ..scene_query import simulated_object
from .job_runner import JobFlow, JobOperator

RIG_TOLERANCE = 0.005  # of the object's size: a rig playing back farther than this is reported


class SimulateFlow(JobFlow):
    """Gather, run the engine, bake and report: the Simulate operator's steps, shared with the
    scripting API (``api.simulate``). ``figures`` holds a finished run's numbers."""

    bl_label = "Simulate"
    job_kind = registry.SIMULATE
    figures: dict | None = None

    def target(self, context):
        """The object simulated."""
        return simulated_object(context)

    def start_job(self, context):
        obj = self.target(context)
        settings = engine_settings(context)
        try:
            gathered = gather(context, obj, settings)
            mode = resolved_bake_mode(obj, settings.checkpoint)
            check_bake(obj, mode)
            command = engine_command(settings.python, deps_root())
        except (GatherError, BakeError, EngineSetupError) as exc:
            self.report({"ERROR"}, f"Simulate: {exc}")
            return None
        if mode == "RIG":
            # the rig alone: the engine's cost does not grow with the vertices (it checks the
            # rig's playback on a sample of them: info rig_error)
            request = dataclasses.replace(gathered.request, want_rig=True, want_frames=False)
            gathered = dataclasses.replace(gathered, request=request)
        folder = new_job_dir()
        request_path = gathered.request.write(folder)
        job = SimulationJob(folder, gathered.frame_count)
        self._gathered = gathered
        self._bake_mode = mode
        try:  # the warm engine (engine.server), started now if none can take the request
            server = registry.engine_server(command, engine_dir())
        except OSError as exc:
            job.start_failed(f"cannot start {command.python!r}: {exc.strerror or exc}")
            return job
        job.attach(server, request_path)
        return job

    def job_done(self, context, job):
        gathered: Gathered = self._gathered
        obj = bpy.data.objects.get(gathered.object_name)
        if obj is None or obj.session_uid != gathered.object_uid or obj.type != "MESH":
            self.report({"ERROR"}, f"Simulate: '{gathered.object_name}' is gone; nothing baked")
            return {"CANCELLED"}
        if obj.mode == "EDIT":
            self.report({"ERROR"}, f"Simulate: '{obj.name}' is in Edit Mode; nothing baked")
            return {"CANCELLED"}
        try:
            frames = rig = None
            if self._bake_mode == "RIG":
                rig = load_rig(
                    job.result.get("rig") or job.folder / "rig.npz",
                    gathered.frame_count,
                    gathered.num_vertices,
                )
            else:
                frames = load_frames(
                    job.result.get("frames") or job.folder / "frames.npy",
                    gathered.frame_count,
                    gathered.num_vertices,
                )
            summary = bake(
                obj, frames, gathered.frame_start, self._bake_mode, gathered.matrix_world, rig
            )
        except (ValueError, OSError, BakeError) as exc:
            self.report({"ERROR"}, f"Simulate: {exc}")
            return {"CANCELLED"}
        seconds = float(job.result.get("seconds") or 0.0)
        obj.neurok.results.seconds = seconds
        info = job.result.get("info") or {}
        device = info.get("device") if isinstance(info, dict) else None
        registry.set_engine_status(
            "ready", f"ran in {seconds:.1f} s" + (f" on {device}" if device else "")
        )
        results = obj.neurok.results  # the figures of the warning, for the panel
        results.dynamics = gathered.request.dynamics
        results.frames_on_barrier = frames_on_barrier(info)
        results.edge_strain = edge_strain(info)[0]
        results.penetration = penetration(info)[0]
        self.figures = {
            **(info if isinstance(info, dict) else {}),
            "seconds": seconds,
            "frames": gathered.frame_count,
            "baked": summary,
        }
        kind, message = simulate_report(obj.name, gathered.frame_count, seconds, summary, info)
        rig_error = info.get("rig_error") if isinstance(info, dict) else None
        if isinstance(rig_error, int | float) and rig_error > RIG_TOLERANCE:
            kind = "WARNING"
            message += (
                f". The rig plays the pinned motion back within {rig_error:.1%} of the object's"
                " size (its bones cannot hold the pins' blend exactly): bake shape keys or a"
                " point cache for the exact motion"
            )
        if gathered.warnings:
            kind, message = "WARNING", " ".join((message + ".", *gathered.warnings))
        self.report({kind}, message)
        return {"FINISHED"}

    def job_failed(self, context, job):
        if job.error and getattr(job, "error_kind", None) == "MissingDependency":
            registry.set_engine_status("error", job.error)


class NEUROK_OT_simulate(SimulateFlow, JobOperator, bpy.types.Operator):
    """Simulate the active mesh with NeuROK and bake the motion onto the timeline"""

    bl_idname = "neurok.simulate"
    bl_label = "Simulate"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if registry.get(registry.SIMULATE) is not None:
            cls.poll_message_set("a simulation is running")
            return False
        return True


class NEUROK_OT_cancel(bpy.types.Operator):
    """Stop the running NeuROK job; the scene stays as it was"""

    bl_idname = "neurok.cancel"
    bl_label = "Cancel"
    bl_options = {"INTERNAL"}

    kind: EnumProperty(
        items=(
            ("ALL", "All", ""),
            (registry.SIMULATE, "Simulation", ""),
            (registry.PROBE, "Engine Check", ""),
            (registry.INSTALL, "Install", ""),
        ),
        default="ALL",
    )

    def execute(self, context):
        if not registry.request_cancel(None if self.kind == "ALL" else self.kind):
            self.report({"INFO"}, "Nothing is running")
            return {"CANCELLED"}
        return {"FINISHED"}


class NEUROK_OT_clear_results(bpy.types.Operator):
    """Remove the shape keys or point cache NeuROK baked on the active object (nothing else)"""

    bl_idname = "neurok.clear_results"
    bl_label = "Clear"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        obj = simulated_object(context)
        if not has_results(obj):
            cls.poll_message_set("the active object has no NeuROK results")
            return False
        if obj.mode == "EDIT":
            cls.poll_message_set("leave Edit Mode first")
            return False
        return True

    def execute(self, context):
        obj = simulated_object(context)
        owner = results_owner(obj)
        removed = clear_results(owner)
        via = "" if owner == obj else f", baked on its shared mesh through '{owner.name}'"
        self.report({"INFO"}, f"Cleared NeuROK results of '{obj.name}' ({removed} removed{via})")
        return {"FINISHED"}
