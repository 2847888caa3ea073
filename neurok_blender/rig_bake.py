# SPDX-License-Identifier: GPL-3.0-or-later
"""Bake the engine's rig (a model with bones) as an ordinary, editable Blender armature.

The engine's rig (``neurok_core.rig``, design section 5) gives B bones with their centres, each
bone's rigid motion per frame in world space (x -> R x + t) and each vertex's four heaviest
bones with their weights; it moves the vertices by dual-quaternion skinning. In Blender that is:

- an Armature object with the mesh's world transform at simulation time, one root bone per
  engine bone (head at its centre, pointing along the object's +Z, in one bone collection);
- on the mesh, one vertex group per bone holding its weights, and an Armature modifier with
  Preserve Volume (Blender's dual-quaternion skinning) at the top of the stack;
- an action of the armature's own with the pose bones' location and rotation keyed on every
  frame (linear), so the timeline plays it and the Graph Editor edits it.

Pose of bone b at frame f: with the mesh's world transform W (x_w = s Rw x + tw, uniform scale
s), the engine's world motion (R, t) is, in the mesh's (= the armature's) space,
L: x -> Rw^T R Rw x + Rw^T (R tw + t - tw) / s; Blender deforms by pose @ rest^-1 = rest @ basis
@ rest^-1 with rest: x -> Rb x + h (the bone's rest matrix), so the basis is the rotation
Rb^T R_L Rb and the location Rb^T (R_L h + t_L - h).

Everything added is recorded in ``obj.neurok.results`` (the armature, the modifier, the vertex
groups); Clear removes exactly that. Names never take over the user's: when a vertex group of
the mesh, or a bone of an armature already deforming it, is named like ours, the bones get the
next free prefix ("NeuROK_2.000", ...). Fit to Target (``fit_bake``) makes its rig with the
same ``add_rig`` and keys single poses into it through ``pose_channels``.
"""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Matrix

from .core import BoneRig, quat_from_matrix, quat_mul, quat_to_matrix, quats_from_matrices

RIG_MODIFIER = "NeuROK Rig"
BONE_PREFIX = "NeuROK"
BONE_COLLECTION = "NeuROK"
WEIGHT_STEPS = 2048  # vertex weights are written in steps of 1 / WEIGHT_STEPS (few add calls)
SCALE_TOLERANCE = 1e-4  # relative spread of the axis scales a rig accepts (uniform scale)


class RigError(Exception):
    """The rig cannot be baked onto this object; the message says why."""


def load_rig(path, count: int, num_vertices: int) -> BoneRig:
    """Read the engine's rig file (``BoneRig.arrays``), checked against the mesh and frames."""
    try:
        with np.load(path, allow_pickle=False) as data:
            rig = BoneRig.from_arrays(data)
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"the engine's rig file is not readable ({exc})") from exc
    if rig is None:
        raise ValueError("the engine's rig file holds no rig")
    nb = rig.num_bones
    if (
        rig.heads.shape != (nb, 3)
        or rig.rotations.shape[1:] != (nb, 4)
        or rig.translations.shape[1:] != (nb, 3)
        or rig.num_frames < count
        or rig.vertex_bones.shape[0] != num_vertices
        or rig.vertex_weights.shape != rig.vertex_bones.shape
    ):
        raise ValueError("the engine returned a rig that does not match the mesh or the frames")
    if not all(np.isfinite(a).all() for a in (rig.heads, rig.rotations, rig.translations)):
        raise ValueError("the engine returned a rig with NaN or infinite transforms")
    rig.rotations, rig.translations = rig.rotations[:count], rig.translations[:count]
    return rig


def check_rig_transform(obj, matrix_world: np.ndarray) -> None:
    """A bone's pose is a rotation and a location: refused when the object's transform scales
    its axes unequally (a rigid motion in world space would be sheared in the mesh's space)."""
    scales = np.linalg.norm(np.asarray(matrix_world, dtype=np.float64)[:3, :3], axis=0)
    if scales.max() - scales.min() > SCALE_TOLERANCE * scales.max():
        axes = ", ".join(f"{s:.3g}" for s in scales)
        raise RigError(
            f"'{obj.name}' is scaled unequally along its axes ({axes}):"
            " a rig cannot follow it. Apply the scale (Object > Apply > Scale) or bake as shape"
            " keys or a point cache"
        )


