"""The engine worker: the process the Blender add-on (or any client) runs to simulate.

Blender never imports torch; it starts ``<python> -m neurok_core.worker`` as a child process,
with ``neurok_core`` importable (the extension folder on ``PYTHONPATH``) and torch installed.

Protocol (version 1)
--------------------
``python -m neurok_core.worker --probe``
    Prints one JSON line ``{"type": "probe", "ok": true, "protocol": 1, "torch": "2.13.0",
    "device": "cpu (2 threads)", "devices": ["cpu", ...], "checkpoint": {...}}`` and exits 0, or
    an ``error`` message (below) and exits 3 when torch or a dependency is missing.
    ``--checkpoint DIR`` and ``--device NAME`` check those too.

``python -m neurok_core.worker --request REQUEST.json``
    ``REQUEST.json`` (UTF-8)::

        {"protocol": 1,
         "mesh": "mesh.npz",             # vertices float32 (N, 3) metres, faces int32 (F, 3)
         "conditions": {...},            # neurok_core.dynamics.conditions.SimulationConditions
                                         #   .to_dict() (frames, fps, forces, drags, pins, ...)
         "dynamics": "rig",              # rig (the default): the rig space, which loads no
                                         #   model (checkpoint and device unused) and always
                                         #   has a rig to write | latent: the learned space
         "checkpoint": null,             # a checkpoint directory, null = the bundled default
         "device": "auto",               # auto | cpu | cuda | mps
         "cache_dir": null,              # where kinematic spaces are cached (optional)
         "output": {"frames": "frames.npy",   # written as a (T, N, 3) float32 .npy, frame by frame
                    "result": "result.npz",   # optional: design section 5 result file
                    "pc2": "anim.pc2",        # optional: a PC2 point cache
                    "rig": "rig.npz"}}        # optional (the rig space, or a model with
                                              #   bones): the motion as a rig, neurok_core.rig
                                              #   arrays; with "rig" alone (frames null) the
                                              #   vertices are not decoded

    A request of several objects simulates them together (``neurok_core.rigspace.objects``:
    each with its own bones and conditions, touching each other; the rig space)::

        {"protocol": 1, "task": "scene",
         "conditions": {...},            # the scene's: frames, fps, gravity, damping, ground,
                                         #   colliders, friction, bounciness, winds
         "objects": [{"name": "ball",    # unique
                      "mesh": "mesh_0.npz", "conditions": {...},  # its own: forces, drags,
                                         #   velocities, pins, mass, stiffness, material
                      "static": false,   # true: a collider of the others (no output)
                      "output": {"frames": "frames_0.npy", "rig": "rig_0.npz"}}, ...],
         "device": "auto"}

    and ends with ``{"type": "done", "objects": {"ball": {"frames": ..., "rig": ...}, ...},
    "count": int, "seconds": float, "info": {...}}`` (progress lines, no frame lines).

    A preview (the extension's live preview while a gizmo is dragged) is a simulation
    request with ``"task": "preview"`` and ``"preview": {"frames": K}``: the run stops after
    its first min(K, frames) frames (the frames file is that long; ``done``'s ``count`` is the
    frames simulated). On a serving worker, a preview answers ``{"type": "error", "kind":
    "Superseded"}`` instead as soon as another line is waiting on stdin (the next request, a
    malformed line, or the end of input): before it starts, once its inputs are read, or after
    any of its frames but the last; the waiting request runs next. A serving worker also keeps
    every rig-space request's space, its contact's geometry and a cloth's simulation mesh
    between requests of the same mesh and settings (``rigspace/shelf.py``), so a run after a
    change of the loads starts stepping at once.

    A simulation (or preview) in the rig space may carry the object's structure, ``"structure":
    {...}`` (the JSON object of ``docs/structure.md``, for the request's mesh), whose joints the
    step then holds instead of the ones the geometry gives (``neurok simulate --structure``).
    A structure request finds it (``neurok structure``)::

        {"protocol": 1, "task": "structure", "mesh": "mesh.npz",
         "pins": [0, 1, ...],            # optional: the held vertices
         "output": {"structure": "structure.json"}}

    and ends with ``{"type": "done", "structure": ..., "count": 0, "seconds": float, "info":
    {"parts": int, "joints": int, "kinds": {...}, "types": {...}}}``.

    An inverse-kinematics request fits the mesh to a target shape instead (``neurok ik``)::

        {"protocol": 1, "task": "ik",
         "mesh": "mesh.npz",             # the object, as above
         "target": "target.npz",         # vertices (M, 3), faces (G, 3) in the mesh's frame;
                                         #   any topology (the same as the mesh's: its vertices
                                         #   are used as correspondences)
         "space": "rig",                 # rig (the default: the rig space's bones) | latent
         "prior": false,                 # rig: the model's prior draws among the starts
         "settings": {"steps": 150, "restarts": 8, "points": 2048, "seed": 0},  # optional
         "checkpoint": null, "device": "auto", "cache_dir": null,
         "output": {"frames": "fit.npy",      # the fitted vertices, (1, N, 3) float32 .npy
                    "rig": "rig.npz"}}        # optional (rig space): the pose as a one-frame
                                              #   rig (neurok_core.rig arrays)

    and ends with ``{"type": "done", "frames": ..., "rig": ..., "count": 1, "seconds": float,
    "info": {"space": ..., "chamfer": float, "bones": int, "start": str, ...}}``.

    Relative paths are relative to the request file's folder. Progress comes back on stdout, one
    JSON object per line, flushed at once:

        {"type": "status",   "stage": "load|encode|rest|subspace|simulate|write", "message": str}
        {"type": "progress", "stage": str, "fraction": float}        # 0..1 within the stage
        {"type": "frame",    "index": int, "count": int, "energy": float}
                             # frame ``index`` is in the frames file (a shared mapping)
        {"type": "done",     "frames": "..."|null, "result": "..."|null, "pc2": "..."|null,
                             "rig": "..."|null, "count": int, "seconds": float, "info": {...}}
        {"type": "error",    "kind": str, "message": str}

    Exit status: 0 done; 2 the request or its inputs are wrong (``kind`` is the engine's error
    class, ``message`` says what to change); 1 an unexpected failure (a plain one-line message on
    stdout, the traceback on stderr only); 3 a missing dependency. Nothing but protocol lines is
    printed on stdout.

``python -m neurok_core.worker --serve [--idle-exit SECONDS]``
    The same, kept warm for many requests: it prints ``{"type": "ready", "protocol": 1}`` once
    torch is imported, then reads one JSON line per request on stdin, ``{"request":
    "REQUEST.json"}`` (an absolute path), and answers each with the lines above, ending with
    exactly one ``done`` or ``error`` line. The model stays loaded and the last kinematic spaces
    stay in memory, so a second request skips importing torch, loading and encoding. It exits
    0 when stdin closes (the client went away) or after ``--idle-exit`` seconds without a request
    (default 600), and after an unexpected failure (exit 1, once its ``error`` line is out);
    a request whose inputs are wrong gets its ``error`` line and the next one is served.

Cancelling is terminating the process (SIGTERM, then SIGKILL): the frames file then holds the
frames announced so far; nothing else is left half written (results are written atomically).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .blas import blas_report, pick_blas_kernel
from .dynamics.conditions import DEFAULT_DYNAMICS, DYNAMICS

PROTOCOL = 1
TASKS = ("simulate", "ik", "scene", "preview", "structure")
# a preview's rigid parts one step a frame at least (not two) with 300 contact points a part
# (not 1,000): a laptop's lid follows Simulate's path to 2% of its size
# (docs/experiments/preview.md); a cloth's steps are Simulate's (projective dynamics, as
# accurate beside BDF2 steps, is slower: docs/experiments/cloth.md)
PREVIEW_RIG_SETTINGS = {"substeps": 1, "contact_samples": 300}
EXIT_OK, EXIT_CRASH, EXIT_USER, EXIT_MISSING = 0, 1, 2, 3


class Superseded(Exception):
    """A preview left unfinished because a newer request arrived (``--serve``)."""


class RequestError(Exception):
    """The request file itself is malformed."""


def emit(message: dict[str, Any], stream=None) -> None:
    """Write one protocol line and flush it (NaN and infinity, which JSON lacks, become null)."""
    stream = stream or sys.stdout
    stream.write(json.dumps(_finite(message), allow_nan=False, default=_jsonable) + "\n")
    stream.flush()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def read_request(path: str | os.PathLike) -> dict[str, Any]:
    """Parse and check ``REQUEST.json``; paths come back absolute."""
    path = Path(path)
    try:
        request = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RequestError(f"request file {path} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RequestError(f"request file {path} is not valid JSON ({exc})") from None
    if not isinstance(request, dict):
        raise RequestError("the request must be a JSON object")
    if request.get("protocol") != PROTOCOL:
        raise RequestError(
            f"request protocol {request.get('protocol')!r} is not supported (this engine speaks"
            f" {PROTOCOL}); update the add-on and the engine together"
        )
    task = request.setdefault("task", "simulate")
    if task not in TASKS:
        raise RequestError(f"'task' must be one of {', '.join(TASKS)}, got {task!r}")
    needed = {
        "simulate": ("mesh", "conditions", "output"),
        "preview": ("mesh", "conditions", "output", "preview"),
        "structure": ("mesh", "output"),
        "ik": ("mesh", "target", "output"),
        "scene": ("conditions", "objects"),
    }[task]
    for key in needed:
        if key not in request:
            raise RequestError(f"the request has no {key!r}")
    if task == "ik":
        return _read_ik_request(request, path.parent)
    if task == "scene":
        return _read_scene_request(request, path.parent)
    if task == "structure":
        return _read_structure_request(request, path.parent)
    if not isinstance(request["conditions"], dict):
        raise RequestError("'conditions' must be a JSON object")
    if task == "preview":
        _check_preview(request)
    if request.get("structure") is not None:
        if not isinstance(request["structure"], dict):
            raise RequestError("'structure' must be a JSON object (docs/structure.md) or null")
        if request.get("dynamics", DEFAULT_DYNAMICS) != "rig":
            raise RequestError("a 'structure' holds the rig space's joints: use dynamics 'rig'")
    output = request["output"]
    if not isinstance(output, dict) or not (output.get("frames") or output.get("rig")):
        raise RequestError("'output' must name at least a 'frames' or a 'rig' file")
    if output.get("pc2") and not output.get("frames"):
        raise RequestError("a 'pc2' output needs the 'frames' (the vertices) too")
    base = path.parent

    def resolve(value):
        return None if value in (None, "") else str((base / str(value)).resolve())

    request["mesh"] = resolve(request["mesh"])
    request["checkpoint"] = resolve(request.get("checkpoint"))
    request["cache_dir"] = resolve(request.get("cache_dir"))
    request["device"] = request.get("device") or "auto"
    request["dynamics"] = request.get("dynamics") or DEFAULT_DYNAMICS
    if request["dynamics"] not in DYNAMICS:
        raise RequestError(
            f"'dynamics' must be one of {', '.join(DYNAMICS)}, got {request['dynamics']!r}"
        )
    request["output"] = {k: resolve(output.get(k)) for k in ("frames", "result", "pc2", "rig")}
    return request


def _check_preview(request: dict[str, Any]) -> None:
    """A preview's own fields: ``{"frames": int >= 1}`` and a frames output."""
    preview = request["preview"]
    frames = preview.get("frames") if isinstance(preview, dict) else None
    if isinstance(frames, bool) or not isinstance(frames, int) or frames < 1:
        raise RequestError("'preview' must be {\"frames\": a whole number >= 1}")
    if not isinstance(request["output"], dict) or not request["output"].get("frames"):
        raise RequestError("a preview's 'output' must name its 'frames' file")


