"""NeuROK's cloth beside MuJoCo's elastic shell (a 2D flexcomp) on the same sheets, in one process.

    python -m training.benchmarks.bench_cloth_reference [--damping 0.6] [--self-contact]
        [--scenes flag,two corners,...] [--substeps 4] [--rest] [--json out.json]

Five scenes, 50 frames at 24 fps, gravity, one material: areal density 0.15 kg/m^2, membrane
stiffness 1,000 N/m, thickness 1 mm (bending rigidity D = k t^2 / (12 (1 - nu^2)), nu = 0.3),
friction 0.5.

- **flag**: a 1 x 0.6 m sheet of 26 x 16 vertices lying flat 1.5 m up, pinned along a short
  edge (its hoist): it swings down and hangs;
- **pushed flag**: the same, its far lower corner pushed sideways and up (0.4 N) for 0.5 s;
- **two corners**: a 0.96 m square sheet of 25 x 25 vertices lying flat 1.5 m up, pinned at two
  adjacent corners: it swings down and hangs from them;
- **sphere**: a 1 m square sheet of 40 x 40 vertices 0.3 m above an off-centre sphere (radius
  0.25 m) standing on the ground: it drapes over it;
- **tablecloth**: a 0.8 x 0.6 m sheet of 33 x 25 vertices lying on a slippery (friction 0.1)
  0.7 m high table with 3/4 of it over the table's edge: the overhang falls and pulls the rest
  off the table.

MuJoCo (``training.data.cloth``: shell elasticity, its discrete implicit step, 4 steps a frame,
its self-collision with ``--self-contact``) is the reference; NeuROK's material has the same
weight, a stretch frequency giving the same membrane stiffness (sqrt(k / (rho L^2)) / 2 pi) and
a bending length (D / w)^(1/3) from the same rigidity, and ``--damping`` as its air damping
(MuJoCo's shell has a little Rayleigh damping and no air; what its swing loses in its steps has
no one counterpart in ours: the default is the damping whose flag follows the shell's best over
all its frames, ``docs/experiments/cloth.md``). ``--substeps``: MuJoCo's steps a frame (its
motion at 4 and at 16 differs by more than the two cloths do). ``--rest``: the shapes each
comes to rest in (10 s, both damped by the same air damping, MuJoCo's as a force -c m v on
each vertex), where no integrator's own damping counts.

Prints each scene's last-frame chamfer distance between the two (the mean of both ways'
nearest-vertex distances) in diagonals, its mean over the frames and its worst frame, the mean
strain, the depth into the colliders and the ground, the frames in which the sheet passes
through itself (``neurok_core.metrics.self_crossings``), the last frame's fastest vertex (in
sizes a frame) and the seconds of each.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import NamedTuple

import numpy as np
from scipy.spatial import cKDTree

from training.options import add_cloth_step_option

FRAMES = 50
DENSITY = 0.15  # kg/m^2
MEMBRANE = 1000.0  # N/m
THICKNESS = 1e-3  # m
POISSON = 0.3
FRICTION = 0.5
SPHERE = (0.12, 0.05, 0.25)  # centre x, y and radius (m), standing on the ground
DAMPING = 0.6  # 1/s: NeuROK's air damping beside the shell (the module docstring)
REST_FRAMES, REST_DAMPING = 240, 3.0  # ``--rest``: 10 s, both cloths damped at 3/s
PUSH = 0.4 / math.sqrt(2.0)  # N along y and z: the pushed flag's 0.4 N
SLIPPERY = 0.1  # the tablecloth's friction with its table (and the ground)
TABLE = (0.6, 0.8, 0.7)  # the table's x and y extents and height (m), its edge at x = 0


def _sheet(n: int, width: float, z: float, depth: float | None = None, x0: float | None = None):
    """A sheet of ``n`` vertices along its ``width`` (x) and as many along its ``depth`` (y,
    default: square) as keep its cells square, lying flat at height ``z``, centred on the
    origin (or starting at x = ``x0``)."""
    from training.data.cloth import Sheet

    depth = width if depth is None else depth
    n_v = n if depth == width else int(round(depth / width * (n - 1))) + 1
    start = -0.5 * width if x0 is None else x0
    return Sheet(
        width,
        depth,
        n,
        n_v,
        origin=np.array([start, -0.5 * depth, z]),
        e_u=np.array([1.0, 0.0, 0.0]),
        e_v=np.array([0.0, 1.0, 0.0]),
    )


class Push(NamedTuple):
    """A force on one vertex (N, (3,)) over the first ``end`` frames (MuJoCo's steps that
    start before frame ``end``; NeuROK's force to frame ``end - 1``, as its force acts on
    the steps that start at or before its end frame)."""

    vertex: int
    vector: tuple
    end: int


class Scene(NamedTuple):
    sheet: object  # training.data.cloth.Sheet
    pins: np.ndarray  # (k,) vertex indices
    mjcf: str  # MuJoCo's colliders
    colliders: tuple  # NeuROK's (neurok_core.dynamics.Collider)
    push: Push | None = None
    shapes: tuple = ()  # (kind, centre (3,), size) of each collider, for the depth
    friction: float = FRICTION


def scenes() -> dict[str, Scene]:
    """name -> Scene."""
    import trimesh

    from neurok_core.dynamics import Collider

    def collider(mesh, name: str):
        return Collider(tuple(map(tuple, mesh.vertices)), tuple(map(tuple, mesh.faces)), name)

    flag = _sheet(26, 1.0, 1.5, depth=0.6)
    hoist = flag.index(np.zeros(flag.n_v, dtype=np.int64), np.arange(flag.n_v))
    corner = int(flag.index(flag.n_u - 1, 0))
    corners = _sheet(25, 0.96, 1.5)
    pins = corners.index([0, corners.n_u - 1], [0, 0])
    draped = _sheet(40, 1.0, 2 * SPHERE[2] + 0.3)
    x, y, r = SPHERE
    ball = trimesh.creation.icosphere(subdivisions=4, radius=r)
    ball.apply_translation((x, y, r))
    mjcf = f'<geom type="sphere" size="{r}" pos="{x} {y} {r}" friction="{FRICTION}"/>'
    cloth = _sheet(33, 0.8, TABLE[2] + 0.01, depth=0.6, x0=-0.2)
    lo, hi = np.array([-0.6, -0.4, 0.0]), np.array([0.0, 0.4, TABLE[2]])
    table = trimesh.creation.box(hi - lo)
    table.apply_translation(0.5 * (lo + hi))
    half, mid = 0.5 * (hi - lo), 0.5 * (lo + hi)
    table_mjcf = (
        f'<geom type="box" size="{half[0]} {half[1]} {half[2]}"'
        f' pos="{mid[0]} {mid[1]} {mid[2]}" friction="{SLIPPERY}"/>'
    )
    return {
        "flag": Scene(flag, np.sort(hoist), "", ()),
        "pushed flag": Scene(flag, np.sort(hoist), "", (), Push(corner, (0.0, PUSH, PUSH), 12)),
        "two corners": Scene(corners, np.sort(pins), "", ()),
        "sphere": Scene(
            draped,
            np.zeros(0, dtype=np.int64),
            mjcf,
            (collider(ball, "sphere"),),
            shapes=(("sphere", np.array([x, y, r]), r),),
        ),
        "tablecloth": Scene(
            cloth,
            np.zeros(0, dtype=np.int64),
            table_mjcf,
            (collider(table, "table"),),
            shapes=(("box", mid, half),),
            friction=SLIPPERY,
        ),
    }


def mujoco_run(
    scene: Scene,
    self_collide: bool = False,
    *,
    frames: int = FRAMES,
    substeps: int = 4,
    air: float = 0.0,
) -> tuple[np.ndarray, float]:
    """MuJoCo's shell over ``frames`` frames at ``substeps`` steps a frame; ``air`` (1/s): an
    air damping as NeuROK's, -air m v on each vertex (MuJoCo's medium forces do not act on a
    flex's vertices); (positions (T, N, 3), seconds)."""
    import mujoco

    from training.data.cloth import ClothMaterial, cloth_xml
    from training.data.mujoco_util import FreeVertices, StepConfig, compile_model, record_flex

    material = ClothMaterial(
        membrane=MEMBRANE,
        thickness=THICKNESS,
        poisson=POISSON,
        damping=1e-3,
        areal_density=DENSITY,
        friction=scene.friction,
    )
    step = StepConfig(substeps=substeps)
    start = time.perf_counter()
    xml = cloth_xml(scene.sheet, material, scene.pins, scene.mjcf, step, self_collide)
    model = compile_model(xml, "reference")
    data = mujoco.MjData(model)
    hook = None
    if scene.push is not None or air > 0:
        free = FreeVertices(model, scene.sheet.points())
        push = np.zeros((len(free.rest), 3))
        if scene.push is not None:
            push[scene.push.vertex] = scene.push.vector
        m = DENSITY * scene.sheet.width * scene.sheet.height / len(free.rest)
        # steps counted, not compared in time (MuJoCo's time gathers rounding)
        pushed = scene.push.end * substeps if scene.push is not None else 0

        def hook(data, t: float) -> None:
            drag = -air * m * free.velocities(data)  # (N, 3)
            on = round(t / step.timestep) < pushed
            free.apply_forces(data, drag + push if on else drag)

    x = record_flex(model, data, frames=frames, cfg=step, what="reference", before_step=hook)
    return np.asarray(x, dtype=np.float64), time.perf_counter() - start


