"""Statistics of a folder of 4D sequences, from the files themselves (no manifest needed).

Only the array headers and the small fields are read, so a large dataset is summarised in
seconds; ``check=True`` also loads and validates every file.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from neurok_core.errors import SequenceError
from neurok_core.sequence import load_sequence

from .manifest import summarise


def _npy_shape(zf: zipfile.ZipFile, member: str) -> tuple[int, ...]:
    with zf.open(member) as fh:
        fmt = np.lib.format
        version = fmt.read_magic(fh)
        read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, _, _ = read(fh)
    return shape


def sequence_record(path: Path, root: Path) -> dict:
    """The manifest record of one file, read from the npz headers."""
    try:
        with zipfile.ZipFile(path) as zf:
            t, n, _ = _npy_shape(zf, "vertices.npy")
            f = _npy_shape(zf, "faces.npy")[0]
        with np.load(path, allow_pickle=False) as data:
            category, closed = str(data["category"]), bool(data["closed"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise SequenceError(f"{path}: unreadable sequence file ({exc})") from exc
    rel = path.relative_to(root)
    return {
        "file": str(rel),
        "family": rel.parts[0] if len(rel.parts) > 1 else path.stem.rsplit("_", 1)[0],
        "category": category,
        "frames": int(t),
        "vertices": int(n),
        "faces": int(f),
        "closed": closed,
        "bytes": path.stat().st_size,
    }


def dataset_stats(root: str | Path, *, check: bool = False) -> dict:
    """Summary (as in the manifest) of every ``*.npz`` under ``root``, plus unreadable files."""
    root = Path(root)
    if not root.is_dir():
        raise SequenceError(f"{root}: not a folder of sequences")
    records, bad = [], []
    for path in sorted(root.rglob("*.npz")):
        if path.name.endswith(".tmp.npz"):
            continue
        try:
            if check:
                load_sequence(path)
            records.append(sequence_record(path, root))
        except SequenceError as exc:
            bad.append(str(exc))
    return {**summarise(records), "unreadable": bad}


def format_stats(stats: dict) -> str:
    """A plain-text table: one row per family, then per category and totals."""
    lines = [
        f"{'family':22s} {'category':12s} {'count':>6s} {'verts min':>9s} {'median':>7s}"
        f" {'max':>6s} {'frames':>7s} {'closed':>6s} {'MB/seq':>7s}"
    ]
    for name, f in stats["per_family"].items():
        v, fr = f["vertices"], f["frames"]
        lines.append(
            f"{name:22s} {f['category']:12s} {f['count']:6d} {v['min']:9.0f} {v['median']:7.0f}"
            f" {v['max']:6.0f} {fr['min']:3.0f}-{fr['max']:<3.0f} {f['closed_fraction']:6.2f}"
            f" {f['mb_per_sequence']:7.2f}"
        )
    lines.append("")
    for cat, c in stats["per_category"].items():
        lines.append(f"{cat:22s} {c['count']:6d} sequences, {c['bytes'] / 1e6:9.1f} MB")
    lines.append(
        f"{'total':22s} {stats['count']:6d} sequences, {stats['bytes_on_disk'] / 1e6:9.1f} MB"
        f" ({stats['mb_per_sequence']:.2f} MB per sequence)"
    )
    for msg in stats.get("unreadable", []):
        lines.append(f"unreadable: {msg}")
    return "\n".join(lines)
