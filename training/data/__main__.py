"""Command line of the data pipeline.

python -m training.data generate --out DIR --count N --seed S --workers 2 [--split train]
                                 [--families a,b] [--frames 24-48] [--quiet]
python -m training.data preview DATA_DIR --out sheet.png [--index K] [--families a,b]
python -m training.data stats DIR [--check] [--json]
python -m training.data families
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from neurok_core.errors import NeuROKError


def _frames(text: str) -> tuple[int, int]:
    try:
        lo, _, hi = text.partition("-")
        return int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--frames wants N or LO-HI, got {text!r}") from None


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in text.split(",") if n.strip())


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m training.data", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate (or resume) a dataset of 4D sequences")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--count", type=int, required=True)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--workers", type=int, default=2)
    g.add_argument("--split", default="train", help="train, val, unseen (held-out families)")
    g.add_argument("--families", type=_names, default=(), help="comma-separated subset")
    g.add_argument("--frames", type=_frames, default=(24, 48), help="N or LO-HI per sequence")
    g.add_argument("--max-attempts", type=int, default=3)
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    v = sub.add_parser("preview", help="contact sheet PNG: rest, middle, last frame per family")
    v.add_argument("data", type=Path)
    v.add_argument("--out", type=Path, default=Path("sheet.png"))
    v.add_argument("--index", type=int, default=0, help="which sequence of each family")
    v.add_argument("--families", type=_names, default=())
    v.add_argument("--rows", type=int, default=8, help="families per page")
    s = sub.add_parser("stats", help="counts, vertex/frame statistics and size of a dataset")
    s.add_argument("data", type=Path)
    s.add_argument("--check", action="store_true", help="also load and validate every file")
    s.add_argument("--json", action="store_true")
    sub.add_parser("families", help="list the registered families and their splits")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "generate":
            from .generate import GenerateConfig, generate_dataset

            cfg = GenerateConfig(
                out=args.out,
                count=args.count,
                seed=args.seed,
                workers=args.workers,
                split=args.split,
                families=args.families,
                frames=args.frames,
                max_attempts=args.max_attempts,
                progress=not args.quiet,
            )
            m = generate_dataset(cfg)
            run = m["this_run"]
            print(
                f"{m['count']} sequences in {args.out} ({run['written']} new, {run['kept']} kept,"
                f" {m['rejects']['total']} rejects, {len(m['missing'])} missing) in"
                f" {run['wall_time_s']:.1f} s, {m['bytes_on_disk'] / 1e6:.1f} MB"
            )
        elif args.command == "preview":
            from .preview import pick_sequences, render_pages

            picks = pick_sequences(args.data, args.index, args.families)
            for page in render_pages(picks, args.out, args.rows):
                print(page)
        elif args.command == "stats":
            from .stats import dataset_stats, format_stats

            st = dataset_stats(args.data, check=args.check)
            print(json.dumps(st, indent=1) if args.json else format_stats(st))
        else:
            from .registry import all_families

            for name, fam in all_families().items():
                print(f"{name:22s} {fam.category:12s} {fam.split}")
    except NeuROKError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
