"""The contact sheet of the plausibility scenes: one row per scene, a few frames per row.

Each frame is the mesh's triangles in a fixed 3/4 view (the same for every scene), with equal axes
that hold every drawn frame of the row, pinned vertices in red (at most
``MAX_PIN_MARKS`` of them), the pushed or dragged vertex in
orange, a drag's target as a green cross, and the contact scenes' obstacles in grey (colliders
as their triangles, the ground as a square under the object). Matplotlib's Agg backend, so it
runs headless.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

COLUMNS = 4  # frames 0, 1/3, 2/3 and the last
MAX_PIN_MARKS = 160  # pinned vertices drawn per frame (an evenly strided subset)
VIEW = dict(elev=20.0, azim=-60.0)


@dataclass
class SheetRow:
    """One scene: positions (T, N, 3) metres (None when the run failed), faces (F, 3), pins (P,),
    ``marked`` vertex indices (forces, drags), drag ``targets`` (K, 3), a note for the title, the
    ``ground`` height (or None) and ``colliders`` ((vertices (M, 3), faces (G, 3)), ...)."""

    name: str
    faces: np.ndarray
    positions: np.ndarray | None
    pins: np.ndarray
    marked: tuple[int, ...] = ()
    targets: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    note: str = ""
    ground: float | None = None
    colliders: tuple = ()


def frame_choice(count: int, columns: int = COLUMNS) -> list[int]:
    """``columns`` frame indices spread from 0 to count - 1 (repeats when there are fewer)."""
    return [round(i * (count - 1) / (columns - 1)) for i in range(columns)]


def _limits(points: np.ndarray, rest: np.ndarray) -> tuple[np.ndarray, float]:
    """Centre (3,) and half-width of a cube holding ``points`` (M, 3), at most 3 rest sizes
    around the rest centre (so an exploded run does not shrink the object to a dot)."""
    centre0 = 0.5 * (rest.min(0) + rest.max(0))
    size = float((rest.max(0) - rest.min(0)).max())
    pts = points[np.isfinite(points).all(1)]
    pts = centre0 + np.clip(pts - centre0, -3 * size, 3 * size)
    lo, hi = pts.min(0), pts.max(0)
    return 0.5 * (lo + hi), 0.5 * float((hi - lo).max()) * 1.05 + 1e-9


OBSTACLE_COLOR = (0.55, 0.55, 0.55)


def _draw_obstacles(ax, row: SheetRow, centre: np.ndarray, half: float, polys) -> None:
    """The row's colliders and ground, under the object (drawn first)."""
    for vertices, faces in row.colliders:
        v = np.asarray(vertices, dtype=np.float64)
        ax.add_collection3d(
            polys(v[np.asarray(faces)], facecolor=OBSTACLE_COLOR, edgecolor="none", alpha=0.35)
        )
    if row.ground is not None:
        (x0, x1), (y0, y1) = (
            (centre[0] - half, centre[0] + half),
            (centre[1] - half, centre[1] + half),
        )
        z = float(row.ground)
        square = [[(x0, y0, z), (x1, y0, z), (x1, y1, z), (x0, y1, z)]]
        ax.add_collection3d(polys(square, facecolor=OBSTACLE_COLOR, edgecolor="none", alpha=0.3))


def contact_sheet(rows: list[SheetRow], path: str | Path, *, columns: int = COLUMNS) -> Path:
    """Draw ``rows`` into a PNG at ``path``; returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    fig = plt.figure(figsize=(3.0 * columns, 2.8 * max(1, len(rows))), dpi=90)
    for r, row in enumerate(rows):
        if row.positions is None or len(row.positions) == 0:
            ax = fig.add_subplot(len(rows), columns, r * columns + 1)
            ax.set_axis_off()
            ax.text(0, 0.5, f"{row.name}: {row.note}"[:120], fontsize=8, wrap=True)
            continue
        pos = np.asarray(row.positions, dtype=np.float64)
        picks = frame_choice(len(pos), columns)
        shown = [pos[picks].reshape(-1, 3), row.targets]
        if row.ground is not None:  # the ground in view, under the object
            shown.append(np.array([[*pos[0].mean(0)[:2], row.ground]]))
        centre, half = _limits(np.concatenate(shown), pos[0])
        for c, k in enumerate(picks):
            ax = fig.add_subplot(len(rows), columns, r * columns + c + 1, projection="3d")
            # markers after the triangles, always on top: matplotlib sorts 3D collections by
            # their mean depth, which hides or shows a whole marker set at once
            ax.computed_zorder = False
            x = pos[k]  # (N, 3)
            tris = Poly3DCollection(
                x[row.faces],
                facecolor=(0.62, 0.72, 0.86),
                edgecolor=(0.2, 0.25, 0.35),
                linewidths=0.08,
                alpha=0.9,
            )
            _draw_obstacles(ax, row, centre, half, Poly3DCollection)
            ax.add_collection3d(tris)
            if len(row.pins):
                p = x[row.pins[:: max(1, len(row.pins) // MAX_PIN_MARKS)]]
                ax.scatter(p[:, 0], p[:, 1], p[:, 2], s=2, c="red", depthshade=False)
            if row.marked:
                m = x[list(row.marked)]
                ax.scatter(m[:, 0], m[:, 1], m[:, 2], s=18, c="orange", depthshade=False)
            if len(row.targets):
                t = row.targets
                ax.scatter(t[:, 0], t[:, 1], t[:, 2], s=30, c="green", marker="x")
            for axis, set_lim in enumerate((ax.set_xlim, ax.set_ylim, ax.set_zlim)):
                set_lim(centre[axis] - half, centre[axis] + half)
            ax.set_box_aspect((1, 1, 1))
            ax.view_init(**VIEW)
            ax.set_axis_off()
            title = f"{row.name}  frame {k}" + (f"  {row.note}" if c == 0 and row.note else "")
            ax.set_title(title, fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
