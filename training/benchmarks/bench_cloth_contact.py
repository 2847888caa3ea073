"""A cloth against a thin collider, and against a broad one: how deep it goes, and its time.

    python -m training.benchmarks.bench_cloth_contact [--releases 17 18 19 20 21]
        [--dampings 0.8 0.2] [--floor] [--json out.json]

- **pole**: the demo's flag (0.42 x 0.27 m, 1,568 vertices on a coarser simulation mesh)
  pinned along a 16 mm pole (a 16-gon), its free corner dragged out and let go at frame
  ``--releases``, air damping ``--dampings``, 48 frames at 24 fps: it swings back round the
  pole. Its deepest vertex beside the pole (not below the pole's end), measured against the
  round pole (a vertex on the 16-gon's flats is 0.16 mm in), and the frames deeper than 1 mm;
- **floor** (``--floor``): a 1 x 0.8 m sheet of 20,000 vertices falling 0.3 m onto a floor
  given as a mesh (a broad collider: the nodes alone meet it), 48 frames.

One thread; each run's seconds from the call to its result. Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

POLE_RADIUS = 0.008
POLE_X = 0.06 - POLE_RADIUS  # the pole's axis: the flag's pinned edge lies on its surface


def _grid(nu: int, nv: int) -> np.ndarray:
    """The faces (2 nu nv, 3) of a (nu + 1) x (nv + 1) grid of vertices, index i (nv + 1) + j."""
    a = (np.arange(nu)[:, None] * (nv + 1) + np.arange(nv)[None]).ravel()
    return np.concatenate(
        [np.stack([a, a + nv + 1, a + nv + 2], 1), np.stack([a, a + nv + 2, a + 1], 1)]
    )


def flag_on_pole(release: int, damping: float, frames: int = 48):
    """(vertices, faces, conditions, corner) of the flag on its pole (module docstring)."""
    import trimesh

    from neurok_core.dynamics import Collider, Drag, SimulationConditions

    width, height, nu, nv = 0.42, 0.27, 48, 31
    uu, vv = np.meshgrid(
        np.linspace(0, width, nu + 1), np.linspace(0, height, nv + 1), indexing="ij"
    )
    v = np.stack([0.06 + uu.ravel(), np.zeros(uu.size), 0.21 + vv.ravel()], 1)
    pole = trimesh.creation.cylinder(radius=POLE_RADIUS, height=0.5, sections=16)
    pole.apply_translation((POLE_X, 0.0, 0.25))
    corner = nu * (nv + 1)
    cond = SimulationConditions(
        pins=tuple(range(nv + 1)),
        frames=frames,
        fps=24,
        mass=0.2,
        damping=damping,
        drags=(Drag(target=tuple(v[corner] + [0.0, -0.18, 0.12]), frame=release, vertex=corner),),
        colliders=(
            Collider(
                vertices=tuple(map(tuple, pole.vertices)), faces=tuple(map(tuple, pole.faces))
            ),
        ),
    )
    return v, _grid(nu, nv), cond, corner


def pole_depth(x: np.ndarray) -> np.ndarray:
    """(..., N) how deep each vertex of ``x`` (..., N, 3) lies inside the round pole (m; < 0
    outside, -1 below or above the pole's ends)."""
    along = (x[..., 2] > 0.0) & (x[..., 2] < 0.5)
    return np.where(along, POLE_RADIUS - np.hypot(x[..., 0] - POLE_X, x[..., 1]), -1.0)


def _floor_sheet():
    from neurok_core.dynamics import Collider, SimulationConditions

    nu, nv = 159, 124
    xs, ys = np.meshgrid(np.linspace(0, 1.0, nu + 1), np.linspace(0, 0.8, nv + 1), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.full(xs.size, 0.3)], 1)
    floor = Collider(
        vertices=((-1.0, -1.0, 0.0), (2.0, -1.0, 0.0), (2.0, 2.0, 0.0), (-1.0, 2.0, 0.0)),
        faces=((0, 1, 2), (0, 2, 3)),
    )
    return v, _grid(nu, nv), SimulationConditions(frames=48, damping=1.0, colliders=(floor,))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, nargs="+", default=[17, 18, 19, 20, 21])
    parser.add_argument("--dampings", type=float, nargs="+", default=[0.8, 0.2])
    parser.add_argument("--floor", action="store_true", help="also the sheet on a floor mesh")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from neurok_core.rigspace import RigSettings
    from neurok_core.rigspace.cloth_simulate import simulate_cloth

    rows = []
    for release in args.releases:
        for damping in args.dampings:
            v, f, cond, _ = flag_on_pole(release, damping)
            start = time.perf_counter()
            result = simulate_cloth(v, f, cond, settings=RigSettings())
            seconds = time.perf_counter() - start
            depth = pole_depth(result.positions.astype(np.float64)).max(1)  # (T,)
            rows.append(
                {
                    "case": "pole",
                    "release": release,
                    "damping": damping,
                    "depth_mm": round(1000 * float(depth.max()), 2),
                    "frames_over_1mm": int((depth > 0.001).sum()),
                    "seconds": round(seconds, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    if args.floor:
        v, f, cond = _floor_sheet()
        start = time.perf_counter()
        result = simulate_cloth(v, f, cond, settings=RigSettings(), want_rig=False)
        seconds = time.perf_counter() - start
        rows.append(
            {
                "case": "floor",
                "lowest_m": round(float(result.positions[-1][:, 2].min()), 5),
                "seconds": round(seconds, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
