"""Several objects against one: the cost of simulating K objects together.

    python -m training.benchmarks.bench_objects [--vertices 20000] [--objects 3]
        [--frames 120] [--repeat 2] [--threads 1]

One object is a closed rounded box (a cube's faces split to about ``--vertices`` vertices)
dropped 10 cm onto the ground; the scene is ``--objects`` such boxes dropped one above the
other (they land and stack). Both run in this process, one after the other, ``--repeat`` times
each (the best time kept): ``ratio`` = the scene's seconds / the one object's (the target of
several objects: <= K). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import trimesh


def box_of(vertices: int, centre) -> tuple[np.ndarray, np.ndarray]:
    """A 20 cm cube's surface split until it has at least ``vertices`` vertices."""
    mesh = trimesh.creation.box((0.2, 0.2, 0.2))
    while len(mesh.vertices) < vertices:
        mesh = mesh.subdivide()
    return np.asarray(mesh.vertices) + np.asarray(centre), np.asarray(mesh.faces)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vertices", type=int, default=20000)
    parser.add_argument("--objects", type=int, default=3)
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace.objects import SceneObject, simulate_objects

    scene = SimulationConditions(frames=args.frames, fps=24.0, ground=0.0, damping=0.5)
    objects = []
    for k in range(args.objects):
        v, f = box_of(args.vertices, (0.01 * k, 0.0, 0.2 + 0.3 * k))
        objects.append(SceneObject(f"box{k}", v, f, SimulationConditions(mass=1.0)))

    def best(run) -> tuple[float, dict]:
        times, out = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            out = run()
            times.append(time.perf_counter() - start)
        return min(times), out

    alone, one = best(lambda: simulate_objects(objects[:1], scene, want_vertices=False))
    together, many = best(lambda: simulate_objects(objects, scene, want_vertices=False))
    steps = [r.info["substeps"] for r in (one["box0"], many["box0"])]
    print(
        json.dumps(
            {
                "vertices": len(objects[0].vertices),
                "objects": args.objects,
                "frames": args.frames,
                "one_s": round(alone, 3),
                "scene_s": round(together, 3),
                "ratio": round(together / alone, 2),
                "steps_one_scene": steps,
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
