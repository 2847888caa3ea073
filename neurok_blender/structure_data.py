# SPDX-License-Identifier: GPL-3.0-or-later
"""Between an object's structure settings (``properties.structure``) and the engine's structure
JSON (``docs/structure.md``): stored from the engine's answer to Find Structure (world space to
the object's frame), and sent with a Simulate (the object's frame to world space). The engine
checks the JSON itself and refuses what does not fit, with the field named."""

from __future__ import annotations

import base64

import numpy as np

from .properties.structure import AXIS_TYPES


class StructureDataError(ValueError):
    """The stored structure cannot be sent as it is; the message says what to change."""


def _apply(matrix: np.ndarray, point) -> np.ndarray:
    return matrix[:3, :3] @ np.asarray(point, dtype=np.float64) + matrix[:3, 3]


def _direction(matrix: np.ndarray, axis) -> np.ndarray:
    d = matrix[:3, :3] @ np.asarray(axis, dtype=np.float64)
    n = float(np.linalg.norm(d))
    return d / n if n > 0 else d


def store_structure(settings, data: dict, matrix_world: np.ndarray) -> None:
    """Fill the structure ``settings`` from the engine's JSON ``data`` of the world-space mesh
    whose object has ``matrix_world`` (4, 4); replaces what was there."""
    local = np.linalg.inv(matrix_world)
    labels = np.asarray(data["vertex_parts"], dtype=np.int32)
    settings.parts.clear()
    counts = np.bincount(labels, minlength=len(data["parts"]))
    for p, part in enumerate(data["parts"]):
        item = settings.parts.add()
        item.kind = item.found_kind = str(part["kind"])
        item.confidence = float(part["confidence"])
        item.vertex_count = int(counts[p])
    settings.joints.clear()
    for joint in data["joints"]:
        item = settings.joints.add()
        item.type = item.found_type = str(joint["type"])
        item.part_a, item.part_b = (int(i) for i in joint["parts"])
        item.point = tuple(_apply(local, joint["point"]))
        if joint.get("axis") is not None:
            item.axis = tuple(_direction(local, joint["axis"]))
        item.use_limits = joint.get("limits") is not None
        if item.use_limits:
            item.limits = tuple(float(x) for x in joint["limits"])
        item.confidence = float(joint["confidence"])
    settings.vertex_count = len(labels)
    settings.vertex_parts = base64.b64encode(labels.astype("<i4").tobytes()).decode("ascii")


def has_structure(settings) -> bool:
    return len(settings.parts) > 0 and settings.vertex_count > 0


def vertex_labels(settings) -> np.ndarray:
    """(N,) int32 the stored part of each vertex (empty when damaged or none)."""
    try:
        return np.frombuffer(base64.b64decode(settings.vertex_parts), dtype="<i4")
    except ValueError:
        return np.zeros(0, dtype=np.int32)


def structure_json(settings, matrix_world: np.ndarray, num_vertices: int, name: str) -> dict:
    """The engine's structure JSON of the settings, in world space (the object's current
    ``matrix_world``); raises StructureDataError when it no longer fits the mesh."""
    if settings.vertex_count != num_vertices:
        raise StructureDataError(
            f"'{name}' has {num_vertices:,} vertices, its structure was found on"
            f" {settings.vertex_count:,}: press Find Structure again, or turn its Use off"
        )
    labels = vertex_labels(settings)
    if len(labels) != num_vertices:
        raise StructureDataError(f"'{name}': its stored structure is damaged: find it again")
    joints = []
    for k, joint in enumerate(settings.joints):
        out = {
            "type": joint.type,
            "parts": [joint.part_a, joint.part_b],
            "point": [float(x) for x in _apply(matrix_world, joint.point)],
            "axis": None,
            "limits": None,
            "confidence": float(joint.confidence),
        }
        if joint.type in AXIS_TYPES:
            axis = _direction(matrix_world, joint.axis)
            if not np.isfinite(axis).all() or abs(float(np.linalg.norm(axis)) - 1.0) > 1e-3:
                raise StructureDataError(
                    f"'{name}': joint {k + 1} is a {joint.type} without an axis: set its Axis"
                )
            out["axis"] = [float(x) for x in axis]
            if joint.use_limits and joint.type == joint.found_type:
                out["limits"] = [float(x) for x in joint.limits]
        joints.append(out)
    return {
        "format": "neurok-structure",
        "version": 1,
        "num_vertices": num_vertices,
        "parts": [{"kind": p.kind, "confidence": float(p.confidence)} for p in settings.parts],
        "vertex_parts": labels.tolist(),
        "joints": joints,
    }


def clear_structure(settings) -> None:
    settings.parts.clear()
    settings.joints.clear()
    settings.vertex_count = 0
    settings.vertex_parts = ""
