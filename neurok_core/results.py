"""The simulation result (design section 5): positions, times, energy and the conditions used,
and, for a skinned model when asked, the motion as a rig (:mod:`~neurok_core.rig`)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .errors import NeuROKError
from .rig import BoneRig


@dataclass
class SimulationResult:
    """positions: (T, N, 3) float32 metres (frame 0 = the input mesh), or None when only the rig
    was asked for; times: (T,) seconds; energy: (T,) joules (kinetic + potential); conditions:
    the SimulationConditions dict used; q: (T, kq) reduced coordinates; info: diagnostics (kq,
    substeps, timings, ...); rig: the bones' motion and the vertex weights, or None."""

    positions: np.ndarray | None
    times: np.ndarray
    energy: np.ndarray
    conditions: dict[str, Any]
    q: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)
    rig: BoneRig | None = None


def save_result(result: SimulationResult, path: str | os.PathLike) -> Path:
    """Write ``result`` as ``.npz`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    arrays = {
        "times": np.asarray(result.times, dtype=np.float64),
        "energy": np.asarray(result.energy, dtype=np.float64),
        "conditions": np.str_(json.dumps(result.conditions)),
        "info": np.str_(json.dumps(result.info, default=str)),
    }
    if result.positions is not None:
        arrays["positions"] = np.asarray(result.positions, dtype=np.float32)
    if result.rig is not None:
        arrays.update(result.rig.arrays())
    if result.q is not None:
        arrays["q"] = np.asarray(result.q, dtype=np.float64)
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    return path


def load_result(path: str | os.PathLike) -> SimulationResult:
    """Read a result written by :func:`save_result` (never unpickles)."""
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            return SimulationResult(
                positions=data["positions"] if "positions" in data.files else None,
                times=data["times"],
                energy=data["energy"],
                conditions=json.loads(str(data["conditions"])),
                q=data["q"] if "q" in data.files else None,
                info=json.loads(str(data["info"])) if "info" in data.files else {},
                rig=BoneRig.from_arrays(data),
            )
    except (OSError, ValueError, KeyError) as exc:
        raise NeuROKError(f"{path}: not a readable simulation result ({exc})") from exc
