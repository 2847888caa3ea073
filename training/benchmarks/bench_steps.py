"""The rig space's implicit steps side by side on the plausibility scenes' own conditions.

    python -m training.benchmarks.bench_steps [--scenes laptop,drawer] [--steps midpoint,newton]
        [--undamped]

Each scene (``training.eval.scenes``: 48 frames, or with ``--undamped`` its 10 s undamped run
at 12 fps) is simulated by ``simulate_rig`` with each ``RigSettings.step`` in turn, one thread.
Prints per run: seconds, implicit steps, Newton iterations, halvings, the largest motion of a
vertex (object sizes), the largest RMS vertex distance over the frames from the first step's
run ("off", object sizes) and the energy drift (max |E_t - E_0| / |E_0|).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def run(name: str, steps: list[str], undamped: bool) -> list[dict]:
    from neurok_core.rigspace import RigSettings, simulate_rig
    from training.eval.scene_meshes import BUILDERS
    from training.eval.scene_specs import scene_conditions, undamped_conditions

    mesh = BUILDERS[name]()
    cond = undamped_conditions(name, mesh, 12.0) if undamped else scene_conditions(name, mesh, 48)
    size = float(np.ptp(mesh.vertices, axis=0).max())
    out, first = [], None
    for step in steps:
        started = time.perf_counter()
        result = simulate_rig(mesh.vertices, mesh.faces, cond, settings=RigSettings(step=step))
        seconds = time.perf_counter() - started
        x = result.positions.astype(np.float64)
        off = None
        if first is None:
            first = x
        else:
            off = float(np.sqrt(((x - first) ** 2).sum(-1).mean(-1)).max() / size)
        e = result.energy
        info = result.info
        out.append(
            {
                "scene": name,
                "step": step,
                "seconds": round(seconds, 2),
                "steps": info["substeps"],
                "newton_iterations": info["newton_iterations"],
                "halvings": info["halvings"],
                "motion": round(float(np.linalg.norm(x - x[0], axis=2).max() / size), 4),
                "off": None if off is None else round(off, 4),
                "energy_drift": float(np.abs(e - e[0]).max() / max(abs(e[0]), 1e-300)),
            }
        )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", default="laptop,door,drawer,arm,laptop_on_desk,bottle_cap")
    parser.add_argument("--steps", default="midpoint,newton")
    parser.add_argument("--undamped", action="store_true", help="the scenes' undamped runs")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    for name in args.scenes.split(","):
        for row in run(name, args.steps.split(","), args.undamped):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
