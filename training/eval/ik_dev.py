"""The rig-space fit's dev set: articulated sequences that the IK table does not use.

    python -m training.eval.ik_dev --out results/ik_dev/rig_0.json [--shard 0 --shards 2]
        [--method rig_no_prior|per_vertex_arap] [--plane 0.8]
    python -m training.eval.ik_dev --summary results/ik_dev/rig_*.json \
        --baseline results/ik_dev/arap_*.json

The IK table (:mod:`training.eval.evaluate`, one sequence per family) takes each family's
first sequence; the dev set takes the next ones: sequences 1-2 of each articulated val
family and 1-3 of each articulated unseen family, 2 targets each (56 targets), scored at
20,000 metric samples (a higher floor than the table's 100,000). The targets, their points
and the budget are the table's (:mod:`training.eval.ik`). ``--shard i --shards n`` fits every
n-th sequence, so that n processes share the set; ``--summary`` prints the mean CD-L1 of the
val and unseen parts against the baseline's, the IoU, the seconds per target and the
metric's floor (each target against itself) with both errors above it.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from neurok_core.metrics import compare_meshes
from neurok_core.rigspace.fit import RigProblem
from neurok_core.rigspace.ik import RigIKSettings
from neurok_core.sequence import load_sequence

from .baselines import BaselineSettings, fit_baseline
from .ik import target_frames, target_points

VAL = (
    "cabinet", "chest", "desk_lamp", "door", "drawers", "fan", "laptop", "oven",
    "random_assembly", "robot_arm", "wheel",
)  # fmt: skip
UNSEEN = ("scissors", "sliding_window")
SAMPLES = 20_000
TARGETS = 2


def dev_sequences(root: Path = Path("data")) -> list[Path]:
    """The dev set's sequence files (module docstring)."""
    out = [root / "val" / f / f"{f}_{i:05d}.npz" for f in VAL for i in (1, 2)]
    return out + [root / "unseen" / f / f"{f}_{i:05d}.npz" for f in UNSEEN for i in (1, 2, 3)]


def fit_dev(paths, method: str, settings: RigIKSettings) -> dict:
    """{"path:frame": {"cd", "iou", "s", "floor", "start"}} of ``method`` on the sequences;
    floor: the target's CD-L1 against itself, the metric's own sampling noise; start: the
    winning start of the fit."""
    out = {}
    for path in paths:
        seq = load_sequence(path)
        problem = RigProblem(seq.vertices[0], seq.faces, settings) if method != "arap" else None
        for t in target_frames(seq.num_frames, TARGETS):
            points = target_points(seq.vertices[t], seq.faces, 2048, 0, seq.name, t)
            started = time.perf_counter()
            start = "arap"
            if problem is not None:
                fit = problem.solve(points)
                vertices, start = fit.vertices, fit.start
            else:
                args = (seq.vertices[0], seq.faces, points, BaselineSettings())
                vertices = fit_baseline("per_vertex_arap", *args).vertices
            seconds = time.perf_counter() - started
            score = compare_meshes(
                seq.vertices[0], vertices, seq.faces, seq.vertices[t], seq.faces,
                closed=seq.closed, samples=SAMPLES,
            )  # fmt: skip
            floor = compare_meshes(
                seq.vertices[0], seq.vertices[t], seq.faces, seq.vertices[t], seq.faces,
                closed=seq.closed, samples=SAMPLES,
            )  # fmt: skip
            out[f"{path}:{t}"] = {
                "cd": score["chamfer_l1"],
                "iou": score.get("iou"),
                "s": seconds,
                "floor": floor["chamfer_l1"],
                "start": start,
            }
    return out


def summary(fits: dict, baseline: dict) -> list[str]:
    """Lines: per part of the set, mean CD-L1 against the baseline's, IoU and seconds."""
    lines = []
    for name in ("val", "unseen"):
        keys = [k for k in fits if f"/{name}/" in k and k in baseline]
        if not keys:
            continue
        cd = np.mean([fits[k]["cd"] for k in keys])
        base = np.mean([baseline[k]["cd"] for k in keys])
        iou = [fits[k]["iou"] for k in keys if fits[k]["iou"] is not None]
        secs = [fits[k]["s"] for k in keys]
        line = (
            f"{name:7s} {len(keys):3d} targets  CD-L1 {cd:.4f} / baseline {base:.4f} = "
            f"{cd / base:.2f}x  IoU {np.mean(iou) if iou else float('nan'):.3f}  "
            f"s {np.mean(secs):.2f} (max {np.max(secs):.2f})"
        )
        floors = [fits[k]["floor"] for k in keys if "floor" in fits[k]]
        if len(floors) == len(keys):  # above the floor: what a fit can still win
            floor = np.mean(floors)
            line += f"  floor {floor:.4f}: above it {cd - floor:.4f} / {base - floor:.4f}"
        lines.append(line)
    return lines


def _load(paths) -> dict:
    out = {}
    for path in paths:
        out.update(json.loads(Path(path).read_text()))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.eval.ik_dev", description=__doc__)
    p.add_argument("--out", help="results JSON of this shard")
    p.add_argument("--method", choices=("rig_no_prior", "arap"), default="rig_no_prior")
    p.add_argument("--shard", type=int, default=0)
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--plane", type=float, default=RigIKSettings.plane)
    p.add_argument("--data", default="data", help="the folder holding val/ and unseen/")
    p.add_argument("--summary", nargs="+", help="results JSONs of a run to summarise")
    p.add_argument("--baseline", nargs="+", help="the baseline's results JSONs")
    args = p.parse_args(argv)
    if args.summary:
        print("\n".join(summary(_load(args.summary), _load(args.baseline or args.summary))))
        return 0
    if not args.out:
        p.error("--out is required to fit")
    paths = dev_sequences(Path(args.data))[args.shard :: args.shards]
    settings = replace(RigIKSettings(), plane=args.plane)
    fits = fit_dev(paths, args.method, settings)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(fits, indent=1))
    print(f"wrote {args.out} ({len(fits)} targets)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