def neurok_run(
    scene: Scene,
    damping: float,
    step: str = "quasi-newton",
    self_contact: bool = False,
    *,
    frames: int = FRAMES,
) -> tuple[np.ndarray, float, dict]:
    from neurok_core.dynamics import Force, SimulationConditions
    from neurok_core.rigspace.cloth import ClothMaterial
    from neurok_core.rigspace.cloth_simulate import simulate_cloth
    from neurok_core.rigspace.space import RigSettings

    sheet = scene.sheet
    size = max(sheet.width, sheet.height)
    rigidity = MEMBRANE * THICKNESS**2 / (12.0 * (1.0 - POISSON**2))
    material = ClothMaterial(
        bending_length=(rigidity / (DENSITY * 9.81)) ** (1.0 / 3.0),
        stretch_hz=math.sqrt(MEMBRANE / (DENSITY * size**2)) / (2.0 * math.pi),
    )
    forces = ()
    if scene.push is not None:
        vector = np.asarray(scene.push.vector, dtype=np.float64)
        forces = (
            Force(
                tuple(vector),
                float(np.linalg.norm(vector)),
                vertex=scene.push.vertex,
                end_frame=scene.push.end - 1,
            ),
        )
    cond = SimulationConditions(
        pins=tuple(int(p) for p in scene.pins),
        mass=DENSITY * sheet.width * sheet.height,
        damping=damping,
        frames=frames,
        self_collision=self_contact,
        ground=0.0 if scene.colliders else None,
        colliders=scene.colliders,
        friction=scene.friction,
        forces=forces,
    )
    start = time.perf_counter()
    result = simulate_cloth(
        sheet.points(),
        sheet.triangles(),
        cond,
        settings=RigSettings(cloth_step=step),
        material=material,
        want_rig=False,
    )
    return result.positions.astype(np.float64), time.perf_counter() - start, result.info