def bake_rig(obj, rig: BoneRig, frame_start: int, matrix_world: np.ndarray) -> int:
    """Add the armature, its action, the vertex groups and the modifier; returns the bones."""
    check_rig_transform(obj, matrix_world)
    arm, names = add_rig(obj, rig, matrix_world, matrix_world)
    quats, locations = pose_channels(arm, names, rig, matrix_world)  # (T, B, 4), (T, B, 3)
    _keyframes(arm, names, quats, locations, frame_start)
    results = obj.neurok.results
    results.frame_start = frame_start
    results.frame_count = len(quats)
    return rig.num_bones


def add_rig(obj, rig: BoneRig, engine_from_rig: np.ndarray, placement: np.ndarray):
    """The armature object at ``placement`` (4, 4) with one bone per engine bone, the vertex
    groups and the Armature modifier, all recorded in ``obj.neurok.results`` (mode "RIG");
    (armature, bone names). ``engine_from_rig`` (4, 4), a rotation, uniform scale and
    translation: from the armature's space to the frame of the engine's rig (for Simulate the
    object's world transform at simulation time, which is also the placement)."""
    results = obj.neurok.results
    nb = rig.num_bones
    prefix = _free_prefix(obj, nb)
    names = [f"{prefix}.{b:03d}" for b in range(nb)]
    rw, tw, scale = _similarity(engine_from_rig)
    heads = (rig.heads - tw) @ rw / scale  # (B, 3) in the armature's (the mesh's) space
    arm = _armature(obj, names, heads, np.asarray(placement, dtype=np.float64))
    results.rig_object = arm
    used = _vertex_groups(obj, names, rig.vertex_bones, rig.vertex_weights)
    for name in used:
        results.rig_groups.add().name = name
    modifier = obj.modifiers.new(name=RIG_MODIFIER, type="ARMATURE")
    modifier.object = arm
    # dual-quaternion skinning is Preserve Volume; a rig-space run blends its bones linearly
    modifier.use_deform_preserve_volume = rig.blend == "dqs"
    modifier.use_vertex_groups = True
    modifier.use_bone_envelopes = False
    obj.modifiers.move(len(obj.modifiers) - 1, 0)  # the rest mesh moves first, then the stack
    results.mode = "RIG"
    results.modifier_name = modifier.name
    return arm, names


def pose_channels(arm, names: list[str], rig: BoneRig, engine_from_rig: np.ndarray):
    """The pose bones' rotation_quaternion (T, B, 4) and location (T, B, 3) that play the
    rig's motion on the armature ``arm`` (bones ``names``, in the rig's order);
    ``engine_from_rig`` as in :func:`add_rig`."""
    rw, tw, scale = _similarity(engine_from_rig)
    rest = [np.array(arm.data.bones[n].matrix_local, dtype=np.float64) for n in names]
    return _pose_channels(rig, rw, tw, scale, np.stack(rest))  # rest: (B, 4, 4)


def clear_rig(obj) -> int:
    """Remove the recorded armature (with its data and action when nothing else uses them),
    its modifier and its vertex groups; returns how many of those went."""
    results = obj.neurok.results
    removed = 0
    arm = results.rig_object
    modifier = obj.modifiers.get(results.modifier_name) if results.modifier_name else None
    if modifier is not None and modifier.type == "ARMATURE":
        obj.modifiers.remove(modifier)
        removed += 1
    for item in results.rig_groups:
        group = obj.vertex_groups.get(item.name)
        if group is not None:
            obj.vertex_groups.remove(group)
            removed += 1
    if arm is not None:
        data = arm.data
        action = arm.animation_data.action if arm.animation_data else None
        bpy.data.objects.remove(arm, do_unlink=True)
        removed += 1
        if data is not None and data.users == 0:
            bpy.data.armatures.remove(data)
        if action is not None and action.users == 0:
            bpy.data.actions.remove(action)
    results.rig_object = None
    results.rig_groups.clear()
    results.modifier_name = ""
    return removed


