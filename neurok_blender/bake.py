# SPDX-License-Identifier: GPL-3.0-or-later
"""Write simulated frames onto an object, and take them off again.

Three ways (design section 8): shape keys, one per frame, keyed on the timeline (value 1 on its
own frame, 0 on the neighbours, linear in between, so sub-frames blend neighbouring frames); a
PC2 point cache read by a Mesh Cache modifier; or, for a model with bones, a rig (an armature
keyed on every frame, ``rig_bake``). Everything added is recorded in
``obj.neurok.results``; re-simulating and Clear remove exactly that, so the user's own shape keys,
modifiers and animation survive. Frames arrive in world space and are stored in the object's local
space (the inverse of ``obj.matrix_world``).
"""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from bpy_extras import anim_utils

from .cache_files import new_cache_path
from .rig_bake import RigError, bake_rig, check_rig_transform, clear_rig

KEY_PREFIX = "NeuROK"
MODIFIER_NAME = "NeuROK Cache"
FCURVE_GROUP = "NeuROK"


class BakeError(Exception):
    """The frames cannot be written onto this object; the message says why."""


def to_local(matrix_world: np.ndarray, frames_world: np.ndarray) -> np.ndarray:
    """(T, N, 3) world positions -> local coordinates of ``matrix_world`` (4, 4), float32."""
    matrix = np.asarray(matrix_world, dtype=np.float64)  # (4, 4)
    inverse = np.linalg.inv(matrix)
    local = frames_world.astype(np.float64) @ inverse[:3, :3].T + inverse[:3, 3]  # (T, N, 3)
    return local.astype(np.float32)


def mesh_sharers(obj) -> list[str]:
    """Names of the other objects that use ``obj``'s mesh (linked duplicates), sorted."""
    return sorted(o.name for o in bpy.data.objects if o != obj and o.data == obj.data)


def results_owner(obj):
    """The object whose recorded results ``obj`` shows: itself, or, for a linked duplicate
    made after a shape-key bake, the object that baked the keys onto their shared mesh."""
    if obj is None or obj.type != "MESH":
        return None
    if obj.neurok.results.mode != "NONE":
        return obj
    for other in bpy.data.objects:
        if (
            other != obj
            and other.data == obj.data
            and other.type == "MESH"
            and other.neurok.results.mode == "SHAPE_KEYS"
        ):
            return other
    return None


def has_results(obj) -> bool:
    return results_owner(obj) is not None


def check_bake(obj, mode: str) -> None:
    """Refuse a bake that would break the user's setup (called before simulating).

    Shape keys live on the mesh, so on a mesh shared by linked duplicates they would move
    every one of them (and a second simulation would stack a second set): refused, naming the
    other users. A point cache is a modifier of this object only, so it is allowed."""
    sharers = mesh_sharers(obj)
    if mode == "SHAPE_KEYS" and sharers:
        names = ", ".join(f"'{n}'" for n in sharers[:5]) + (" ..." if len(sharers) > 5 else "")
        raise BakeError(
            f"'{obj.name}' shares its mesh '{obj.data.name}' with {names}: shape keys on a"
            " shared mesh would move them all. Make it single-user (Object > Relations > Make"
            " Single User > Object & Data) or bake as a point cache (this object only)"
        )
    if mode == "RIG":
        try:
            check_rig_transform(obj, np.array(obj.matrix_world))
        except RigError as exc:
            raise BakeError(str(exc)) from None
    key = obj.data.shape_keys
    if mode == "SHAPE_KEYS" and key is not None and not key.use_relative:
        raise BakeError(
            f"'{obj.name}' uses absolute shape keys (Relative unchecked); bake as a point cache"
            " or make its shape keys relative"
        )


