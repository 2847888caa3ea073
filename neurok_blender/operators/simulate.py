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
from ..gather import (
    Gathered,
    GatheredScene,
    GatherError,
    gather,
    gather_scene,
    moving_selection,
)
from ..paths import deps_root, new_job_dir
from ..preferences import engine_settings
from ..request import load_frames, simulate_report
from ..rig_bake import load_rig
from ..scene_query import simulated_object
from .job_runner import EngineJobFlow, JobOperator

RIG_TOLERANCE = 0.005  # of the object's size: a rig playing back farther than this is reported


class SimulateFlow(EngineJobFlow):
    """Gather, run the engine, bake and report: the Simulate operator's steps, shared with the
    scripting API (``api.simulate``). ``figures`` holds a finished run's numbers."""

    bl_label = "Simulate"
    job_kind = registry.SIMULATE
    figures: dict | None = None
    _scene = None  # a run of several objects (``gather_scene``), or None

    def target(self, context):
        """The object simulated."""
        return simulated_object(context)

    def together(self, context, obj) -> list:
        """The objects that move in the run, ``obj`` first: with it, the other selected meshes
        whose role is Moves (the Simulate button)."""
        return moving_selection(context, obj)

    def start_job(self, context):
        obj = self.target(context)
        settings = engine_settings(context)
        self._scene = None
        try:
            scene = gather_scene(context, self.together(context, obj), settings)
            if scene is not None:
                return self._start_scene(scene, settings)
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
        return self.run_on_engine(job, command, request_path)

    def _start_scene(self, scene: GatheredScene, settings):
        """Start the run of several objects (``gather_scene``): each baked in its own mode."""
        parts, modes = [], []
        try:
            for gathered in scene.parts:
                obj = bpy.data.objects[gathered.object_name]
                mode = resolved_bake_mode(obj, settings.checkpoint)
                check_bake(obj, mode)
                rig = mode == "RIG"
                request = dataclasses.replace(gathered.request, want_rig=rig, want_frames=not rig)
                parts.append(dataclasses.replace(gathered, request=request))
                modes.append(mode)
            command = engine_command(settings.python, deps_root())
        except (BakeError, EngineSetupError) as exc:
            self.report({"ERROR"}, f"Simulate: {exc}")
            return None
        scene = GatheredScene(tuple(parts))
        folder = new_job_dir()
        request_path = scene.request.write(folder)
        job = SimulationJob(folder, scene.frame_count)
        self._scene, self._bake_modes = scene, modes
        self._gathered = scene.parts[0]
        return self.run_on_engine(job, command, request_path)

    def _scene_done(self, job):
        """Bake every object of a finished run of several objects; the report. Every object's
        output is loaded and checked before any is baked: a run whose object went away (or
        whose output is unreadable) bakes none of them."""
        scene: GatheredScene = self._scene
        outputs = job.result.get("objects") or {}
        loaded = []
        for i, (gathered, mode) in enumerate(zip(scene.parts, self._bake_modes, strict=True)):
            obj = self.live_mesh(gathered.object_name, gathered.object_uid, "nothing baked")
            if obj is None:
                return {"CANCELLED"}
            out = outputs.get(gathered.object_name) or {}
            try:
                frames = rig = None
                if mode == "RIG":
                    path = out.get("rig") or job.folder / f"rig_{i}.npz"
                    rig = load_rig(path, gathered.frame_count, gathered.num_vertices)
                else:
                    path = out.get("frames") or job.folder / f"frames_{i}.npy"
                    frames = load_frames(path, gathered.frame_count, gathered.num_vertices)
                check_bake(obj, mode)
            except (ValueError, OSError, BakeError) as exc:
                self.report({"ERROR"}, f"Simulate: '{gathered.object_name}': {exc}; nothing baked")
                return {"CANCELLED"}
            loaded.append((obj, gathered, mode, frames, rig))
        seconds = float(job.result.get("seconds") or 0.0)
        info = job.result.get("info") or {}
        baked = []
        for obj, gathered, mode, frames, rig in loaded:
            try:
                summary = bake(obj, frames, gathered.frame_start, mode, gathered.matrix_world, rig)
            except (ValueError, OSError, BakeError) as exc:
                self.report({"ERROR"}, f"Simulate: '{gathered.object_name}': {exc}")
                return {"CANCELLED"}
            results = obj.neurok.results
            results.seconds = seconds
            results.dynamics = "rig"
            results.frames_on_barrier = frames_on_barrier(info)
            results.edge_strain = edge_strain(info)[0]
            results.penetration = penetration(info)[0]
            baked.append(f"'{obj.name}' {summary}")
        registry.set_engine_status("ready", f"ran in {seconds:.1f} s")
        self.figures = {**info, "seconds": seconds, "frames": scene.frame_count, "baked": baked}
        message = (
            f"Simulated {len(baked)} objects together, {scene.frame_count} frames in"
            f" {seconds:.1f} s: " + "; ".join(baked)
        )
        warnings = [w for g in scene.parts for w in g.warnings]
        if warnings:
            self.report({"WARNING"}, " ".join((message + ".", *warnings)))
        else:
            self.report({"INFO"}, message)
        return {"FINISHED"}

    def job_done(self, context, job):
        if self._scene is not None:
            return self._scene_done(job)
        gathered: Gathered = self._gathered
        obj = self.live_mesh(gathered.object_name, gathered.object_uid, "nothing baked")
        if obj is None:
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


def engine_free(operator) -> bool:
    """An operator's poll: False, with the reason, while the engine runs a simulation or a fit."""
    if registry.get(registry.SIMULATE) is not None:
        operator.poll_message_set("a simulation is running")
        return False
    if registry.get(registry.FIT) is not None:
        operator.poll_message_set("a fit is running")
        return False
    if registry.get(registry.STRUCTURE) is not None:
        operator.poll_message_set("the structure is being found")
        return False
    return True


class NEUROK_OT_simulate(SimulateFlow, JobOperator, bpy.types.Operator):
    """Simulate the active mesh with NeuROK and bake the motion onto the timeline"""

    bl_idname = "neurok.simulate"
    bl_label = "Simulate"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        return engine_free(cls)


class NEUROK_OT_cancel(bpy.types.Operator):
    """Stop the running NeuROK job; the scene stays as it was"""

    bl_idname = "neurok.cancel"
    bl_label = "Cancel"
    bl_options = {"INTERNAL"}

    kind: EnumProperty(
        items=(
            ("ALL", "All", ""),
            (registry.SIMULATE, "Simulation", ""),
            (registry.FIT, "Fit", ""),
            (registry.STRUCTURE, "Structure", ""),
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
