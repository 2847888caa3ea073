"""The checks every generated sequence passes before it is written.

``check_sequence`` runs the format validator of ``neurok_core.sequence`` and then the data checks
of the generator: frame 0 is the rest shape (equal to a given rest mesh when the generator knows
it, and in every case the start of the motion: no jump from frame 0 to frame 1 larger than the
later steps), the rest mesh has no degenerate triangles, and nothing explodes (bounding box
growth, edge stretch, per-frame vertex steps, all relative to the rest shape), and something
moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurok_core.errors import SequenceError
from neurok_core.sequence import Sequence4D, validate_sequence


@dataclass(frozen=True)
class SequenceLimits:
    """Thresholds of ``check_sequence``; lengths are in rest bounding-box diagonals."""

    min_frames: int = 2
    max_extent_growth: float = 3.0  # frame bbox diagonal / rest diagonal
    max_edge_stretch: float = 5.0  # edge length / rest edge length
    max_frame_step: float = 5.0  # largest vertex move between consecutive frames
    max_start_jump: float = 3.0  # frame 0 -> 1 step / largest later step
    rest_tolerance: float = 1e-5  # |frame 0 - rest| allowed, float32 rounding
    min_rest_area: float = 1e-12  # smallest rest triangle area / diagonal^2
    min_motion: float = 1e-3  # largest displacement from frame 0 over the sequence


def check_sequence(
    seq: Sequence4D, *, rest: np.ndarray | None = None, limits: SequenceLimits = SequenceLimits()
) -> None:
    """Raise ``SequenceError`` unless ``seq`` is a valid, sane 4D sequence.

    rest: optional (N, 3) rest shape that frame 0 must equal (within ``rest_tolerance`` of the
    rest diagonal).
    """
    validate_sequence(seq, min_frames=limits.min_frames, max_extent_growth=limits.max_extent_growth)
    v = seq.vertices  # (T, N, 3) float32
    f = seq.faces
    diag = float(np.linalg.norm(v[0].astype(np.float64).ptp(0)))
    if rest is not None:
        check_rest_frame(seq, rest, limits.rest_tolerance)
    tri = v[0].astype(np.float64)[f]  # (F, 3, 3)
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=-1)
    if area.min() <= limits.min_rest_area * diag**2:
        raise SequenceError(
            f"{seq.name}: the rest frame has {int((area <= limits.min_rest_area * diag**2).sum())}"
            " degenerate (zero-area) triangles"
        )
    steps = np.linalg.norm(np.diff(v, axis=0), axis=-1).max(axis=1)  # (T-1,)
    if steps.max() > limits.max_frame_step * diag:
        t = int(steps.argmax())
        raise SequenceError(
            f"{seq.name}: a vertex moves {steps[t] / diag:.1f} rest diagonals between frames"
            f" {t} and {t + 1} (explosion?)"
        )
    if len(steps) > 1 and steps[0] > limits.max_start_jump * steps[1:].max() + 1e-4 * diag:
        raise SequenceError(
            f"{seq.name}: frame 0 -> 1 jumps {steps[0] / max(steps[1:].max(), 1e-12):.1f}x the"
            " largest later step: frame 0 is not the start of the motion (not the rest shape?)"
        )
    moved = float(np.abs(v - v[:1]).max())
    if moved < limits.min_motion * diag:
        raise SequenceError(f"{seq.name}: nothing moves (largest displacement {moved:.2g} m)")
    half = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    key = np.unique(half[:, 0].astype(np.int64) * v.shape[1] + half[:, 1])
    a, b = key // v.shape[1], key % v.shape[1]  # (E,) each undirected edge once
    length = np.linalg.norm(v[:, a] - v[:, b], axis=-1)  # (T, E)
    rest_len = np.maximum(length[0], 1e-9 * diag)
    stretch = float((length / rest_len).max())
    if stretch > limits.max_edge_stretch:
        raise SequenceError(
            f"{seq.name}: an edge stretches {stretch:.1f}x its rest length (explosion?)"
        )


def check_rest_frame(seq: Sequence4D, rest: np.ndarray, tolerance: float = 1e-5) -> None:
    """Raise ``SequenceError`` unless frame 0 equals ``rest`` (N, 3) within ``tolerance`` of the
    rest bounding-box diagonal."""
    rest = np.asarray(rest, dtype=np.float64)
    v0 = seq.vertices[0].astype(np.float64)
    if rest.shape != v0.shape:
        raise SequenceError(f"{seq.name}: rest shape {rest.shape} != frame 0 {v0.shape}")
    diag = float(np.linalg.norm(rest.max(0) - rest.min(0)))
    err = float(np.abs(v0 - rest).max())
    if err > tolerance * diag:
        raise SequenceError(f"{seq.name}: frame 0 differs from the rest shape by {err:.3g} m")
