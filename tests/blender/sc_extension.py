"""Scenarios: registration, conditions and gizmos, request gathering, refusals."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import bpy
import numpy as np
from bl_helpers import (
    PACKAGE,
    activate,
    add_grid,
    addon,
    attempt_simulate,
    call,
    empty_scene,
    gizmo_group_registered,
    op_exists,
    prefs,
    scenario,
    write_script,
)


@scenario
def register_cycle(params) -> dict:
    """Disable and enable the installed add-on twice; the package lives under bl_ext."""
    import addon_utils

    out = {"cycles": []}
    for _ in range(2):
        addon_utils.disable(PACKAGE, default_set=True)
        gone = {
            "op": hasattr(bpy.ops.neurok, "simulate") and op_exists("neurok.simulate"),
            "object_prop": hasattr(bpy.types.Object, "neurok"),
            "panel": hasattr(bpy.types, "NEUROK_PT_main"),
            "gizmo_group": gizmo_group_registered(),
        }
        addon_utils.enable(PACKAGE, default_set=True)
        back = {
            "op": op_exists("neurok.simulate"),
            "object_prop": hasattr(bpy.types.Object, "neurok"),
            "scene_prop": hasattr(bpy.types.Scene, "neurok"),
            "panel": hasattr(bpy.types, "NEUROK_PT_main"),
            "gizmo_group": gizmo_group_registered(),
            "prefs": PACKAGE in bpy.context.preferences.addons
            and prefs() is not None
            and prefs().bl_rna.identifier == "NeuROKPreferences",
        }
        out["cycles"].append({"disabled": gone, "enabled": back})
    mods = sorted(m for m in sys.modules if "neurok" in m and not m.startswith("__editable"))
    out["modules"] = mods
    out["top_level_neurok"] = [m for m in mods if m.split(".")[0] in ("neurok_blender",)]
    out["torch_loaded"] = "torch" in sys.modules
    paths = addon("neurok_blender.paths")
    out["user_dir"] = str(paths.user_dir("deps"))
    out["addon_package"] = paths.ADDON_PACKAGE
    out["extension_root_has_core"] = (
        Path(addon("neurok_blender.engine.command").EXTENSION_ROOT) / "neurok_core" / "worker.py"
    ).is_file()
    return out


@scenario
def conditions(params) -> dict:
    """Add force/drag/velocity at the cursor and at the active vertex; gizmos; select; remove."""
    import bmesh
    from mathutils import Vector

    empty_scene()
    obj = add_grid("Sheet", 4, 4, 2.0)
    obj.rotation_euler = (0.3, 0.0, 0.5)
    obj.location = (1.0, 2.0, 3.0)
    bpy.context.view_layer.update()
    out = {}
    # 3D cursor a bit above the sheet's centre: the force snaps to the surface below it
    bpy.context.scene.cursor.location = obj.matrix_world @ Vector((0.1, 0.2, 0.5))
    out["add_force"] = call(bpy.ops.neurok.add_force)
    force = bpy.context.active_object
    bpy.context.view_layer.update()
    local = obj.matrix_world.inverted() @ force.matrix_world.translation
    normal = (obj.matrix_world.to_3x3() @ Vector((0, 0, 1))).normalized()
    out["force"] = {
        "name": force.name,
        "parent": force.parent.name if force.parent else None,
        "display": force.empty_display_type,
        "kind": force.neurok.condition.kind,
        "local": list(local),
        "z_dot_normal": float(force.matrix_world.to_3x3().col[2].normalized().dot(normal)),
        "anchor_vertex": force.neurok.condition.anchor_vertex,
        "selected": sorted(o.name for o in bpy.context.selected_objects),
    }
    # the panel target stays the sheet while its force is active; the gizmos follow
    gizmos = addon("neurok_blender.gizmos")
    scene_query = addon("neurok_blender.scene_query")
    out["target_with_force_active"] = scene_query.simulated_object(bpy.context).name
    # edit mode: at the active vertex
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(obj.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[5].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[5])
    out["add_drag_edit"] = call(bpy.ops.neurok.add_drag)
    out["add_velocity_edit"] = call(bpy.ops.neurok.add_velocity)
    bpy.ops.object.mode_set(mode="OBJECT")
    conds = scene_query.conditions_of(obj)
    drag = next(c for c in conds if c.neurok.condition.kind == "DRAG")
    vel = next(c for c in conds if c.neurok.condition.kind == "VELOCITY")
    bpy.context.view_layer.update()
    v5 = obj.matrix_world @ obj.data.vertices[5].co
    out["drag"] = {
        "anchor_vertex": drag.neurok.condition.anchor_vertex,
        "at_vertex": float((drag.matrix_world.translation - v5).length),
        "frame": drag.neurok.condition.frame,
        "display": drag.empty_display_type,
    }
    out["velocity"] = {"anchor_vertex": vel.neurok.condition.anchor_vertex}
    out["conditions"] = [c.name for c in conds]
    # gizmos: one per condition, bound to strength / speed / location
    activate(obj)
    group = bpy.types.GizmoGroup.bl_rna_get_subclass_py("NEUROK_GGT_conditions")
    out["gizmo_poll_active"] = bool(group.poll(bpy.context))
    force.neurok.condition.strength = 42.0
    specs = gizmos.gizmo_specs(bpy.context)
    out["gizmos"] = [
        {
            "empty": s.key[0],
            "type": s.gizmo_type,
            "prop": s.prop,
            "value": float(getattr(s.data, s.prop))
            if s.prop != "location"
            else list(getattr(s.data, s.prop)),
            "data_is_condition": s.data == bpy.data.objects[s.key[0]].neurok.condition,
            "origin_error": float(
                (s.matrix.translation - bpy.data.objects[s.key[0]].matrix_world.translation).length
            )
            if s.gizmo_type == "GIZMO_GT_arrow_3d"
            else float(
                (
                    (s.matrix @ bpy.data.objects[s.key[0]].location)
                    - bpy.data.objects[s.key[0]].matrix_world.translation
                ).length
            ),
        }
        for s in specs
    ]
    # moving the empty moves its gizmo
    force.location.x += 0.25
    bpy.context.view_layer.update()
    moved = next(s for s in gizmos.gizmo_specs(bpy.context) if s.key[0] == force.name)
    out["gizmo_follows"] = float((moved.matrix.translation - force.matrix_world.translation).length)
    # another active object: no gizmos
    bpy.ops.mesh.primitive_cube_add(location=(5, 5, 5))
    out["gizmo_poll_other"] = bool(group.poll(bpy.context))
    out["specs_other"] = len(gizmos.gizmo_specs(bpy.context))
    other = bpy.context.active_object
    # select a condition from the list, then remove it
    out["select"] = call(bpy.ops.neurok.select_condition, name=drag.name)
    out["active_after_select"] = bpy.context.view_layer.objects.active.name
    out["remove"] = call(bpy.ops.neurok.remove_condition, name=drag.name)
    out["after_remove"] = [c.name for c in scene_query.conditions_of(obj)]
    out["remove_missing"] = call(bpy.ops.neurok.remove_condition, name="Nope")
    activate(other)
    out["add_force_cube"] = call(bpy.ops.neurok.add_force)
    bpy.ops.object.camera_add()
    out["add_force_camera"] = call(bpy.ops.neurok.add_force)
    return out


@scenario
def gather_world_space(params) -> dict:
    """The request for a parented, rotated, non-uniformly scaled n-gon mesh with every kind of
    condition, a pin group and the scene's gravity and frame range."""
    import bmesh

    empty_scene()
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 11, 30
    scene.render.fps, scene.render.fps_base = 30, 1.001
    scene.gravity = (0.0, 0.0, -5.0)
    bpy.ops.object.empty_add(location=(1, 2, 3), rotation=(0.3, 0.2, 0.1))
    parent = bpy.context.active_object
    parent.scale = (2.0, 1.0, 0.5)
    bpy.ops.mesh.primitive_cylinder_add(vertices=8, end_fill_type="NGON")
    obj = bpy.context.active_object
    obj.parent = parent
    obj.rotation_euler = (0.5, 0.0, 1.0)
    obj.scale = (1.0, 3.0, 0.25)
    group = obj.vertex_groups.new(name="Pin")
    group.add([0, 1, 2, 3], 1.0, "REPLACE")
    group.add([4], 0.3, "REPLACE")
    obj.neurok.physics.pin_group = "Pin"
    obj.neurok.physics.mass = 3.0
    obj.neurok.physics.stiffness = 2.0
    obj.neurok.physics.damping = 0.5
    bpy.context.view_layer.update()
    activate(obj)
    bpy.ops.object.mode_set(mode="EDIT")
    bm = bmesh.from_edit_mesh(obj.data)
    bm.verts.ensure_lookup_table()
    for v in bm.verts:
        v.select = False
    bm.verts[6].select = True
    bm.select_history.clear()
    bm.select_history.add(bm.verts[6])
    bpy.ops.neurok.add_force()
    bpy.ops.object.mode_set(mode="OBJECT")
    scene_query = addon("neurok_blender.scene_query")
    force = scene_query.conditions_of(obj)[0]
    force.neurok.condition.use_frame_range = True
    force.neurok.condition.frame_start, force.neurok.condition.frame_end = 13, 18
    force.neurok.condition.strength = 7.0
    scene.cursor.location = obj.matrix_world @ obj.data.vertices[9].co
    activate(obj)
    bpy.ops.neurok.add_drag()
    drag = bpy.context.active_object
    grabbed = drag.matrix_world.translation.copy()
    drag.location.x += 1.0
    drag.neurok.condition.frame = 16
    activate(obj)
    bpy.ops.neurok.add_velocity()
    vel = bpy.context.active_object
    vel.neurok.condition.whole_object = True
    vel.neurok.condition.speed = 2.0
    activate(obj)
    gather = addon("neurok_blender.gather")
    settings = addon("neurok_blender.preferences").engine_settings(bpy.context)
    got = gather.gather(bpy.context, obj, settings)
    req = got.request
    world = np.array([list(obj.matrix_world @ v.co) for v in obj.data.vertices])
    bpy.context.view_layer.update()
    out = {
        "vertex_error": float(np.abs(req.vertices - world).max()),
        "faces": req.faces.shape,
        "faces_max": int(req.faces.max()),
        "polygons": len(obj.data.polygons),
        "conditions": req.conditions.to_dict(),
        "force_world_z": list(force.matrix_world.to_3x3().col[2].normalized()),
        "drag_target": list(drag.matrix_world.translation),
        "grabbed": list(grabbed),
        "frame_start": got.frame_start,
        "frame_count": got.frame_count,
        "cache_dir": req.cache_dir,
        "dynamics": req.dynamics,
    }
    obj.neurok.physics.dynamics = "latent"
    out["latent_dynamics"] = gather.gather(bpy.context, obj, settings).request.dynamics
    # a checkpoint folder that does not exist: the learned space refuses it, the rig space,
    # which loads no model, goes on
    missing = dataclasses.replace(settings, checkpoint=str(Path(params["tmp"]) / "nowhere"))
    try:
        gather.gather(bpy.context, obj, missing)
        out["latent_missing_checkpoint"] = ""
    except gather.GatherError as exc:
        out["latent_missing_checkpoint"] = str(exc)
    obj.neurok.physics.dynamics = "rig"
    out["rig_missing_checkpoint"] = gather.gather(bpy.context, obj, missing).request.checkpoint
    # a cloth material: the preset's name, in the engine's spelling
    out["default_material"] = gather.gather(bpy.context, obj, settings).request.conditions.material
    obj.neurok.physics.cloth_material = "DENIM"
    out["denim"] = gather.gather(bpy.context, obj, settings).request.conditions.material
    obj.neurok.physics.cloth_material = "NONE"
    out["default_self_collision"] = gather.gather(
        bpy.context, obj, settings
    ).request.conditions.self_collision
    obj.neurok.physics.cloth_self_collision = True
    out["self_collision"] = gather.gather(bpy.context, obj, settings).request.conditions.to_dict()[
        "self_collision"
    ]
    obj.neurok.physics.cloth_self_collision = False
    # the force's Empty moved off its vertex: it then acts at the Empty's point
    force.location.z += 0.3
    bpy.context.view_layer.update()
    moved = gather.gather(bpy.context, obj, settings).request.conditions.forces[0]
    out["moved_force"] = {"vertex": moved.vertex, "point": moved.point}
    out["moved_force_location"] = list(force.matrix_world.translation)
    # no gravity when the scene has it off
    scene.use_gravity = False
    out["gravity_off"] = gather.gather(bpy.context, obj, settings).request.conditions.gravity
    # a posed object: simulated in its rest shape, and the request says so
    out["plain_warnings"] = list(gather.gather(bpy.context, obj, settings).warnings)
    bpy.ops.object.armature_add()
    rig = bpy.context.active_object
    posed = obj.modifiers.new("Pose", "ARMATURE")
    posed.object = rig
    obj.modifiers.new("Smooth It", "SUBSURF")  # not a deforming modifier
    activate(obj)
    out["posed_warnings"] = list(gather.gather(bpy.context, obj, settings).warnings)
    return out