def _read_structure_request(request: dict[str, Any], base: Path) -> dict[str, Any]:
    output = request["output"]
    if not isinstance(output, dict) or not output.get("structure"):
        raise RequestError("a structure request's 'output' must name its 'structure' file")
    pins = request.get("pins") or []
    if not isinstance(pins, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in pins
    ):
        raise RequestError("'pins' must be a list of vertex indices")
    resolve = _resolver(base)
    request["mesh"] = resolve(request["mesh"])
    request["output"] = {"structure": resolve(output["structure"])}
    return request


def run_structure_request(request: dict[str, Any]) -> dict[str, Any]:
    """Find a mesh's structure (``neurok structure``); returns the ``done`` message, whose
    ``structure`` is the written JSON file (``docs/structure.md``)."""
    from collections import Counter

    from .errors import ConditionError
    from .geometry import validate_mesh
    from .structure import find_structure

    start = time.perf_counter()
    vertices, faces = load_mesh(request["mesh"])
    vertices, faces = validate_mesh(vertices, faces)
    pins = request.get("pins") or []
    if pins and max(pins) >= len(vertices):
        raise ConditionError(f"pin {max(pins)} is not a vertex (the mesh has {len(vertices)})")
    _status("structure", "finding the parts and joints")
    structure = find_structure(vertices, faces, pins)
    path = Path(request["output"]["structure"])
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(structure.to_json() + "\n", encoding="utf-8")
    os.replace(partial, path)
    return {
        "type": "done",
        "structure": str(path),
        "count": 0,
        "seconds": round(time.perf_counter() - start, 3),
        "info": {
            "parts": len(structure.parts),
            "joints": len(structure.joints),
            "kinds": dict(Counter(p.kind for p in structure.parts)),
            "types": dict(Counter(j.type for j in structure.joints)),
        },
    }