def bake(obj, frames_world, frame_start: int, mode: str, matrix_world=None, rig=None) -> str:
    """Replace our previous results on ``obj`` by ``frames_world`` (T, N, 3), or by ``rig``
    (a ``BoneRig``, ``rig_bake.load_rig``) in mode "RIG"; returns a summary.

    matrix_world: (4, 4) the object's transform when it was simulated (default: its current
    one), so moving the object while the engine runs does not shift the result.
    """
    if matrix_world is None:
        matrix_world = np.array(obj.matrix_world)
    if mode == "RIG":
        if rig is None or rig.vertex_bones.shape[0] != len(obj.data.vertices):
            raise BakeError(
                f"'{obj.name}' now has {len(obj.data.vertices)} vertices, not the simulated"
                " mesh's: the mesh changed meanwhile; simulate again"
            )
        check_bake(obj, mode)
        clear_results(obj)
        try:
            bones = bake_rig(obj, rig, frame_start, matrix_world)
        except RigError as exc:
            raise BakeError(str(exc)) from None
        return f"a rig of {bones} bones"
    if frames_world.shape[1] != len(obj.data.vertices):
        raise BakeError(
            f"'{obj.name}' now has {len(obj.data.vertices)} vertices, the simulation"
            f" {frames_world.shape[1]}: the mesh changed meanwhile; simulate again"
        )
    check_bake(obj, mode)
    local = to_local(matrix_world, frames_world)
    clear_results(obj)
    if mode == "POINT_CACHE":
        path = bake_point_cache(obj, local, frame_start)
        return f"point cache {path.name}"
    bake_shape_keys(obj, local, frame_start)
    return f"{len(local)} shape keys"


# -- shape keys -------------------------------------------------------------------------------
def _channelbag(key):
    anim = key.animation_data
    if anim is None or anim.action is None or anim.action_slot is None:
        return None
    return anim_utils.action_get_channelbag_for_slot(anim.action, anim.action_slot)


def bake_shape_keys(obj, local: np.ndarray, frame_start: int) -> None:
    """One shape key per frame (local (T, N, 3)), keyed so frame f shows key f alone."""
    results = obj.neurok.results
    active_name = obj.active_shape_key.name if obj.active_shape_key else None
    key = obj.data.shape_keys
    if key is None or len(key.key_blocks) == 0:
        basis = obj.shape_key_add(name="Basis", from_mix=False)
        results.created_basis = True
        results.basis_name = basis.name
        key = obj.data.shape_keys
    basis = key.reference_key
    anim = key.animation_data or key.animation_data_create()
    if anim.action is None:
        anim.action = bpy.data.actions.new(f"{obj.name} {KEY_PREFIX}")
        results.action_name = anim.action.name
    action = anim.action
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    count = len(local)
    for i, positions in enumerate(local):
        frame = frame_start + i
        block = obj.shape_key_add(name=f"{KEY_PREFIX} {frame:04d}", from_mix=False)
        block.data.foreach_set("co", positions.ravel())
        block.relative_key = basis
        block.value = 0.0
        results.shape_keys.add().name = block.name
        fcurve = action.fcurve_ensure_for_datablock(
            key, block.path_from_id("value"), group_name=FCURVE_GROUP
        )
        points = [(f, 1.0 if f == frame else 0.0) for f in (frame - 1, frame, frame + 1)]
        points = [p for p in points if frame_start <= p[0] < frame_start + count]
        fcurve.keyframe_points.add(len(points))
        fcurve.keyframe_points.foreach_set("co", [v for p in points for v in p])
        fcurve.keyframe_points.foreach_set("interpolation", [linear] * len(points))
        fcurve.update()
    if active_name is not None and active_name in key.key_blocks:
        obj.active_shape_key_index = key.key_blocks.find(active_name)
    results.mode = "SHAPE_KEYS"
    results.frame_start = frame_start
    results.frame_count = count
    obj.data.update()


