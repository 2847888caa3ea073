"""The inverse-kinematics task of the evaluation (design section 6, the paper's Table 1).

For every sequence and each of ``targets`` frames spread over it (never frame 0), every method is
given the rest mesh M0 and ``target_points`` points sampled on the target surface (no
correspondences) and fits it with the same budget (``steps`` Adam steps for each of ``restarts``
starts, ``points`` samples of M0 in the same chamfer loss); the fitted mesh is scored against the
target mesh by :func:`neurok_core.metrics.compare_meshes` (Chamfer-L1/L2 on ``samples``
area-uniform points per mesh, IoU for closed sequences only, in the normalised frame of M0).

Rows: ``neurok`` (inverse kinematics in the reduced space of the main checkpoint),
``no_reduction`` (the same checkpoint searched in the full latent), ``rig`` (the bones' rigid
motions of the rig space, :mod:`neurok_core.rigspace.fit`, with the main checkpoint's prior
draws as starts and its prior as an energy), ``rig_no_prior`` (the same fit without any model),
one row per extra checkpoint (reduced space, e.g. ``displacement``, ``no_augmentation``) and the
baselines of :mod:`training.eval.baselines`. The rig rows take the shared budget as their
solver's iterations per start (``steps``), ``restarts`` and ``points``.
"""

from __future__ import annotations

import hashlib
import re
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neurok_core.errors import MeshError, NeuROKError, SequenceError
from neurok_core.geometry import sample_surface_points
from neurok_core.ik import IKSettings, inverse_kinematics
from neurok_core.metrics import DEFAULT_SAMPLES, compare_meshes
from neurok_core.rigspace.fit import RigProblem
from neurok_core.rigspace.ik import RigIKSettings
from neurok_core.space import SpaceSettings

from .baselines import BASELINES, BaselineSettings, fit_baseline

MAIN = "neurok"
FULL_LATENT = "no_reduction"
RIG = "rig"
RIG_NO_PRIOR = "rig_no_prior"
RIG_METHODS = (RIG, RIG_NO_PRIOR)


@dataclass(frozen=True)
class IKTask:
    """What fixes the IK numbers: targets per sequence, points on each target, metric samples,
    the shared budget (``ik`` for the models, ``rig`` for the rig-space fits, ``baseline`` for
    the baselines: the same steps, restarts and points) and the kinematic-space settings."""

    targets: int = 4
    target_points: int = 2048
    samples: int = DEFAULT_SAMPLES
    ik: IKSettings = field(default_factory=IKSettings)
    rig: RigIKSettings = field(default_factory=RigIKSettings)
    baseline: BaselineSettings = field(default_factory=BaselineSettings)
    space: SpaceSettings = field(default_factory=SpaceSettings)
    seed: int = 0


# --------------------------------------------------------------------------------------------
# Data


def family_of(path: Path, root: Path) -> str:
    """The family folder of a sequence, or its file name without the trailing index."""
    if path.parent != root:
        return path.parent.name
    return re.sub(r"(_val|_unseen|_train)?_\d+$", "", path.stem) or path.stem


def find_sequences(root: str | Path) -> list[tuple[str, Path]]:
    """(family, path) of every ``.npz`` in ``root`` and its sub-folders, sorted."""
    root = Path(root)
    if not root.is_dir():
        raise SequenceError(f"{root}: no such data folder (expected FAMILY/*.npz or *.npz)")
    files = sorted(
        p for p in (*root.glob("*.npz"), *root.glob("*/*.npz")) if not p.name.endswith(".tmp.npz")
    )
    if not files:
        raise SequenceError(
            f"{root}: no sequences found (expected FAMILY/*.npz or *.npz; generate them with "
            "python -m training.data generate)"
        )
    return [(family_of(p, root), p) for p in files]


def select_sequences(items: list[tuple[str, Path]], max_per_family: int | None):
    """At most ``max_per_family`` per family, evenly spaced in file order (deterministic)."""
    if not max_per_family:
        return list(items)
    by_family: dict[str, list] = {}
    for item in items:
        by_family.setdefault(item[0], []).append(item)
    out = []
    for family in sorted(by_family):
        group = by_family[family]
        count = min(max_per_family, len(group))
        picks = np.unique(np.round(np.linspace(0, len(group) - 1, count)).astype(int))
        out.extend(group[i] for i in picks)
    return out


def target_frames(num_frames: int, count: int) -> list[int]:
    """``count`` frames spread over the sequence, never frame 0: round(k (T - 1) / count)."""
    if num_frames < 2:
        raise SequenceError("a sequence needs at least 2 frames to have an IK target")
    frames = [round(k * (num_frames - 1) / count) for k in range(1, count + 1)]
    return sorted({max(1, f) for f in frames})


