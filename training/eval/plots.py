"""Figures of the evaluation (PNG, matplotlib Agg), written by ``python -m training.eval.evaluate``.

- ``ik_<set>.png``: one row per example target (a few per category): the target mesh, then each
  method's fitted mesh with its Chamfer-L1; all panels of a row share one cubic box and view.
- ``motion_<set>.png``: the generated motion of the same examples under the standard ``force``
  and ``drag`` conditions (:mod:`training.eval.motion`), four frames each; the drag target is a
  black cross.
- ``energy_<set>.png``: total energy against time of the undamped and damped runs of the first
  example (the paper's energy-conservation figure): flat when undamped, decaying when damped.
- ``training_<row>.png``: training curves (:func:`training.plots.plot_training`) of each
  checkpoint whose run folder (the checkpoint's parent) holds a ``metrics.jsonl``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurok_core.sequence import Sequence4D
from training.data.preview import MAX_FACES, camera, draw_frame

ROWS_PER_PAGE = 8


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _frames_of(seq: Sequence4D, frames: list[np.ndarray]) -> Sequence4D:
    """A sequence of the given (N, 3) frames on ``seq``'s topology and part labels."""
    stacked = np.stack([np.asarray(f, dtype=np.float32) for f in frames])  # (K, N, 3)
    return Sequence4D(stacked, seq.faces, seq.parts, seq.closed, seq.category, seq.source, seq.name)


def _box(frames: Sequence4D) -> tuple[np.ndarray, float]:
    lo = frames.vertices.min(axis=(0, 1)).astype(np.float64)
    hi = frames.vertices.max(axis=(0, 1)).astype(np.float64)
    return 0.5 * (lo + hi), 0.55 * float((hi - lo).max())


def _faces(seq: Sequence4D) -> np.ndarray:
    if len(seq.faces) <= MAX_FACES:
        return seq.faces
    keep = np.random.default_rng(0).choice(len(seq.faces), MAX_FACES, replace=False)
    return seq.faces[np.sort(keep)]


def _save(fig, out: Path, dpi: int = 70) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    _pyplot().close(fig)
    return out


def _sheet(rows: list[tuple[Sequence4D, list[str], list[tuple]]], out: Path) -> Path:
    """Rows of panels: (frames, titles, extra marks) -> PNG; each row one box and view."""
    plt = _pyplot()
    cols = max(len(titles) for _, titles, _ in rows)
    fig = plt.figure(figsize=(2.6 * cols, 2.8 * len(rows)))
    for r, (frames, titles, marks) in enumerate(rows):
        centre, half = _box(frames)
        view = camera(frames.vertices[0].astype(np.float64))
        faces = _faces(frames)
        for c, title in enumerate(titles):
            ax = fig.add_subplot(len(rows), cols, r * cols + c + 1, projection="3d")
            draw_frame(ax, frames, c, centre, half, faces, view)
            for point in marks:
                ax.scatter(*np.asarray(point)[:, None], color="black", marker="x", s=60)
            ax.set_title(title, fontsize=7)
    return _save(fig, out)


def _pages(rows: list, out: Path) -> list[Path]:
    paths = []
    for k in range(0, len(rows), ROWS_PER_PAGE):
        page = out if k == 0 else out.with_name(f"{out.stem}_{k // ROWS_PER_PAGE + 1}{out.suffix}")
        paths.append(_sheet(rows[k : k + ROWS_PER_PAGE], page))
    return paths


def ik_sheet(examples: list[dict], methods: list[str], out: Path) -> list[Path]:
    """Target beside every method's fit, one row per example."""
    rows = []
    for ex in examples:
        seq, t = ex["sequence"], ex["frame"]
        shown = [m for m in methods if m in ex["fits"]]
        frames = _frames_of(seq, [seq.vertices[t]] + [ex["fits"][m][0] for m in shown])
        titles = [f"{seq.name}\n{seq.category} target t={t}"]
        titles += [f"{m}\nCD-L1 {ex['fits'][m][1]:.4f}" for m in shown]
        rows.append((frames, titles, []))
    return _pages(rows, out) if rows else []


def motion_sheet(examples: list[dict], out: Path, count: int = 4) -> list[Path]:
    """Four frames of the ``force`` and ``drag`` runs of every example that was simulated."""
    rows = []
    for ex in examples:
        seq = ex["sequence"]
        for name in ("force", "drag"):
            result = ex["simulations"].get(name)
            if result is None:
                continue
            picks = np.unique(np.round(np.linspace(0, len(result.positions) - 1, count)))
            frames = _frames_of(seq, [result.positions[int(i)] for i in picks])
            titles = [f"{seq.name} {name}\nframe {int(i)}" for i in picks]
            marks = [drag["target"] for drag in result.conditions.get("drags", [])]
            rows.append((frames, titles, marks))
    return _pages(rows, out) if rows else []


def energy_figure(examples: list[dict], out: Path) -> list[Path]:
    """Energy over time of the undamped and damped runs of the first example that has them."""
    for ex in examples:
        sims = ex["simulations"]
        if "undamped" in sims and "damped" in sims:
            break
    else:
        return []
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, style in (("undamped", "-"), ("damped", "--")):
        result = sims[name]
        e = np.asarray(result.energy, dtype=np.float64)
        drift = float(np.abs(e - e[0]).max() / abs(e[0])) if e[0] else float("nan")
        damping = result.conditions.get("damping", 0.0)
        ax.plot(result.times, e, style, label=f"{name} (damping {damping:g}/s, change {drift:.1%})")
    ax.set_xlabel("time [s]")
    ax.set_ylabel("total energy [J]")
    ax.set_ylim(bottom=0)
    ax.set_title(f"{ex['sequence'].name}: energy of the generated motion", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return [_save(fig, out, dpi=100)]


def dataset_figures(name: str, examples: list[dict], methods: list[str], folder) -> list[Path]:
    """Every figure of one data folder; returns the paths written."""
    folder = Path(folder)
    return [
        *ik_sheet(examples, methods, folder / f"ik_{name}.png"),
        *motion_sheet(examples, folder / f"motion_{name}.png"),
        *energy_figure(examples, folder / f"energy_{name}.png"),
    ]


def training_figures(checkpoints: dict[str, str], folder) -> list[Path]:
    """Training curves of each checkpoint whose run (its parent folder) has metrics.jsonl."""
    from training.plots import plot_training

    paths = []
    for row, checkpoint in checkpoints.items():
        metrics = Path(checkpoint).resolve().parent / "metrics.jsonl"
        if metrics.is_file() and metrics.stat().st_size > 0:
            paths.append(plot_training(metrics, Path(folder) / f"training_{row}.png"))
    return paths
