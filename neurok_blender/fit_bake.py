# SPDX-License-Identifier: GPL-3.0-or-later
"""Key a fit (Fit to Target) onto its object at one frame: a shape key, or a rig pose.

The engine fits in the object's own (local) frame, so its answer needs no transform here:

- **Shape Key**: one key, "NeuROK Fit" (relative to the reference key; a "Basis" is added first
  when the mesh has none), holding the fitted positions, its value keyed to 1 at the frame. A
  second fit updates that key rather than adding another. It is the user's afterwards: Simulate
  and Clear leave it, as they leave every shape key they did not bake.
- **Rig Pose**: the pose of the object's NeuROK rig (``rig_bake``), with each pose bone's
  location and rotation keyed at the frame. The rig of an earlier bake or fit is reused when it
  is the fit's: the same bones (count and heads), weights and blend, and an armature whose
  space differs from the object's by a rotation, uniform scale and translation. Otherwise the
  object's NeuROK results are replaced, as a new bake replaces them, by a rig made as the rig
  bake makes one (armature, vertex groups, Armature modifier, recorded in
  ``obj.neurok.results``), placed at the object's transform.

Pose of a bone keyed into an armature at A (world) on an object at W: the fit's motion x -> R x
+ t is in the object's space, which is the armature's through W^-1 A (the identity for a rig made
here), so ``rig_bake.pose_channels`` turns it into the bone's channels with that map.
"""

from __future__ import annotations

import bpy
import numpy as np

from .bake import clear_results
from .core import BoneRig
from .rig_bake import WEIGHT_STEPS, add_rig, pose_channels

FIT_KEY = "NeuROK Fit"
FCURVE_GROUP = "NeuROK"
HEAD_TOLERANCE = 1e-4  # of the object's size: the bones of a rig to reuse sit at the fit's heads
FRAME_TOLERANCE = 1e-5  # how far the armature's space may be from a similarity of the object's


# -- shape key --------------------------------------------------------------------------------
def key_fit_shape(obj, local: np.ndarray, frame: int) -> str:
    """Write the fitted positions (N, 3) (local) into the key "NeuROK Fit", keyed to 1 at
    ``frame``; returns what was keyed, for the report."""
    active_name = obj.active_shape_key.name if obj.active_shape_key else None
    if obj.data.shape_keys is None or len(obj.data.shape_keys.key_blocks) == 0:
        obj.shape_key_add(name="Basis", from_mix=False)
    key = obj.data.shape_keys
    block = key.key_blocks.get(FIT_KEY)
    updated = block is not None
    if block is None:
        block = obj.shape_key_add(name=FIT_KEY, from_mix=False)
        block.relative_key = key.reference_key
    block.data.foreach_set("co", np.ascontiguousarray(local, dtype=np.float32).ravel())
    block.value = 1.0
    anim = key.animation_data or key.animation_data_create()
    if anim.action is None:
        anim.action = bpy.data.actions.new(f"{obj.name} {FIT_KEY}")
    fcurve = anim.action.fcurve_ensure_for_datablock(
        key, block.path_from_id("value"), group_name=FCURVE_GROUP
    )
    fcurve.keyframe_points.insert(frame, 1.0)  # (a key already there is replaced)
    fcurve.update()
    if active_name is not None and active_name in key.key_blocks:
        obj.active_shape_key_index = key.key_blocks.find(active_name)
    obj.data.update()
    return f"as shape key '{FIT_KEY}'{' (updated)' if updated else ''} at frame {frame}"


# -- rig pose ---------------------------------------------------------------------------------
def key_fit_pose(obj, rig: BoneRig, frame: int, size: float) -> str:
    """Key the one-frame ``rig`` (the fit, in the object's space) as the pose of the object's
    NeuROK rig at ``frame``, reusing a matching rig or making one (module docstring); ``size``:
    the object's size (m), for the heads' tolerance. Returns what was keyed, for the report."""
    placement = np.array(obj.matrix_world, dtype=np.float64)  # (4, 4)
    arm, names = matching_rig(obj, rig, placement, size)
    results = obj.neurok.results
    made, earlier = arm is None, None
    if made:
        replaced = {"SHAPE_KEYS": "shape keys", "POINT_CACHE": "point cache", "RIG": "rig"}
        earlier = replaced.get(results.mode)
        clear_results(obj)
        arm, names = add_rig(obj, rig, np.eye(4), placement)
        results.frame_start, results.frame_count = frame, 1
    engine_from_rig = np.linalg.inv(placement) @ np.array(arm.matrix_world, dtype=np.float64)
    quats, locations = pose_channels(arm, names, rig, engine_from_rig)  # (1, B, 4), (1, B, 3)
    key_pose(arm, names, quats[0], locations[0], frame)
    if not made:  # the recorded range now covers the keyed frame
        last = max(results.frame_start + results.frame_count - 1, frame)
        results.frame_start = min(results.frame_start, frame)
        results.frame_count = last - results.frame_start + 1
    what = f"as the pose of '{arm.name}' ({len(names)} bones) at frame {frame}"
    if earlier:
        what += f", in place of its earlier NeuROK {earlier}"
    return what


