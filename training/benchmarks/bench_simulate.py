"""End-to-end simulation speed: load, kinematic space, integrate, decode every frame.

    python -m training.benchmarks.bench_simulate [--checkpoint CKPT] [--vertices 20000 100000]
        [--frames 120] [--threads N] [--force N] [--damping R] [--setting NAME=VALUE ...]
        [--repeat R] [--random --preset NAME] [--rig] [--dynamics rig|latent]
        [--cloth-step projective|quasi-newton] [--self-collision]

Without ``--checkpoint`` it uses the bundled default model when present, else (or with
``--random``) a network of ``--preset`` (default "default") with random weights (its decoder head
perturbed so that it moves; the cost is the same as a trained one's).
Each mesh is a flat sheet with ~N vertices; the conditions are gravity, a pin set on one end
and a force pulse at the other (``--force`` N for half a second, default 20; ``--damping``
1/s, default 0). Prints seconds per stage and the peak resident memory of the
process (each size runs in its own process so the peaks are separate), and the cost of one
Hessian pass of the decoder (an expansion of the local model; ``hessian_tokens_ms`` its part
that does not depend on the tracked points) and of decoding one frame (in a batch of
``simulate.DECODE_BATCH``, as simulate decodes them). ``frames_on_barrier``: frames whose
state the prior barrier pushed back (the motion pressing against the limits of the learned
shapes, where the dynamics are stiff and need many short steps). ``--setting`` overrides
fields of ``neurok_core.dynamics.settings.DynamicsSettings`` (e.g. ``--setting local_reuse=0
--setting barrier_scale=0.1``) to measure what a numerical setting costs or buys. ``--rig`` (a
model with bones) asks for the motion as a rig instead of the vertices, as Blender's rig bake
does: no frame is decoded onto the mesh (``rig_error``: its playback against a vertex sample).
``--dynamics rig`` (the default) integrates the motion in the rig space of the mesh
(``neurok_core.rigspace``: no model is loaded; ``--rig`` then skips skinning the frames onto the
vertices, as the rig bake does); ``--dynamics latent`` in the learned space of the model.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

from training.options import add_cloth_step_option, add_setting_option, parse_settings


def mesh_with(vertices: int):
    """A 0.6 x 0.3 m sheet triangulated on a regular grid of about ``vertices`` vertices."""
    import numpy as np

    ny = max(2, int(round((vertices / 2) ** 0.5)))
    nx = max(2, int(round(vertices / ny)))
    xs, ys = np.meshgrid(np.linspace(0, 0.6, nx), np.linspace(0, 0.3, ny), indexing="ij")
    v = np.stack([xs.ravel(), ys.ravel(), np.zeros(nx * ny)], axis=1)
    i, j = np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), indexing="ij")
    a = (i * ny + j).ravel()
    f = np.concatenate([np.stack([a, a + ny, a + 1], 1), np.stack([a + 1, a + ny, a + ny + 1], 1)])
    return v, f


def stage_costs(space, conditions, repeats: int = 5) -> tuple[float, float, float]:
    """Milliseconds of one decoder pass giving x, J and the Hessian at the tracked points (what
    an expansion of the local model costs), of its first half alone (the latent tokens' jets,
    which do not depend on the points) and of decoding one frame onto every vertex (the
    mean over a batch of DECODE_BATCH frames), each the mean of ``repeats`` runs after a
    warm-up, at a state near rest."""
    import torch

    from neurok_core.simulate import DECODE_BATCH, build_system

    system, _ = build_system(space, conditions)
    q = torch.full((system.num_coords,), 0.01, dtype=space.dtype, device=space.device)
    z = space.latent(q)[None].repeat(DECODE_BATCH, 1)
    decoder = getattr(system.kinematics, "inner", system.kinematics)  # (under a pin clamp)

    def mean_ms(fn) -> float:
        with torch.no_grad():
            fn()
            start = time.perf_counter()
            for _ in range(repeats):
                fn()
        return round((time.perf_counter() - start) / repeats * 1e3, 1)

    decode = mean_ms(lambda: space.decode_vertices(z)) / DECODE_BATCH
    return (
        mean_ms(lambda: system.kinematics.hessian(q)),
        mean_ms(lambda: decoder.hessian_tokens(q)),
        round(decode, 1),
    )


def _conditions(vertices, frames: int, force: float, damping: float, ground, device: str):
    """The benchmark's conditions on the sheet: its near end pinned, a ``force`` N push up at
    its far corner for half a second, gravity, ``damping``, a ground ``ground`` m below."""
    from neurok_core.dynamics import Force, SimulationConditions

    x = vertices[:, 0]
    pins = tuple(int(i) for i in (x <= x.min() + 0.02).nonzero()[0])
    tip = int(x.argmax())
    return SimulationConditions(
        forces=(
            Force(direction=(0, 0, 1), strength=force, vertex=tip, end_frame=min(12, frames - 1)),
        )
        if force > 0 and frames >= 2
        else (),
        pins=pins,
        frames=frames,
        fps=24,
        damping=damping,
        device=device,
        ground=None if ground is None else float(vertices[:, 2].min()) - ground,
    )


def run_one_rig(args) -> dict:
    """One size in the rig space (no model): its figures, or why it could not be integrated."""
    import numpy as np

    from neurok_core.errors import NeuROKError
    from neurok_core.rigspace import simulate_rig
    from neurok_core.rigspace.space import RigSettings

    t0 = time.perf_counter()
    vertices, faces = mesh_with(args.size)
    conditions = _conditions(
        vertices, args.frames, args.force, args.damping, args.ground, args.device
    )
    out = {"vertices": len(vertices), "dynamics": "rig", "ground_below_m": args.ground}
    try:
        result = simulate_rig(
            vertices,
            faces,
            conditions,
            want_vertices=not args.rig,
            settings=RigSettings(
                cloth_step=args.cloth_step, cloth_self_contact=args.self_collision
            ),
        )
    except NeuROKError as exc:
        out.update(error=str(exc), total_s=None, simulate_s=None)
        return out
    total = time.perf_counter() - t0
    info = result.info
    moved = None
    if result.positions is not None:
        moved = round(
            float(np.linalg.norm(result.positions - result.positions[0], axis=2).max()), 4
        )
    out.update(
        output="rig" if args.rig else "vertices",
        frames=len(result.times),
        bones=info["space"]["bones"],
        nodes=info["space"].get("nodes"),
        space_s=info["space_seconds"],
        simulate_s=round(total - info["space_seconds"], 2),
        total_s=round(total, 2),
        substeps=info["substeps"],
        # the rig space's Newton iterations and Jacobians, or a cloth's quasi-Newton
        # iterations and factorisations (an object of open sheets: neurok_core.rigspace.cloth)
        newton_iterations=info.get("newton_iterations", info.get("iterations")),
        jacobians=info.get("jacobians", info.get("factorisations")),
        halvings=info["halvings"],
        max_motion_m=moved,
        peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )
    return out


def run_one(args) -> dict:

    import numpy as np
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from neurok_core.api import NeuROK, default_checkpoint
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS

    t0 = time.perf_counter()
    ckpt = args.checkpoint or (
        default_checkpoint()
        if not args.random and (default_checkpoint() / "config.json").is_file()
        else None
    )
    if ckpt is not None:
        engine = NeuROK.load(ckpt, device=args.device)
        source = str(ckpt)
    else:
        from neurok_core.device import select_device
        from neurok_core.model import build_model

        torch.manual_seed(0)
        model = build_model(args.preset)
        with torch.no_grad():
            model.decoder.head.weight.normal_(0.0, 0.05)
        model = model.to(select_device(args.device))
        engine = NeuROK(model, {}, select_device(args.device), checkpoint=f"random-{args.preset}")
        source = f"random {args.preset}-preset weights"
    t_load = time.perf_counter()
    vertices, faces = mesh_with(args.size)
    space = engine.space(vertices, faces, cache_dir=False)
    t_space = time.perf_counter()
    conditions = _conditions(
        vertices, args.frames, args.force, args.damping, args.ground, args.device
    )
    settings = DEFAULT_SETTINGS.with_overrides(
        local_model=not args.exact, **parse_settings(args.setting)
    )
    result = engine.simulate(
        space,
        conditions,
        settings=settings,
        vertices=not args.rig,
        rig=args.rig,
        dynamics="latent",
    )
    t_sim = time.perf_counter()
    hessian_ms, tokens_ms, decode_ms = stage_costs(space, conditions)
    moved = None
    if result.positions is not None:
        moved = round(
            float(np.linalg.norm(result.positions - result.positions[0], axis=2).max()), 4
        )
    return {
        "vertices": len(vertices),
        "model": source,
        "output": "rig" if args.rig else "vertices",
        "ground_below_m": args.ground,
        "rig_error": result.info.get("rig_error"),
        "frames": len(result.times),
        "load_s": round(t_load - t0, 2),
        "space_s": round(t_space - t_load, 2),
        "simulate_s": round(t_sim - t_space, 2),
        "total_s": round(t_sim - t0, 2),
        "reduced_dims": result.info["reduced_dims"],
        "kinematics": "exact decoder" if args.exact else "local quadratic model",
        "substeps": result.info["substeps"],
        "expansions": result.info["expansions"],
        "decoder_evaluations": result.info["decoder_evaluations"],
        "model_error": round(result.info["model_error"], 6),
        "model_energy_jumps_J": round(result.info["model_energy_jumps"], 4),
        "max_motion_m": moved,
        "rest_latent_distance": round(result.info["rest_latent_distance"], 2),
        "max_latent_distance": round(result.info["max_latent_distance"], 2),
        "prior_radius": round(result.info["prior_radius"], 2),
        "frames_on_barrier": result.info["frames_on_barrier"],
        "hessian_pass_ms": hessian_ms,
        "hessian_tokens_ms": tokens_ms,
        "decode_frame_ms": decode_ms,
        "threads": torch.get_num_threads(),
        "expansion_reuses": result.info["expansion_reuses"],
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument(
        "--preset",
        default="default",
        help="with --random: the preset of the random-weight network (e.g. skinned)",
    )
    parser.add_argument(
        "--random",
        action="store_true",
        help="a network with random weights of --preset instead of the bundled model",
    )
    parser.add_argument("--vertices", type=int, nargs="+", default=[20000, 100000])
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads (default 0: torch's own choice, every core, as the worker runs)",
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--force", type=float, default=20.0, help="N on the far corner, 0.5 s")
    parser.add_argument("--damping", type=float, default=0.0, help="1/s")
    add_setting_option(parser)
    add_cloth_step_option(parser)
    parser.add_argument(
        "--exact",
        action="store_true",
        help="also run every size with the decoder at every right-hand side (no local model)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of each size, alternating sizes (the min and median total are printed: "
        "timings on a shared machine vary by tens of per cent from run to run)",
    )
    parser.add_argument(
        "--self-collision",
        action="store_true",
        help="the rig space's cloth keeps its layers apart (its Self Collision)",
    )
    parser.add_argument(
        "--rig",
        action="store_true",
        help="the motion as a rig, no vertices decoded (a model with bones)",
    )
    parser.add_argument(
        "--dynamics",
        choices=("rig", "latent"),
        default="rig",
        help="the rig space of the mesh (no model) or the learned space of the model",
    )
    parser.add_argument(
        "--ground",
        type=float,
        default=None,
        metavar="METRES",
        help="also run every size with a ground plane this far below the mesh's lowest point "
        "(side by side with the run without; the ratio is the cost of contact)",
    )
    parser.add_argument("--with-ground", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    parse_settings(args.setting)  # refuse a bad one before starting anything
    if args.size is not None:  # one size (and kinematics), in this process
        if not args.with_ground:
            args.ground = None
        print(json.dumps(run_one_rig(args) if args.dynamics == "rig" else run_one(args)))
        return 0
    with open("/proc/loadavg") as fh:
        load = fh.read().split()[:3]
    threads = args.threads or "all cores"
    print(f"load average {' '.join(load)}; threads {threads}; device {args.device}")
    if args.repeat < 1:
        raise SystemExit("--repeat must be >= 1")
    runs = [(n, False, False) for n in args.vertices]
    if args.exact:
        runs += [(n, True, False) for n in args.vertices]
    if args.ground is not None:
        runs = [(n, e, g) for n, e, _ in runs for g in (False, True)]
    totals: dict[tuple, list[float]] = {run: [] for run in runs}
    simulated: dict[tuple, list[float]] = {run: [] for run in runs}
    for n, exact, grounded in [run for _ in range(args.repeat) for run in runs]:
        cmd = [
            sys.executable,
            "-m",
            "training.benchmarks.bench_simulate",
            "--size",
            str(n),
            "--frames",
            str(args.frames),
            "--threads",
            str(args.threads),
            "--device",
            args.device,
        ]
        if args.checkpoint:
            cmd += ["--checkpoint", args.checkpoint]
        if args.random:
            cmd += ["--random", "--preset", args.preset]
        if exact:
            cmd.append("--exact")
        if args.rig:
            cmd.append("--rig")
        cmd += ["--dynamics", args.dynamics]
        if grounded:
            cmd += ["--with-ground", "--ground", str(args.ground)]
        for item in args.setting:
            cmd += ["--setting", item]
        cmd += ["--force", str(args.force), "--damping", str(args.damping)]
        cmd += ["--cloth-step", args.cloth_step]
        if args.self_collision:
            cmd.append("--self-collision")
        out = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(f"{n} vertices: failed\n{out.stderr[-2000:]}")
            continue
        line = out.stdout.strip().splitlines()[-1]
        print(line)
        if json.loads(line).get("total_s") is None:  # not integrated: no time to count
            continue
        totals[(n, exact, grounded)].append(json.loads(line)["total_s"])
        simulated[(n, exact, grounded)].append(json.loads(line)["simulate_s"])
    if args.ground is not None:
        for n, exact, grounded in runs:
            if grounded and simulated[(n, exact, True)] and simulated[(n, exact, False)]:
                a = statistics.median(simulated[(n, exact, False)])
                b = statistics.median(simulated[(n, exact, True)])
                print(
                    f"{n} vertices: simulate {a:.2f} s without contact, {b:.2f} s with a ground "
                    f"{args.ground:g} m below: contact costs {b / a:.2f}x"
                )
    if args.repeat > 1:
        for (n, exact, _), values in totals.items():
            if values:
                kind = "exact decoder" if exact else "local model"
                print(
                    f"{n} vertices ({kind}): total min {min(values):.2f} s, median "
                    f"{statistics.median(values):.2f} s over {len(values)} runs"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
