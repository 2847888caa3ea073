# SPDX-License-Identifier: GPL-3.0-or-later
"""The "NeuROK" sidebar tab: engine status, conditions, physics, output and Simulate, and Fit
to Target."""

from __future__ import annotations

from collections import Counter

import bpy

from .. import live_preview
from ..bake import mesh_sharers, results_owner
from ..bake_mode import BIG_MESH, resolved_bake_mode
from ..core import short_warning
from ..engine import registry
from ..gather import deforming_modifiers, moving_selection
from ..operators.engine import warm_up_once
from ..preferences import engine_settings
from ..properties.structure import AXIS_TYPES
from ..scene_query import KIND_ICONS, conditions_of, frame_range, scene_fps, simulated_object
from ..structure_data import has_structure
from .progress import draw_job
from .status import engine_status_line


def _target(context):
    obj = simulated_object(context)
    return obj if obj is not None and obj.type == "MESH" else None


class _NeuROKPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "NeuROK"


class _ObjectPanel(_NeuROKPanel):
    """A sub-panel of the main one, shown only when there is a mesh to work on."""

    bl_parent_id = "NEUROK_PT_main"

    @classmethod
    def poll(cls, context):
        return _target(context) is not None


class NEUROK_PT_main(_NeuROKPanel, bpy.types.Panel):
    bl_label = "NeuROK"

    def draw(self, context):
        layout = self.layout
        self.draw_engine(layout)
        obj = _target(context)
        if obj is None:
            layout.label(text="Select a mesh object to simulate", icon="INFO")
        else:
            layout.label(text=obj.name, icon="OBJECT_DATA")
            warm_up_once()  # so that the engine is ready when Simulate is clicked

    @staticmethod
    def draw_engine(layout):
        if draw_job(layout, registry.PROBE) or draw_job(layout, registry.INSTALL):
            return
        icon, text = engine_status_line()
        row = layout.row(align=True)
        row.label(text=f"Engine: {text}", icon=icon)
        row.operator("neurok.check_engine", text="", icon="FILE_REFRESH")


class NEUROK_PT_conditions(_ObjectPanel, bpy.types.Panel):
    bl_label = "Conditions"

    def draw(self, context):
        layout = self.layout
        obj = _target(context)
        row = layout.row(align=True)
        row.operator("neurok.add_force", text="Force", icon="FORCE_FORCE")
        row.operator("neurok.add_drag", text="Drag", icon="VIEW_PAN")
        row.operator("neurok.add_velocity", text="Velocity", icon="FORCE_WIND")
        conditions = conditions_of(obj)
        if not conditions:
            layout.label(text="No conditions: gravity only")
        box = layout.column(align=True)
        for empty in conditions:
            self.draw_row(box, context, empty)
        active = context.active_object
        if active in conditions:
            self.draw_details(layout.box(), active)
        layout.prop(context.scene.neurok, "show_gizmos")

    @staticmethod
    def draw_row(layout, context, empty):
        cond = empty.neurok.condition
        row = layout.row(align=True)
        op = row.operator(
            "neurok.select_condition",
            text=empty.name,
            icon=KIND_ICONS[cond.kind],
            depress=empty == context.active_object,
        )
        op.name = empty.name
        if cond.kind == "FORCE":
            row.prop(cond, "strength", text="")
        elif cond.kind == "VELOCITY":
            row.prop(cond, "speed", text="")
        else:
            row.prop(cond, "frame", text="")
        row.operator("neurok.remove_condition", text="", icon="X").name = empty.name

    @staticmethod
    def draw_details(layout, empty):
        cond = empty.neurok.condition
        layout.use_property_split = True
        layout.label(text=empty.name, icon=KIND_ICONS[cond.kind])
        if cond.kind == "FORCE":
            layout.prop(cond, "strength")
            layout.prop(cond, "use_frame_range")
            sub = layout.column(align=True)
            sub.active = cond.use_frame_range
            sub.prop(cond, "frame_start")
            sub.prop(cond, "frame_end")
        elif cond.kind == "VELOCITY":
            layout.prop(cond, "speed")
            layout.prop(cond, "whole_object")
        else:
            layout.prop(cond, "frame")
            layout.label(text="Move the handle (G) to the target", icon="INFO")


