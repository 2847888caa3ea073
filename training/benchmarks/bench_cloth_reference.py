"""NeuROK's cloth beside MuJoCo's elastic shell (a 2D flexcomp) on the same sheets, in one process.

    python -m training.benchmarks.bench_cloth_reference [--damping 0.6] [--self-contact]
        [--json out.json]

Two scenes, 50 frames at 24 fps, gravity, one material: areal density 0.15 kg/m^2, membrane
stiffness 1,000 N/m, thickness 1 mm (bending rigidity D = k t^2 / (12 (1 - nu^2)), nu = 0.3),
friction 0.5.

- **two corners**: a 0.96 m square sheet of 25 x 25 vertices lying flat 1.5 m up, pinned at two
  adjacent corners: it swings down and hangs from them;
- **sphere**: a 1 m square sheet of 40 x 40 vertices 0.3 m above an off-centre sphere (radius
  0.25 m) standing on the ground: it drapes over it.

MuJoCo (``training.data.cloth``: shell elasticity, its discrete implicit step, 4 steps a frame,
no self-collision) is the reference; NeuROK's material has the same weight, a stretch frequency
giving the same membrane stiffness (sqrt(k / (rho L^2)) / 2 pi) and a bending length (D / w)^(1/3)
from the same rigidity, and ``--damping`` as its air damping (MuJoCo's shell has a little
Rayleigh damping and no air; 0.6/s is what the two-corner sheet's swing follows best with
NeuROK's BDF2 steps: docs/experiments/cloth.md). Prints each scene's last-frame chamfer
distance between the two (the mean of both ways' nearest-vertex distances) in diagonals, the
free vertices' mean strain and depth into the sphere, the frames in which the sheet passes
through itself (``neurok_core.metrics.self_crossings``: neither solver keeps its layers apart
yet) and the seconds of each.
"""

from __future__ import annotations

import argparse
import json
import math
import time

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


def _sheet(n: int, width: float, z: float):
    from training.data.cloth import Sheet

    return Sheet(
        width,
        width,
        n,
        n,
        origin=np.array([-0.5 * width, -0.5 * width, z]),
        e_u=np.array([1.0, 0.0, 0.0]),
        e_v=np.array([0.0, 1.0, 0.0]),
    )


def scenes() -> dict:
    """name -> (sheet, pinned vertex indices, MJCF colliders, SimulationConditions colliders)."""
    import trimesh

    from neurok_core.dynamics import Collider

    corners = _sheet(25, 0.96, 1.5)
    pins = corners.index([0, corners.n_u - 1], [0, 0])
    draped = _sheet(40, 1.0, 2 * SPHERE[2] + 0.3)
    x, y, r = SPHERE
    ball = trimesh.creation.icosphere(subdivisions=4, radius=r)
    ball.apply_translation((x, y, r))
    mjcf = f'<geom type="sphere" size="{r}" pos="{x} {y} {r}" friction="{FRICTION}"/>'
    collider = Collider(tuple(map(tuple, ball.vertices)), tuple(map(tuple, ball.faces)), "sphere")
    return {
        "two corners": (corners, np.sort(pins), "", ()),
        "sphere": (draped, np.zeros(0, dtype=np.int64), mjcf, (collider,)),
    }


def mujoco_run(sheet, pins, colliders: str) -> tuple[np.ndarray, float]:
    from training.data.cloth import ClothMaterial, simulate_cloth

    material = ClothMaterial(
        membrane=MEMBRANE,
        thickness=THICKNESS,
        poisson=POISSON,
        damping=1e-3,
        areal_density=DENSITY,
        friction=FRICTION,
    )
    start = time.perf_counter()
    seq = simulate_cloth("reference", sheet, material, pins, FRAMES, colliders=colliders)
    return np.asarray(seq.vertices, dtype=np.float64), time.perf_counter() - start


def neurok_run(
    sheet, pins, colliders, damping: float, step: str = "projective", self_contact: bool = False
) -> tuple[np.ndarray, float, dict]:
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace.cloth import ClothMaterial
    from neurok_core.rigspace.cloth_simulate import simulate_cloth
    from neurok_core.rigspace.space import RigSettings

    size = max(sheet.width, sheet.height)
    rigidity = MEMBRANE * THICKNESS**2 / (12.0 * (1.0 - POISSON**2))
    material = ClothMaterial(
        bending_length=(rigidity / (DENSITY * 9.81)) ** (1.0 / 3.0),
        stretch_hz=math.sqrt(MEMBRANE / (DENSITY * size**2)) / (2.0 * math.pi),
    )
    cond = SimulationConditions(
        pins=tuple(int(p) for p in pins),
        mass=DENSITY * sheet.width * sheet.height,
        damping=damping,
        frames=FRAMES,
        ground=0.0 if colliders else None,
        colliders=colliders,
        friction=FRICTION,
    )
    start = time.perf_counter()
    result = simulate_cloth(
        sheet.points(),
        sheet.triangles(),
        cond,
        settings=RigSettings(cloth_step=step, cloth_self_contact=self_contact),
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


def _depth(positions: np.ndarray) -> float:
    x, y, r = SPHERE
    d = np.linalg.norm(positions - np.array([x, y, r]), axis=-1) - r
    return float(max(0.0, -d.min()))


def _crossing_frames(sheet, positions: np.ndarray) -> int:
    """How many frames have an edge of the sheet through one of its own triangles."""
    from neurok_core.metrics import self_crossings

    faces = sheet.triangles()
    return sum(self_crossings(x, faces) > 0 for x in positions)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--damping", type=float, default=0.6, help="NeuROK's air damping (1/s)")
    parser.add_argument("--json", default=None)
    add_cloth_step_option(parser)
    parser.add_argument(
        "--self-contact", action="store_true", help="NeuROK's cloth keeps its layers apart"
    )
    args = parser.parse_args(argv)
    rows = []
    for name, (sheet, pins, mjcf, colliders) in scenes().items():
        ref, ref_s = mujoco_run(sheet, pins, mjcf)
        ours, ours_s, info = neurok_run(
            sheet, pins, colliders, args.damping, args.cloth_step, args.self_contact
        )
        diag = float(np.linalg.norm(np.ptp(ref[0], axis=0)))
        rows.append(
            {
                "scene": name,
                "vertices": int(ref.shape[1]),
                "chamfer_last": round(chamfer(ref[-1], ours[-1]) / diag, 4),
                "chamfer_worst": round(
                    max(chamfer(ref[t], ours[t]) for t in range(FRAMES)) / diag, 4
                ),
                "strain": [round(_strain(sheet, ref), 4), round(_strain(sheet, ours), 4)],
                "depth_m": [round(_depth(ref), 4), round(_depth(ours), 4)] if mjcf else None,
                "crossing_frames": [_crossing_frames(sheet, ref), _crossing_frames(sheet, ours)],
                "seconds": [round(ref_s, 2), round(ours_s, 2)],
                "iterations": info["iterations"],
            }
        )
    print(
        "| scene | vertices | last frame apart (chamfer / diagonal) | worst frame | mean strain"
        " MuJoCo / NeuROK | frames through itself MuJoCo / NeuROK | seconds MuJoCo / NeuROK |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['scene']} | {r['vertices']} | {r['chamfer_last']:.2%} | {r['chamfer_worst']:.2%}"
            f" | {r['strain'][0]:.2%} / {r['strain'][1]:.2%}"
            f" | {r['crossing_frames'][0]} / {r['crossing_frames'][1]} of {FRAMES}"
            f" | {r['seconds'][0]:.2f} / {r['seconds'][1]:.2f} s |"
        )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