@scenario
def refusals(params) -> dict:
    """What Simulate refuses before any engine starts: each a message, the scene untouched."""
    empty_scene()
    p = prefs()
    # a worker must not even start: point the interpreter at a script that leaves a mark
    mark = Path(params["tmp"]) / "started"
    p.python_path = write_script(Path(params["tmp"]) / "python", f"touch {mark}; exit 1")
    out = {}
    activate(None)
    out["no_active"] = attempt_simulate()
    bpy.ops.object.camera_add()
    out["camera"] = attempt_simulate()
    empty = bpy.data.objects.new("Empty Mesh", bpy.data.meshes.new("Empty Mesh"))
    bpy.context.collection.objects.link(empty)
    activate(empty)
    out["empty_mesh"] = attempt_simulate(empty)
    edges = bpy.data.meshes.new("Edges")
    edges.from_pydata([(0, 0, 0), (1, 0, 0)], [(0, 1)], [])
    wire = bpy.data.objects.new("Wire", edges)
    bpy.context.collection.objects.link(wire)
    activate(wire)
    out["no_faces"] = attempt_simulate(wire)
    sheet = add_grid("Sheet", 6, 4)
    out["over_limit"] = attempt_simulate(sheet, max_vertices=10)
    sheet.neurok.physics.dynamics = "latent"  # the rig space loads no model: no checkpoint
    out["missing_checkpoint"] = attempt_simulate(
        sheet, checkpoint=str(Path(params["tmp"]) / "nowhere")
    )
    sheet.neurok.physics.dynamics = "rig"
    out["missing_python"] = attempt_simulate(sheet, python_path="/nonexistent/bin/python3")
    bpy.ops.object.mode_set(mode="EDIT")
    out["edit_mode"] = attempt_simulate(sheet)
    bpy.ops.object.mode_set(mode="OBJECT")
    scene = bpy.context.scene
    scene.frame_end = 1
    out["one_frame"] = attempt_simulate(sheet)
    scene.frame_end = 12
    sheet.neurok.physics.pin_group = "Missing"
    out["missing_pin_group"] = attempt_simulate(sheet)
    sheet.neurok.physics.pin_group = ""
    bpy.context.scene.cursor.location = (0, 0, 0)
    bpy.ops.neurok.add_drag()
    drag = bpy.context.active_object
    drag.neurok.condition.frame = 40
    activate(sheet)
    out["drag_out_of_range"] = attempt_simulate(sheet)
    drag.neurok.condition.frame = 5
    # a mesh whose coordinates are NaN says so (not that an arrow has zero scale)
    nan_sheet = add_grid("NaN Sheet", 4, 4)
    activate(nan_sheet)
    bpy.context.scene.cursor.location = nan_sheet.matrix_world @ nan_sheet.data.vertices[0].co
    bpy.ops.neurok.add_force()
    for v in nan_sheet.data.vertices:
        v.co = (float("nan"),) * 3
    activate(nan_sheet)
    out["nan_mesh"] = attempt_simulate()  # (its NaN positions never compare equal)
    out["worker_started"] = mark.exists()
    return out