def _resolver(base: Path):
    def resolve(value):
        return None if value in (None, "") else str((base / str(value)).resolve())

    return resolve


def _read_ik_request(request: dict[str, Any], base: Path) -> dict[str, Any]:
    """The checks and paths of an inverse-kinematics request (module docstring)."""
    resolve = _resolver(base)
    output = request["output"]
    if not isinstance(output, dict) or not output.get("frames"):
        raise RequestError("an 'ik' request's 'output' must name a 'frames' file")
    request["space"] = request.get("space") or "rig"
    if request["space"] not in ("rig", "latent"):
        raise RequestError(f"'space' must be rig or latent, got {request['space']!r}")
    if output.get("rig") and request["space"] != "rig":
        raise RequestError("a 'rig' output needs the rig space (the latent space has no bones)")
    settings = request.get("settings") or {}
    if not isinstance(settings, dict) or set(settings) - {"steps", "restarts", "points", "seed"}:
        raise RequestError("'settings' may hold steps, restarts, points and seed only")
    for key in ("steps", "restarts", "points"):
        value = settings.get(key, 1)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise RequestError(f"'settings.{key}' must be a whole number of at least 1")
    request["settings"] = settings
    request["prior"] = bool(request.get("prior", False))
    for key in ("mesh", "target", "checkpoint", "cache_dir"):
        request[key] = resolve(request.get(key))
    request["device"] = request.get("device") or "auto"
    request["output"] = {k: resolve(output.get(k)) for k in ("frames", "rig")}
    return request


