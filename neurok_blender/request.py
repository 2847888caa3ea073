# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulation request the add-on sends to the engine worker.

Its conditions are the engine's own ``SimulationConditions`` (plain Python, imported through
``core``; the add-on runs in Blender's Python, which has numpy but no torch). Everything is in
the engine's units and frames: metres and seconds in world space, frames 0-based from the first
simulated frame (frame 0 is the rest shape).

Files written for the worker (design section 4)::

    <folder>/mesh.npz      vertices float32 (N, 3) metres (world), faces int32 (F, 3)
    <folder>/request.json  protocol 1 (see neurok_core/worker.py)
    <folder>/frames.npy    written by the worker: float32 (T, N, 3), world space
    <folder>/rig.npz       written by the worker when a rig is asked for (neurok_core.rig)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .core import DEFAULT_DYNAMICS, SimulationConditions, warning

PROTOCOL = 1


@dataclass(frozen=True, eq=False)
class SimulationRequest:
    """One simulation: the world-space mesh, its conditions and the engine settings.

    vertices: (N, 3) float32 metres, world space; faces: (F, 3) int32 triangles.
    dynamics: the coordinates of the motion, one of the engine's ``DYNAMICS``: "rig" (the rig
    space, the default: it loads no model) or "latent" (the learned model's latent space).
    checkpoint: a checkpoint folder, None for the engine's bundled default.
    want_frames / want_rig: what the engine returns, the frames of every vertex and / or the
    rig (the rig space, or a model with bones).
    """

    vertices: np.ndarray = field(repr=False)
    faces: np.ndarray = field(repr=False)
    conditions: SimulationConditions
    dynamics: str = DEFAULT_DYNAMICS
    checkpoint: str | None = None
    device: str = "auto"
    cache_dir: str | None = None
    want_frames: bool = True
    want_rig: bool = False

    def write(self, folder: str | Path) -> Path:
        """Write ``mesh.npz`` and ``request.json`` into ``folder``; returns the request path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.savez(
            folder / "mesh.npz",
            vertices=np.ascontiguousarray(self.vertices, dtype=np.float32),
            faces=np.ascontiguousarray(self.faces, dtype=np.int32),
        )
        payload = {
            "protocol": PROTOCOL,
            "mesh": "mesh.npz",
            "conditions": self.conditions.to_dict(),
            "dynamics": self.dynamics,
            "checkpoint": self.checkpoint,
            "device": self.device,
            "cache_dir": self.cache_dir,
            "output": {
                "frames": "frames.npy" if self.want_frames else None,
                "result": None,
                "pc2": None,
                "rig": "rig.npz" if self.want_rig else None,
            },
        }
        path = folder / "request.json"
        path.write_text(json.dumps(payload, indent=1), encoding="utf-8")
        return path


def load_frames(path: str | Path, count: int, num_vertices: int) -> np.ndarray:
    """Read the worker's frames file: (count, num_vertices, 3) float32, checked finite."""
    frames = np.load(path, mmap_mode="r", allow_pickle=False)
    if frames.ndim != 3 or frames.shape[1:] != (num_vertices, 3) or frames.shape[0] < count:
        raise ValueError(
            f"the engine returned frames of shape {frames.shape}, expected ({count},"
            f" {num_vertices}, 3)"
        )
    frames = np.array(frames[:count], dtype=np.float32)  # (T, N, 3)
    if not np.isfinite(frames).all():
        raise ValueError("the engine returned frames with NaN or infinite positions")
    return frames


def simulate_report(name: str, frames: int, seconds: float, baked: str, info) -> tuple[str, str]:
    """(Blender report type, message) for a finished simulation: what was baked, and a warning
    when the engine's figures say the result is likely implausible (``core.warning``: the rule
    of either dynamics, as the CLI's summary words it), with what to change."""
    text = f"Simulated {frames} frames of '{name}' in {seconds:.1f} s; baked as {baked}"
    doubt = warning(info, frames)
    if doubt:
        return "WARNING", f"{text}. {doubt}"
    return "INFO", text
