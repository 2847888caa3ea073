# SPDX-License-Identifier: GPL-3.0-or-later
"""The headless demo: build the extension, install it into a throw-away Blender user folder, open
two example objects, add their conditions and simulate them with the extension's own operators,
bake, save a .blend and render a preview.

    .venv/bin/python -m tools.demo --out out/demo [--frames 48] [--checkpoint DIR]

Runs Blender as the ``bpy`` module (no window); the engine runs in the worker process the
extension starts, exactly as it does for a user (this process never imports torch). The scene:

- a laptop (base and lid, one mesh; the base pinned) whose open lid gets a push from a force
  arrow on its top edge, then swings shut under gravity and rests on the base;
- a flag on a pole (pinned along the pole) whose free corner is pulled by a drag handle and
  released: it falls back and hangs from the pole.

Both move in the rig space (``DYNAMICS``: the bones' rigid motions, joints and contact as
energies; the lid stays rigid and turns about the hinge its interface with the base makes; the
flag, a cloth, moves at its own resolution and keeps its size). Automatic bakes the laptop as an
editable rig and the flag as shape keys. Writes ``neurok_demo.blend``,
``frames/*.png``
(Workbench, frame number stamped), ``contact_sheet.png``, ``preview.gif`` (when Pillow is
installed) and ``summary.json`` (paths, timings, what moved).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "bl_ext.user_default.neurok"  # where Blender installs the extension
SHOWN = ("Pole", "Force marker", "Drag target")  # props the camera frames with the examples
DYNAMICS = "rig"  # the motion in the rig space: lids stay rigid, cloth keeps its size


class DemoError(Exception):
    """The demo cannot go on; the message says what to do."""


def bundled_checkpoint() -> Path:
    return ROOT / "neurok_core" / "weights" / "default"


def check_checkpoint(path: str | None) -> str:
    """The checkpoint preference: '' for the bundled model (which must exist) or a folder."""
    if path:
        if not (Path(path) / "config.json").is_file():
            raise DemoError(f"{path} is not a NeuROK checkpoint folder (no config.json in it)")
        return str(Path(path).resolve())
    if not (bundled_checkpoint() / "config.json").is_file():
        raise DemoError(
            f"the bundled default model is missing ({bundled_checkpoint()}); train one"
            " (training/README.md) and pass --checkpoint RUN/checkpoint"
        )
    return ""


class Clock:
    """Wall time of each step, printed as it ends."""

    def __init__(self):
        self.start = time.monotonic()
        self.steps: dict[str, float] = {}

    def step(self, name: str, began: float) -> None:
        self.steps[name] = round(time.monotonic() - began, 2)
        print(f"  {name}: {self.steps[name]:.1f} s", flush=True)

    def total(self) -> float:
        return round(time.monotonic() - self.start, 2)


def _report_progress(label: str, stop: threading.Event) -> threading.Thread:
    """Print the running simulation's stage now and then (the operator blocks meanwhile)."""
    registry = importlib.import_module(f"{PACKAGE}.neurok_blender.engine.registry")

    def run():
        shown = None
        while not stop.wait(2.0):
            job = registry.get(registry.SIMULATE)
            if job is None:
                continue
            line = f"    {label}: {job.status} ({job.fraction * 100:.0f}%)"
            if line != shown:
                print(line, flush=True)
                shown = line

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def install(zip_path: Path, python: str, checkpoint: str, device: str) -> None:
    import bpy

    result = bpy.ops.extensions.package_install_files(
        filepath=str(zip_path), repo="user_default", enable_on_install=True
    )
    if result != {"FINISHED"} or PACKAGE not in bpy.context.preferences.addons:
        raise DemoError(f"Blender did not install and enable {zip_path}")
    prefs = bpy.context.preferences.addons[PACKAGE].preferences
    prefs.python_path = python
    prefs.checkpoint = checkpoint
    prefs.device = device.upper()
    bpy.context.preferences.filepaths.save_version = 0  # no .blend1 next to the demo file


def _activate(obj) -> None:
    import bpy

    for other in bpy.context.view_layer.objects:
        other.select_set(False)
    obj.select_set(True)
    bpy.context.view_layer.objects.active = obj


