"""Speed and size of the 4D data generators, per family and per category.

    python -m training.benchmarks.bench_data [--per-family 4] [--split train] [--families a,b]
                                             [--frames 24-48] [--target 2000] [--workers 2]
                                             [--parallel] [--json bench.json]

Each family makes ``--per-family`` sequences through the same path as the generate command
(generate, check, write the compressed file) in this process, one after the other; the table
gives sequences per minute on one core (wall clock, and CPU time, which is less sensitive to other
load on the machine), vertices, frames and MB on disk per sequence. The estimate at the end is
the time to generate ``--target`` sequences balanced over the split's families on ``--workers``
cores (from the CPU-time rates), checked against the goal of 2,000 training sequences of at
least 24 frames in 60 minutes on 2 cores. ``--parallel`` also runs the real command with
``--workers`` processes on the same number of sequences and reports its measured rate.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from training.data.__main__ import _frames, _names
from training.data.generate import (
    GenerateConfig,
    SlotTask,
    generate_dataset,
    run_slot,
    split_families,
)

GOAL_SEQUENCES, GOAL_MINUTES, GOAL_CORES = 2000, 60.0, 2


def bench_family(name: str, split: str, per_family: int, frames, seed: int, out: Path) -> dict:
    """Make ``per_family`` sequences of one family; timings per sequence and sizes."""
    wall, cpu, rows, rejects = [], [], [], 0
    for k in range(per_family):
        file = f"{name}/{name}_{k:05d}.npz"
        task = SlotTask(str(out / file), file, name, k, k, seed, split, tuple(frames), 3)
        w0, c0 = time.perf_counter(), time.process_time()
        result = run_slot(task)
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        rejects += len(result.rejects)
        if result.record:
            rows.append(result.record)
    n = max(len(rows), 1)
    return {
        "family": name,
        "category": rows[0]["category"] if rows else "?",
        "sequences": len(rows),
        "rejects": rejects,
        "wall_s_per_sequence": float(np.mean(wall)),
        "cpu_s_per_sequence": float(np.mean(cpu)),
        "per_minute_wall": 60.0 / float(np.mean(wall)),
        "per_minute_cpu": 60.0 / max(float(np.mean(cpu)), 1e-9),
        "vertices_mean": float(np.mean([r["vertices"] for r in rows])) if rows else 0.0,
        "vertices_min": int(min((r["vertices"] for r in rows), default=0)),
        "vertices_max": int(max((r["vertices"] for r in rows), default=0)),
        "frames_mean": float(np.mean([r["frames"] for r in rows])) if rows else 0.0,
        "mb_per_sequence": sum(r["bytes"] for r in rows) / 1e6 / n,
    }


def estimate(rows: list[dict], target: int, workers: int) -> dict:
    """Minutes and MB for ``target`` sequences balanced over ``rows``' families."""
    per_family = target / len(rows)
    cpu_s = sum(per_family * r["cpu_s_per_sequence"] for r in rows)
    wall_s = sum(per_family * r["wall_s_per_sequence"] for r in rows)
    mb = sum(per_family * r["mb_per_sequence"] for r in rows)
    return {
        "sequences": target,
        "workers": workers,
        "minutes_from_cpu_time": cpu_s / workers / 60.0,
        "minutes_from_wall_time": wall_s / workers / 60.0,
        "gigabytes": mb / 1e3,
    }


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--per-family", type=int, default=4)
    p.add_argument("--split", default="train")
    p.add_argument("--families", type=_names, default=())
    p.add_argument("--frames", type=_frames, default=(24, 48))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", type=int, default=GOAL_SEQUENCES)
    p.add_argument("--workers", type=int, default=GOAL_CORES)
    p.add_argument("--parallel", action="store_true", help="also time the real command")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    fams = split_families(args.split, args.families)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for fam in fams:
            row = bench_family(
                fam.name, args.split, args.per_family, args.frames, args.seed, Path(tmp)
            )
            rows.append(row)
            print(
                f"{row['family']:22s} {row['category']:12s} {row['per_minute_wall']:7.1f}/min wall"
                f" {row['per_minute_cpu']:7.1f}/min cpu  verts {row['vertices_min']:6d}-"
                f"{row['vertices_max']:<6d} frames {row['frames_mean']:4.1f}"
                f"  {row['mb_per_sequence']:5.2f} MB/seq  rejects {row['rejects']}",
                flush=True,
            )
        parallel = None
        if args.parallel:
            cfg = GenerateConfig(
                out=Path(tmp) / "parallel",
                count=args.per_family * len(fams),
                seed=args.seed + 1,
                workers=args.workers,
                split=args.split,
                families=tuple(f.name for f in fams),
                frames=tuple(args.frames),
                progress=False,
            )
            run = generate_dataset(cfg)["this_run"]
            parallel = {
                k: run[k] for k in ("workers", "written", "wall_time_s", "sequences_per_minute")
            }
    categories = defaultdict(list)
    for r in rows:
        categories[r["category"]].append(r)
    per_category = {}
    for cat, rs in sorted(categories.items()):
        per_category[cat] = {
            "families": len(rs),
            # a balanced mix of the category's families: harmonic mean of the rates
            "per_minute_cpu": len(rs) / sum(1.0 / r["per_minute_cpu"] for r in rs),
            "per_minute_wall": len(rs) / sum(1.0 / r["per_minute_wall"] for r in rs),
            "mb_per_sequence": float(np.mean([r["mb_per_sequence"] for r in rs])),
        }
        c = per_category[cat]
        print(
            f"{cat:35s} {c['per_minute_wall']:7.1f}/min wall {c['per_minute_cpu']:7.1f}/min"
            f" cpu  {c['mb_per_sequence']:5.2f} MB/seq  ({len(rs)} families, one core)"
        )
    est = estimate(rows, args.target, args.workers)
    goal = GOAL_MINUTES * args.target / GOAL_SEQUENCES
    verdict = "meets" if est["minutes_from_cpu_time"] <= goal else "misses"
    print(
        f"{args.target} sequences balanced over {len(rows)} families on {args.workers} cores:"
        f" {est['minutes_from_cpu_time']:.1f} min (cpu), {est['minutes_from_wall_time']:.1f} min"
        f" (wall), {est['gigabytes']:.2f} GB -> {verdict} the goal of {goal:.0f} min"
    )
    if parallel:
        print(
            f"generate command, {parallel['workers']} workers: {parallel['written']} sequences"
            f" in {parallel['wall_time_s']:.1f} s = {parallel['sequences_per_minute']:.1f}/min"
        )
    result = {
        "families": rows,
        "per_category": per_category,
        "estimate": est,
        "parallel": parallel,
        "frames": list(args.frames),
        "split": args.split,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
