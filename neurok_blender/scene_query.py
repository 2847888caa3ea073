# SPDX-License-Identifier: GPL-3.0-or-later
"""Which object the add-on works on, and its conditions (the Empties parented to it)."""

from __future__ import annotations

import bpy

KIND_LABELS = {"FORCE": "Force", "DRAG": "Drag", "VELOCITY": "Velocity"}
KIND_ICONS = {"FORCE": "FORCE_FORCE", "DRAG": "VIEW_PAN", "VELOCITY": "FORCE_WIND"}


def is_condition(obj: bpy.types.Object | None) -> bool:
    """True for an Empty that stands for a NeuROK condition."""
    return obj is not None and obj.type == "EMPTY" and obj.neurok.condition.kind != "NONE"


def simulated_object(context) -> bpy.types.Object | None:
    """The active object, or the object a selected condition belongs to."""
    obj = context.active_object
    if is_condition(obj) and obj.parent is not None:
        return obj.parent
    return obj


def conditions_of(obj: bpy.types.Object | None) -> list[bpy.types.Object]:
    """The condition Empties parented to ``obj``, by name."""
    if obj is None:
        return []
    return sorted((c for c in obj.children if is_condition(c)), key=lambda c: c.name)


def frame_range(scene: bpy.types.Scene) -> tuple[int, int]:
    """(first, last) scene frame simulated: the preview range when it is on, else the scene's."""
    if scene.use_preview_range:
        return scene.frame_preview_start, scene.frame_preview_end
    return scene.frame_start, scene.frame_end


def scene_fps(scene: bpy.types.Scene) -> float:
    return scene.render.fps / scene.render.fps_base
