"""The cloth at its own resolution (neurok_core.rigspace.cloth) beside Blender's cloth, in one
process, on the same flag, preset by preset.

    python -m training.benchmarks.bench_cloth [--nx 30 --nz 20] [--self-collision]
        [--cases Cotton:flat,Silk:flat] [--json out.json]

A 1.16 x 0.76 m quad-grid flag (``nx`` x ``nz`` vertices) pinned along its hoist (x = 0), under
gravity for 48 frames at 24 fps, in two poses: **upright** (in the XZ plane, the hoist
vertical: it buckles out of its plane and hangs in folds) and **flat** (in the XY plane, lying
at z = 1.5 m: it falls and hangs); 10 um off its plane, as no real flag is exactly flat.
Blender's cloth: a Cloth modifier with one of its presets (``scripts/presets/cloth``: Cotton,
Denim, Leather, Rubber, Silk; no collisions), pinned by a vertex group, baked
with ``bpy.ops.ptcache.bake``; NeuROK: ``simulate_cloth`` on the same mesh (split into
triangles), 0.15 kg/m^2, the material of the same name and no damping of the user's. Rows:
every preset lying flat, Cotton upright. Prints the far edge's mean drop at 1 s and 2 s (and
how far NeuROK's is from Blender's), the mean edge strain at the end and the seconds of each,
and writes JSON. ``--self-collision`` turns on both: Blender's cloth's Self Collisions (its
defaults: 15 mm, friction 5) and NeuROK's (``SimulationConditions.self_collision``).
"""

from __future__ import annotations

import argparse
import ast
import json
import time

import numpy as np

from training.options import add_cloth_step_option

FRAMES = 49  # frame 0 (rest) and 48 frames: 2 s at 24 fps
IMPERFECT = 1e-5  # m: how far off its plane the flag's mesh lies at most


def flag(nx: int, nz: int, flat: bool):
    """(vertices (N, 3), quads (Q, 4), pins, far edge) of the flag, off its plane by at most
    ``IMPERFECT`` m (a flag exactly flat in its upright plane stays flat in Blender's cloth
    at 600 vertices: its rounding is in the plane; with 10 um off it, Blender's hangs)."""
    xs, zs = np.meshgrid(np.linspace(0, 1.16, nx), np.linspace(0.0, 0.76, nz), indexing="ij")
    off = IMPERFECT * np.sin(7.0 * xs.ravel()) * np.cos(5.0 * zs.ravel())
    v = np.stack([xs.ravel(), off, 1.5 + zs.ravel()], 1)
    if flat:
        v = np.stack([xs.ravel(), zs.ravel(), 1.5 + off], 1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(nz - 1), indexing="ij")
    a = (i * nz + j).ravel()
    quads = np.stack([a, a + nz, a + nz + 1, a + 1], 1)
    return v, quads, np.arange(nz), np.arange((nx - 1) * nz, nx * nz)


def _apply_preset(settings, preset: str) -> None:
    """Set Blender's cloth ``preset`` (its file's ``bpy.context.cloth.settings.X = V`` lines)."""
    from pathlib import Path

    import bpy

    path = Path(bpy.utils.resource_path("LOCAL")) / "scripts" / "presets" / "cloth"
    prefix = "bpy.context.cloth.settings."
    for line in (path / f"{preset}.py").read_text().splitlines():
        if line.startswith(prefix):
            name, value = line[len(prefix) :].split(" = ")
            setattr(settings, name, type(getattr(settings, name))(ast.literal_eval(value)))