def _read_scene_request(request: dict[str, Any], base: Path) -> dict[str, Any]:
    """The checks and paths of a request of several objects (module docstring)."""
    resolve = _resolver(base)
    if not isinstance(request["conditions"], dict):
        raise RequestError("'conditions' must be a JSON object")
    objects = request["objects"]
    if not isinstance(objects, list) or not objects:
        raise RequestError("'objects' must be a list of objects")
    for item in objects:
        if not isinstance(item, dict) or not {"name", "mesh", "conditions"} <= set(item):
            raise RequestError("each object needs a 'name', a 'mesh' and its 'conditions'")
        if not isinstance(item["conditions"], dict):
            raise RequestError(f"object {item['name']!r}: 'conditions' must be a JSON object")
        item["mesh"] = resolve(item["mesh"])
        item["static"] = bool(item.get("static", False))
        output = item.get("output") or {}
        if not isinstance(output, dict):
            raise RequestError(f"object {item['name']!r}: 'output' must be a JSON object")
        if not item["static"] and not (output.get("frames") or output.get("rig")):
            raise RequestError(f"object {item['name']!r}: 'output' names no 'frames' or 'rig'")
        item["output"] = {k: resolve(output.get(k)) for k in ("frames", "rig")}
    request["device"] = request.get("device") or "auto"
    return request


def run_scene_request(request: dict[str, Any]) -> dict[str, Any]:
    """Run a request of several objects (``neurok_core.rigspace.objects``), emitting progress
    lines; returns the ``done`` message, its ``objects`` each moving object's output files."""
    import numpy as np

    from .dynamics.conditions import SimulationConditions
    from .geometry import validate_mesh
    from .rigspace.objects import SceneObject, simulate_objects

    start = time.perf_counter()
    scene = SimulationConditions.from_dict(request["conditions"])
    objects = []
    for item in request["objects"]:
        vertices, faces = load_mesh(item["mesh"])
        validate_mesh(vertices, faces)
        conditions = SimulationConditions.from_dict(item["conditions"])
        objects.append(SceneObject(item["name"], vertices, faces, conditions, item["static"]))
    wants = {item["name"]: item["output"] for item in request["objects"]}
    _status("simulate", f"simulating {len(objects)} objects, {scene.frames} frames")
    results = simulate_objects(
        objects,
        scene,
        on_progress=_progress,
        want_vertices=any(w["frames"] for w in wants.values()),
    )
    _status("write", "writing results")
    written = {}
    for name, result in results.items():
        out = wants[name]
        if out["frames"]:
            Path(out["frames"]).parent.mkdir(parents=True, exist_ok=True)
            np.save(out["frames"], np.asarray(result.positions, dtype=np.float32))
        if out["rig"]:
            write_rig_arrays(result.rig, out["rig"])
        written[name] = out
    first = next(iter(results.values()))
    return {
        "type": "done",
        "objects": written,
        "count": len(first.times),
        "seconds": round(time.perf_counter() - start, 3),
        "info": first.info,
    }


