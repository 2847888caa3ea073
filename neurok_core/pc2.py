"""PC2 point caches: the standard format Blender's Mesh Cache modifier, Maya and Houdini read.

Layout (little endian): a 32-byte header

    char[12] signature = b"POINTCACHE2\\0"; int32 version = 1; int32 num_points;
    float32 start_frame; float32 sample_rate; int32 num_samples

followed by ``num_samples * num_points`` float32 xyz triples, frame after frame.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import NeuROKError

SIGNATURE = b"POINTCACHE2\0"
HEADER = struct.Struct("<12siiffi")  # 32 bytes


@dataclass(frozen=True)
class PointCache:
    """frames: (T, N, 3) float32 positions; start_frame and sample_rate (frames per sample)."""

    frames: np.ndarray
    start_frame: float = 0.0
    sample_rate: float = 1.0


def write_pc2(
    path: str | os.PathLike,
    frames: np.ndarray,
    *,
    start_frame: float = 0.0,
    sample_rate: float = 1.0,
) -> Path:
    """Write ``frames`` (T, N, 3) to ``path`` atomically."""
    frames = np.asarray(frames)
    if frames.ndim != 3 or frames.shape[2] != 3 or frames.shape[0] < 1 or frames.shape[1] < 1:
        raise NeuROKError(f"point cache frames must be (T, N, 3), got {frames.shape}")
    if not np.isfinite(frames).all():
        raise NeuROKError("point cache frames contain NaN or inf")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(
            HEADER.pack(
                SIGNATURE,
                1,
                frames.shape[1],
                float(start_frame),
                float(sample_rate),
                frames.shape[0],
            )
        )
        fh.write(np.ascontiguousarray(frames, dtype="<f4").tobytes())
    os.replace(tmp, path)
    return path


def read_pc2(path: str | os.PathLike) -> PointCache:
    """Read a PC2 file; a wrong signature or a truncated body raises ``NeuROKError``."""
    path = Path(path)
    data = path.read_bytes()
    if len(data) < HEADER.size:
        raise NeuROKError(f"{path}: too short to be a PC2 point cache")
    signature, version, num_points, start, rate, num_samples = HEADER.unpack_from(data)
    if signature != SIGNATURE:
        raise NeuROKError(f"{path}: not a PC2 point cache (signature {signature!r})")
    if version != 1 or num_points < 1 or num_samples < 1:
        raise NeuROKError(f"{path}: unsupported PC2 header (version {version})")
    expected = HEADER.size + num_samples * num_points * 12
    if len(data) < expected:
        raise NeuROKError(f"{path}: truncated PC2 file ({len(data)} of {expected} bytes)")
    body = np.frombuffer(data, dtype="<f4", count=num_samples * num_points * 3, offset=HEADER.size)
    frames = body.reshape(num_samples, num_points, 3).astype(np.float32)
    return PointCache(frames=frames, start_frame=start, sample_rate=rate)
