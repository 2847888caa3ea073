"""Can a model's kinematic space turn a hinged part rigidly? A reachability probe.

    python -m training.eval.reach --checkpoint CKPT [--scene laptop] [--angles 15 30 60]
        [--steps 300]

For a plausibility scene with a hinge (``training.eval.scene_meshes``: laptop, chest), the targets
are the same mesh with its lid closed by each angle about the hinge (exact correspondences: the
mesh built at a smaller opening). For each target the state that best matches it vertex for
vertex is fitted with Adam from the rest state, (a) over the full latent z and (b) over the
active subspace's coordinates q, the ones the dynamics move. Reported per fit: RMS vertex error /
L, the lid's turn toward the base (the rotation of its best rigid fit, about the hinge), the
lid's and the base's rigid-fit residual / L. A space that reaches a 30 deg turn with small
residuals in (a) but not in (b) loses the turn in the subspace; one that cannot in (a) does not
offer it at all (the decoder). Writes JSON with ``--out``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from neurok_core.metrics import best_rotations, rigid_fit_residual

from . import scene_meshes


def _turn_toward_base(rest: np.ndarray, moved: np.ndarray, axis: np.ndarray) -> float:
    """The signed angle (deg) of the best rotation from ``rest`` to ``moved`` (both (n, 3))
    about ``axis``; positive closes a scene lid (a turn about +X)."""
    rotation = best_rotations(rest, moved[None])[0]  # (3, 3)
    angle = math.degrees(math.acos(max(-1.0, min(1.0, (np.trace(rotation) - 1.0) / 2.0))))
    w = np.array(
        [
            rotation[2, 1] - rotation[1, 2],
            rotation[0, 2] - rotation[2, 0],
            rotation[1, 0] - rotation[0, 1],
        ]
    )
    return angle if float(w @ axis) >= 0 else -angle


def fit(space, target: np.ndarray, reduced: bool, steps: int, lr: float) -> np.ndarray:
    """Vertices (N, 3) of the state that best matches ``target`` (N, 3) vertex for vertex."""
    goal = torch.as_tensor(target, dtype=space.dtype, device=space.device)
    scale = float(space.object_size)
    if reduced:
        x = torch.zeros(space.reduced_dims, dtype=space.dtype, device=space.device)
    else:
        x = space.z_rest.detach().clone()
    x.requires_grad_(True)
    opt = torch.optim.Adam([x], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        z = space.latent(x[None]) if reduced else x[None]
        loss = ((space.decode_vertices(z)[0] - goal) ** 2).sum(-1).mean() / scale**2
        loss.backward()
        opt.step()
    with torch.no_grad():
        z = space.latent(x[None]) if reduced else x[None]
        return space.decode_vertices(z)[0].double().cpu().numpy()


def probe(
    checkpoint: str | None,
    scene: str,
    angles: list[float],
    steps: int,
    lr: float,
    soft_modes: bool = False,
) -> dict:
    from neurok_core.api import NeuROK
    from neurok_core.softmodes import motion_subspace

    build = getattr(scene_meshes, scene)
    rest = build()
    if rest.hinge is None:
        raise SystemExit(f"scene {scene!r} has no hinge")
    engine = NeuROK.load(checkpoint, device="cpu")
    started = time.perf_counter()
    space = engine.space(rest.vertices, rest.faces)
    lid = rest.parts == rest.hinge.moving_part
    base = rest.parts == rest.hinge.fixed_part
    axis = np.asarray(rest.hinge.axis, dtype=np.float64)
    size = rest.size
    opening = float(np.degrees(np.arccos(np.clip(np.dot(rest.hinge.lid, rest.hinge.base), -1, 1))))
    views = [(space, False, "full latent"), (space, True, f"subspace ({space.reduced_dims})")]
    if soft_modes:  # the soft subspace the dynamics would move in, with the scene's pins
        soft, _, _ = motion_subspace(space, tuple(int(p) for p in rest.pins), soft=True)
        views.append((soft, True, f"soft subspace ({soft.reduced_dims})"))
    rows = []
    for angle in angles:
        target = build(opening_deg=opening - angle).vertices
        for view, reduced, name in views:
            got = fit(view, target, reduced, steps, lr)
            rows.append(
                {
                    "angle": angle,
                    "space": name,
                    "rms": float(np.sqrt(((got - target) ** 2).sum(1).mean())) / size,
                    "lid_turn_deg": _turn_toward_base(rest.vertices[lid], got[lid], axis),
                    "lid_residual": float(rigid_fit_residual(rest.vertices[lid], got[lid][None])[0])
                    / size,
                    "base_residual": float(
                        rigid_fit_residual(rest.vertices[base], got[base][None])[0]
                    )
                    / size,
                    "base_motion": float(np.abs(got[base] - rest.vertices[base]).max()) / size,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return {
        "checkpoint": checkpoint or "bundled",
        "scene": scene,
        "steps": steps,
        "lr": lr,
        "reduced_dims": space.reduced_dims,
        "seconds": round(time.perf_counter() - started, 1),
        "fits": rows,
    }


def table(report: dict) -> str:
    lines = [
        "| closed by | space | RMS error / L | lid turn | lid residual / L | base residual / L"
        " | base motion / L |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["fits"]:
        lines.append(
            f"| {r['angle']:g} deg | {r['space']} | {r['rms']:.4f} | {r['lid_turn_deg']:.1f} deg"
            f" | {r['lid_residual']:.4f} | {r['base_residual']:.4f} | {r['base_motion']:.4f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=None, help="default: the bundled model")
    parser.add_argument("--scene", default="laptop", choices=("laptop", "chest"))
    parser.add_argument("--angles", type=float, nargs="+", default=[15.0, 30.0, 60.0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="write the report here as JSON")
    parser.add_argument(
        "--soft-modes",
        action="store_true",
        help="also fit in the soft subspace (neurok_core.softmodes) with the scene's pins",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    report = probe(args.checkpoint, args.scene, args.angles, args.steps, args.lr, args.soft_modes)
    print(table(report))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
