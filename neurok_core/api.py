"""The Python API of the engine.

    >>> engine = NeuROK.load()                          # the bundled default model
    >>> space = engine.space(vertices, faces)           # the object's kinematic space (cached)
    >>> result = engine.simulate(space, SimulationConditions(forces=(...), frames=120))
    >>> fit = engine.ik(vertices, faces, target_points)  # the rig space (or space="latent")

Everything is in the caller's frame and units (metres, seconds, kg); vertices map 1:1 onto the
input's vertices.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .checkpoint import checkpoint_info, load_checkpoint, verify_weights
from .device import describe_device, select_device
from .dynamics.conditions import DEFAULT_DYNAMICS, DYNAMICS
from .errors import CheckpointError
from .ik import IKResult, IKSettings, inverse_kinematics
from .space import KinematicSpace, SpaceSettings, build_space

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
SPACES = ("rig", "latent")  # the coordinates inverse kinematics fits in


def default_checkpoint() -> Path:
    """The checkpoint that ships with the extension (``neurok_core/weights/default``)."""
    return WEIGHTS_DIR / "default"


def default_cache_dir() -> Path:
    """Where kinematic spaces are cached unless told otherwise."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neurok" / "spaces"


def _noop(*_args) -> None:
    return None


class NeuROK:
    """A loaded NeuROK model on a device, with the operations an application needs."""

    def __init__(self, model, info: dict[str, Any], device: torch.device, checkpoint: Path):
        self.model = model.eval()
        self.info = info
        self.device = device
        self.checkpoint = checkpoint
        self.fingerprint = str(info.get("weights_sha256") or checkpoint)

    @classmethod
    def load(cls, checkpoint: str | os.PathLike | None = None, *, device: str = "auto") -> NeuROK:
        """Load ``checkpoint`` (a folder; None = the bundled default) onto ``device``."""
        path = Path(checkpoint) if checkpoint else default_checkpoint()
        if checkpoint is None and not (path / "config.json").is_file():
            raise CheckpointError(
                f"the bundled default model is missing from {path}; reinstall the extension or "
                "choose a checkpoint folder (model.safetensors + config.json)"
            )
        dev = select_device(device)
        model, info = load_checkpoint(path, device=str(dev))
        for p in model.parameters():
            p.requires_grad_(False)
        return cls(model, info, dev, path)

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary: checkpoint, model size, device, training and metrics."""
        return {
            "checkpoint": str(self.checkpoint),
            "device": describe_device(self.device),
            "model": self.info.get("model", {}),
            "num_parameters": self.model.num_parameters(),
            "training": self.info.get("training", {}),
            "metrics": self.info.get("metrics", {}),
        }

    # ------------------------------------------------------------------ space
    def space(
        self,
        vertices: np.ndarray,
        faces: np.ndarray,
        *,
        settings: SpaceSettings | None = None,
        cache_dir: str | os.PathLike | None | bool = None,
        on_status=_noop,
        on_progress=_noop,
    ) -> KinematicSpace:
        """The kinematic space of a mesh; ``cache_dir`` None = the default cache, False = none."""
        if cache_dir is None:
            cache_dir = default_cache_dir()
        return build_space(
            self.model,
            vertices,
            faces,
            settings=settings,
            cache_dir=cache_dir or None,
            model_fingerprint=self.fingerprint,
            on_status=on_status,
            on_progress=on_progress,
        )

    # ------------------------------------------------------------------ inverse kinematics
    def ik(
        self,
        vertices: np.ndarray,
        faces: np.ndarray,
        target_points: np.ndarray,
        *,
        space: str = "rig",
        target_vertices: np.ndarray | None = None,
        settings=None,
        prior: bool = True,
        cache_dir: str | os.PathLike | None | bool = None,
    ):
        """Fit the mesh (vertices (N, 3), faces (F, 3)) to a target's surface points (M, 3).

        space="rig" (the default): the bones' rigid motions of the mesh's rig space
        (:func:`neurok_core.rigspace.fit.fit_rig` -> ``RigIKResult``, with ``.rig()``), with
        this model's prior draws (and posterior, given ``target_vertices`` (N, 3) of a target
        that shares the mesh's topology) among the starts when ``prior``; ``settings`` a
        ``RigIKSettings``. space="latent": the model's learned latent space
        (:meth:`inverse_kinematics` -> ``IKResult``), ``settings`` an ``IKSettings``.
        """
        if space not in SPACES:
            raise ValueError(f"space must be one of {SPACES}, got {space!r}")
        if space == "latent":
            kspace = self.space(vertices, faces, cache_dir=cache_dir)
            return self.inverse_kinematics(kspace, target_points, settings=settings)
        from .rigspace.fit import fit_rig

        kspace = self.space(vertices, faces, cache_dir=cache_dir) if prior else None
        return fit_rig(
            vertices,
            faces,
            target_points,
            settings=settings,
            target_vertices=target_vertices,
            kspace=kspace,
        )

    def inverse_kinematics(
        self,
        space: KinematicSpace,
        target_points: np.ndarray,
        *,
        settings: IKSettings | None = None,
        reduced: bool = True,
    ) -> IKResult:
        """The state of ``space`` that best matches the target surface points (M, 3)."""
        return inverse_kinematics(space, target_points, settings=settings, reduced=reduced)

    # ------------------------------------------------------------------ simulation
    def simulate(
        self,
        space: KinematicSpace,
        conditions,
        *,
        on_frame=None,
        on_progress=_noop,
        settings=None,
        vertices: bool = True,
        rig: bool = False,
        dynamics: str = DEFAULT_DYNAMICS,
        time_limit: float | None = None,
    ):
        """Simulate ``conditions`` on ``space``'s mesh. ``dynamics="rig"`` (the default)
        integrates the motion in the rig space of the mesh
        (:func:`neurok_core.rigspace.simulate_rig`, which needs no model: the bones' rigid
        motions as coordinates; ``settings`` a ``RigSettings``); its result always carries the
        rig, and an object that starts inside the ground is refused before any work.
        ``dynamics="latent"`` integrates it in the model's learned space instead
        (:func:`neurok_core.simulate.simulate`; ``settings`` the latent dynamics' numerical
        settings, default ``DEFAULT_SETTINGS``). ``vertices`` / ``rig``: what to return, the
        vertex positions and / or the bones (the rig space always returns its rig).
        ``time_limit``: seconds after which the run stops with the frames so far
        (``info["cancelled"]``); None: none."""
        from .dynamics.settings import DEFAULT_SETTINGS, DynamicsSettings
        from .rigspace import RigSettings, simulate_rig
        from .simulate import simulate

        if dynamics not in DYNAMICS:
            raise ValueError(f"dynamics must be one of {DYNAMICS}, got {dynamics!r}")
        kind = RigSettings if dynamics == "rig" else DynamicsSettings
        if settings is not None and not isinstance(settings, kind):
            raise TypeError(
                f"settings for dynamics={dynamics!r} must be a {kind.__name__}, got a"
                f" {type(settings).__name__} (the other dynamics'?): pass dynamics= as well"
            )
        if dynamics == "rig":  # needs no model: its bones come from the mesh
            return simulate_rig(
                space.vertices,
                space.faces,
                conditions,
                settings=settings,
                on_frame=on_frame,
                on_progress=on_progress,
                want_vertices=vertices,
                time_limit=time_limit,
            )
        return simulate(
            space,
            conditions,
            on_frame=on_frame,
            on_progress=on_progress,
            settings=settings or DEFAULT_SETTINGS,
            vertices=vertices,
            rig=rig,
            time_limit=time_limit,
        )


def checkpoint_summary(checkpoint: str | os.PathLike | None = None) -> dict[str, Any]:
    """The JSON side of a checkpoint without loading its weights (whose presence and checksum
    are checked, as loading them would: a truncated file is an error here too)."""
    path = Path(checkpoint) if checkpoint else default_checkpoint()
    started = time.perf_counter()
    info = checkpoint_info(path)
    verify_weights(path, info)
    info["path"] = str(path)
    info["read_seconds"] = round(time.perf_counter() - started, 4)
    return info