class NEUROK_PT_physics(_ObjectPanel, bpy.types.Panel):
    bl_label = "Physics"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = _target(context)
        physics = obj.neurok.physics
        layout.operator_menu_enum(
            "neurok.apply_solid_preset", "material", text="Solid Preset", icon="PRESET"
        )
        layout.prop(physics, "mass")
        layout.prop(physics, "stiffness", text="Stiffness (Hz)")
        layout.prop(physics, "damping")
        layout.prop(physics, "cloth_material")
        layout.prop(physics, "cloth_self_collision")
        row = layout.row(heading="Gravity")
        row.prop(physics, "use_gravity", text="")
        scene = context.scene
        sub = row.row()
        sub.active = physics.use_gravity and scene.use_gravity
        g = scene.gravity if scene.use_gravity else (0.0, 0.0, 0.0)
        sub.label(text=f"scene: {g[0]:.2f}, {g[1]:.2f}, {g[2]:.2f} m/s²")
        layout.prop_search(physics, "pin_group", obj, "vertex_groups", text="Pin Group")
        layout.prop(physics, "dynamics")


class NEUROK_PT_structure(_ObjectPanel, bpy.types.Panel):
    """What moves how: the parts and joints Find Structure found, each joint's type editable."""

    bl_label = "Structure"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        obj = _target(context)
        structure = obj.neurok.structure
        if draw_job(layout, registry.STRUCTURE):
            return
        row = layout.row(align=True)
        row.operator("neurok.find_structure", icon="MOD_BUILD")
        row.operator("neurok.clear_structure", text="", icon="TRASH")
        if not has_structure(structure):
            layout.label(text="None found: Simulate uses the geometry's joints", icon="INFO")
            return
        row = layout.row(align=True)
        row.prop(structure, "use")
        row.prop(structure, "show", text="", icon="HIDE_OFF" if structure.show else "HIDE_ON")
        if structure.vertex_count != len(obj.data.vertices):
            layout.label(text="Found on another mesh: find it again", icon="ERROR")
        kinds = ", ".join(
            f"{n} {k}" for k, n in sorted(Counter(p.kind for p in structure.parts).items())
        )
        layout.label(text=f"{len(structure.parts)} parts: {kinds}")
        for k, part in enumerate(structure.parts):
            self.draw_part(layout, k, part)
        for k, joint in enumerate(structure.joints):
            self.draw_joint(layout, k, joint)

    @staticmethod
    def draw_part(layout, index: int, part):
        row = layout.row(align=True)
        row.label(text=f"Part {index}: {part.vertex_count:,} vertices")
        row.prop(part, "kind_choice", text="")
        if part.found_kind and part.kind != part.found_kind:
            row.label(text="", icon="MODIFIER")  # the artist's, not the geometry's

    @staticmethod
    def draw_joint(layout, index: int, joint):
        box = layout.box()
        other = "World" if joint.part_b < 0 else f"Part {joint.part_b}"
        row = box.row(align=True)
        row.label(text=f"{index + 1}. Part {joint.part_a} - {other}")
        row.prop(joint, "type", text="")
        if joint.type in AXIS_TYPES:
            box.prop(joint, "axis")
        found = f"found: {joint.found_type}, confidence {joint.confidence:.2f}"
        box.label(text=found, icon="INFO" if joint.type == joint.found_type else "MODIFIER")


