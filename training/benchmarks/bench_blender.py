"""NeuROK against Blender's own cloth, in Blender, on the same sheets and frame range.

    python -m training.benchmarks.bench_blender [--vertices 5000 20000 100000] [--frames 120]
        [--skip-cloth] [--checkpoint CKPT] [--threads N] [--bake rig] [--dynamics rig|latent]
        [--json out.json]

For each size, in a fresh Blender (the ``bpy`` module, its own temporary user folder, the built
extension installed as a user installs it): a 1 x 0.5 m horizontal sheet of about N vertices
(a regular quad grid) pinned along one short edge (vertex group "Pin") falls and swings under
the scene's gravity over frames 1..F at 24 fps.

(a) Blender cloth: a Cloth modifier with its default settings (quality 5, no collisions) pinned
    by the group; the wall time of ``bpy.ops.ptcache.bake`` over the frame range.
(b) NeuROK: the extension's Simulate on the same sheet (pin group, scene gravity, no self
    collision as in (a)), with the real
    engine worker, end to end (gather, start the worker, load the model, build the kinematic
    space with an empty cache, integrate, decode every frame, bake): shape keys below 50,000
    vertices, a PC2 point cache above (``--bake`` overrides; ``--bake rig``, for a model with
    bones, bakes an armature and the engine decodes no vertices). Timed three times: cold (a
    fresh Blender; Simulate starts the engine, which imports torch), warm (the engine already
    running, as once the NeuROK tab was shown, on a second sheet moved 2 m so that it is a new
    mesh to the engine, with no kinematic space cached for it) and again (that second sheet
    simulated once more: the engine keeps its kinematic space, as when an artist re-simulates
    after changing a force).

Both report how far the free edge dropped by the last frame, so that a run that did not move is
seen. Blender's cloth solver uses every core (TBB); the engine uses torch's threads (all cores,
or ``OMP_NUM_THREADS`` / ``--threads``). Prints a table and writes JSON.
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

PACKAGE = "bl_ext.user_default.neurok"
POINT_CACHE_FROM = 50_000  # vertices: bake as a point cache from here on (shape keys below)


def grid_shape(vertices: int) -> tuple[int, int]:
    """(nx, ny) vertex counts of a 2:1 grid with about ``vertices`` vertices."""
    ny = max(2, round((vertices / 2) ** 0.5))
    return max(2, round(vertices / ny)), ny


def quad_object(name: str, co, quads):
    """A mesh object of vertices ``co`` (V, 3) and quads (F, 4), linked to the scene."""
    import bpy
    import numpy as np

    mesh = bpy.data.meshes.new(name)
    mesh.vertices.add(len(co))
    mesh.vertices.foreach_set("co", np.asarray(co, dtype=np.float32).ravel())
    mesh.loops.add(quads.size)
    mesh.loops.foreach_set("vertex_index", quads.astype(np.int32).ravel())
    mesh.polygons.add(len(quads))
    mesh.polygons.foreach_set("loop_start", np.arange(0, quads.size, 4, dtype=np.int32))
    mesh.update(calc_edges=True)
    mesh.validate()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def sheet_object(name: str, vertices: int):
    """A 1 x 0.5 m quad-grid sheet at z = 1 m, pin group "Pin" along x = -0.5 (one short edge)."""
    import numpy as np

    nx, ny = grid_shape(vertices)
    xs, ys = np.meshgrid(np.linspace(-0.5, 0.5, nx), np.linspace(-0.25, 0.25, ny), indexing="ij")
    co = np.stack([xs.ravel(), ys.ravel(), np.ones(nx * ny)], axis=1)  # (V, 3), index i*ny + j
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    quads = np.stack([a, a + ny, a + ny + 1, a + 1], axis=1)  # (F, 4)
    obj = quad_object(name, co, quads)
    group = obj.vertex_groups.new(name="Pin")
    group.add(list(range(ny)), 1.0, "REPLACE")  # i = 0: x = -0.5
    free = np.arange((nx - 1) * ny, nx * ny)  # i = nx - 1: the opposite edge
    return obj, free


def edge_drop(obj, free, frame: int) -> float:
    """How far the free edge's mean height fell between the mesh and ``frame`` (metres)."""
    import bpy
    import numpy as np

    rest = np.empty(len(obj.data.vertices) * 3)
    obj.data.vertices.foreach_get("co", rest)
    bpy.context.scene.frame_set(frame)
    ev = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = ev.to_mesh()
    now = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", now)
    ev.to_mesh_clear()
    return float(rest.reshape(-1, 3)[free, 2].mean() - now.reshape(-1, 3)[free, 2].mean())


