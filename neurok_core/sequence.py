"""The 4D sequence format (design section 5): one ``.npz`` per sequence.

Fields: ``vertices`` float32 (T, N, 3), frame 0 = rest shape, metres, Z up; ``faces`` int32 (F, 3);
``parts`` int32 (N,) rigid part or dominant bone per vertex, -1 where not meaningful;
``closed`` bool (watertight enough for volumetric IoU); ``category`` str (articulated, skinned,
cloth, elastic, continuum, ...); ``source`` str; ``name`` str.
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import SequenceError

CATEGORIES = ("articulated", "skinned", "cloth", "elastic", "continuum", "multibody")


@dataclass(frozen=True)
class Sequence4D:
    """One mesh moving with a fixed topology.

    vertices: (T, N, 3) float32, metres, frame 0 is the rest shape.
    faces: (F, 3) int32 triangles.
    parts: (N,) int32 part label per vertex, -1 where not meaningful.
    """

    vertices: np.ndarray
    faces: np.ndarray
    parts: np.ndarray
    closed: bool
    category: str
    source: str
    name: str

    @property
    def num_frames(self) -> int:
        return int(self.vertices.shape[0])

    @property
    def num_vertices(self) -> int:
        return int(self.vertices.shape[1])


def validate_sequence(
    seq: Sequence4D, *, min_frames: int = 2, max_extent_growth: float = 10.0
) -> None:
    """Raise ``SequenceError`` if ``seq`` breaks the format or looks like a simulation blow-up.

    Checks: dtypes and shapes, at least ``min_frames`` frames, finite values, face indices in
    range, no face repeating a vertex, a non-degenerate rest shape, a known category, and no
    frame whose bounding-box diagonal exceeds ``max_extent_growth`` times the rest one.
    """
    v, f, p = seq.vertices, seq.faces, seq.parts
    if not isinstance(v, np.ndarray) or v.ndim != 3 or v.shape[2] != 3:
        raise SequenceError(
            f"{seq.name}: vertices must be (T, N, 3), got {getattr(v, 'shape', None)}"
        )
    if v.dtype != np.float32:
        raise SequenceError(f"{seq.name}: vertices must be float32, got {v.dtype}")
    t, n, _ = v.shape
    if t < min_frames:
        raise SequenceError(f"{seq.name}: {t} frames, at least {min_frames} needed")
    if n < 3:
        raise SequenceError(f"{seq.name}: {n} vertices, at least 3 needed")
    if not np.isfinite(v).all():
        raise SequenceError(f"{seq.name}: vertices contain NaN or inf")
    if not isinstance(f, np.ndarray) or f.ndim != 2 or f.shape[1] != 3 or len(f) == 0:
        raise SequenceError(f"{seq.name}: faces must be a non-empty (F, 3) array")
    if f.dtype != np.int32:
        raise SequenceError(f"{seq.name}: faces must be int32, got {f.dtype}")
    if f.min() < 0 or f.max() >= n:
        raise SequenceError(f"{seq.name}: face indices outside [0, {n})")
    if ((f[:, 0] == f[:, 1]) | (f[:, 1] == f[:, 2]) | (f[:, 0] == f[:, 2])).any():
        raise SequenceError(f"{seq.name}: a face repeats a vertex")
    if not isinstance(p, np.ndarray) or p.shape != (n,) or p.dtype != np.int32:
        raise SequenceError(f"{seq.name}: parts must be int32 (N,) = ({n},)")
    if seq.category not in CATEGORIES:
        raise SequenceError(f"{seq.name}: unknown category {seq.category!r}, one of {CATEGORIES}")
    rest = v[0]
    diag0 = float(np.linalg.norm(rest.max(0) - rest.min(0)))
    if diag0 <= 1e-6:
        raise SequenceError(f"{seq.name}: the rest shape is degenerate (extent {diag0:g} m)")
    diags = np.linalg.norm(v.max(1) - v.min(1), axis=-1)  # (T,)
    if diags.max() > max_extent_growth * diag0:
        raise SequenceError(
            f"{seq.name}: frame {int(diags.argmax())} is {diags.max() / diag0:.1f}x the rest size"
            " (simulation blow-up?)"
        )


def save_sequence(seq: Sequence4D, path: str | os.PathLike) -> Path:
    """Validate and write ``seq`` atomically (a partial file never has the final name)."""
    validate_sequence(seq)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(
        tmp,
        vertices=seq.vertices,
        faces=seq.faces,
        parts=seq.parts,
        closed=np.bool_(seq.closed),
        category=np.str_(seq.category),
        source=np.str_(seq.source),
        name=np.str_(seq.name),
    )
    os.replace(tmp, path)
    return path


def load_sequence(path: str | os.PathLike, *, validate: bool = True) -> Sequence4D:
    """Read a sequence written by ``save_sequence`` (never unpickles)."""
    path = Path(path)
    if not path.is_file():
        raise SequenceError(f"{path}: no such sequence file")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"vertices", "faces", "parts", "closed", "category", "source", "name"} - set(
                data.files
            )
            if missing:
                raise SequenceError(f"{path}: missing fields {sorted(missing)}")
            seq = Sequence4D(
                vertices=data["vertices"],
                faces=data["faces"],
                parts=data["parts"],
                closed=bool(data["closed"]),
                category=str(data["category"]),
                source=str(data["source"]),
                name=str(data["name"]),
            )
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        if isinstance(exc, SequenceError):
            raise
        raise SequenceError(f"{path}: unreadable sequence file ({exc})") from exc
    if validate:
        validate_sequence(seq)
    return seq