def add_condition_at(obj, vertex: int, operator):
    """Run an add-condition operator with ``vertex`` active in Edit Mode; returns the Empty."""
    import bmesh
    import bpy

    _activate(obj)
    before = set(bpy.data.objects)
    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(obj.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[vertex].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[vertex])
    try:
        operator()
    finally:
        bpy.ops.object.mode_set(mode="OBJECT")
    (empty,) = set(bpy.data.objects) - before
    return empty


def _visible_between(obj, first: int, last: int, frames: int) -> None:
    """Render ``obj`` only on frames first..last (keyed, so the saved file plays the same)."""
    for frame in sorted({1, first, last + 1}):
        if frame <= frames + 1:
            obj.hide_render = not first <= frame <= last
            obj.keyframe_insert("hide_render", frame=frame)


def build_scene(frames: int, detail: int):
    """The examples, their physics and conditions; returns (laptop, flag) Examples."""
    import bpy
    from mathutils import Matrix, Vector

    from . import examples

    for obj in list(bpy.data.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.render.fps, scene.render.fps_base = 24, 1.0
    scene.frame_set(1)
    examples.ground()
    laptop = examples.laptop(location=(-0.3, 0.0, 0.0), turn_degrees=-60.0, detail=detail)
    pole_top = (0.06, 0.0, 0.5)
    examples.pole("Pole", pole_top)
    flag = examples.flag(pole_top=pole_top, width=0.42, height=0.27, detail=max(4, 2 * detail))
    bpy.context.view_layer.update()

    physics = laptop.obj.neurok.physics
    physics.pin_group, physics.mass, physics.damping = laptop.pin_group, 1.0, 0.3
    physics.dynamics = DYNAMICS
    laptop.obj.neurok.output.bake_mode = "AUTO"  # a rig (the rig space's, or a model's bones)
    force = add_condition_at(laptop.obj, laptop.handle_vertex, bpy.ops.neurok.add_force)
    point = force.matrix_world.translation.copy()
    aim = Vector(laptop.direction).to_track_quat("Z", "Y").to_matrix().to_4x4()
    force.matrix_world = Matrix.Translation(point) @ aim  # the arrow pushes the lid shut
    cond = force.neurok.condition
    cond.strength = 1.0  # newtons, 0.23 N m about the hinge: tips the lid past upright
    cond.use_frame_range = True
    cond.frame_start, cond.frame_end = 1, max(2, min(frames, 1 + frames // 8))
    marker = examples.arrow("Force marker", 0.15)
    marker.parent = force  # the arrow's tip on the grabbed point, along the force
    _visible_between(marker, cond.frame_start, cond.frame_end, frames)

    physics = flag.obj.neurok.physics
    physics.pin_group, physics.mass, physics.damping = flag.pin_group, 0.2, 0.8
    physics.dynamics = DYNAMICS
    flag.obj.neurok.output.bake_mode = "AUTO" if DYNAMICS == "rig" else "POINT_CACHE"
    drag = add_condition_at(flag.obj, flag.handle_vertex, bpy.ops.neurok.add_drag)
    corner = flag.obj.matrix_world @ flag.obj.data.vertices[flag.handle_vertex].co
    drag.matrix_world = Matrix.Translation(corner + Vector((0.0, -0.18, 0.12)))
    drag.neurok.condition.frame = max(2, min(frames, 1 + round(0.4 * (frames - 1))))
    marker = examples.sphere("Drag target", 0.014)
    marker.parent = drag  # shown until the point gets there and is let go
    _visible_between(marker, 1, drag.neurok.condition.frame, frames)
    bpy.context.view_layer.update()
    return laptop, flag


def simulate(example, clock: Clock) -> dict:
    """Run the extension's Simulate on one example (synchronously, as in background mode)."""
    import bpy

    _activate(example.obj)
    name = example.obj.name
    print(f"simulating {name} ({len(example.obj.data.vertices):,} vertices)", flush=True)
    stop = threading.Event()
    watcher = _report_progress(name, stop)
    began = time.monotonic()
    try:
        result = bpy.ops.neurok.simulate()
    except RuntimeError as exc:  # the operator reported an error
        raise DemoError(f"simulating {name} failed: {str(exc).strip()}") from None
    finally:
        stop.set()
        watcher.join()
    if result != {"FINISHED"}:
        raise DemoError(f"simulating {name} did not finish ({result})")
    clock.step(f"simulate {name}", began)
    results = example.obj.neurok.results
    return {"engine_seconds": round(results.seconds, 2), "baked_as": results.mode}


def motion_summary(example, frames: int) -> dict:
    """How far the baked animation moves the pinned and the free vertices (metres)."""
    import numpy as np

    from .demo_render import animated_points

    obj = example.obj
    group = obj.vertex_groups[example.pin_group].index
    pins = np.array(
        [v.index for v in obj.data.vertices if any(g.group == group for g in v.groups)],
        dtype=np.int64,
    )
    n = len(obj.data.vertices)
    rest = animated_points([obj], [1])  # (N, 3)
    moved = animated_points([obj], range(1, frames + 1)).reshape(frames, n, 3) - rest  # (T, N, 3)
    distance = np.linalg.norm(moved, axis=2)  # (T, N)
    free = np.setdiff1d(np.arange(n), pins)
    # how far the free vertices are from moving as one rigid body (the laptop: its lid)
    from neurok_core.metrics import rigid_fit_residual

    unrigid = rigid_fit_residual(rest[free], (moved + rest)[:, free])  # (T,) metres
    return {
        "vertices": n,
        "max_pinned_motion": float(distance[:, pins].max()) if len(pins) else 0.0,
        "max_free_motion": float(distance[:, free].max()),
        "handle_motion_last": float(distance[-1, example.handle_vertex]),
        "free_rigid_residual_max": float(unrigid.max()),
        "free_rigid_residual_last": float(unrigid[-1]),
        "scene_scores": scene_scores(example, rest, moved + rest, pins),
    }


def scene_scores(example, rest, frames, pins) -> dict:
    """The plausibility benchmark's scores of a demo object (``training.eval.scene_metrics``;
    lengths in object sizes): the laptop as two parts (the pinned base, the free lid) with the lid's
    turn in degrees, the flag as cloth (edge strain)."""
    import numpy as np

    from training.eval.scene_metrics import (
        object_size,
        part_rotations,
        rotation_angles,
        score_motion,
    )

    faces = [tuple(p.vertices) for p in example.obj.data.polygons]
    tris = np.array([(f[0], f[i], f[i + 1]) for f in faces for i in range(1, len(f) - 1)])
    if example.category == "articulated":
        parts = np.ones(len(rest), dtype=np.int64)
        parts[pins] = 0
        scores = score_motion(rest, frames, tris, parts, pins)
        turn = rotation_angles(part_rotations(rest, frames, parts, 1))  # (T,) the lid's
        scores.update(lid_turn_max_deg=float(turn.max()), lid_turn_final_deg=float(turn[-1]))
        return scores
    obstacles = _collision_obstacles(object_size(rest))
    scores = score_motion(rest, frames, tris, None, pins, strain=True, obstacles=obstacles)
    if obstacles is not None:  # (in metres, as the README quotes it)
        scores["penetration_m"] = scores["penetration"] * object_size(rest)
    return scores


def _collision_obstacles(size: float):
    """The scene's objects with Collision physics (the flag's pole) as exact-distance
    obstacles for scoring, or None."""
    import bpy
    import numpy as np

    from neurok_core.dynamics.obstacles import MeshDistance, Obstacles

    meshes = []
    for obj in bpy.data.objects:
        if obj.type != "MESH" or not any(m.type == "COLLISION" for m in obj.modifiers):
            continue
        world = np.array(obj.matrix_world)
        v = np.array(
            [tuple(world[:3, :3] @ np.array(p.co) + world[:3, 3]) for p in obj.data.vertices]
        )
        polys = [tuple(p.vertices) for p in obj.data.polygons]
        f = np.array([(q[0], q[i], q[i + 1]) for q in polys for i in range(1, len(q) - 1)])
        meshes.append(MeshDistance(v, f, size / 100, 0.1 * size, obj.name))
    return Obstacles(None, meshes) if meshes else None


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m tools.demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", default="out/demo", help="output folder (default: out/demo)")
    parser.add_argument("--frames", type=int, default=48, help="animation length (default 48)")
    parser.add_argument(
        "--checkpoint", default=None, help="a checkpoint folder (default: the bundled model)"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the engine's Python (default: this one)"
    )
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda", "mps"))
    parser.add_argument(
        "--detail", type=int, default=24, help="mesh cells along the laptop's width (default 24)"
    )
    parser.add_argument("--size", default="640x360", help="preview size WxH (default 640x360)")
    parser.add_argument(
        "--engine",
        default="WORKBENCH",
        type=str.upper,
        choices=("WORKBENCH", "EEVEE"),
        help="renderer (default Workbench; Eevee works headless but compiles shaders for minutes)",
    )
    parser.add_argument(
        "--keep-user-folder", action="store_true", help="keep the temporary Blender user folder"
    )
    args = parser.parse_args(argv)
    if args.frames < 2:
        parser.error("--frames must be at least 2")
    if args.detail < 2:
        parser.error("--detail must be at least 2")
    try:
        w, h = (int(s) for s in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size {args.size!r}: expected WIDTHxHEIGHT, e.g. 640x360")
    args.size = (w, h)
    return args


def run(args) -> dict:
    checkpoint = check_checkpoint(args.checkpoint)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    clock = Clock()
    print(f"NeuROK demo -> {out}", flush=True)

    from .build import build

    began = time.monotonic()
    zip_path = build(out / "dist")
    clock.step("build extension", began)

    user = Path(tempfile.mkdtemp(prefix="neurok-demo-user-"))
    os.environ["BLENDER_USER_RESOURCES"] = str(user)  # before Blender starts: a clean user folder
    try:
        began = time.monotonic()
        import bpy

        install(zip_path, args.python, checkpoint, args.device)
        clock.step("start Blender and install", began)

        began = time.monotonic()
        laptop, flag = build_scene(args.frames, args.detail)
        blend = out / "neurok_demo.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(blend))  # the point cache goes beside it
        clock.step("build scene", began)

        runs = {ex.obj.name: simulate(ex, clock) for ex in (laptop, flag)}
        bpy.ops.wm.save_mainfile()

        from . import demo_render

        began = time.monotonic()
        shown = [laptop.obj, flag.obj] + [bpy.data.objects[n] for n in SHOWN]
        points = demo_render.animated_points(shown, range(1, args.frames + 1))
        demo_render.add_camera(points)
        pattern = demo_render.setup_render(out / "frames", args.size, args.engine)
        bpy.ops.wm.save_mainfile()  # with the camera and the render settings
        paths = demo_render.render_frames(pattern)
        clock.step(f"render {len(paths)} frames", began)
        began = time.monotonic()
        sheet = demo_render.contact_sheet(paths, out / "contact_sheet.png")
        animation = demo_render.gif(paths, out / "preview.gif", fps=24)
        clock.step("contact sheet and GIF", began)
        motion = {ex.obj.name: motion_summary(ex, args.frames) for ex in (laptop, flag)}
    finally:
        if not args.keep_user_folder:
            shutil.rmtree(user, ignore_errors=True)

    summary = {
        "extension": str(zip_path),
        "blend": str(blend),
        "point_cache": (
            str(Path(bpy.path.abspath(flag.obj.neurok.results.cache_path)))
            if flag.obj.neurok.results.cache_path
            else None
        ),
        "frames": [str(p) for p in paths],
        "contact_sheet": str(sheet),
        "gif": str(animation) if animation else None,
        "frame_count": args.frames,
        "checkpoint": checkpoint or str(bundled_checkpoint()),
        "simulations": runs,
        "motion": motion,
        "seconds": {**clock.steps, "total": clock.total()},
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        summary = run(args)
    except DemoError as exc:
        print(f"demo failed: {exc}", file=sys.stderr)
        return 1
    print("\noutputs:")
    for key in ("blend", "point_cache", "contact_sheet", "gif", "extension"):
        if summary[key]:
            print(f"  {key.replace('_', ' ')}: {summary[key]}")
    print(f"  frames: {Path(summary['frames'][0]).parent}/ ({len(summary['frames'])} PNGs)")
    for name, run_info in summary["simulations"].items():
        moved = summary["motion"][name]["max_free_motion"] * 1000
        print(
            f"  {name}: engine {run_info['engine_seconds']:.1f} s, baked as"
            f" {run_info['baked_as'].lower().replace('_', ' ')}, moves up to {moved:.1f} mm"
        )
    print(f"total {summary['seconds']['total']:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