# -- parts ------------------------------------------------------------------------------------
def _free_prefix(obj, count: int) -> str:
    """The first of NeuROK, NeuROK_2, ... none of whose bone names is a vertex group of ``obj``
    or a bone of an armature already deforming it."""
    taken = {g.name for g in obj.vertex_groups}
    for modifier in obj.modifiers:
        if modifier.type == "ARMATURE" and modifier.object is not None:
            taken |= {b.name for b in modifier.object.data.bones}
    for n in range(1, 1000):
        prefix = BONE_PREFIX if n == 1 else f"{BONE_PREFIX}_{n}"
        if not any(f"{prefix}.{b:03d}" in taken for b in range(count)):
            return prefix
    raise RigError(f"'{obj.name}' already has vertex groups for a thousand NeuROK rigs")


def _bone_length(heads: np.ndarray) -> float:
    """Half the median distance from a bone's head to its nearest neighbour's (readable, never
    overlapping much), at least a thousandth of the heads' extent."""
    extent = float(np.ptp(heads, axis=0).max()) if len(heads) > 1 else 1.0
    if len(heads) < 2:
        return 0.1 * max(extent, 1e-3)
    c = heads - heads.mean(0)
    sq = (c * c).sum(1)
    d2 = sq[:, None] + sq[None] - 2.0 * (c @ c.T)  # (B, B) squared distances
    np.fill_diagonal(d2, np.inf)
    nearest = np.sqrt(np.maximum(d2.min(1), 0.0))
    return max(0.5 * float(np.median(nearest)), 1e-3 * max(extent, 1e-9))


def _armature(obj, names: list[str], heads: np.ndarray, matrix_world: np.ndarray):
    """A new Armature object beside ``obj`` (its collections, its world transform at
    simulation time) with one root bone per head, tails along +Z, in one bone collection."""
    data = bpy.data.armatures.new(f"{obj.name} NeuROK Rig")
    arm = bpy.data.objects.new(f"{obj.name} NeuROK Rig", data)
    collections = list(obj.users_collection) or [bpy.context.scene.collection]
    for collection in collections:
        collection.objects.link(arm)
    arm.matrix_world = Matrix(matrix_world.tolist())
    length = _bone_length(heads)
    view_layer = bpy.context.view_layer
    active = view_layer.objects.active
    selected = [o for o in view_layer.objects if o.select_get()]
    for o in selected:
        o.select_set(False)
    view_layer.objects.active = arm
    arm.select_set(True)
    try:
        bpy.ops.object.mode_set(mode="EDIT")
        bones = data.collections.new(BONE_COLLECTION)
        for name, head in zip(names, heads, strict=True):
            bone = data.edit_bones.new(name)
            bone.head = tuple(head)
            bone.tail = (head[0], head[1], head[2] + length)
            bone.roll = 0.0
            bone.use_deform = True
            bones.assign(bone)
        bpy.ops.object.mode_set(mode="OBJECT")
    finally:
        arm.select_set(False)
        for o in selected:
            o.select_set(True)
        view_layer.objects.active = active
    for pose_bone in arm.pose.bones:
        pose_bone.rotation_mode = "QUATERNION"
    return arm


def _similarity(matrix: np.ndarray):
    """(rotation (3, 3), translation (3,), scale) of a (4, 4) rotation-scale-translation."""
    w = np.asarray(matrix, dtype=np.float64)
    scale = float(np.linalg.norm(w[:3, 0]))
    return w[:3, :3] / scale, w[:3, 3], scale


