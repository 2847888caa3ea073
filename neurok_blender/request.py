# SPDX-License-Identifier: GPL-3.0-or-later
"""The requests the add-on sends to the engine worker: a simulation, or a fit to a target.

Its conditions are the engine's own ``SimulationConditions`` (plain Python, imported through
``core``; the add-on runs in Blender's Python, which has numpy but no torch). Everything is in
the engine's units and frames: metres and seconds in world space, frames 0-based from the first
simulated frame (frame 0 is the rest shape).

Files written for the worker (design section 4)::

    <folder>/mesh.npz      vertices float32 (N, 3) metres (world), faces int32 (F, 3)
    <folder>/request.json  protocol 1 (see neurok_core/worker.py)
    <folder>/frames.npy    written by the worker: float32 (T, N, 3), world space
    <folder>/rig.npz       written by the worker when a rig is asked for (neurok_core.rig)

A fit (``FitRequest``, the worker's ``"task": "ik"``) works in the object's own (local) frame::

    <folder>/mesh.npz      the object's vertices (N, 3) and faces, local coordinates
    <folder>/target.npz    the target's surface (M, 3), (G, 3) in the same frame, any topology
    <folder>/request.json  protocol 1, task "ik", space "rig"
    <folder>/fit.npy       written by the worker: float32 (1, N, 3), the fitted vertices
    <folder>/rig.npz       written by the worker when asked: the pose as a one-frame rig
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
    preview_frames: a live preview (the worker's ``"task": "preview"``): the run stops after
    this many frames; None for a full simulation.
    structure: the object's structure (the engine's JSON, world space) whose joints the rig
    step holds, or None for the ones the geometry gives.
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
    preview_frames: int | None = None
    structure: dict | None = field(default=None, repr=False)

    def write(self, folder: str | Path) -> Path:
        """Write ``mesh.npz`` and ``request.json`` into ``folder``; returns the request path."""
        folder = _folder(folder)
        write_mesh(folder / "mesh.npz", self.vertices, self.faces)
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
        if self.structure is not None:
            payload["structure"] = self.structure
        if self.preview_frames is not None:
            payload["task"] = "preview"
            payload["preview"] = {"frames": int(self.preview_frames)}
        return write_request(folder, payload)


@dataclass(frozen=True, eq=False)
class SceneRequest:
    """Several objects simulated together (the worker's ``"task": "scene"``): each (name,
    its own ``SimulationRequest``); the scene's conditions are the first one's (its
    forces, drags, velocities, pins, mass, stiffness and material are its own), every object's
    output its ``want_frames`` / ``want_rig``::

        <folder>/mesh_<i>.npz, <folder>/frames_<i>.npy, <folder>/rig_<i>.npz
    """

    objects: tuple[tuple[str, SimulationRequest], ...]

    def write(self, folder: str | Path) -> Path:
        folder = _folder(folder)
        items = []
        for i, (name, request) in enumerate(self.objects):
            write_mesh(folder / f"mesh_{i}.npz", request.vertices, request.faces)
            items.append(
                {
                    "name": name,
                    "mesh": f"mesh_{i}.npz",
                    "conditions": request.conditions.to_dict(),
                    "output": {
                        "frames": f"frames_{i}.npy" if request.want_frames else None,
                        "rig": f"rig_{i}.npz" if request.want_rig else None,
                    },
                }
            )
        first = self.objects[0][1]
        payload = {
            "protocol": PROTOCOL,
            "task": "scene",
            "conditions": first.conditions.to_dict(),
            "objects": items,
            "device": first.device,
        }
        return write_request(folder, payload)


@dataclass(frozen=True, eq=False)
class StructureRequest:
    """Find an object's structure (the worker's ``"task": "structure"``): the world-space mesh
    and its pinned vertices::

        <folder>/mesh.npz, <folder>/request.json, <folder>/structure.json (the answer)
    """

    vertices: np.ndarray = field(repr=False)
    faces: np.ndarray = field(repr=False)
    pins: tuple[int, ...] = ()

    def write(self, folder: str | Path) -> Path:
        folder = _folder(folder)
        write_mesh(folder / "mesh.npz", self.vertices, self.faces)
        payload = {
            "protocol": PROTOCOL,
            "task": "structure",
            "mesh": "mesh.npz",
            "pins": [int(i) for i in self.pins],
            "output": {"structure": "structure.json"},
        }
        return write_request(folder, payload)


@dataclass(frozen=True, eq=False)
class FitRequest:
    """One fit of an object to a target shape (inverse kinematics in the rig space).

    vertices: (N, 3) float32 metres, the object's local coordinates; faces: (F, 3) int32.
    target_vertices: (M, 3), target_faces: (G, 3): the target's surface in the same frame, of
    any topology (the engine uses the same topology's vertices as correspondences).
    want_rig: also return the pose as a one-frame rig (Key As Rig Pose).
    """

    vertices: np.ndarray = field(repr=False)
    faces: np.ndarray = field(repr=False)
    target_vertices: np.ndarray = field(repr=False)
    target_faces: np.ndarray = field(repr=False)
    device: str = "auto"
    cache_dir: str | None = None
    want_rig: bool = False

    def write(self, folder: str | Path) -> Path:
        """Write ``mesh.npz``, ``target.npz`` and ``request.json``; returns the request path."""
        folder = _folder(folder)
        write_mesh(folder / "mesh.npz", self.vertices, self.faces)
        write_mesh(folder / "target.npz", self.target_vertices, self.target_faces)
        payload = {
            "protocol": PROTOCOL,
            "task": "ik",
            "mesh": "mesh.npz",
            "target": "target.npz",
            "space": "rig",
            "device": self.device,
            "cache_dir": self.cache_dir,
            "output": {"frames": "fit.npy", "rig": "rig.npz" if self.want_rig else None},
        }
        return write_request(folder, payload)


def _folder(folder: str | Path) -> Path:
    """The request's folder, made if needed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def write_request(folder: Path, payload: dict) -> Path:
    """``<folder>/request.json`` (compact JSON: a preview writes one at every change)."""
    path = folder / "request.json"
    path.write_text(json.dumps(payload, separators=(",", ":")), encoding="utf-8")
    return path


def write_mesh(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    """A mesh file as the worker reads it: vertices float32 (N, 3), faces int32 (F, 3)."""
    np.savez(
        path,
        vertices=np.ascontiguousarray(vertices, dtype=np.float32),
        faces=np.ascontiguousarray(faces, dtype=np.int32),
    )


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


def fit_report(name: str, target: str, seconds: float, info, keyed: str) -> str:
    """The INFO line of a finished fit: the engine's figures (``done`` info: the chamfer of
    its surface samples in the normalised frame, squared, which includes the sampling's own
    spacing; the bones) and what was keyed."""
    info = info if isinstance(info, dict) else {}
    figures = [f"{seconds:.1f} s"]
    chamfer = info.get("chamfer")
    if isinstance(chamfer, int | float) and chamfer >= 0:
        figures.append(f"chamfer {chamfer:.2g} (normalised)")
    if isinstance(info.get("bones"), int):
        figures.append(f"{info['bones']} bones")
    return f"Fitted '{name}' to '{target}' ({'; '.join(figures)}); keyed {keyed}"
