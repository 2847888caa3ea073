"""The sampling floor of an IK table: each target scored against itself.

    python -m training.eval.floor RESULTS.json [RESULTS2.json ...]

For every target of an evaluation report (:mod:`training.eval.evaluate`), the Chamfer-L1 of the
target mesh against itself by :func:`neurok_core.metrics.compare_meshes` at the report's metric
samples (different samples on each side, as for a fit): what no fit can go below. Prints, per
data folder and category, the mean floor beside each method's mean CD-L1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from neurok_core.metrics import compare_meshes
from neurok_core.sequence import load_sequence

from .ik import find_sequences


def floors(report: dict) -> list[str]:
    """The printed lines of one report."""
    samples = report["settings"]["task"]["samples"]
    lines = []
    for data in report["datasets"]:
        by_name = {}
        for _, path in find_sequences(data["folder"]):
            by_name.setdefault(path.stem, path)
        loaded: dict = {}
        rows = []
        for t in data["targets"]:
            name = t["sequence"]
            if name not in loaded:
                stems = [s for s in by_name if s == name or s == name.replace("_val", "").replace(
                    "_unseen", "")]  # fmt: skip
                for stem in stems or by_name:
                    seq = load_sequence(by_name[stem])
                    if seq.name == name:
                        loaded[name] = seq
                        break
            seq = loaded[name]
            frame = seq.vertices[t["frame"]]
            floor = compare_meshes(seq.vertices[0], frame, seq.faces, frame, seq.faces,
                                   closed=False, samples=samples)["chamfer_l1"]  # fmt: skip
            rows.append(
                (t["category"], floor, {m: v["chamfer_l1"] for m, v in t["methods"].items()})
            )
        for cat in sorted({c for c, _, _ in rows}) + ["all"]:
            chosen = [r for r in rows if cat in ("all", r[0])]
            means = {m: round(float(np.mean([r[2][m] for r in chosen])), 4) for m in chosen[0][2]}
            floor = float(np.mean([r[1] for r in chosen]))
            lines.append(f"{data['name']} {cat} ({len(chosen)}): floor {floor:.4f} {means}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.eval.floor", description=__doc__)
    parser.add_argument("reports", nargs="+", help="results JSON of training.eval.evaluate")
    args = parser.parse_args(argv)
    for path in args.reports:
        for line in floors(json.loads(Path(path).read_text())):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
