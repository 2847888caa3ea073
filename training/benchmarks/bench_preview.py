"""The live preview in real Blender: from a change (a gizmo's strength, a drag handle moved) to
the updated preview in the viewport, at about 20k vertices.

    python -m training.benchmarks.bench_preview [--vertices 20000] [--frames 12] [--changes 6]
        [--cases laptop,box,flag] [--json out.json]

Each case runs in a fresh Blender (the ``bpy`` module, its own temporary user folder, the built
extension installed as a user installs it, the engine's Python this interpreter):

- ``laptop``: a 32 x 22 cm laptop (base pinned by a vertex group, lid open at 105 degrees), a
  force arrow on the lid's top edge pushing it shut for the first 6 frames; the change: the
  arrow's strength (what dragging its gizmo sets), 2 to 7 N;
- ``box``: a 20 cm box resting on the ground, a force arrow on its side; strength 5 to 15 N;
- ``flag``: a 1 x 0.6 m flag (a cloth) pinned along its pole edge, a drag handle on its free
  corner; the change: the handle moved (what G or its move gizmo does).

The preview is started with the Live Preview operator; its first preview (the preview engine
starting, importing torch, building the object's space) is timed as ``cold``. Then each change is
made and the preview's own tick (what its timer calls every ``POLL`` seconds) is called at that
pace, the first ``POLL`` after the change, until the viewport shows that change's preview,
finished: ``latency`` (median and worst over ``--changes`` changes), ``first_frame`` (until its
first frame is shown) and the longest tick on Blender's side (the UI's own time: the rest runs in
the preview engine's process). Then a continuous drag: a change at every tick for a second,
and ``after drag``: from its last change to that change's preview, finished (the previews the
drag outdated are skipped, not queued). Prints one JSON line per case and a table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from training.benchmarks.bench_blender import PACKAGE, install_extension


def _mesh_object(name: str, vertices, faces):
    import bpy
    import numpy as np

    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(np.asarray(vertices).tolist(), [], np.asarray(faces).tolist())
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _activate(obj) -> None:
    import bpy

    bpy.context.view_layer.update()
    for other in bpy.context.scene.objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def _edge_for(kind: str, vertices: int) -> float:
    """The scene mesh's edge length that gives about ``vertices`` vertices."""
    from training.eval import scene_meshes as sm

    make = {"laptop": sm.laptop, "flag": sm.flag}[kind]
    lo, hi = 0.001, 0.1
    for _ in range(30):  # the vertex count falls as the edge grows
        mid = (lo * hi) ** 0.5
        if len(make(edge=mid).vertices) > vertices:
            lo = mid
        else:
            hi = mid
    return hi


def _setup(case: str, vertices: int):
    """(object, change(k) -> None) of ``case``: the object with its condition, and the k-th
    change of it."""
    import bpy
    import numpy as np
    from mathutils import Vector

    scene = bpy.context.scene
    if case == "box":
        from training.benchmarks.bench_objects import box_of

        v, f = box_of(vertices, (0.0, 0.0, 0.1))
        obj = _mesh_object("Box", v, f)
        obj.neurok.physics.use_ground = True
        _activate(obj)
        scene.cursor.location = Vector((-0.1, 0.0, 0.1))
        bpy.ops.neurok.add_force()
        cond = obj.children[0].neurok.condition
        cond.end_frame = scene.frame_start + 6
        strengths = np.linspace(5.0, 15.0, 11)
        return obj, lambda k: setattr(cond, "strength", float(strengths[k % len(strengths)]))
    from training.eval import scene_meshes as sm

    mesh = getattr(sm, case)(edge=_edge_for(case, vertices))
    obj = _mesh_object(case.title(), mesh.vertices, mesh.faces)
    group = obj.vertex_groups.new(name="Pin")
    group.add([int(i) for i in mesh.pins], 1.0, "REPLACE")
    obj.neurok.physics.pin_group = "Pin"
    _activate(obj)
    if case == "laptop":
        scene.cursor.location = Vector(mesh.vertices[mesh.landmarks["lid_edge"]])
        bpy.ops.neurok.add_force()
        cond = obj.children[0].neurok.condition
        cond.end_frame = scene.frame_start + 6
        strengths = np.linspace(2.0, 7.0, 11)
        return obj, lambda k: setattr(cond, "strength", float(strengths[k % len(strengths)]))
    corner = mesh.vertices[mesh.landmarks["corner"]]
    scene.cursor.location = Vector(corner)
    bpy.ops.neurok.add_drag()
    handle = obj.children[0]
    handle.neurok.condition.frame = scene.frame_start + 8
    rest = handle.location.copy()

    def move(k: int) -> None:
        handle.location = rest + Vector((0.0, -0.05 * (1 + k % 6), 0.1 + 0.02 * (k % 4)))

    return obj, move