def load_mesh(path: str):
    """Read the request's mesh file: ``vertices`` (N, 3) and ``faces`` (F, 3)."""
    import numpy as np

    from .errors import MeshError

    try:
        with np.load(path, allow_pickle=False) as data:
            if "vertices" not in data.files or "faces" not in data.files:
                raise MeshError(f"mesh file {path} needs 'vertices' and 'faces' arrays")
            return np.asarray(data["vertices"]), np.asarray(data["faces"])
    except FileNotFoundError:
        raise MeshError(f"mesh file {path} does not exist") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, MeshError):
            raise
        raise MeshError(f"mesh file {path} is unreadable ({exc})") from None


class Warm:
    """What a serving worker keeps between requests: the loaded models (by checkpoint and
    device) and the last few kinematic spaces (by model and mesh)."""

    SPACES = 4
    RIG_SPACES = 12  # rig spaces and what is kept of their meshes (``SpaceShelf``)

    def __init__(self, newer=None) -> None:
        from .rigspace.shelf import SpaceShelf

        self.engines: dict[tuple, Any] = {}
        self.spaces = SpaceShelf(self.SPACES)  # the learned space's, by model and mesh
        self.rig_spaces = SpaceShelf(self.RIG_SPACES)  # the rig space's, by mesh and settings
        # whether a newer request is waiting (``serve``): a running preview then stops
        self.newer = newer or (lambda: False)
        self.valid_meshes: set[str] = set()  # digests of meshes validated already

    def validate_mesh(self, vertices, faces) -> None:
        """``geometry.validate_mesh`` once per mesh (a preview sends the same mesh at every
        change: 12 ms of a 20k-vertex laptop's 0.3 s)."""
        import hashlib

        import numpy as np

        from .geometry import validate_mesh

        try:  # the arrays as they came: their shapes, types and bytes (no cast hides any)
            h = hashlib.sha256()
            for a in (vertices, faces):
                a = np.asarray(a)
                h.update(repr((a.shape, a.dtype.str)).encode())
                h.update(np.ascontiguousarray(a).tobytes())
            digest = h.hexdigest()
        except Exception:  # not plain arrays: the check says what is wrong with them
            validate_mesh(vertices, faces)
            return
        if digest not in self.valid_meshes:
            validate_mesh(vertices, faces)
            if len(self.valid_meshes) >= 4 * self.RIG_SPACES:
                self.valid_meshes.clear()
            self.valid_meshes.add(digest)

    def engine(self, checkpoint: str | None, device: str):
        from .api import NeuROK

        key = (checkpoint, device)
        if key not in self.engines:
            self.engines.clear()  # one model at a time: they are large
            self.spaces.clear()
            self.engines[key] = NeuROK.load(checkpoint, device=device)
        return self.engines[key]

    def space(self, engine, vertices, faces, build):
        from .space import SpaceSettings, space_cache_key

        key = space_cache_key(vertices, faces, engine.fingerprint, SpaceSettings())
        return self.spaces.get(key, build)


