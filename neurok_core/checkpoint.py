"""NeuROK checkpoints (design section 5): a folder with ``model.safetensors`` and ``config.json``.

``config.json``::

    {"format": "neurok-checkpoint", "format_version": 1,
     "model": ModelConfig.to_dict(),          # alone rebuilds the network
     "normalization": {...},                  # the frame the network expects its points in
     "training": {...}, "metrics": {...}, "extra": {...},
     "weights_sha256": "...", "num_parameters": ..., "created": ISO-8601, "neurok_version": "..."}

Loading reads tensors with safetensors only (never ``torch.load``, never unpickles), rebuilds the
model from the JSON, and checks the checksum, the tensor names, the shapes and finiteness; every
problem is a :class:`~neurok_core.errors.CheckpointError` that names the file and what to do.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from . import __version__
from .errors import CheckpointError
from .model import ModelConfig, NeuROKModel

FORMAT = "neurok-checkpoint"
FORMAT_VERSION = 1
WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
NORMALIZATION = {
    "center": "bounding_box_center",
    "scale": "longest_bounding_box_side",
    "extent": 1.0,
    "note": "points are centred on the rest shape's bounding-box centre and scaled so that its "
    "longest side is 1; every frame of a sequence uses the rest shape's transform",
}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _jsonable(value: Any, where: str) -> Any:
    """A JSON-ready copy of ``value``: numpy and torch scalars/arrays become lists and numbers,
    paths become strings, and non-finite floats become null (JSON has no NaN)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist(), where)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise CheckpointError(
        f"cannot store {where} in {CONFIG_FILE}: {type(value).__name__} is not JSON data; "
        "pass numbers, strings, lists and dicts"
    )


def _unwrap(model: torch.nn.Module) -> NeuROKModel:
    """The NeuROKModel inside ``model`` (DistributedDataParallel and similar wrappers)."""
    inner = getattr(model, "module", model)
    if not isinstance(inner, NeuROKModel):
        raise CheckpointError(
            f"save_checkpoint expects a NeuROKModel (or a wrapper of one), got "
            f"{type(model).__name__}"
        )
    return inner


def save_checkpoint(
    model: torch.nn.Module,
    directory: str | os.PathLike,
    *,
    training: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``model`` as a checkpoint directory (created if needed) and return its path.

    training: how it was trained (steps, data summary, seed, ...); metrics: results at release;
    extra: anything else (e.g. optimiser step for resuming bookkeeping). All must be JSON data
    (numpy/torch scalars and arrays are converted; NaN/inf are stored as null).
    Both files are written under temporary names and renamed into place, so a crash never
    leaves a half-written file under the final names; the weights' SHA-256 in ``config.json``
    lets :func:`load_checkpoint` detect a weights file that does not belong to the config.
    """
    net = _unwrap(model)
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create the checkpoint directory {directory}: {exc}") from exc
    state = {k: v.detach().to("cpu").contiguous() for k, v in net.state_dict().items()}
    config = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": net.config.to_dict(),
        "normalization": NORMALIZATION,
        "training": _jsonable(training or {}, "training"),
        "metrics": _jsonable(metrics or {}, "metrics"),
        "extra": _jsonable(extra or {}, "extra"),
        "num_parameters": net.num_parameters(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "neurok_version": __version__,
    }
    suffix = f".tmp-{os.getpid()}"
    weights_tmp = directory / (WEIGHTS_FILE + suffix)
    config_tmp = directory / (CONFIG_FILE + suffix)
    try:
        save_file(state, str(weights_tmp), metadata={"format": FORMAT})
        config["weights_sha256"] = _sha256(weights_tmp)
        with open(config_tmp, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=2, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(weights_tmp, directory / WEIGHTS_FILE)
        os.replace(config_tmp, directory / CONFIG_FILE)
    except OSError as exc:
        raise CheckpointError(f"cannot write the checkpoint in {directory}: {exc}") from exc
    finally:
        for tmp in (weights_tmp, config_tmp):
            tmp.unlink(missing_ok=True)
    return directory


def _checkpoint_dir(directory: str | os.PathLike) -> Path:
    path = Path(directory)
    if path.is_file() and path.name in (CONFIG_FILE, WEIGHTS_FILE):
        path = path.parent  # a file inside a checkpoint: use its directory
    if not path.exists():
        raise CheckpointError(
            f"checkpoint directory {path} does not exist; pass the folder that holds "
            f"{CONFIG_FILE} and {WEIGHTS_FILE}"
        )
    if not path.is_dir():
        raise CheckpointError(
            f"{path} is not a checkpoint directory; pass the folder that holds {CONFIG_FILE} "
            f"and {WEIGHTS_FILE}"
        )
    return path


def checkpoint_info(directory: str | os.PathLike) -> dict[str, Any]:
    """The validated contents of a checkpoint's ``config.json`` (the weights are not read)."""
    path = _checkpoint_dir(directory) / CONFIG_FILE
    if not path.is_file():
        raise CheckpointError(
            f"{path} is missing: {path.parent} is not a complete NeuROK checkpoint; "
            "copy the whole checkpoint folder again or re-save it"
        )
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(
            f"{path} is not valid JSON ({exc}); the checkpoint is corrupt, copy or re-save it"
        ) from exc
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        found = info.get("format") if isinstance(info, dict) else type(info).__name__
        raise CheckpointError(
            f"{path} is not a NeuROK checkpoint config (format {found!r}, expected {FORMAT!r}); "
            "point to a checkpoint written by save_checkpoint"
        )
    version = info.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CheckpointError(f"{path} has an invalid format_version {version!r}; re-save it")
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has format_version {version}, newer than this NeuROK ({__version__}) reads "
            f"(up to {FORMAT_VERSION}); update NeuROK to load it"
        )
    if not isinstance(info.get("model"), dict):
        raise CheckpointError(f"{path} has no 'model' config; the checkpoint cannot be rebuilt")
    return info


