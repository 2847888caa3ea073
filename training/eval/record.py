"""Record evaluation tables in a checkpoint's ``config.json`` (``metrics.evaluation``).

    python -m training.eval.record --checkpoint neurok_core/weights/default \
        results/eval.json [results/eval_ablations.json ...] [--note TEXT]

Each results file is the JSON that ``training.eval.evaluate --out`` wrote. Their per-category means
(``summary``) are merged into one table per data folder and method; a row may come from one
file only. At least one file must hold the ``neurok`` row of this very checkpoint (same weights
SHA-256), so that a table never lands in the config of a model it was not measured on; files
without a ``neurok`` row (e.g. ablation rows run on their own) are merged beside it. The
weights and the rest of the config are left as they are (the config is replaced atomically).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from neurok_core.checkpoint import CONFIG_FILE, checkpoint_info
from neurok_core.errors import NeuROKError

from .ik import MAIN

KEYS = ("chamfer_l1", "chamfer_l2", "iou", "targets")


def _rounded(value: Any) -> Any:
    return round(value, 5) if isinstance(value, float) else value


def merge_tables(reports: list[tuple[str, dict]], weights_sha256: str) -> dict[str, Any]:
    """The ``metrics.evaluation`` record of (name, report) pairs for the checkpoint whose
    weights hash is ``weights_sha256``; raises NeuROKError on a foreign or conflicting file."""
    tables: dict[str, dict] = {}
    sources, origin = [], {}
    own = False
    for name, report in reports:
        try:
            datasets, checkpoints = report["datasets"], report["checkpoints"]
        except (KeyError, TypeError):
            raise NeuROKError(f"{name}: not a results file of training.eval.evaluate") from None
        main = checkpoints.get(MAIN)
        if main is not None:
            if main.get("weights_sha256") != weights_sha256:
                raise NeuROKError(
                    f"{name}: its '{MAIN}' row was measured on other weights "
                    f"({main.get('path')}); record it in that checkpoint instead"
                )
            own = True
        methods = set()
        for section in datasets:
            table = tables.setdefault(section["name"], {})
            for method, cats in section["summary"].items():
                key = (section["name"], method)
                if key in origin:
                    raise NeuROKError(
                        f"the {method} row of {section['name']} is in both {origin[key]} and "
                        f"{name}: give each row once"
                    )
                origin[key] = name
                methods.add(method)
                table[method] = {
                    cat: {k: _rounded(v.get(k)) for k in KEYS} for cat, v in cats.items()
                }
        sources.append(
            {
                "file": name,
                "command": report.get("command"),
                "methods": sorted(methods),
                "checkpoints": {k: v.get("path") for k, v in checkpoints.items()},
                "settings": report.get("settings"),
                "seconds": report.get("seconds"),
            }
        )
    if not own:
        raise NeuROKError(
            f"none of the files holds the '{MAIN}' row of this checkpoint: evaluate it with "
            "--checkpoint pointing at it"
        )
    return {"sources": sources, "tables": tables}


def record(checkpoint: str | os.PathLike, files: list[str], note: str | None = None) -> Path:
    """Write the merged tables of ``files`` into ``checkpoint``'s config; returns its path."""
    info = checkpoint_info(checkpoint)
    reports = []
    for f in files:
        try:
            reports.append((Path(f).name, json.loads(Path(f).read_text())))
        except (OSError, ValueError) as exc:
            raise NeuROKError(f"cannot read the results file {f}: {exc}") from exc
    evaluation = merge_tables(reports, info.get("weights_sha256"))
    if note:
        evaluation["note"] = note
    path = Path(checkpoint) / CONFIG_FILE
    config = json.loads(path.read_text())
    config.setdefault("metrics", {})["evaluation"] = evaluation
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(config, indent=2, allow_nan=False) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="checkpoint folder whose config gets it")
    p.add_argument("results", nargs="+", help="results JSON of training.eval.evaluate")
    p.add_argument("--note", help="a line kept with the tables (e.g. the reduced budget)")
    args = p.parse_args(argv)
    try:
        path = record(args.checkpoint, args.results, args.note)
    except NeuROKError as exc:
        print(f"training.eval.record: error: {exc}", file=sys.stderr)
        return 2
    print(f"recorded {len(args.results)} results file(s) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