def run_request(request: dict[str, Any], warm: Warm | None = None) -> dict[str, Any]:
    """Run one simulation request, emitting progress lines; returns the ``done`` message.
    ``warm``: a serving worker's loaded models and spaces, reused and kept up to date.

    A preview (``"task": "preview"``, ``"preview": {"frames": K}``) is the same run stopped
    after its first min(K, frames) frames (the frames file holds those); on a serving worker
    it raises :class:`Superseded` instead when a newer request is waiting: before it starts,
    once its inputs are read, and after each frame but its last."""
    import numpy as np

    from .dynamics.conditions import SimulationConditions
    from .results import save_result

    preview = request["task"] == "preview"
    newer = warm.newer if warm is not None and preview else (lambda: False)
    if newer():
        raise Superseded("a newer request is waiting")
    start = time.perf_counter()
    rig_space = request["dynamics"] == "rig"  # no model: the rig space is the mesh's own
    engine = space = None
    if not rig_space:
        emit({"type": "status", "stage": "load", "message": "loading the model"})
        engine = _engine(request, warm)
    vertices, faces = load_mesh(request["mesh"])
    conditions = SimulationConditions.from_dict(request["conditions"])
    conditions.validate(len(vertices))
    if preview and conditions.self_collision:  # a preview is Simulate's motion, roughly:
        # without the cloth's layers' contact (several times its time)
        conditions = dataclasses.replace(conditions, self_collision=False)
    if rig_space:  # the mesh's refusals, which the learned space's encoding makes itself
        from .geometry import validate_mesh

        (warm.validate_mesh if warm is not None else validate_mesh)(vertices, faces)
    structure = None
    if request.get("structure") is not None:
        from .structure import Structure

        structure = Structure.from_json(json.dumps(request["structure"]), len(vertices))

    on_status, on_progress = _status, _progress

    if not rig_space:
        space = _space(engine, request, vertices, faces, warm, on_status, on_progress)
    out = request["output"]
    frames_path, rig_path = out["frames"], out["rig"]
    count = min(conditions.frames, request["preview"]["frames"]) if preview else conditions.frames
    if newer():
        raise Superseded("a newer request is waiting")
    frames = None
    if frames_path:
        Path(frames_path).parent.mkdir(parents=True, exist_ok=True)
        frames = np.lib.format.open_memmap(
            frames_path, mode="w+", dtype=np.float32, shape=(count, len(vertices), 3)
        )

    def on_frame(index: int, positions, energy: float) -> bool:
        if index >= count:
            return False  # a preview's frames are done
        if frames is not None:
            # in the file's shared mapping: another process reading the file sees it at once,
            # and it survives this process being killed (no flush to disk per frame)
            frames[index] = positions
        emit({"type": "frame", "index": index, "count": count, "energy": float(energy)})
        if index + 1 < count and newer():  # out of date: nothing after this frame is wanted
            raise Superseded("a newer request arrived")
        # a preview shorter than the run stops at its last frame
        return not (preview and count < conditions.frames and index + 1 >= count)

    if rig_space:
        from .rigspace import RigSettings, simulate_rig

        on_status("simulate", f"simulating {count} frames in the rig space")
        result = simulate_rig(
            vertices,
            faces,
            conditions,
            on_frame=on_frame,
            on_progress=on_progress,
            want_vertices=frames is not None,
            shelf=warm.rig_spaces if warm is not None else None,
            want_rig=bool(rig_path) or bool(out["result"]),
            structure=structure,
            settings=RigSettings(**PREVIEW_RIG_SETTINGS) if preview else None,
            want_figures=not preview,
        )
    else:
        on_status("simulate", f"simulating {count} frames")
        result = engine.simulate(
            space,
            conditions,
            dynamics="latent",
            on_frame=on_frame,
            on_progress=on_progress,
            vertices=frames is not None,
            rig=bool(rig_path),
        )
    if preview:
        count = int(result.times.shape[0])  # the frames it simulated
    on_status("write", "writing results")
    if out["result"]:
        save_result(result, out["result"])
    if out["pc2"]:
        from .pc2 import write_pc2

        write_pc2(out["pc2"], result.positions, start_frame=0, sample_rate=1)
    if rig_path:
        write_rig_arrays(result.rig, rig_path)
    if frames is not None:
        frames.flush()
    return {
        "type": "done",
        "frames": frames_path,
        "result": out["result"],
        "pc2": out["pc2"],
        "rig": rig_path,
        "count": count,
        "seconds": round(time.perf_counter() - start, 3),
        "info": result.info,
    }