def blender_cloth(v, quads, pins, preset: str, layers: bool = False) -> tuple[np.ndarray, float]:
    """Blender's cloth (its ``preset``; ``layers``: its Self Collisions on) on the mesh:
    (positions (T, N, 3), bake seconds)."""
    import bpy

    from training.benchmarks.bench_blender import quad_object

    bpy.ops.wm.read_factory_settings(use_empty=True)
    obj = quad_object("flag", v, quads)
    scene = bpy.context.scene
    scene.render.fps = 24
    obj.vertex_groups.new(name="Pin").add(pins.tolist(), 1.0, "REPLACE")
    modifier = obj.modifiers.new("Cloth", "CLOTH")
    modifier.settings.vertex_group_mass = "Pin"
    _apply_preset(modifier.settings, preset)
    modifier.collision_settings.use_self_collision = layers
    cache = modifier.point_cache
    cache.frame_start, cache.frame_end = 1, FRAMES
    bpy.context.view_layer.objects.active = obj
    with bpy.context.temp_override(scene=scene, active_object=obj, point_cache=cache):
        start = time.perf_counter()
        bpy.ops.ptcache.bake(bake=True)
        seconds = time.perf_counter() - start
    out = []
    for frame in range(1, FRAMES + 1):
        scene.frame_set(frame)
        evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        m = evaluated.to_mesh()
        co = np.empty(len(m.vertices) * 3)
        m.vertices.foreach_get("co", co)
        evaluated.to_mesh_clear()
        out.append(co.reshape(-1, 3))
    return np.stack(out), seconds


def neurok_cloth(
    v, quads, pins, material: str, step: str, layers: bool = False
) -> tuple[np.ndarray, float, dict]:
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace.cloth_simulate import simulate_cloth
    from neurok_core.rigspace.space import RigSettings

    tris = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
    area = 1.16 * 0.76
    cond = SimulationConditions(
        pins=tuple(pins.tolist()),
        mass=0.15 * area,
        frames=FRAMES,
        material=material,
        self_collision=layers,
    )
    start = time.perf_counter()
    result = simulate_cloth(v, tris, cond, settings=RigSettings(cloth_step=step), want_rig=False)
    return result.positions.astype(np.float64), time.perf_counter() - start, result.info


def figures(v, quads, far, positions) -> dict:
    drop = v[far, 2].mean() - positions[:, far, 2].mean(1)
    e = np.unique(np.sort(np.concatenate([quads[:, [0, 1]], quads[:, [1, 2]]]), 1), axis=0)
    rest = np.linalg.norm(v[e[:, 1]] - v[e[:, 0]], axis=1)
    last = np.linalg.norm(positions[-1, e[:, 1]] - positions[-1, e[:, 0]], axis=1)
    return {
        "drop_1s": round(float(drop[24]), 4),
        "drop_2s": round(float(drop[FRAMES - 1]), 4),
        "strain_end": round(float(np.abs(last / rest - 1).mean()), 4),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nx", type=int, default=30)
    parser.add_argument("--nz", type=int, default=20)
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--self-collision", action="store_true", help="both cloths keep their layers apart"
    )
    parser.add_argument(
        "--cases", default=None, help="PRESET:POSE,... (default: every preset flat, Cotton upright)"
    )
    add_cloth_step_option(parser)
    args = parser.parse_args(argv)
    cases = [(p, "flat") for p in ("Cotton", "Denim", "Leather", "Rubber", "Silk")]
    cases.append(("Cotton", "upright"))
    if args.cases:
        cases = [tuple(c.split(":")) for c in args.cases.split(",") if c]
    rows = []
    layers = args.self_collision
    for preset, pose in cases:
        v, quads, pins, far = flag(args.nx, args.nz, pose == "flat")
        ours, ours_s, info = neurok_cloth(v, quads, pins, preset.lower(), args.cloth_step, layers)
        theirs, theirs_s = blender_cloth(v, quads, pins, preset, layers)
        rows.append(
            {
                "preset": preset,
                "pose": pose,
                "vertices": len(v),
                "blender": figures(v, quads, far, theirs) | {"seconds": round(theirs_s, 3)},
                "neurok": figures(v, quads, far, ours)
                | {"seconds": round(ours_s, 3), "iterations": info["iterations"]},
            }
        )
    print(
        "| preset | pose | drop at 1 s: Blender / NeuROK | at 2 s | strain at the end | seconds |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        b, n = r["blender"], r["neurok"]
        off = [n[k] / max(b[k], 1e-9) - 1.0 for k in ("drop_1s", "drop_2s")]
        print(
            f"| {r['preset']} | {r['pose']} | {b['drop_1s']:.3f} / {n['drop_1s']:.3f} m"
            f" ({off[0]:+.0%}) | {b['drop_2s']:.3f} / {n['drop_2s']:.3f} m ({off[1]:+.0%})"
            f" | {b['strain_end']:.2%} / {n['strain_end']:.2%}"
            f" | {b['seconds']:.2f} / {n['seconds']:.2f} s |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
