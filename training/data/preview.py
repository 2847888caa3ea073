"""Contact sheet of a dataset: one row per family, its rest, middle and last frame.

    python -m training.data preview DATA_DIR --out sheet.png [--index K] [--families a,b]

Meshes are drawn with matplotlib (``Poly3DCollection``), faces coloured by part label and shaded
by the angle between their normal and a fixed light; the three panels of a row share one cubic
box, so the motion reads directly (a part that moves out of the box is visible as such).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neurok_core.errors import SequenceError
from neurok_core.sequence import Sequence4D, load_sequence

LIGHT = np.array([0.4, -0.6, 0.7]) / np.linalg.norm([0.4, -0.6, 0.7])
MAX_FACES = 60_000  # faces drawn per panel; more are subsampled (for speed only)


def pick_sequences(root: str | Path, index: int = 0, families=()) -> dict[str, Path]:
    """The ``index``-th file (sorted) of each family folder under ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise SequenceError(f"{root}: not a folder of sequences")
    picks = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if families and folder.name not in families:
            continue
        files = sorted(f for f in folder.glob("*.npz") if not f.name.endswith(".tmp.npz"))
        if files:
            picks[folder.name] = files[min(index, len(files) - 1)]
    if not picks:
        raise SequenceError(f"{root}: no sequences found (expected FAMILY/*.npz)")
    return picks


def _face_colours(vertices: np.ndarray, faces: np.ndarray, parts: np.ndarray, cmap) -> np.ndarray:
    tri = vertices[faces]  # (F, 3, 3)
    n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    n /= np.maximum(np.linalg.norm(n, axis=1, keepdims=True), 1e-12)
    shade = 0.35 + 0.65 * np.abs(n @ LIGHT)  # (F,) two-sided Lambert
    label = parts[faces[:, 0]]
    base = np.asarray(cmap(np.where(label < 0, 7, label) % 10))[:, :3]  # (F, 3)
    return np.clip(base * shade[:, None], 0, 1)


def camera(rest: np.ndarray) -> tuple[float, float]:
    """(elevation, azimuth) in degrees: a three-quarter view across the object's longest
    horizontal axis, from higher up for flat objects."""
    xy = rest[:, :2] - rest[:, :2].mean(0)
    _, vecs = np.linalg.eigh(xy.T @ xy)
    major = vecs[:, -1]  # (2,) longest horizontal direction
    azim = np.degrees(np.arctan2(major[1], major[0])) - 60.0
    extent = rest.max(0) - rest.min(0)
    elev = 22.0 if extent[2] > 0.3 * extent[:2].max() else 55.0
    return elev, float(azim)


def draw_frame(ax, seq: Sequence4D, t: int, centre, half: float, faces=None, view=(22.0, -60.0)):
    from matplotlib import colormaps
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    v = seq.vertices[t].astype(np.float64)
    f = seq.faces if faces is None else faces
    colours = _face_colours(v, f, seq.parts, colormaps["tab10"])
    ax.add_collection3d(Poly3DCollection(v[f], facecolors=colours, edgecolors="none"))
    for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre, strict=True):
        setter(c - half, c + half)
    ax.set_box_aspect((1, 1, 1))
    ax.view_init(*view)
    ax.set_axis_off()


def render_sheet(picks: dict[str, Path], out: str | Path, *, dpi: int = 80) -> Path:
    """Write the contact sheet of ``picks`` (family -> sequence file) to ``out`` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(picks)
    fig = plt.figure(figsize=(12, 4 * rows))
    rng = np.random.default_rng(0)
    for r, (name, path) in enumerate(picks.items()):
        seq = load_sequence(path)
        frames = [0, seq.num_frames // 2, seq.num_frames - 1]
        lo = seq.vertices[frames].min(axis=(0, 1)).astype(np.float64)
        hi = seq.vertices[frames].max(axis=(0, 1)).astype(np.float64)
        centre, half = 0.5 * (lo + hi), 0.55 * float((hi - lo).max())
        view = camera(seq.vertices[0].astype(np.float64))
        faces = seq.faces
        if len(faces) > MAX_FACES:
            faces = faces[np.sort(rng.choice(len(faces), MAX_FACES, replace=False))]
        for c, t in enumerate(frames):
            ax = fig.add_subplot(rows, 3, 3 * r + c + 1, projection="3d")
            draw_frame(ax, seq, t, centre, half, faces, view)
            label = ("rest", "middle", "last")[c]
            ax.set_title(
                f"{name} ({seq.category}) {label} t={t}\nN={seq.num_vertices}"
                f" parts={len(np.unique(seq.parts))}",
                fontsize=8,
            )
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


def render_pages(picks: dict[str, Path], out: str | Path, rows_per_page: int = 8) -> list[Path]:
    """Contact sheets of at most ``rows_per_page`` families: out.png, out_2.png, ..."""
    out = Path(out)
    items = list(picks.items())
    pages = []
    for k in range(0, len(items), rows_per_page):
        page = out if k == 0 else out.with_name(f"{out.stem}_{k // rows_per_page + 1}{out.suffix}")
        pages.append(render_sheet(dict(items[k : k + rows_per_page]), page))
    return pages