def chamfer(a: np.ndarray, b: np.ndarray) -> float:
    """Mean of the nearest-point distances from ``a`` to ``b`` and from ``b`` to ``a`` (m)."""
    return 0.5 * float(cKDTree(b).query(a)[0].mean() + cKDTree(a).query(b)[0].mean())


def _strain(sheet, positions: np.ndarray) -> float:
    from neurok_core.geometry import unique_edges

    e = unique_edges(sheet.triangles())
    rest = np.linalg.norm(positions[0, e[:, 1]] - positions[0, e[:, 0]], axis=1)
    now = np.linalg.norm(positions[:, e[:, 1]] - positions[:, e[:, 0]], axis=2)
    return float(np.abs(now / rest - 1.0).mean(1).max())


def _depth(scene: Scene, positions: np.ndarray) -> float:
    """The deepest any vertex of any frame lies inside a collider or the ground (m)."""
    deepest = max(0.0, -float(positions[..., 2].min())) if scene.colliders else 0.0
    for kind, centre, size in scene.shapes:
        if kind == "sphere":
            d = size - np.linalg.norm(positions - centre, axis=-1)
        else:  # a box: the least way out through one of its faces
            d = (size - np.abs(positions - centre)).min(-1)
        deepest = max(deepest, float(d.max()))
    return deepest