def target_points(vertices, faces, count: int, seed: int, name: str, frame: int) -> np.ndarray:
    """The target's surface points (count, 3): a seed of its own for every (sequence, frame)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), frame])
    return sample_surface_points(vertices, faces, count, rng)


# --------------------------------------------------------------------------------------------
# Models and methods


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Models:
    """The loaded checkpoints (name -> NeuROK) and which row uses which checkpoint."""

    def __init__(self, checkpoints: dict[str, str], device: str, cache_dir):
        from neurok_core.api import NeuROK

        self.engines = {
            name: NeuROK.load(path, device=device) for name, path in checkpoints.items()
        }
        self.cache_dir = cache_dir

    def describe(self) -> dict[str, Any]:
        out = {}
        for name, engine in self.engines.items():
            root = Path(engine.checkpoint)
            root = root.parent if root.is_file() else root  # a file inside the checkpoint
            out[name] = {
                "path": str(root),
                "weights_sha256": file_sha256(root / "model.safetensors"),
                "config_sha256": file_sha256(root / "config.json"),
                "model": engine.info.get("model", {}),
                "num_parameters": engine.model.num_parameters(),
                "training_steps": engine.info.get("training", {}).get("steps"),
            }
        return out

    @staticmethod
    def checkpoint_of(method: str) -> str | None:
        """The checkpoint a row uses (None: none)."""
        if method in BASELINES or method == RIG_NO_PRIOR:
            return None
        return MAIN if method in (MAIN, FULL_LATENT, RIG) else method

    def space(self, method: str, vertices, faces, settings: SpaceSettings):
        engine = self.engines[self.checkpoint_of(method)]
        return engine.space(vertices, faces, settings=settings, cache_dir=self.cache_dir)


def resolve_methods(requested: list[str] | None, ablations: dict[str, str]) -> list[str]:
    """The table rows in order; unknown names raise a clear error."""
    known = [MAIN, FULL_LATENT, *RIG_METHODS, *ablations, *BASELINES]
    if not requested:
        return known
    unknown = [m for m in requested if m not in known]
    if unknown:
        raise NeuROKError(
            f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(known)} (ablation"
            " rows need --ablation NAME=CHECKPOINT)"
        )
    return [m for m in known if m in requested]


# --------------------------------------------------------------------------------------------
# One sequence


class SequenceSpaces:
    """The kinematic spaces of one rest mesh, built on first use, once per checkpoint."""

    def __init__(self, models: Models, seq, settings: SpaceSettings, rig: RigIKSettings):
        self.models, self.seq, self.settings, self.rig_settings = models, seq, settings, rig
        self.spaces: dict = {}
        self.rigs: dict = {}
        self.seconds = 0.0  # spent building them

    def get(self, method: str):
        key = self.models.checkpoint_of(method)
        if key not in self.spaces:
            started = time.perf_counter()
            v, f = self.seq.vertices[0], self.seq.faces
            self.spaces[key] = self.models.space(method, v, f, self.settings)
            self.seconds += time.perf_counter() - started
        return self.spaces[key]

    def rig(self, method: str) -> RigProblem:
        """The rig-space problem of the rest mesh for ``method`` (``RIG_METHODS``)."""
        if method not in self.rigs:
            kspace = self.get(RIG) if method == RIG else None
            started = time.perf_counter()
            v, f = self.seq.vertices[0], self.seq.faces
            self.rigs[method] = RigProblem(v, f, self.rig_settings, kspace)
            self.seconds += time.perf_counter() - started
        return self.rigs[method]


def fit_method(method: str, space, seq, points, task: IKTask) -> tuple[np.ndarray, float]:
    """(fitted vertices (N, 3), final chamfer loss) of ``method`` for one target; ``space``:
    the method's kinematic space or rig-space problem (None for a baseline)."""
    if method in RIG_METHODS:
        fit = space.solve(points)
        return fit.vertices, fit.loss
    if method in BASELINES:
        fit = fit_baseline(method, seq.vertices[0], seq.faces, points, task.baseline)
        return fit.vertices, fit.loss
    fit = inverse_kinematics(space, points, settings=task.ik, reduced=method != FULL_LATENT)
    return fit.vertices, fit.loss


def score_fit(rest, vertices, faces, target, closed: bool, samples: int) -> dict[str, Any]:
    """``compare_meshes`` of a fit against the target; a closed sequence whose meshes hold no
    volume for the IoU estimate (a thin rope) gets IoU None and the reason in ``iou_error``."""
    try:
        return dict(
            compare_meshes(rest, vertices, faces, target, faces, closed=closed, samples=samples)
        )
    except MeshError as exc:
        if not closed:
            raise
        score = dict(
            compare_meshes(rest, vertices, faces, target, faces, closed=False, samples=samples)
        )
        return score | {"iou_error": str(exc)}


def fit_targets(seq, family: str, methods, spaces: SequenceSpaces, task: IKTask, timing: dict):
    """One record per target frame of ``seq`` with every method's scores, and the fits of the
    last target (method -> (vertices (N, 3) float32, Chamfer-L1)) for the figures.
    ``timing["fit"]`` and ``timing["score"]`` accumulate the seconds spent."""
    rest, faces = seq.vertices[0], seq.faces
    frames = target_frames(seq.num_frames, task.targets)
    records, last_fits = [], {}
    for t in frames:
        points = target_points(seq.vertices[t], faces, task.target_points, task.seed, seq.name, t)
        scores = {}
        for method in methods:
            if method in RIG_METHODS:
                space = spaces.rig(method)
            else:
                space = None if method in BASELINES else spaces.get(method)
            started = time.perf_counter()
            verts, loss = fit_method(method, space, seq, points, task)
            fitted = time.perf_counter()
            score = score_fit(rest, verts, faces, seq.vertices[t], seq.closed, task.samples)
            timing["fit"] += fitted - started
            timing["score"] += time.perf_counter() - fitted
            scores[method] = {**score, "fit_loss": loss, "seconds": round(fitted - started, 3)}
            if t == frames[-1]:
                last_fits[method] = (verts.astype(np.float32), score["chamfer_l1"])
        records.append(
            {
                "sequence": seq.name,
                "family": family,
                "category": seq.category,
                "frame": t,
                "closed": seq.closed,
                "vertices": seq.num_vertices,
                "methods": scores,
            }
        )
    return records, last_fits