def run_cloth(vertices: int, frames: int) -> dict:
    """Bake Blender's cloth on the sheet; seconds of the bake and the edge drop."""
    import bpy

    obj, free = sheet_object("Cloth sheet", vertices)
    modifier = obj.modifiers.new("Cloth", "CLOTH")
    modifier.settings.vertex_group_mass = "Pin"
    cache = modifier.point_cache
    cache.frame_start, cache.frame_end = 1, frames
    scene = bpy.context.scene
    bpy.context.view_layer.objects.active = obj
    with bpy.context.temp_override(scene=scene, active_object=obj, point_cache=cache):
        start = time.perf_counter()
        bpy.ops.ptcache.bake(bake=True)
        seconds = time.perf_counter() - start
    if not cache.is_baked:
        raise RuntimeError("Blender's cloth bake did not finish")
    drop = edge_drop(obj, free, frames)
    with bpy.context.temp_override(scene=scene, active_object=obj, point_cache=cache):
        bpy.ops.ptcache.free_bake()
    mesh = obj.data
    bpy.data.objects.remove(obj)
    bpy.data.meshes.remove(mesh)
    bpy.context.view_layer.update()
    return {"seconds": round(seconds, 2), "edge_drop_m": round(drop, 4), "quality": 5}


def neurok_sheet(vertices: int, bake: str, name: str, x: float = 0.0, dynamics: str = "rig"):
    """A sheet (placed at ``x`` m) set up for NeuROK: pin group, bake mode, ``dynamics`` (the
    rig space, where a sheet is a cloth at its own resolution, or the learned space's
    pipeline: model, encoding); (obj, free edge)."""
    obj, free = sheet_object(name, vertices)
    obj.location.x = x
    obj.neurok.physics.pin_group = "Pin"
    obj.neurok.physics.dynamics = dynamics
    # as Blender's cloth's defaults have it (and NeuROK's: said here, as the bench compares them)
    obj.neurok.physics.cloth_self_collision = False
    obj.neurok.output.bake_mode = bake
    return obj, free


def run_operator_timed(obj, operator, label: str) -> float:
    """Seconds of ``operator()`` (a ``bpy.ops`` call) with ``obj`` the only selected and
    active object; its failure or any result but FINISHED raised as a RuntimeError."""
    import bpy

    for other in bpy.context.selected_objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj
    start = time.perf_counter()
    try:
        result = operator()
    except RuntimeError as exc:
        raise RuntimeError(f"{label} failed: {str(exc).strip()}") from None
    seconds = time.perf_counter() - start
    if result != {"FINISHED"}:
        raise RuntimeError(f"{label} returned {result}")
    return seconds


def simulate_timed(obj, free, frames: int) -> dict:
    """The extension's Simulate on ``obj``, timed end to end, and the free edge's drop."""
    import bpy

    seconds = run_operator_timed(obj, bpy.ops.neurok.simulate, "NeuROK Simulate")
    return {
        "seconds": round(seconds, 2),
        "engine_seconds": round(obj.neurok.results.seconds, 2),
        "bake": obj.neurok.output.bake_mode,
        "edge_drop_m": round(edge_drop(obj, free, frames), 4),
    }


def install_extension(zip_path: str):
    """Install and enable the extension zip in this Blender; its preferences, the engine's
    Python set to this interpreter."""
    import bpy

    result = bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"} or PACKAGE not in bpy.context.preferences.addons:
        raise RuntimeError(f"Blender did not install {zip_path}")
    prefs = bpy.context.preferences.addons[PACKAGE].preferences
    prefs.python_path = sys.executable
    return prefs