def matching_rig(obj, rig: BoneRig, placement: np.ndarray, size: float):
    """(armature, bone names in the rig's order) of the object's NeuROK rig when it can play
    ``rig``'s pose exactly, else (None, None)."""
    results = obj.neurok.results
    arm = results.rig_object
    if results.mode != "RIG" or arm is None or arm.type != "ARMATURE":
        return None, None
    modifier = obj.modifiers.get(results.modifier_name) if results.modifier_name else None
    if (
        modifier is None
        or modifier.type != "ARMATURE"
        or modifier.object != arm
        or modifier.use_deform_preserve_volume != (rig.blend == "dqs")
    ):
        return None, None
    names = _bone_names(arm)
    if names is None or len(names) != rig.num_bones:
        return None, None
    engine_from_rig = np.linalg.inv(placement) @ np.array(arm.matrix_world, dtype=np.float64)
    if not _is_similarity(engine_from_rig):
        return None, None
    heads = np.array([arm.data.bones[n].head_local for n in names], dtype=np.float64)  # (B, 3)
    heads = heads @ engine_from_rig[:3, :3].T + engine_from_rig[:3, 3]
    if np.abs(heads - rig.heads).max() > HEAD_TOLERANCE * max(size, 1e-9):
        return None, None
    if not _weights_match(obj, names, rig):
        return None, None
    return arm, names


def key_pose(arm, names: list[str], quats: np.ndarray, locations: np.ndarray, frame: int):
    """Set each pose bone's rotation_quaternion (B, 4) and location (B, 3) and key them at
    ``frame`` in the armature's action (made when it has none), each quaternion on the
    hemisphere of what its curves held there, so the keys around it blend the short way."""
    anim = arm.animation_data or arm.animation_data_create()
    if anim.action is None:
        anim.action = bpy.data.actions.new(f"{arm.name} Action")
    action = anim.action
    for b, name in enumerate(names):
        bone = arm.pose.bones[name]
        curves = {
            path: [
                action.fcurve_ensure_for_datablock(
                    arm, bone.path_from_id(path), index=i, group_name=name
                )
                for i in range(size)
            ]
            for path, size in (("location", 3), ("rotation_quaternion", 4))
        }
        quat = np.asarray(quats[b], dtype=np.float64)
        held = np.array([c.evaluate(frame) for c in curves["rotation_quaternion"]])
        if held @ quat < 0:
            quat = -quat
        for path, values in (("location", locations[b]), ("rotation_quaternion", quat)):
            for fcurve, value in zip(curves[path], values, strict=True):
                fcurve.keyframe_points.insert(frame, float(value))
                fcurve.update()
        bone.location = tuple(locations[b])
        bone.rotation_quaternion = tuple(quat)


def _bone_names(arm) -> list[str] | None:
    """The armature's bones in the engine's order (the number after the last dot), or None
    when some bone is not named so (not a NeuROK rig's)."""
    numbered = []
    for bone in arm.data.bones:
        stem, dot, number = bone.name.rpartition(".")
        if not (dot and stem and number.isdigit()):
            return None
        numbered.append((int(number), bone.name))
    return [name for _, name in sorted(numbered)]


def _is_similarity(matrix: np.ndarray) -> bool:
    """Whether a (4, 4) affine map is a rotation, a uniform scale and a translation."""
    m = np.asarray(matrix, dtype=np.float64)[:3, :3]
    scale = float(np.linalg.norm(m[:, 0]))
    if not scale > 0:
        return False
    r = m / scale
    return bool(np.abs(r.T @ r - np.eye(3)).max() < FRAME_TOLERANCE and np.linalg.det(r) > 0)


def _weights_match(obj, names: list[str], rig: BoneRig) -> bool:
    """Whether the vertex groups ``names`` hold the rig's weights (as the rig bake writes
    them: in steps of 1 / WEIGHT_STEPS, zeros left out)."""
    bone_of = {obj.vertex_groups[n].index: b for b, n in enumerate(names) if n in obj.vertex_groups}
    found = [
        (v.index, bone_of[g.group], round(g.weight * WEIGHT_STEPS))
        for v in obj.data.vertices
        for g in v.groups
        if g.group in bone_of and g.weight > 0
    ]
    steps = np.round(np.asarray(rig.vertex_weights, dtype=np.float64) * WEIGHT_STEPS)  # (N, K)
    rows = np.repeat(np.arange(steps.shape[0]), steps.shape[1])
    keep = steps.ravel() > 0
    wanted = np.stack([rows, np.asarray(rig.vertex_bones).ravel(), steps.ravel()], 1)[keep]
    got = np.array(found, dtype=np.float64).reshape(-1, 3)
    if len(got) != len(wanted):
        return False
    order = np.lexsort(got.T[::-1])
    return bool(np.array_equal(got[order], wanted[np.lexsort(wanted.T[::-1])]))
