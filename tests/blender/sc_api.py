"""Scenario: the scripting API (``neurok.api``) in background mode: a rig-space laptop simulated
and followed through ``on_progress``, then a second run cancelled at once."""

from __future__ import annotations

import bpy
import numpy as np
from bl_helpers import activate, addon, empty_scene, prefs, scenario, snapshot
from sc_rig_space import BASE, LID, _laptop
from sc_simulate import _force_at_vertex


@scenario
def api_simulate(params) -> dict:
    """simulate(wait=True) with on_progress, its report and figures; a refused run (another is
    going on); then simulate(wait=False) cancelled before it ends."""
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]  # no model: the rig space needs none
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 12
    obj, nb = _laptop()
    obj.neurok.physics.pin_group = "Base"  # (Dynamics: the rig space, the default)
    local = np.array([v.co for v in obj.data.vertices])
    target = np.array([0.0, BASE[1] / 2, BASE[2] + 0.75 * LID[1]])
    lid = np.arange(nb, len(local))
    activate(obj)
    pushed = int(lid[np.argmin(np.linalg.norm(local[lid] - target, axis=1))])
    _force_at_vertex(obj, pushed, 2.0)
    activate(None)  # the API simulates the object it is given, not the active one

    package = addon()
    api = package.api  # the top-level re-export
    seen = []
    run = api.simulate(obj, on_progress=seen.append)
    out = {
        "api_is_module": api is addon("neurok_blender.api"),
        "fractions": [s.fraction for s in seen],
        "statuses": [s.status for s in seen],
        "done": run.done,
        "result": run.result,
        "cancelled": run.cancelled,
        "error": run.error,
        "report": run.report,
        "figures": run.figures,
        "progress": [run.progress.fraction, run.progress.status],
        "results_mode": bpy.data.objects["Laptop"].neurok.results.mode,
    }

    # a second run, cancelled as soon as it started: the object stays as the first run left it
    obj = bpy.data.objects["Laptop"]
    before = snapshot(obj)
    second = api.simulate(obj, wait=False)
    out["second_started_done"] = second.done
    refused = api.simulate(obj)  # only one simulation at a time
    out["refused"] = [refused.done, refused.result, refused.error]
    second.cancel()
    out["second"] = {
        "done": second.done,
        "result": second.result,
        "cancelled": second.cancelled,
        "error": second.error,
        "report": second.report,
        "figures": second.figures,
        "wait": second.wait(timeout=1.0),
    }
    out["unchanged"] = snapshot(bpy.data.objects["Laptop"]) == before
    running = addon("neurok_blender.engine.registry").get("simulate")
    out["nothing_running"] = running is None
    return out
