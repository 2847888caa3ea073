# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn the active object and its target into a fit request, both in the object's own frame.

The object's mesh is gathered as Simulate gathers it (``gather.mesh_arrays``: ``obj.data``
before modifiers, the same vertex order, Blender's loop triangles) but stays in the object's
local coordinates, where the fitted positions are keyed. The target is its evaluated mesh, the
shape shown at the current frame (modifiers, shape keys and deformations applied; any
topology), brought into that frame through its world matrix and the inverse of the object's:
x_local = W_object^-1 W_target x_target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bake import mesh_sharers
from .gather import (
    GatherError,
    check_finite,
    check_object,
    deforming_modifiers,
    mesh_arrays,
    transform,
    world_matrix,
)
from .paths import space_cache_dir
from .preferences import EngineSettings
from .request import FitRequest


@dataclass(frozen=True, eq=False)
class FitGathered:
    """A fit request plus what keying its answer needs."""

    request: FitRequest
    object_name: str
    object_uid: int
    target_name: str
    num_vertices: int
    size: float  # the object's size (m, local): the longest side of its box
    frame: int  # the scene frame the fit is keyed at
    key_as: str  # "RIG" | "SHAPE_KEY"
    warnings: tuple[str, ...] = ()


def check_target(obj, target) -> None:
    """Refuse a missing target, the object itself or a target that is not a mesh."""
    if target is None:
        raise GatherError(
            f"'{obj.name}' has no target: pick the mesh to fit it to in NeuROK > Fit to Target"
            " > Target"
        )
    if target == obj:
        raise GatherError(
            f"the target is '{obj.name}' itself: pick another mesh, the shape to fit it to"
        )
    if target.type != "MESH":
        raise GatherError(
            f"the target '{target.name}' is not a mesh ({target.type.lower()}): pick a mesh object"
        )


def check_shape_key(obj) -> None:
    """Refuse what a shape key cannot hold: a mesh shared by linked duplicates (the key would
    move them all) or absolute shape keys."""
    sharers = mesh_sharers(obj)
    if sharers:
        names = ", ".join(f"'{n}'" for n in sharers[:5]) + (" ..." if len(sharers) > 5 else "")
        raise GatherError(
            f"'{obj.name}' shares its mesh '{obj.data.name}' with {names}: a shape key would"
            " move them all. Make it single-user (Object > Relations > Make Single User > Object"
            " & Data) or Key As Rig Pose"
        )
    key = obj.data.shape_keys
    if key is not None and not key.use_relative:
        raise GatherError(
            f"'{obj.name}' uses absolute shape keys (Relative unchecked): make them relative or"
            " Key As Rig Pose"
        )


def target_surface(context, target) -> tuple[np.ndarray, np.ndarray]:
    """The target's evaluated mesh in world space: vertices (M, 3) float64 and loop triangles
    (G, 3) int32."""
    evaluated = target.evaluated_get(context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    try:
        co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
        mesh.vertices.foreach_get("co", co)
        mesh.calc_loop_triangles()
        tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
        mesh.loop_triangles.foreach_get("vertices", tris)
    finally:
        evaluated.to_mesh_clear()
    matrix = np.array(evaluated.matrix_world, dtype=np.float64)  # (4, 4)
    return transform(matrix, co.reshape(-1, 3).astype(np.float64)), tris.reshape(-1, 3)


def fit_warnings(obj, key_as: str) -> tuple[str, ...]:
    """What the user must know about how the keyed fit will show."""
    out = []
    found = deforming_modifiers(obj)
    if found:
        out.append(
            f"'{obj.name}' is deformed by {', '.join(found)}: the fit poses its mesh's own"
            " (rest) shape, and those modifiers apply on top of it"
        )
    baked = {"RIG": "rig", "POINT_CACHE": "point cache"}.get(obj.neurok.results.mode)
    if key_as == "SHAPE_KEY" and baked:
        out.append(
            f"Its NeuROK {baked} still moves it on top of the shape key: Clear it to see the fit"
            " alone"
        )
    return tuple(out)


def gather_fit(context, obj, target, key_as: str, settings: EngineSettings) -> FitGathered:
    """Everything the engine needs to fit ``obj`` to ``target``; raises GatherError."""
    check_object(obj, settings.max_vertices)
    check_target(obj, target)
    if key_as == "SHAPE_KEY":
        check_shape_key(obj)
    context.view_layer.update()  # current world matrices
    matrix = world_matrix(obj)
    local, faces = mesh_arrays(obj)
    check_finite(obj, local, "fitting")
    target_world, target_faces = target_surface(context, target)
    if len(target_faces) == 0:
        raise GatherError(
            f"the target '{target.name}' has no faces: NeuROK fits to a surface; give it faces"
            " or pick another mesh"
        )
    target_local = transform(np.linalg.inv(matrix), target_world)  # (M, 3)
    check_finite(target, target_local, "fitting to it")
    request = FitRequest(
        vertices=local.astype(np.float32),
        faces=faces,
        target_vertices=target_local.astype(np.float32),
        target_faces=target_faces,
        device=settings.device,
        cache_dir=str(space_cache_dir()),
        want_rig=key_as == "RIG",
    )
    return FitGathered(
        request=request,
        object_name=obj.name,
        object_uid=obj.session_uid,
        target_name=target.name,
        num_vertices=len(local),
        size=float(np.ptp(local, axis=0).max()),
        frame=context.scene.frame_current,
        key_as=key_as,
        warnings=fit_warnings(obj, key_as),
    )