class NEUROK_PT_collision(_ObjectPanel, bpy.types.Panel):
    bl_label = "Collision"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        physics = _target(context).neurok.physics
        row = layout.row(heading="Ground")
        row.prop(physics, "use_ground", text="")
        sub = layout.column()
        sub.active = physics.use_ground
        sub.prop(physics, "ground_at_lowest")
        height = sub.row()
        height.active = physics.use_ground and not physics.ground_at_lowest
        height.prop(physics, "ground_height")
        layout.prop(physics, "role")
        layout.prop(physics, "collider_source")
        if physics.collider_source == "COLLECTION":
            layout.prop(physics, "collider_collection")
        layout.prop(physics, "friction")
        layout.prop(physics, "bounciness")


class NEUROK_PT_output(_ObjectPanel, bpy.types.Panel):
    bl_label = "Output"

    def draw(self, context):
        layout = self.layout
        obj = _target(context)
        scene = context.scene
        first, last = frame_range(scene)
        source = "preview range" if scene.use_preview_range else "scene"
        layout.label(
            text=f"Frames {first}-{last} at {scene_fps(scene):g} fps ({source})", icon="TIME"
        )
        layout.prop(obj.neurok.output, "bake_mode", expand=True)
        mode = resolved_bake_mode(obj, engine_settings(context).checkpoint)
        if obj.neurok.output.bake_mode == "AUTO":
            what = {"RIG": "a rig", "SHAPE_KEYS": "shape keys"}.get(mode, "a point cache")
            layout.label(text=f"Automatic: bakes as {what}", icon="INFO")
        big = len(obj.data.vertices) > BIG_MESH
        if big and mode == "SHAPE_KEYS":
            layout.label(text="Big mesh: a point cache is faster and smaller", icon="INFO")
        if deforming_modifiers(obj):
            layout.label(text="Deformed by modifiers: simulates the rest shape", icon="ERROR")
        sharers = mesh_sharers(obj)
        if sharers and mode == "SHAPE_KEYS":
            layout.label(
                text=f"Mesh shared with {len(sharers)} other object(s): bake as a point cache"
                " or make it single-user",
                icon="ERROR",
            )
        if not draw_job(layout, registry.SIMULATE):
            together = moving_selection(context, obj)
            if len(together) > 1:  # what Simulate will move: the selected meshes that move
                layout.label(text=f"Moves {len(together)} selected objects together", icon="INFO")
            row = layout.row()
            row.scale_y = 1.5
            row.operator("neurok.simulate", icon="PLAY")
        self.draw_preview(layout, context)
        self.draw_results(layout, obj)

    @staticmethod
    def draw_preview(layout, context):
        on = live_preview.active()
        row = layout.row(align=True)
        row.operator("neurok.live_preview", icon="HIDE_OFF" if on else "HIDE_ON", depress=on)
        row.prop(context.scene.neurok, "preview_frames", text="Frames")
        if on:
            layout.label(text=f"Preview: {live_preview.status()}", icon="TIME")

    @staticmethod
    def draw_results(layout, obj):
        owner = results_owner(obj)
        if owner is None:
            return
        results = owner.neurok.results
        row = layout.row(align=True)
        what = {"SHAPE_KEYS": "shape keys", "RIG": "a rig"}.get(results.mode, "point cache")
        frames = f"{results.frame_count} frame{'' if results.frame_count == 1 else 's'}"
        row.label(text=f"Baked {frames} as {what}", icon="CHECKMARK")
        row.operator("neurok.clear_results", text="Clear", icon="TRASH")
        doubt = short_warning(
            results.dynamics == "rig",
            results.frame_count,
            results.frames_on_barrier,
            results.edge_strain,
            results.penetration,
        )
        if doubt:
            layout.label(text=doubt, icon="ERROR")


class NEUROK_PT_fit(_ObjectPanel, bpy.types.Panel):
    bl_label = "Fit to Target"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        settings = _target(context).neurok
        layout.prop(settings, "fit_target")
        layout.prop(settings, "fit_key_as", expand=True)
        if not draw_job(layout, registry.FIT):
            layout.operator("neurok.fit_to_target", icon="MOD_SHRINKWRAP")