def _pose_channels(rig, rw, tw, scale, rest):
    """Pose-bone (rotation_quaternion (T, B, 4), location (T, B, 3)) of the engine's world
    motions (module docstring), quaternions kept on one hemisphere from frame to frame."""
    q = rig.rotations  # (T, B, 4) world rotations
    t = rig.translations  # (T, B, 3)
    qw = quat_from_matrix(rw)  # (4,)
    conj = np.array([1.0, -1.0, -1.0, -1.0])
    q_local = quat_mul(quat_mul(qw * conj, q), qw)  # Rw^T R Rw, (T, B, 4)
    r_world = quat_to_matrix(q)  # (T, B, 3, 3)
    t_local = np.einsum("ij,tbj->tbi", rw.T, np.einsum("tbij,j->tbi", r_world, tw) + t - tw) / scale
    rb = rest[:, :3, :3]  # (B, 3, 3)
    h = rest[:, :3, 3]  # (B, 3)
    qb = quats_from_matrices(rb)  # (B, 4)
    quats = quat_mul(quat_mul(qb * conj, q_local), qb)  # Rb^T R_L Rb
    r_local = quat_to_matrix(q_local)  # (T, B, 3, 3)
    moved = np.einsum("tbij,bj->tbi", r_local, h) + t_local - h  # (T, B, 3)
    locations = np.einsum("bji,tbj->tbi", rb, moved)  # Rb^T (...)
    flip = np.cumprod(np.where((quats[1:] * quats[:-1]).sum(-1) < 0, -1.0, 1.0), axis=0)
    quats[1:] *= flip[..., None]
    return quats, locations


def _keyframes(arm, names, quats, locations, frame_start: int) -> None:
    """Key every pose bone's location and rotation on every frame (linear) in a new action."""
    anim = arm.animation_data_create()
    action = bpy.data.actions.new(f"{arm.name} Action")
    anim.action = action
    linear = bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value
    frames = frame_start + np.arange(len(quats), dtype=np.float64)
    co = np.empty((len(frames), 2))
    co[:, 0] = frames
    interpolation = np.full(len(frames), linear, dtype=np.int32)
    for b, name in enumerate(names):
        bone = arm.pose.bones[name]
        for path, values in (("location", locations[:, b]), ("rotation_quaternion", quats[:, b])):
            data_path = f'pose.bones["{name}"].{path}'
            for i in range(values.shape[1]):
                fcurve = action.fcurve_ensure_for_datablock(
                    arm, data_path, index=i, group_name=name
                )
                points = fcurve.keyframe_points
                points.add(len(frames))
                co[:, 1] = values[:, i]
                points.foreach_set("co", co.ravel())
                points.foreach_set("interpolation", interpolation)
                fcurve.update()
        bone.location = tuple(locations[0, b])
        bone.rotation_quaternion = tuple(quats[0, b])


def _vertex_groups(obj, names, vertex_bones, vertex_weights) -> list[str]:
    """One vertex group per bone that holds any vertex, weights in steps of 1/WEIGHT_STEPS;
    returns the groups' names."""
    used = []
    bones = np.asarray(vertex_bones).ravel()
    weights = np.round(np.asarray(vertex_weights, dtype=np.float64).ravel() * WEIGHT_STEPS)
    rows = np.repeat(np.arange(vertex_bones.shape[0]), vertex_bones.shape[1])
    keep = weights > 0
    bones, weights, rows = bones[keep], weights[keep], rows[keep]
    order = np.lexsort((weights, bones))
    bones, weights, rows = bones[order], weights[order], rows[order]
    starts = np.flatnonzero(np.r_[True, (bones[1:] != bones[:-1]) | (weights[1:] != weights[:-1])])
    ends = np.r_[starts[1:], len(bones)]
    groups = {}
    for s, e in zip(starts, ends, strict=True):
        b = int(bones[s])
        group = groups.get(b)
        if group is None:
            group = groups[b] = obj.vertex_groups.new(name=names[b])
            used.append(group.name)
        group.add(rows[s:e].tolist(), float(weights[s]) / WEIGHT_STEPS, "REPLACE")
    return used
