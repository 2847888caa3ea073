"""Standard runs over many sequences, per sequence: how far drags end from their targets and how
rigid (articulated) or unstretched (cloth) the generated motion stays.

    python -m training.eval.motion_sweep --data DIR [--data DIR ...] [--checkpoint CKPT]
        [--per-family N] [--runs drag] [--frames 24] [--setting NAME=VALUE ...]
        [--space NAME=VALUE ...] [--out JSON]

For the first ``--per-family`` sequences of every family folder, each run of ``--runs`` (the
evaluation's standard conditions, ``motion.standard_conditions``) is simulated with the
checkpoint (default: the bundled model) and reported: ``miss`` (drag runs: distance of the
dragged point from its target at its frame, in object sizes), ``shape`` (the mean over frames of
the part rigidity error for articulated sequences with part labels, of the edge strain for cloth,
``motion.shape_scores``), or the simulator's error. ``--setting`` overrides
``DynamicsSettings`` fields (e.g. ``--setting drag_bias_cap=inf`` for drag hands that cancel
all of the grabbed point's velocity term) and ``--space`` those of ``SpaceSettings`` (e.g.
``--space rest_steps=0`` to start from the posterior mean of no motion), so that numerical
choices can be compared on the same sequences. Where ``evaluate`` takes one sequence per
category, this covers every family.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from ..options import add_setting_option


def sequences(folders: list[str], per_family: int) -> list[Path]:
    """The first ``per_family`` .npz of every family: of every FAMILY/ subfolder, or in a flat
    folder of every name prefix before the last ``_`` (``a1_00.npz``, ``a1_01.npz``: ``a1``)."""
    out: list[Path] = []
    for folder in folders:
        root = Path(folder)
        subfolders = sorted(p for p in root.iterdir() if p.is_dir())
        if subfolders:
            groups = [sorted(group.glob("*.npz")) for group in subfolders]
        else:
            families: dict[str, list[Path]] = {}
            for path in sorted(root.glob("*.npz")):
                families.setdefault(path.stem.rsplit("_", 1)[0], []).append(path)
            groups = list(families.values())
        for paths in groups:
            out += paths[:per_family]
    return out


def sweep_one(
    engine, path: Path, runs: list[str], frames: int, settings, space_settings=None
) -> list[dict]:
    """The records of one sequence's runs."""
    from neurok_core.errors import NeuROKError
    from neurok_core.sequence import load_sequence

    from .motion import shape_scores, standard_conditions

    seq = load_sequence(path)
    rest = seq.vertices[0].astype(np.float64)
    size = float((rest.max(0) - rest.min(0)).max())
    space = engine.space(rest, seq.faces, settings=space_settings, cache_dir=False)
    conditions = standard_conditions(seq, frames)
    records = []
    for run in runs:
        record: dict = {"sequence": path.name, "category": seq.category, "run": run}
        cond = conditions[run]
        try:
            result = engine.simulate(space, cond, settings=settings, dynamics="latent")
        except NeuROKError as exc:
            record["error"] = str(exc)
            records.append(record)
            continue
        for hand in cond.drags:
            record["miss"] = float(
                np.linalg.norm(result.positions[hand.frame, hand.vertex] - hand.target) / size
            )
        scores = shape_scores(seq, result.positions)
        for key in ("part_rigidity", "edge_strain"):
            if key in scores:
                record["shape"] = scores[key]["mean"]
        records.append(record)
    return records


def main(argv: list[str] | None = None) -> int:
    from ..options import parse_fields, parse_settings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", action="append", required=True, help="folder (repeatable)")
    parser.add_argument("--checkpoint", default=None, help="default: the bundled model")
    parser.add_argument("--per-family", type=int, default=1)
    parser.add_argument("--runs", default="drag", help="comma-separated: force, undamped, drag")
    parser.add_argument("--frames", type=int, default=24)
    parser.add_argument("--threads", type=int, default=1)
    add_setting_option(parser)
    parser.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a SpaceSettings field (how the kinematic space is built; repeatable)",
    )
    parser.add_argument("--out", default=None, help="write the records as JSON")
    args = parser.parse_args(argv)

    import torch

    from neurok_core.api import NeuROK, default_checkpoint
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS
    from neurok_core.space import SpaceSettings

    torch.set_num_threads(args.threads)
    settings = DEFAULT_SETTINGS.with_overrides(**parse_settings(args.setting))
    space_settings = SpaceSettings(**parse_fields(SpaceSettings, args.space, "--space"))
    engine = NeuROK.load(args.checkpoint or default_checkpoint())
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    records: list[dict] = []
    for path in sequences(args.data, args.per_family):
        for record in sweep_one(engine, path, runs, args.frames, settings, space_settings):
            records.append(record)
            value = record.get("error") or " ".join(
                f"{k} {record[k]:.4f}" for k in ("miss", "shape") if k in record
            )
            print(f"{record['sequence']} {record['run']}: {value}", flush=True)
    for category in sorted({r["category"] for r in records}):
        shapes = [r["shape"] for r in records if r["category"] == category and "shape" in r]
        failed = sum("error" in r for r in records if r["category"] == category)
        if shapes or failed:
            mean = f"{np.mean(shapes):.4f} over {len(shapes)} runs" if shapes else "-"
            print(f"{category}: mean shape score {mean}; {failed} failed")
    if args.out:
        Path(args.out).write_text(json.dumps({"argv": argv or sys.argv[1:], "records": records}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