def _crossing_frames(sheet, positions: np.ndarray) -> int:
    """How many frames have an edge of the sheet through one of its own triangles."""
    from neurok_core.metrics import self_crossings

    faces = sheet.triangles()
    return sum(self_crossings(x, faces) > 0 for x in positions)


def compare(scene: Scene, ref: np.ndarray, ours: np.ndarray) -> dict:
    """The figures of one scene's two runs (T, N, 3) each."""
    sheet = scene.sheet
    diag = float(np.linalg.norm(np.ptp(ref[0], axis=0)))
    apart = [chamfer(ref[t], ours[t]) / diag for t in range(1, len(ref))]  # frame 0: alike
    size = float(np.ptp(ref[0], axis=0).max())
    return {
        "vertices": int(ref.shape[1]),
        "chamfer_last": round(apart[-1], 4),
        "chamfer_mean": round(float(np.mean(apart)), 4),
        "chamfer_worst": round(max(apart), 4),
        "strain": [round(_strain(sheet, ref), 4), round(_strain(sheet, ours), 4)],
        "depth_m": [round(_depth(scene, ref), 4), round(_depth(scene, ours), 4)],
        "crossing_frames": [_crossing_frames(sheet, ref), _crossing_frames(sheet, ours)],
        # the last frame's fastest vertex, in sizes a frame (at rest: <= 0.005)
        "last_speed": [
            round(float(np.linalg.norm(x[-1] - x[-2], axis=1).max()) / size, 4) for x in (ref, ours)
        ],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--damping",
        type=float,
        default=None,
        help=f"NeuROK's air damping (1/s; default {DAMPING}, with --rest {REST_DAMPING})",
    )
    parser.add_argument(
        "--substeps", type=int, default=4, help="MuJoCo's steps a frame (its data's: 4)"
    )
    parser.add_argument(
        "--rest",
        action="store_true",
        help=f"the shapes at rest: {REST_FRAMES} frames, both cloths damped by the same air"
        " damping (MuJoCo's as a force on each vertex)",
    )
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--scenes", default=None, help="comma-separated names (default: every scene)"
    )
    add_cloth_step_option(parser)
    parser.add_argument(
        "--self-contact",
        action="store_true",
        help="both cloths keep their layers apart (MuJoCo's flex self-collision, NeuROK's)",
    )
    args = parser.parse_args(argv)
    every = scenes()
    names = list(every) if args.scenes is None else [n.strip() for n in args.scenes.split(",")]
    unknown = sorted(set(names) - set(every))
    if unknown:
        parser.error(f"unknown scenes {unknown}; the scenes are {list(every)}")
    damping = args.damping if args.damping is not None else REST_DAMPING if args.rest else DAMPING
    frames = REST_FRAMES if args.rest else FRAMES
    air = damping if args.rest else 0.0
    rows = []
    for name in names:
        scene = every[name]
        ref, ref_s = mujoco_run(
            scene, args.self_contact, frames=frames, substeps=args.substeps, air=air
        )
        ours, ours_s, info = neurok_run(
            scene, damping, args.cloth_step, args.self_contact, frames=frames
        )
        row = {"scene": name, **compare(scene, ref, ours)}
        row["seconds"] = [round(ref_s, 2), round(ours_s, 2)]
        row["iterations"] = info["iterations"]
        rows.append(row)
    print(
        "| scene | vertices | last frame apart (chamfer / diagonal) | mean over frames | worst"
        " frame | mean strain MuJoCo / NeuROK | depth in obstacles (mm) | frames through itself"
        " MuJoCo / NeuROK | last frame's speed (sizes) | seconds MuJoCo / NeuROK |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['scene']} | {r['vertices']} | {r['chamfer_last']:.2%}"
            f" | {r['chamfer_mean']:.2%} | {r['chamfer_worst']:.2%}"
            f" | {r['strain'][0]:.2%} / {r['strain'][1]:.2%}"
            f" | {1e3 * r['depth_m'][0]:.1f} / {1e3 * r['depth_m'][1]:.1f}"
            f" | {r['crossing_frames'][0]} / {r['crossing_frames'][1]} of {frames}"
            f" | {r['last_speed'][0]:.4f} / {r['last_speed'][1]:.4f}"
            f" | {r['seconds'][0]:.2f} / {r['seconds'][1]:.2f} s |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