def run_ik_request(request: dict[str, Any], warm: Warm | None = None) -> dict[str, Any]:
    """Run one inverse-kinematics request (module docstring); returns the ``done`` message."""
    import numpy as np

    from .errors import MeshError
    from .geometry import sample_surface_points, validate_mesh

    start = time.perf_counter()
    vertices, faces = load_mesh(request["mesh"])
    target_v, target_f = load_mesh(request["target"])
    vertices, faces = validate_mesh(vertices, faces)
    try:
        target_v, target_f = validate_mesh(target_v, target_f)
    except MeshError as exc:
        raise MeshError(f"the target: {exc}") from None
    s = request["settings"]
    budget = {k: s[k] for k in ("steps", "restarts", "seed") if k in s}
    shared = target_v.shape == vertices.shape and np.array_equal(target_f, faces)
    rng = np.random.default_rng(s.get("seed", 0))
    points = sample_surface_points(target_v, target_f, s.get("points", 2048), rng)
    engine = kspace = None
    if request["space"] == "latent" or request["prior"]:
        emit({"type": "status", "stage": "load", "message": "loading the model"})
        engine = _engine(request, warm)
        kspace = _space(engine, request, vertices, faces, warm, _status, _progress)
    emit({"type": "status", "stage": "fit", "message": f"fitting in the {request['space']} space"})
    info: dict[str, Any] = {"space": request["space"], "correspondences": bool(shared)}
    if request["space"] == "latent":
        from .ik import IKSettings

        fit = engine.inverse_kinematics(kspace, points, settings=IKSettings(**budget))
    else:
        from .rigspace.fit import fit_rig
        from .rigspace.ik import RigIKSettings

        fit = fit_rig(
            vertices,
            faces,
            points,
            settings=RigIKSettings(**budget),
            target_vertices=target_v if shared else None,
            kspace=kspace,
        )
        info.update(bones=fit.space.num_bones, start=fit.start, seconds=fit.seconds)
    info["chamfer"] = float(fit.loss)
    emit({"type": "status", "stage": "write", "message": "writing the fit"})
    out = request["output"]
    Path(out["frames"]).parent.mkdir(parents=True, exist_ok=True)
    tmp = out["frames"] + ".tmp.npy"
    np.save(tmp, np.asarray(fit.vertices, dtype=np.float32)[None])
    os.replace(tmp, out["frames"])
    if out["rig"]:
        write_rig_arrays(fit.rig(), out["rig"])
    emit({"type": "frame", "index": 0, "count": 1, "energy": 0.0})
    return {
        "type": "done",
        "frames": out["frames"],
        "rig": out["rig"],
        "count": 1,
        "seconds": round(time.perf_counter() - start, 3),
        "info": info,
    }


def _status(stage: str, message: str) -> None:
    emit({"type": "status", "stage": stage, "message": message})


def _progress(stage: str, fraction: float) -> None:
    emit({"type": "progress", "stage": stage, "fraction": round(float(fraction), 4)})


def _engine(request: dict[str, Any], warm: Warm | None):
    """The request's model (``NeuROK``), loaded now or kept by a serving worker."""
    from .api import NeuROK

    if warm is None:
        return NeuROK.load(request["checkpoint"], device=request["device"])
    return warm.engine(request["checkpoint"], request["device"])


def _space(engine, request, vertices, faces, warm: Warm | None, on_status, on_progress):
    """The mesh's kinematic space in ``engine``'s model, built now or kept by ``warm``."""

    def build():
        return engine.space(
            vertices,
            faces,
            cache_dir=request["cache_dir"],
            on_status=on_status,
            on_progress=on_progress,
        )

    return build() if warm is None else warm.space(engine, vertices, faces, build)


def write_rig_arrays(rig, path: str) -> None:
    """The rig's arrays (:meth:`~neurok_core.rig.BoneRig.arrays`) as an ``.npz``, atomically."""
    import numpy as np

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = path + ".tmp.npz"
    np.savez(tmp, **rig.arrays())
    os.replace(tmp, path)


def probe(checkpoint: str | None, device: str) -> dict[str, Any]:
    """Check that the engine can run here: torch, the device and the checkpoint."""
    import torch

    from .api import default_checkpoint
    from .checkpoint import checkpoint_info
    from .device import describe_device, select_device

    dev = select_device(device)
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    info = checkpoint_info(checkpoint or default_checkpoint())
    return {
        "type": "probe",
        "ok": True,
        "protocol": PROTOCOL,
        "torch": torch.__version__.split("+")[0],
        "device": describe_device(dev),
        "devices": devices,
        "blas": blas_report(),
        "checkpoint": {
            "path": str(checkpoint or default_checkpoint()),
            "num_parameters": info.get("num_parameters"),
            "trained": bool(info.get("training")),
        },
    }