def _clear_shape_keys(obj) -> int:
    results = obj.neurok.results
    key = obj.data.shape_keys
    removed = 0
    if key is not None:
        active_name = obj.active_shape_key.name if obj.active_shape_key else None
        bag = _channelbag(key)
        for item in results.shape_keys:
            block = key.key_blocks.get(item.name)
            if block is None:
                continue
            if bag is not None:
                fcurve = bag.fcurves.find(block.path_from_id("value"))
                if fcurve is not None:
                    bag.fcurves.remove(fcurve)
            obj.shape_key_remove(block)
            removed += 1
        _remove_our_action(key, results.action_name)
        if results.created_basis and len(key.key_blocks) == 1:
            basis = key.key_blocks.get(results.basis_name)
            if basis is not None:
                obj.shape_key_remove(basis)  # the last key: Blender drops the Key as well
        elif active_name and obj.data.shape_keys and active_name in key.key_blocks:
            obj.active_shape_key_index = key.key_blocks.find(active_name)
    results.shape_keys.clear()
    results.created_basis = False
    results.basis_name = ""
    results.action_name = ""
    return removed


def _remove_our_action(key, action_name: str) -> None:
    """Drop the action the bake created once it holds nothing else."""
    anim = key.animation_data
    if not action_name or anim is None or anim.action is None or anim.action.name != action_name:
        return
    action = anim.action
    bag = _channelbag(key)
    if bag is not None and len(bag.fcurves):
        return  # the user keyed something into it meanwhile: keep it
    anim.action = None
    if action.users == 0:
        bpy.data.actions.remove(action)
    if not anim.drivers and not anim.nla_tracks:
        key.animation_data_clear()


# -- point cache ------------------------------------------------------------------------------
def _write_pc2(path: Path, frames: np.ndarray) -> None:
    from .core import write_pc2

    write_pc2(path, frames, start_frame=0.0, sample_rate=1.0)


def bake_point_cache(obj, local: np.ndarray, frame_start: int) -> Path:
    """Write local (T, N, 3) as a PC2 file and add a Mesh Cache modifier that plays it."""
    results = obj.neurok.results
    path, stored = new_cache_path(obj)  # a file per bake: undo brings back the one it played
    _write_pc2(path, local)
    modifier = obj.modifiers.new(name=MODIFIER_NAME, type="MESH_CACHE")
    modifier.cache_format = "PC2"
    modifier.filepath = stored
    modifier.time_mode = "FRAME"
    modifier.play_mode = "SCENE"
    modifier.frame_start = frame_start
    modifier.frame_scale = 1.0
    modifier.interpolation = "LINEAR"
    # With shape keys under it, integrate the cache's motion instead of overwriting them.
    modifier.deform_mode = "INTEGRATE" if obj.data.shape_keys else "OVERWRITE"
    obj.modifiers.move(len(obj.modifiers) - 1, 0)  # the rest mesh moves first, then the stack
    results.mode = "POINT_CACHE"
    results.modifier_name = modifier.name
    results.cache_path = stored
    results.frame_start = frame_start
    results.frame_count = len(local)
    return path


def _clear_point_cache(obj) -> int:
    """Remove our Mesh Cache modifier. The file stays, so that undoing Clear brings back a
    modifier that still plays; it goes when nothing can bring it back (``cache_files``)."""
    results = obj.neurok.results
    removed = 0
    modifier = obj.modifiers.get(results.modifier_name) if results.modifier_name else None
    if modifier is not None and modifier.type == "MESH_CACHE":
        obj.modifiers.remove(modifier)
        removed = 1
    results.modifier_name = ""
    results.cache_path = ""
    return removed


def clear_results(obj) -> int:
    """Remove what the last bake added to ``obj``; returns how many keys/modifiers went."""
    results = obj.neurok.results
    removed = 0
    if results.mode == "SHAPE_KEYS" or len(results.shape_keys):
        removed += _clear_shape_keys(obj)
    if results.mode == "RIG" or results.rig_object is not None or len(results.rig_groups):
        removed += clear_rig(obj)
    if results.mode == "POINT_CACHE" or results.modifier_name:
        removed += _clear_point_cache(obj)
    results.mode = "NONE"
    results.frame_count = 0
    results.frames_on_barrier = 0
    results.edge_strain = 0.0
    results.penetration = 0.0
    obj.data.update()
    return removed
