"""Several objects against one: the cost of simulating K objects together.

    python -m training.benchmarks.bench_objects [--vertices 20000] [--objects 3]
        [--frames 120] [--repeat 2] [--threads 1] [--friction 0.5] [--windows 0.125]

One object is a closed rounded box (a cube's faces split to about ``--vertices`` vertices)
dropped 10 cm onto the ground; the scene is ``--objects`` such boxes dropped one above the
other (they land and stack). Both run in this process, one after the other, ``--repeat`` times
each (the best time kept): ``ratio`` = the scene's seconds / the one object's (the target of
several objects: <= K). Both once as shipped (a scene that has come to rest stops stepping:
``RigSettings.sleep_distance``) and once awake to the end (``*_awake``: every frame stepped,
what a scene that keeps moving costs). Prints one JSON line. ``--windows SECONDS``: also, for
the scene's last awake run, its implicit solves, Newton iterations and failed solves (each a
halving) in windows of that many seconds of simulated time (where the scene's iterations go).
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
    parser.add_argument("--friction", type=float, default=0.5, help="of the boxes and ground")
    parser.add_argument("--windows", type=float, default=None, metavar="SECONDS")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace import RigSettings
    from neurok_core.rigspace.objects import SceneObject, simulate_objects

    scene = SimulationConditions(
        frames=args.frames, fps=24.0, ground=0.0, damping=0.5, friction=args.friction
    )
    objects = []
    for k in range(args.objects):
        v, f = box_of(args.vertices, (0.01 * k, 0.0, 0.2 + 0.3 * k))
        objects.append(
            SceneObject(f"box{k}", v, f, SimulationConditions(mass=1.0, friction=args.friction))
        )

    def best(run) -> tuple[float, dict]:
        times, out = [], None
        for _ in range(args.repeat):
            start = time.perf_counter()
            out = run()
            times.append(time.perf_counter() - start)
        return min(times), out

    shipped, awake = RigSettings(), RigSettings(sleep_distance=0.0)

    def run(some, settings):
        return simulate_objects(some, scene, settings=settings, want_vertices=False)

    alone, one = best(lambda: run(objects[:1], shipped))
    together, many = best(lambda: run(objects, shipped))
    alone_awake, _ = best(lambda: run(objects[:1], awake))
    solves = []  # (t, iterations, failed) of every solve of the scene's last awake run
    if args.windows:
        from neurok_core.rigspace.newton_step import ProjectedNewton

        solve = ProjectedNewton._solve

        def counted(self, q, v, t, h, history=None):
            start = self.report.iterations
            out = solve(self, q, v, t, h, history)
            solves.append((t, self.report.iterations - start, out is None))
            return out

        ProjectedNewton._solve = counted

    def scene_awake():
        solves.clear()
        return run(objects, awake)

    together_awake, many_awake = best(scene_awake)
    steps = [r.info["substeps"] for r in (one["box0"], many["box0"], many_awake["box0"])]
    windows = {}
    for t, iterations, failed in solves:
        w = windows.setdefault(round(args.windows * int(t / args.windows), 6), [0, 0, 0])
        w[0], w[1], w[2] = w[0] + 1, w[1] + iterations, w[2] + int(failed)
    print(
        json.dumps(
            {
                "vertices": len(objects[0].vertices),
                "objects": args.objects,
                "frames": args.frames,
                "one_s": round(alone, 3),
                "scene_s": round(together, 3),
                "ratio": round(together / alone, 2),
                "asleep_frame_one_scene": [r["box0"].info["asleep_frame"] for r in (one, many)],
                "one_awake_s": round(alone_awake, 3),
                "scene_awake_s": round(together_awake, 3),
                "ratio_awake": round(together_awake / alone_awake, 2),
                "steps_one_scene_scene_awake": steps,
                **({"windows_solves_iterations_failed": windows} if args.windows else {}),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
