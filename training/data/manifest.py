"""The dataset manifest (``manifest.json``) and the summaries shared with ``stats``.

Layout: the run settings (split, seed, families, frames_range, generator version, platform),
``counts`` (sequences per family and per category), ``vertices`` / ``frames`` / ``faces``
statistics overall and per family, ``rejects`` (total, and per family with each reason's count
and an example message), ``missing`` (slots that failed every attempt), ``this_run`` (written,
kept, failed, wall time, sequences per minute), ``bytes_on_disk`` and ``mb_per_sequence``, and
``sequences``: one record per file (family, category, frames, vertices, faces, closed, bytes,
attempt, rejects before it).
"""

from __future__ import annotations

import platform
import re
import time
from collections import defaultdict

import numpy as np


def describe(values) -> dict:
    """min / max / mean / median / p10 / p90 of a list of numbers (empty -> {})."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {}
    return {
        "min": float(a.min()),
        "p10": float(np.percentile(a, 10)),
        "median": float(np.median(a)),
        "mean": float(a.mean()),
        "p90": float(np.percentile(a, 90)),
        "max": float(a.max()),
    }


def summarise(records: list[dict]) -> dict:
    """Counts and statistics of sequence records (as in ``manifest['sequences']``)."""
    per_family: dict[str, list[dict]] = defaultdict(list)
    per_category: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        per_family[r["family"]].append(r)
        per_category[r["category"]].append(r)

    def block(rs: list[dict]) -> dict:
        total = sum(r["bytes"] for r in rs)
        return {
            "count": len(rs),
            "vertices": describe([r["vertices"] for r in rs]),
            "frames": describe([r["frames"] for r in rs]),
            "closed_fraction": float(np.mean([r["closed"] for r in rs])) if rs else 0.0,
            "bytes": total,
            "mb_per_sequence": total / 1e6 / max(len(rs), 1),
        }

    fams = {}
    for name, rs in sorted(per_family.items()):
        fams[name] = {"category": rs[0]["category"], **block(rs)}
    total = sum(r["bytes"] for r in records)
    return {
        "count": len(records),
        "counts": {
            "per_family": {k: len(v) for k, v in sorted(per_family.items())},
            "per_category": {k: len(v) for k, v in sorted(per_category.items())},
        },
        "vertices": describe([r["vertices"] for r in records]),
        "faces": describe([r["faces"] for r in records]),
        "frames": describe([r["frames"] for r in records]),
        "per_family": fams,
        "per_category": {k: block(v) for k, v in sorted(per_category.items())},
        "bytes_on_disk": total,
        "mb_per_sequence": total / 1e6 / max(len(records), 1),
    }


def reject_summary(results, families: list[str]) -> dict:
    """Per family: number of rejects and, per reason (numbers masked), count and an example."""
    per = {name: {"count": 0, "reasons": {}} for name in families}
    for r in results:
        fam = per.setdefault(r.family, {"count": 0, "reasons": {}})
        for msg in r.rejects:
            key = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", msg)
            fam["count"] += 1
            entry = fam["reasons"].setdefault(key, {"count": 0, "example": msg})
            entry["count"] += 1
    return {"total": sum(f["count"] for f in per.values()), "per_family": per}


def build_manifest(cfg, families: list[str], results, wall: float, version: str) -> dict:
    records = []
    for r in results:
        if r.status in ("written", "existing"):
            records.append({**r.record, "rejects": list(r.rejects)})
    written = sum(r.status == "written" for r in results)
    try:
        import mujoco

        mujoco_version = mujoco.__version__
    except ImportError:
        mujoco_version = None
    return {
        "format": "neurok 4D sequences (design section 5)",
        "generator_version": version,
        "split": cfg.split,
        "seed": cfg.seed,
        "families": families,
        "frames_range": list(cfg.frames),
        "count_requested": cfg.count,
        "max_attempts": cfg.max_attempts,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "platform": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "mujoco": mujoco_version,
            "machine": platform.machine(),
        },
        "this_run": {
            "workers": cfg.workers,
            "written": written,
            "kept": sum(r.status == "existing" for r in results),
            "failed": sum(r.status == "failed" for r in results),
            "wall_time_s": wall,
            "sequences_per_minute": 60.0 * written / wall if wall > 0 else 0.0,
        },
        **summarise(records),
        "rejects": reject_summary(results, families),
        "missing": sorted(r.file for r in results if r.status == "failed"),
        "sequences": records,
    }