def answer(request_path: str, warm: Warm | None = None) -> int:
    """Run one request file and emit its ``done`` or ``error`` line; the exit status."""
    return respond(lambda: run_any(read_request(request_path), warm))


def run_any(request: dict[str, Any], warm: Warm | None = None) -> dict[str, Any]:
    """Run a checked request of either task."""
    if request["task"] == "ik":
        return run_ik_request(request, warm)
    if request["task"] == "scene":
        return run_scene_request(request)
    if request["task"] == "structure":
        return run_structure_request(request)
    return run_request(request, warm)


def respond(make) -> int:
    """Emit ``make()``'s message, or the ``error`` line of what it raised; the exit status."""
    from .errors import NeuROKError

    try:
        emit(make())
        return EXIT_OK
    except Superseded as exc:
        emit({"type": "error", "kind": "Superseded", "message": str(exc)})
        return EXIT_USER
    except (RequestError, NeuROKError) as exc:
        kind = "RequestError" if isinstance(exc, RequestError) else type(exc).__name__
        emit({"type": "error", "kind": kind, "message": str(exc)})
        return EXIT_USER
    except KeyboardInterrupt:
        emit({"type": "error", "kind": "Cancelled", "message": "cancelled"})
        return EXIT_CRASH
    except Exception as exc:  # noqa: BLE001  (a crash must still come back as a plain message)
        traceback.print_exc(file=sys.stderr)
        emit(
            {
                "type": "error",
                "kind": "InternalError",
                "message": f"the engine failed unexpectedly: {type(exc).__name__}: {exc}",
            }
        )
        return EXIT_CRASH


def serve(idle_exit: float) -> int:
    """The ``--serve`` loop (module docstring): requests from stdin until it closes or idles."""
    import queue
    import threading

    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:  # a thread, so that waiting can time out on every platform
        for line in sys.stdin:
            if line.strip():  # (a blank line is no request, and stops no preview)
                lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    warm = Warm(newer=lambda: not lines.empty())
    emit({"type": "ready", "protocol": PROTOCOL})
    while True:
        try:
            line = lines.get(timeout=idle_exit)
        except queue.Empty:
            return EXIT_OK  # idle: give the memory back
        if line is None:
            return EXIT_OK  # the client is gone
        if not line.strip():
            continue
        try:
            message = json.loads(line)
            path = message["request"]
            if not isinstance(path, str):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            emit(
                {
                    "type": "error",
                    "kind": "RequestError",
                    "message": 'a serving engine takes one {"request": "PATH"} JSON line at a'
                    f" time, got {line.strip()[:120]!r}",
                }
            )
            continue
        if answer(path, warm) == EXIT_CRASH:
            return EXIT_CRASH  # its state may be broken: the client starts a fresh one


def _seconds(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neurok_core.worker", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--request", help="run the simulation request in this JSON file")
    group.add_argument("--probe", action="store_true", help="check torch, device and checkpoint")
    group.add_argument(
        "--serve", action="store_true", help="run requests read from stdin (one JSON line each)"
    )
    parser.add_argument("--checkpoint", default=None, help="checkpoint to check with --probe")
    parser.add_argument("--device", default="auto", help="device to check with --probe")
    parser.add_argument(
        "--idle-exit",
        type=_seconds,
        default=600.0,
        help="with --serve: exit after this many seconds without a request",
    )
    args = parser.parse_args(argv)

    try:
        # in this order (a bare interpreter is told of numpy first); numba: the compiled
        # contact loops, loaded where a run first needs them
        for name in ("numpy", "torch", "numba"):
            importlib.import_module(name)
    except ImportError as exc:
        emit(
            {
                "type": "error",
                "kind": "MissingDependency",
                "message": f"the engine's Python cannot import {exc.name or exc}: install the"
                " engine's dependencies (add-on preferences, Install dependencies) or choose an"
                " interpreter that has torch",
            }
        )
        return EXIT_MISSING

    if args.serve:
        return serve(args.idle_exit)
    if args.request:
        return answer(args.request)
    return respond(lambda: probe(args.checkpoint, args.device))


if __name__ == "__main__":
    pick_blas_kernel()  # a process of its own: numpy's BLAS kernel first (neurok_core.blas)
    status = main()
    # Everything is written and flushed by now (results atomically, the frames file frame by
    # frame); ending here skips the interpreter's teardown of torch, about half a second.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