def run_case(args) -> dict:
    """One case in this process (a fresh Blender)."""
    import bpy

    prefs = install_extension(args.zip)
    prefs.device = "CPU"
    import importlib

    preview = importlib.import_module(f"{PACKAGE}.neurok_blender.live_preview")
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 48
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.neurok.preview_frames = args.frames
    obj, change = _setup(args.case, args.vertices)
    _activate(obj)
    start = time.monotonic()
    if bpy.ops.neurok.live_preview() != {"FINISHED"}:
        raise RuntimeError("Live Preview did not start")
    ticks: list[float] = []

    def wait_for(run_after: float, timeout: float) -> tuple[float, float | None]:
        """Tick at the timer's pace until the newest run sent after ``run_after`` is shown,
        finished; (seconds since ``run_after``, seconds until its first frame was shown)."""
        first = None
        while True:
            time.sleep(preview.POLL)
            t = time.monotonic()
            preview.tick(bpy.context)
            ticks.append(time.monotonic() - t)
            shown = preview.shown()
            now = time.monotonic()
            if now - run_after > timeout:
                raise RuntimeError(f"no preview after {timeout:.0f} s: {preview.status()}")
            if shown is None or shown.run.sent < run_after:
                continue
            if first is None:
                first = now - run_after
            newest = preview.runs()[-1]
            if shown.run is newest and newest.state == "done":
                return now - run_after, first
            if newest.state == "error":
                raise RuntimeError(f"the preview failed: {newest.error}")

    cold, _ = wait_for(start, 300.0)
    latencies, firsts, parts = [], [], []
    ticks.clear()
    for k in range(args.changes):
        t0 = time.monotonic()
        change(k)
        latency, first = wait_for(t0, 60.0)
        latencies.append(latency)
        firsts.append(first)
        run = preview.shown().run
        # (change -> request sent, sent -> done line read, the engine's own run)
        parts.append((run.sent - t0, run.done_at - run.sent, run.info.get("seconds") or 0.0))
    # a continuous drag: a change at every tick for a second, then the hand stops
    end = time.monotonic() + 1.0
    k = 0
    while time.monotonic() < end:
        change(args.changes + k)
        k += 1
        time.sleep(preview.POLL)
        t = time.monotonic()
        preview.tick(bpy.context)
        ticks.append(time.monotonic() - t)
    t0 = time.monotonic()
    after_drag, _ = wait_for(t0 - preview.POLL, 60.0)
    shown = preview.shown()
    out = {
        "case": args.case,
        "vertices": len(obj.data.vertices),
        "frames": len(shown.frames),
        "cold_s": round(cold, 3),
        "latency_median_s": round(statistics.median(latencies), 3),
        "latency_max_s": round(max(latencies), 3),
        "first_frame_median_s": round(statistics.median(firsts), 3),
        "tick_max_ms": round(1000 * max(ticks), 1),
        "tick_median_ms": round(1000 * statistics.median(ticks), 2),
        "engine_s": shown.run.info.get("seconds"),
        # medians over the changes: Blender's gathering and sending, the engine's answer
        # (sent to its done line read), the engine's run alone
        "send_s": round(statistics.median(p[0] for p in parts), 3),
        "answer_s": round(statistics.median(p[1] for p in parts), 3),
        "run_s": round(statistics.median(p[2] for p in parts), 3),
        "engine_steps": shown.run.info.get("substeps"),
        "engine_iterations": shown.run.info.get(
            "newton_iterations", shown.run.info.get("iterations")
        ),
        "latencies_s": [round(x, 3) for x in latencies],
        "drag_changes": k,
        "after_drag_s": round(after_drag, 3),
    }
    bpy.ops.neurok.live_preview()  # stop
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| case | vertices | frames | cold (s) | latency median / max (s) | first frame (s) |"
        " after a drag (s) | longest tick (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['case']} | {r['vertices']} | {r['frames']} | {r['cold_s']} |"
            f" {r['latency_median_s']} / {r['latency_max_s']} | {r['first_frame_median_s']} |"
            f" {r['after_drag_s']} | {r['tick_max_ms']} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, default=20000)
    parser.add_argument("--frames", type=int, default=12, help="the preview's frames")
    parser.add_argument("--changes", type=int, default=6)
    parser.add_argument("--cases", default="laptop,box,flag")
    parser.add_argument("--json", default=None, help="write the results here as JSON")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--zip", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case is not None:  # one case, in this process (a fresh Blender)
        print("RESULT " + json.dumps(run_case(args)), flush=True)
        return 0
    root = Path(__file__).resolve().parents[2]
    from tools.build import build

    rows, failed = [], False
    with tempfile.TemporaryDirectory(prefix="neurok-bench-") as tmp:
        zip_path = build(Path(tmp) / "dist")
        with open("/proc/loadavg") as fh:
            print(f"load average {' '.join(fh.read().split()[:3])}", flush=True)
        for case in args.cases.split(","):
            env = dict(os.environ, BLENDER_USER_RESOURCES=str(Path(tmp) / f"user_{case}"))
            env.pop("PYTHONPATH", None)
            env.setdefault("OMP_NUM_THREADS", "1")
            cmd = [sys.executable, "-m", "training.benchmarks.bench_preview", "--case", case]
            cmd += ["--zip", str(zip_path), "--vertices", str(args.vertices)]
            cmd += ["--frames", str(args.frames), "--changes", str(args.changes)]
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not found:
                print(f"{case}: failed\n{(proc.stdout + proc.stderr)[-3000:]}", flush=True)
                failed = True
                continue
            rows.append(json.loads(found[-1][len("RESULT ") :]))
            print(json.dumps(rows[-1]), flush=True)
    if rows:
        print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
