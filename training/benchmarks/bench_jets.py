"""The decoder's Taylor-mode forward (jets) against torch.func: CPU time of one point_kinematics.

    python -m training.benchmarks.bench_jets [--repeat 3]

For each deformation kind, a tiny model with random weights (its decoder head perturbed so that
it moves) on a subdivided 0.4 x 0.2 x 0.05 m slab, float64, one thread; prints the least CPU
time of this thread over ``--repeat`` passes. ``tests/test_jets.py`` checks that the two agree.
"""

from __future__ import annotations

import argparse
import time


def point_kinematics_ms(deformation: str, repeat: int) -> dict:
    import torch
    import trimesh

    from neurok_core.dynamics import SimulationConditions
    from neurok_core.dynamics.system import point_kinematics
    from neurok_core.model import ModelConfig, build_model
    from neurok_core.simulate import build_system
    from neurok_core.space import SpaceSettings, build_space

    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("tiny", deformation=deformation)).double()
    with torch.no_grad():  # a decoder that moves things (a fresh one decodes to the identity)
        model.decoder.head.weight.normal_(0.0, 0.1)
        model.decoder.head.bias.normal_(0.0, 0.02)
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    settings = SpaceSettings(
        dynamics_points=48, skinning_points=128, subspace_samples=16, rest_steps=20
    )
    space = build_space(model.eval(), mesh.vertices, mesh.faces, settings=settings)
    conditions = SimulationConditions(gravity=(0, 0, -9.81), frames=4, fps=24)
    q = torch.full((space.reduced_dims,), 0.3, dtype=torch.float64)
    v = torch.ones_like(q)
    out = {"deformation": deformation, "kq": space.reduced_dims}
    for name, autodiff in (("jets", False), ("torch.func", True)):
        system, _ = build_system(space, conditions, autodiff=autodiff)
        out["points"] = system.num_points
        point_kinematics(system, q, v)  # warm-up
        runs = []
        for _ in range(repeat):  # CPU time of this thread: the machine may be busy
            start = time.thread_time()
            point_kinematics(system, q, v)
            runs.append(time.thread_time() - start)
        out[f"{name}_ms"] = round(1e3 * min(runs), 2)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    for deformation in ("skinned", "dualquat", "displacement"):
        print(point_kinematics_ms(deformation, args.repeat), flush=True)


if __name__ == "__main__":
    main()
