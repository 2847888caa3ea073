"""Fit to Target in Blender: the operator's wall time on a jointed mesh, and where it goes.

    python -m training.benchmarks.bench_blender_fit [--vertices 20000] [--degrees 100]
        [--json out.json]

In a fresh Blender (the ``bpy`` module, its own temporary user folder, the built extension
installed as a user installs it): a closed laptop of about N vertices, two boxes (a 32 x 22 x
1.5 cm base and a 7 mm lid resting 0.5 mm above it) each subdivided into a fine grid, is fitted
to a target of its own pose, the lid opened by ``--degrees`` about its back edge (the hinge),
with the extension's Fit to Target operator and a real engine worker (the rig space: no model),
each run keyed at its own frame:

1. cold: Key As Rig Pose, the target a coarser mesh of the same pose (another topology: the
   engine fits its surface points), in a fresh Blender whose engine the operator starts;
2. warm: the same fit at another frame (the engine already running; the rig is reused);
3. warm, Key As Shape Key;
4. warm, Key As Rig Pose to a target of the laptop's own topology (a posed duplicate: the
   engine fits by its vertices).

Each run's wall time is ``bpy.ops.neurok.fit_to_target()`` from its call to its return (the
fit keyed; in background mode the operator runs synchronously), with its parts: gather (the
mesh, the target's evaluated surface, the request written), engine (the worker's own seconds,
and in it the rig space, the part search and the solve), load (the answer read back), key (the
shape key or the pose keyed) and the rest (starting or reaching the engine, messages). The
engine runs on torch's threads (``OMP_NUM_THREADS``). Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .bench_blender import PACKAGE, install_extension, run_operator_timed

BASE = (0.32, 0.22, 0.015)  # the base's size (m); the lid is as wide and deep, 7 mm thick
LID = 0.007
GAP = 0.0005


def box_cuts(vertices: int) -> int:
    """The fewest cuts per edge that give two grid-filled boxes at least ``vertices`` vertices
    (a box cut c times along each edge has 6 c^2 + 12 c + 8)."""
    cuts = 1
    while 2 * (6 * cuts**2 + 12 * cuts + 8) < vertices:
        cuts += 1
    return cuts


def laptop(name: str, cuts: int, degrees: float = 0.0):
    """The laptop as a mesh object: the base, then the lid turned by ``degrees`` about the
    hinge (local x through the base's top back edge, y = 0.11 m)."""
    import bmesh
    import bpy
    import numpy as np
    from mathutils import Matrix

    bm = bmesh.new()
    for size, centre in (
        (BASE, (0.0, 0.0, BASE[2] / 2)),
        ((BASE[0], BASE[1], LID), (0.0, 0.0, BASE[2] + GAP + LID / 2)),
    ):
        matrix = Matrix.Diagonal((*size, 1.0))
        matrix.translation = centre
        made = bmesh.ops.create_cube(bm, size=1.0, matrix=matrix)
        edges = {e for v in made["verts"] for e in v.link_edges}
        bmesh.ops.subdivide_edges(bm, edges=list(edges), cuts=cuts, use_grid_fill=True)
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    co = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", co)
    co = co.reshape(-1, 3)
    lid = co[:, 2] > BASE[2] + GAP / 2  # the lid's vertices
    hinge = np.array([0.0, BASE[1] / 2, BASE[2]])
    a = np.radians(degrees)  # opening: the front edge (y < 0) rises
    turn = np.array([[1, 0, 0], [0, np.cos(a), np.sin(a)], [0, -np.sin(a), np.cos(a)]])
    co[lid] = (co[lid] - hinge) @ turn.T + hinge
    mesh.vertices.foreach_set("co", co.ravel())
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def timed_parts(parts: dict) -> None:
    """Wrap the Fit to Target operator's steps so that each call records its seconds."""
    from importlib import import_module

    fit = import_module(f"{PACKAGE}.neurok_blender.operators.fit")

    def wrap(owner, name, label):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                parts[label] = parts.get(label, 0.0) + time.perf_counter() - start

        setattr(owner, name, timed)

    for name, label in (
        ("gather_fit", "gather"),
        ("load_frames", "load"),
        ("load_rig", "load"),
        ("key_fit_pose", "key"),
        ("key_fit_shape", "key"),
    ):
        wrap(fit, name, label)
    wrap(import_module(f"{PACKAGE}.neurok_blender.request").FitRequest, "write", "gather")
    original_done = fit.FitFlow.job_done

    def job_done(self, context, job):
        parts["engine_result"] = dict(job.result or {})
        return original_done(self, context, job)

    fit.FitFlow.job_done = job_done


def fit_timed(obj, target, key_as: str, frame: int, parts: dict) -> dict:
    """One Fit to Target, timed from the operator's call to its return."""
    import bpy

    bpy.context.scene.frame_set(frame)
    obj.neurok.fit_target, obj.neurok.fit_key_as = target, key_as
    parts.clear()
    seconds = run_operator_timed(obj, bpy.ops.neurok.fit_to_target, "Fit to Target")
    done = parts.pop("engine_result", {})
    info = done.get("info") or {}
    engine = float(done.get("seconds") or 0.0)
    known = engine + sum(parts.values())
    return {
        "key_as": key_as,
        "target_vertices": len(target.data.vertices),
        "seconds": round(seconds, 3),
        **{k: round(v, 3) for k, v in parts.items()},
        "engine": round(engine, 3),
        "engine_parts": info.get("seconds"),
        "rest": round(seconds - known, 3),
        "bones": info.get("bones"),
        "chamfer": info.get("chamfer"),
        "start": info.get("start"),
    }


def run_one(args) -> dict:
    """Every run in this process (a fresh Blender)."""
    import bpy

    prefs = install_extension(args.zip)
    prefs.device = "CPU"
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    cuts = box_cuts(args.vertices)
    obj = laptop("Laptop", cuts)
    obj.location = (0.3, -0.2, 0.8)
    obj.rotation_euler = (0.0, 0.0, 0.5)
    coarse = laptop("Open (coarse)", max(1, cuts // 2), args.degrees)  # another topology
    posed = laptop("Open (posed copy)", cuts, args.degrees)  # the laptop's own topology
    for target, x in ((coarse, 1.0), (posed, -1.0)):
        target.location = (0.3 + x, -0.2, 0.8)  # beside it, the same turn
        target.rotation_euler = (0.0, 0.0, 0.5)
    bpy.context.view_layer.update()
    parts: dict = {}
    timed_parts(parts)
    out = {"vertices": len(obj.data.vertices), "degrees": args.degrees, "runs": []}
    for name, target, key_as, frame in (
        ("cold", coarse, "RIG", 1),
        ("warm", coarse, "RIG", 5),
        ("warm", coarse, "SHAPE_KEY", 9),
        ("warm, same topology", posed, "RIG", 13),
    ):
        run = fit_timed(obj, target, key_as, frame, parts)
        out["runs"].append({"run": name, **run})
    return out


def table(row: dict) -> str:
    lines = [
        f"{row['vertices']:,} vertices, lid opened {row['degrees']:g} degrees",
        "| run | key as | target vertices | operator | gather | engine (space / search /"
        " solve) | load | key | rest | bones | chamfer |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in row["runs"]:
        e = r.get("engine_parts") or {}
        inner = " / ".join(f"{e.get(k, 0):.2f}" for k in ("space", "search", "solve"))
        lines.append(
            f"| {r['run']} | {r['key_as'].lower().replace('_', ' ')} | {r['target_vertices']:,}"
            f" | **{r['seconds']:.2f} s** | {r.get('gather', 0):.2f} s | {r['engine']:.2f} s"
            f" ({inner}) | {r.get('load', 0):.2f} s | {r.get('key', 0):.2f} s"
            f" | {r['rest']:.2f} s | {r['bones']} | {r['chamfer']:.2g} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, default=20000)
    parser.add_argument("--degrees", type=float, default=100.0)
    parser.add_argument("--json", default=None, help="write the results here as JSON")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--zip", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # in this process (a fresh Blender)
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return 0
    root = Path(__file__).resolve().parents[2]
    from tools.build import build

    with tempfile.TemporaryDirectory(prefix="neurok-bench-") as tmp:
        zip_path = build(Path(tmp) / "dist")
        with open("/proc/loadavg") as fh:
            load = " ".join(fh.read().split()[:3])
        threads = os.environ.get("OMP_NUM_THREADS") or "torch default"
        print(f"load average {load}; {os.cpu_count()} CPUs; engine threads {threads}", flush=True)
        env = dict(os.environ, BLENDER_USER_RESOURCES=str(Path(tmp) / "user"))
        env.pop("PYTHONPATH", None)
        cmd = [sys.executable, "-m", "training.benchmarks.bench_blender_fit", "--one"]
        cmd += ["--zip", str(zip_path), "--vertices", str(args.vertices)]
        cmd += ["--degrees", str(args.degrees)]
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not found:
        print(f"failed\n{(proc.stdout + proc.stderr)[-3000:]}", flush=True)
        return 1
    row = json.loads(found[-1][len("RESULT ") :])
    print(table(row))
    if args.json:
        header = {"cpu_count": os.cpu_count(), "load_average": load, "engine_threads": threads}
        Path(args.json).write_text(json.dumps({**header, **row}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