def _describe(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def verify_weights(directory: str | os.PathLike, info: dict[str, Any]) -> Path:
    """The weights file of a checkpoint, refused when missing or when it does not match the
    checksum its ``config.json`` records (``info``, from :func:`checkpoint_info`)."""
    root = _checkpoint_dir(directory)
    weights = root / WEIGHTS_FILE
    if not weights.is_file():
        raise CheckpointError(
            f"{weights} is missing; copy the whole checkpoint folder again or re-save it"
        )
    expected_sha = info.get("weights_sha256")
    if expected_sha is not None and _sha256(weights) != expected_sha:
        raise CheckpointError(
            f"{weights} does not match the checksum in {root / CONFIG_FILE} (the file is "
            "truncated, corrupt or from another checkpoint); copy or re-save the checkpoint"
        )
    return weights


def load_checkpoint(
    directory: str | os.PathLike, *, device: str | torch.device = "cpu"
) -> tuple[NeuROKModel, dict[str, Any]]:
    """Rebuild the model of a checkpoint from ``config.json`` and load its weights.

    Returns ``(model, info)``: the model in eval mode on ``device`` (float32), and the parsed
    ``config.json`` (see :func:`checkpoint_info`).
    """
    info = checkpoint_info(directory)
    root = _checkpoint_dir(directory)
    config_path = root / CONFIG_FILE
    weights = verify_weights(directory, info)
    try:
        config = ModelConfig.from_dict(info["model"])
    except (TypeError, ValueError) as exc:
        raise CheckpointError(
            f"the model config in {config_path} is invalid: {exc}; update NeuROK or re-save "
            "the checkpoint"
        ) from exc
    try:
        tensors = load_file(str(weights), device="cpu")
    except Exception as exc:  # safetensors raises its own error types for bad files
        raise CheckpointError(
            f"{weights} is not a readable safetensors file ({exc}); it is truncated or corrupt, "
            "copy or re-save the checkpoint"
        ) from exc

    model = NeuROKModel(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing tensors: {_describe(missing)}")
        if unexpected:
            parts.append(f"unexpected tensors: {_describe(unexpected)}")
        raise CheckpointError(
            f"{weights} does not match the model described in {config_path} "
            f"({'; '.join(parts)}); the two files come from different models, re-save it"
        )
    wrong = [
        f"{k} {tuple(tensors[k].shape)} != {tuple(v.shape)}"
        for k, v in expected.items()
        if tensors[k].shape != v.shape
    ]
    if wrong:
        raise CheckpointError(
            f"tensor shapes in {weights} do not match the model described in {config_path}: "
            f"{_describe(wrong)}; the two files come from different models, re-save it"
        )
    bad = [k for k, v in tensors.items() if not v.is_floating_point() or not v.isfinite().all()]
    if bad:
        raise CheckpointError(
            f"{weights} holds non-finite or non-float values in {_describe(bad)}; the training "
            "run diverged or the file is corrupt, use an earlier checkpoint"
        )
    model.load_state_dict(tensors, strict=True)
    return model.to(device).eval(), info
