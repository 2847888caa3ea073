"""Summaries and printed tables of the evaluation (:mod:`training.eval.evaluate`).

IK summary: for each method and category (and "all", every target of the folder), the mean of
Chamfer-L1 and Chamfer-L2 over the targets and the mean IoU over the targets of closed sequences.
Motion summary: per category, the mean of each plausibility metric over the sequences whose run
finished (a run stopped by the time limit keeps its partial numbers in the JSON only; see
:mod:`training.eval.motion`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

METRICS = ("chamfer_l1", "chamfer_l2", "iou")
MOTION_METRICS = (
    ("part_rigidity", ("force", "part_rigidity", "mean")),
    ("edge_strain", ("force", "edge_strain", "mean")),
    ("energy_drift", ("undamped", "energy_drift")),
    ("drag_alignment", ("drag", "drag_alignment")),
)


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def summarize(records: list[dict], methods: list[str]) -> dict[str, dict]:
    """method -> category (and "all") -> {targets, chamfer_l1, chamfer_l2, iou, iou_targets}."""
    out: dict[str, dict] = {}
    for method in methods:
        groups: dict[str, list[dict]] = {}
        for r in records:
            if method in r["methods"]:
                groups.setdefault(r["category"], []).append(r["methods"][method])
                groups.setdefault("all", []).append(r["methods"][method])
        rows = {}
        for category, scores in groups.items():
            row: dict[str, Any] = {"targets": len(scores)}
            row.update({m: _mean(s.get(m) for s in scores) for m in METRICS})
            row["seconds"] = _mean(s.get("seconds") for s in scores)  # fit time per target
            row["iou_targets"] = sum(s.get("iou") is not None for s in scores)
            rows[category] = row
        out[method] = rows
    return out


def _lookup(record: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(record, dict) or key not in record:
            return None
        record = record[key]
    return record


def summarize_motion(records: list[dict[str, Any]], method: str) -> dict[str, dict]:
    """category (and "all") -> mean of each motion metric of ``method`` with its count, and the
    ground truth's part rigidity and edge strain."""
    groups: dict[str, list[dict]] = {}
    for r in records:
        if method in r["methods"]:
            groups.setdefault(r["category"], []).append(r)
            groups.setdefault("all", []).append(r)
    out: dict[str, dict] = {}
    for category, items in groups.items():
        row: dict[str, Any] = {"sequences": len(items)}
        for name, path in MOTION_METRICS:
            runs = [r["methods"][method].get(path[0], {}) for r in items]
            values = [None if run.get("timed_out") else _lookup(run, path[1:]) for run in runs]
            row[name] = _mean(values)
            row[f"{name}_count"] = sum(v is not None for v in values)
        for name in ("part_rigidity", "edge_strain"):
            row[f"{name}_ground_truth"] = _mean(
                _lookup(r["ground_truth"], (name, "mean")) for r in items
            )
        out[category] = row
    return out


def _cell(value, fmt: str) -> str:
    """``value`` in ``fmt`` (width included), or a dash of the same width."""
    width = int(fmt.split(".")[0] or 0)
    return f"{'-':>{width}}" if value is None else format(value, fmt)


def _categories(rows) -> list[str]:
    return sorted({c for r in rows for c in r if c != "all"}) + ["all"]


def format_table(summary: dict[str, dict], methods: list[str], title: str) -> str:
    """Rows = methods, columns = per category CD-L1 / CD-L2 / IoU, then "all" and the mean fit
    time per target (seconds)."""
    cats = _categories(summary.values())
    counts = {c: max(summary[m].get(c, {}).get("targets", 0) for m in methods) for c in cats}
    head1 = f"{'':18}" + "".join(f"| {f'{c} ({counts[c]})':<25}" for c in cats)
    head2 = f"{'method':18}" + "".join(f"| {'CD-L1':>7} {'CD-L2':>8} {'IoU':>6}   " for _ in cats)
    head1, head2 = head1 + "| time", head2 + f"| {'s':>5}"
    lines = [title, head1, head2, "-" * len(head2)]
    for m in methods:
        cells = []
        for c in cats:
            row = summary[m].get(c, {})
            cells.append(
                f"| {_cell(row.get('chamfer_l1'), '7.4f')} {_cell(row.get('chamfer_l2'), '8.2e')}"
                f" {_cell(row.get('iou'), '6.3f')}   "
            )
        cells.append(f"| {_cell(summary[m].get('all', {}).get('seconds'), '5.2f')}")
        lines.append(f"{m:18}" + "".join(cells))
    return "\n".join(lines)


def format_motion_table(summary: dict[str, dict], title: str) -> str:
    """Rows = categories: the model's motion metrics beside the ground truth's."""
    lines = [
        title,
        f"{'category':14}{'seqs':>5} {'rigidity':>9} {'(gt)':>9} {'strain':>8} {'(gt)':>8}"
        f" {'E drift':>8} {'drag err':>9}",
    ]
    for cat in _categories([summary]):
        if cat in summary:
            r = summary[cat]
            lines.append(
                f"{cat:14}{r['sequences']:>5} {_cell(r['part_rigidity'], '9.4f')}"
                f" {_cell(r['part_rigidity_ground_truth'], '9.4f')}"
                f" {_cell(r['edge_strain'], '8.4f')}"
                f" {_cell(r['edge_strain_ground_truth'], '8.4f')}"
                f" {_cell(r['energy_drift'], '8.2e')} {_cell(r['drag_alignment'], '9.4f')}"
            )
    return "\n".join(lines)


def jsonable(value: Any) -> Any:
    """A copy of ``value`` that ``json.dumps(..., allow_nan=False)`` accepts (NaN/inf -> None)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
