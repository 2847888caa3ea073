"""The rig space on pybullet's robots, as the step issue tried them: base pinned, a push at the tip.

    python -m training.benchmarks.bench_robots [--robots kuka_iiwa pr2_gripper] [--time-limit 120]

Each robot (``training.data.robots``: its links at the rest pose, one mesh) has its base link's
vertices pinned and a 5 N push along +X on its highest vertex for the first 12 frames; 48
frames at 24 fps, gravity, damping 0.2, one thread. Prints, per robot, the rig space's parts
and joints, the seconds, the implicit steps, Newton iterations and halvings, and whether it
made every frame within the time limit.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def robot_mesh(name: str):
    """(vertices (N, 3), faces (F, 3), the base link's vertices) of robot ``name`` at rest."""
    from training.data import robots

    asset = next(a for a in robots.ROBOTS if a.name == name)
    robot = robots.load_robot(asset)
    try:
        vertices = robots.pose_sequence(robot, robot.rest[None])[0]
        starts = np.cumsum([0] + [len(g.vertices) for g in robot.links])
        faces = np.concatenate([g.faces + s for g, s in zip(robot.links, starts, strict=False)])
    finally:
        robots.close(robot)
    return vertices, faces, np.arange(starts[0], starts[1])


def run(name: str, time_limit: float) -> dict:
    from neurok_core.dynamics import Force, SimulationConditions
    from neurok_core.rigspace import simulate_rig

    vertices, faces, base = robot_mesh(name)
    tip = int(np.argmax(vertices[:, 2]))
    push = Force(direction=(1.0, 0.0, 0.0), strength=5.0, vertex=tip, end_frame=12)
    cond = SimulationConditions(pins=tuple(base.tolist()), forces=(push,), damping=0.2, frames=48)
    start = time.perf_counter()
    result = simulate_rig(vertices, faces, cond, want_vertices=False, time_limit=time_limit)
    info = result.info
    return {
        "robot": name,
        "vertices": len(vertices),
        "parts": info["space"]["parts"],
        "joints": [j["kind"] for j in info["space"]["joints"]],
        "seconds": round(time.perf_counter() - start, 1),
        "frames": len(result.times),
        "steps": info.get("substeps"),
        "newton_iterations": info.get("newton_iterations"),
        "halvings": info.get("halvings"),
        "timed_out": info.get("timed_out"),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", default=["kuka_iiwa", "pr2_gripper"])
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args(argv)
    for name in args.robots:
        print(json.dumps(run(name, args.time_limit)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
