"""A flag modelled on its pole as one mesh, simulated, and how it hangs.

    python -m training.eval.mixed_flag [--old]

A 4 x 4 x 200 cm pole (its foot pinned) and a 100 x 60 cm flag whose hoist lies on the pole's
face, one mesh; 1 kg, damping 0.2, 48 frames at 24 fps, no ground. Prints the flag's far edge
height at 0, 1 and 2 s, how far the hoist moved, the strain and the time. ``--old`` simulates
the whole mesh in the rig space, as before sheets and solids were told apart (the flag a loose
part of a few bones).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from neurok_core.dynamics import SimulationConditions
from neurok_core.rigspace import simulate as rig_simulate
from neurok_core.rigspace.simulate import simulate_rig

from .scene_meshes import grid_box, sheet


def flag_on_pole():
    """(vertices, faces, the pole's vertex count)."""
    pv, pf = grid_box((0.04, 0.04, 2.0), (0.0, 0.0, 1.0), 0.04)
    fv, ff, _ = sheet(1.0, 0.6, 0.04)  # the xz plane: x along, z up
    fv = fv + [0.02, 0.0, 1.35]  # the hoist on the pole's +x face
    return np.concatenate([pv, fv]), np.concatenate([pf, ff + len(pv)]), len(pv)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", action="store_true", help="the whole mesh in the rig space")
    args = parser.parse_args(argv)
    v, f, n = flag_on_pole()
    pins = tuple(int(i) for i in np.flatnonzero(v[:, 2] < 0.01))
    cond = SimulationConditions(frames=48, fps=24, mass=1.0, damping=0.2, pins=pins)
    if args.old:
        rig_simulate.sheet_vertices = lambda *_: None  # every part the rig space's
    start = time.perf_counter()
    result = simulate_rig(v, f, cond)
    seconds = time.perf_counter() - start
    p = result.positions.astype(np.float64)
    fly = n + np.flatnonzero(v[n:, 0] > 1.0)
    hoist = n + np.flatnonzero(v[n:, 0] < 0.021)
    heights = p[[0, 24, 47]][:, fly, 2].mean(1)
    print(
        f"far edge at 0 / 1 / 2 s: {heights[0]:.2f} / {heights[1]:.2f} / {heights[2]:.2f} m;"
        f" hoist moved {1000 * np.abs(p[:, hoist] - v[hoist]).max():.1f} mm;"
        f" strain {result.info.get('edge_strain_max', float('nan')):.2%};"
        f" sewn {result.info.get('sewn', 0)}; {seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