def run_one(args) -> dict:
    """One size in this process (a fresh Blender): cloth, then NeuROK."""
    import bpy

    prefs = install_extension(args.zip)
    prefs.checkpoint = args.checkpoint or ""
    prefs.device = "CPU"
    prefs.max_vertices = max(prefs.max_vertices, args.one)
    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, args.frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)
    nx, ny = grid_shape(args.one)
    out = {"vertices": nx * ny, "frames": args.frames}
    if not args.skip_cloth:
        out["cloth"] = run_cloth(args.one, args.frames)
    bake = args.bake
    if bake == "auto":
        bake = "POINT_CACHE" if nx * ny >= POINT_CACHE_FROM else "SHAPE_KEYS"
    try:
        out["neurok"] = simulate_timed(
            *neurok_sheet(args.one, bake.upper(), "NeuROK sheet", 0.0, args.dynamics), args.frames
        )
        # again with the engine already running (as once the NeuROK tab was shown), on another
        # sheet (moved 2 m: a new mesh to the engine, no kinematic space cached for it)
        warm, free = neurok_sheet(args.one, bake.upper(), "Warm sheet", 2.0, args.dynamics)
        out["neurok_warm"] = simulate_timed(warm, free, args.frames)
        # and that sheet once more: the engine keeps its kinematic space
        out["neurok_again"] = simulate_timed(warm, free, args.frames)
    except RuntimeError as exc:  # reported in the table; the cloth time still counts
        out["neurok"] = {"error": str(exc), "bake": bake.upper()}
        return out
    if "cloth" in out:
        cloth = max(out["cloth"]["seconds"], 1e-9)
        out["ratio"] = round(out["neurok"]["seconds"] / cloth, 2)
        out["ratio_warm"] = round(out["neurok_warm"]["seconds"] / cloth, 2)
        out["ratio_again"] = round(out["neurok_again"]["seconds"] / cloth, 2)
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| vertices | frames | Blender cloth bake | NeuROK simulate + bake (engine)"
        " | NeuROK / cloth | warm engine: simulate + bake | warm / cloth"
        " | again (space kept) | again / cloth | edge drop cloth / NeuROK |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        n = r["neurok"]
        cloth = r.get("cloth")
        if "error" in n:
            lines.append(
                f"| {r['vertices']:,} | {r['frames']} | "
                + (f"{cloth['seconds']:.2f} s" if cloth else "skipped")
                + f" | failed: {n['error'][:80]} | - | - | - | - | - | - |"
            )
            continue
        lines.append(
            f"| {r['vertices']:,} | {r['frames']} | "
            + (f"{cloth['seconds']:.2f} s" if cloth else "skipped")
            + f" | {n['seconds']:.1f} s ({n['engine_seconds']:.1f} s, {n['bake'].lower()}) | "
            + (f"{r['ratio']:.2f}x" if cloth else "-")
            + f" | {r['neurok_warm']['seconds']:.1f} s ({r['neurok_warm']['engine_seconds']:.1f} s)"
            + " | "
            + (f"{r['ratio_warm']:.2f}x" if cloth else "-")
            + f" | {r['neurok_again']['seconds']:.1f} s"
            + f" ({r['neurok_again']['engine_seconds']:.1f} s) | "
            + (f"{r['ratio_again']:.2f}x" if cloth else "-")
            + " | "
            + (f"{cloth['edge_drop_m']:.3f} m" if cloth else "-")
            + f" / {n['edge_drop_m']:.3f} m |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vertices", type=int, nargs="+", default=[5000, 20000, 100000])
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--skip-cloth", action="store_true", help="only time NeuROK")
    parser.add_argument("--checkpoint", default=None, help="default: the bundled model")
    parser.add_argument("--threads", type=int, default=None, help="the engine's torch threads")
    parser.add_argument(
        "--bake", default="auto", choices=("auto", "shape_keys", "point_cache", "rig")
    )
    parser.add_argument(
        "--dynamics", default="rig", choices=("rig", "latent"), help="NeuROK's (rig: a cloth)"
    )
    parser.add_argument("--json", default=None, help="write the results here as JSON")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--zip", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.frames < 2:
        parser.error("--frames must be at least 2")
    if args.one is not None:  # one size, in this process (a fresh Blender)
        print("RESULT " + json.dumps(run_one(args)), flush=True)
        return 0
    root = Path(__file__).resolve().parents[2]
    if args.checkpoint:
        args.checkpoint = str(Path(args.checkpoint).resolve())
    elif not (root / "neurok_core" / "weights" / "default" / "config.json").is_file():
        parser.error("the bundled default model is missing: pass --checkpoint RUN/checkpoint")
    from tools.build import build

    with tempfile.TemporaryDirectory(prefix="neurok-bench-") as tmp:
        zip_path = build(Path(tmp) / "dist")
        with open("/proc/loadavg") as fh:
            load = " ".join(fh.read().split()[:3])
        engine_threads = args.threads or os.environ.get("OMP_NUM_THREADS") or "torch default"
        header = {
            "cpu_count": os.cpu_count(),
            "load_average": load,
            "engine_threads": str(engine_threads),
            "checkpoint": args.checkpoint or "bundled default",
        }
        print(
            f"load average {load}; {os.cpu_count()} CPUs; engine threads {engine_threads};"
            f" model {header['checkpoint']}",
            flush=True,
        )
        rows = []
        for n in args.vertices:
            user = Path(tmp) / f"user_{n}"
            env = dict(os.environ, BLENDER_USER_RESOURCES=str(user))
            env.pop("PYTHONPATH", None)
            if args.threads:
                env["OMP_NUM_THREADS"] = str(args.threads)
            cmd = [sys.executable, "-m", "training.benchmarks.bench_blender", "--one", str(n)]
            cmd += ["--zip", str(zip_path), "--frames", str(args.frames), "--bake", args.bake]
            cmd += ["--dynamics", args.dynamics]
            cmd += ["--checkpoint", args.checkpoint] if args.checkpoint else []
            cmd += ["--skip-cloth"] if args.skip_cloth else []
            proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not found:
                print(f"{n} vertices: failed\n{(proc.stdout + proc.stderr)[-3000:]}", flush=True)
                continue
            rows.append(json.loads(found[-1][len("RESULT ") :]))
            print(json.dumps(rows[-1]), flush=True)
    if rows:
        print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps({**header, "runs": rows}, indent=1))
    complete = len(rows) == len(args.vertices) and not any("error" in r["neurok"] for r in rows)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
