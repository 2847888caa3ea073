"""Scenario: a two-box laptop simulated in the rig space (Dynamics = Rig Space) and baked by
Automatic, with a real engine process and no model at all."""

from __future__ import annotations

import time

import bmesh
import bpy
import numpy as np
from bl_helpers import activate, addon, attempt_simulate, call, empty_scene, prefs, scenario
from mathutils import Matrix
from sc_rig import _frames
from sc_simulate import _force_at_vertex

BASE = (0.32, 0.22, 0.015)  # a 32 x 22 cm laptop: a 1.5 cm base (the mesh's first vertices)
LID = (0.32, 0.22, 0.007)  # and a 7 mm lid


def _box(size, centre, cuts: int = 3):
    """(V, 3) vertices and the quads of a box with ``cuts`` cuts along each edge."""
    bm = bmesh.new()
    matrix = Matrix.Diagonal((*size, 1.0))
    matrix.translation = centre
    bmesh.ops.create_cube(bm, size=1.0, matrix=matrix)
    bmesh.ops.subdivide_edges(bm, edges=bm.edges[:], cuts=cuts, use_grid_fill=True)
    bm.verts.index_update()
    vertices = np.array([v.co for v in bm.verts], dtype=np.float64)
    faces = [[v.index for v in face.verts] for face in bm.faces]
    bm.free()
    return vertices, faces


def _laptop():
    """The base lying flat and the lid standing upright behind its back edge, the two boxes
    touching along that edge (the hinge, local x through (0, 0.11, 0.015)); the base's
    vertices in the vertex group "Base"."""
    _, by, bz = BASE
    base_v, base_f = _box(BASE, (0.0, 0.0, bz / 2))
    lid_v, lid_f = _box((LID[0], LID[2], LID[1]), (0.0, by / 2 + LID[2] / 2, bz + LID[1] / 2))
    nb = len(base_v)
    mesh = bpy.data.meshes.new("Laptop")
    faces = base_f + [[i + nb for i in f] for f in lid_f]
    mesh.from_pydata(np.concatenate([base_v, lid_v]).tolist(), [], faces)
    mesh.update()
    obj = bpy.data.objects.new("Laptop", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.vertex_groups.new(name="Base").add(list(range(nb)), 1.0, "REPLACE")
    return obj, nb


def _push_lid(obj, nb: int):
    """(arrow, vertex): a 2 N force arrow on the laptop's lid inner face (towards the base),
    pushing for the first 8 frames."""
    local = np.array([v.co for v in obj.data.vertices])
    target = np.array([0.0, BASE[1] / 2, BASE[2] + 0.75 * LID[1]])
    lid = np.arange(nb, len(local))
    pushed = int(lid[np.argmin(np.linalg.norm(local[lid] - target, axis=1))])
    activate(obj)
    arrow = _force_at_vertex(obj, pushed, 2.0)
    arrow.neurok.condition.use_frame_range = True
    arrow.neurok.condition.frame_start, arrow.neurok.condition.frame_end = 1, 9
    return arrow, pushed


def _bake(mode: str, out: dict, tag: str) -> np.ndarray:
    """Simulate the laptop baked as ``mode``; its playback in world space, (T, N, 3)."""
    obj = bpy.data.objects["Laptop"]  # undo steps replace the Python objects
    obj.neurok.output.bake_mode = mode
    activate(obj)
    start = time.monotonic()
    out[tag] = call(bpy.ops.neurok.simulate, undo=True)
    out[f"{tag}_seconds"] = time.monotonic() - start
    obj = bpy.data.objects["Laptop"]
    out[f"{tag}_results"] = obj.neurok.results.mode
    out[f"{tag}_modifiers"] = [m.type for m in obj.modifiers]
    return _frames(obj)


@scenario
def rig_space_laptop(params) -> dict:
    """Dynamics = Rig Space (the default), bake Automatic: an armature whose playback is the
    engine's vertices (the same run baked as shape keys), then the explicit shape keys and point
    cache; with a checkpoint folder holding no model, which the latent dynamics refuse."""
    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]  # a folder without a model
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    obj, nb = _laptop()
    obj.location = (0.4, -0.3, 0.8)
    obj.rotation_euler = (0.0, 0.0, 0.5)
    physics = obj.neurok.physics
    physics.pin_group = "Base"
    bpy.context.view_layer.update()
    local = np.array([v.co for v in obj.data.vertices])
    arrow, pushed = _push_lid(obj, nb)
    bpy.context.view_layer.update()
    out = {"nb": nb, "pushed": pushed}
    out["arrow_local_z"] = list(
        obj.matrix_world.inverted().to_3x3() @ arrow.matrix_world.col[2].xyz
    )
    out["default_dynamics"] = physics.dynamics
    out["dynamics_items"] = [i.identifier for i in physics.bl_rna.properties["dynamics"].enum_items]
    # the latent dynamics need the model, which is not there: refused, nothing changes
    physics.dynamics = "latent"
    activate(obj)
    out["latent"] = attempt_simulate(obj)
    physics.property_unset("dynamics")  # back to the default
    settings = addon("neurok_blender.preferences").engine_settings(bpy.context)
    gathered = addon("neurok_blender.gather").gather(bpy.context, obj, settings)
    out["request_dynamics"] = gathered.request.dynamics
    out["auto_resolves_to"] = addon("neurok_blender.bake_mode").resolved_bake_mode(
        obj, p.checkpoint
    )
    rig = _bake("AUTO", out, "auto")
    obj = bpy.data.objects["Laptop"]
    arm = obj.neurok.results.rig_object
    out["armature"] = None if arm is None else arm.name
    out["bones"] = 0 if arm is None else len(arm.data.bones)
    if arm is not None:
        mod = obj.modifiers[0]
        out["preserve_volume"] = mod.use_deform_preserve_volume
        fcurves = list(arm.animation_data.action.layers[0].strips[0].channelbags[0].fcurves)
        out["fcurves"] = len(fcurves)
        out["keys_per_fcurve"] = sorted({len(f.keyframe_points) for f in fcurves})
    keys = _bake("SHAPE_KEYS", out, "keys")  # the engine's own vertices of the same run
    cache = _bake("POINT_CACHE", out, "cache")
    out["rest"] = local.tolist()
    out["matrix_world"] = [list(r) for r in bpy.data.objects["Laptop"].matrix_world]
    out["rig_frames"] = rig.tolist()
    out["key_frames"] = keys.tolist()
    out["cache_frames"] = cache.tolist()
    return out


def _flag(width: float = 0.42, height: float = 0.27, edge: float = 0.03):
    """A flag upright in the XZ plane, its pole edge (x = 0) the vertex group "Pole"; (the
    object, its free bottom corner's vertex)."""
    cols, rows = round(width / edge) + 1, round(height / edge) + 1
    x, z = np.meshgrid(np.linspace(0, width, cols), np.linspace(0, height, rows))
    vertices = np.stack([x.ravel(), np.zeros(x.size), z.ravel()], 1)
    idx = np.arange(rows * cols).reshape(rows, cols)
    quads = np.stack([idx[:-1, :-1], idx[:-1, 1:], idx[1:, 1:], idx[1:, :-1]], -1)
    mesh = bpy.data.meshes.new("Flag")
    mesh.from_pydata(vertices.tolist(), [], quads.reshape(-1, 4).tolist())
    mesh.update()
    obj = bpy.data.objects.new("Flag", mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.vertex_groups.new(name="Pole").add(idx[:, 0].tolist(), 1.0, "REPLACE")
    obj.neurok.physics.pin_group = "Pole"
    return obj, int(idx[0, -1])


def _simulated(obj, RecordingLayout) -> dict:
    """``obj`` simulated through the scripting API: its report, the figures of the warning and
    the lines the Output panel shows for the bake."""
    run = addon("neurok_blender.api").simulate(obj)
    obj = bpy.data.objects[obj.name]
    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}
    panels = addon("neurok_blender.ui.panels")
    panels.NEUROK_PT_output.draw_results(RecordingLayout(log), obj)
    figures = run.figures
    keys = ("dynamics", "edge_strain_max", "penetration_max", "integration", "frames_on_barrier")
    return {
        "result": run.result,
        "report": run.report,
        "figures": {k: figures.get(k) for k in keys},
        "results": [obj.neurok.results.dynamics, obj.neurok.results.edge_strain],
        "panel": log["labels"],
    }


@scenario
def rig_space_warnings(params) -> dict:
    """The rig space by default, out of the box: a 1 m cube with the default force arrow (10 N)
    under the scene's gravity, the two-box laptop pushed shut, a flag hanging from its pole; and
    a flag whose corner a drag handle pulls 5 m from its pole, which stretches it as no cloth
    stretches: its report and its panel say so."""
    from sc_panels import RecordingLayout

    empty_scene()
    p = prefs()
    p.checkpoint = params["checkpoint"]  # no model: the rig space needs none
    p.device = "CPU"
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 24
    out = {}
    bpy.ops.mesh.primitive_cube_add(size=1.0, location=(0.0, 0.0, 2.0))
    cube = bpy.context.active_object
    scene.cursor.location = (0.0, 0.0, 3.0)  # the arrow at the top face's centre
    bpy.ops.neurok.add_force()
    arrow = bpy.context.active_object
    out["cube_defaults"] = [
        cube.neurok.physics.dynamics,
        arrow.neurok.condition.strength,
        cube.neurok.physics.use_gravity and scene.use_gravity,
    ]
    out["cube"] = _simulated(cube, RecordingLayout)
    laptop, nb = _laptop()
    laptop.location = (3.0, 0.0, 0.0)
    laptop.neurok.physics.pin_group = "Base"
    bpy.context.view_layer.update()
    local = np.array([v.co for v in laptop.data.vertices])
    target = np.array([0.0, BASE[1] / 2, BASE[2] + 0.75 * LID[1]])
    lid = np.arange(nb, len(local))
    activate(laptop)
    pushed = _force_at_vertex(
        laptop, int(lid[np.argmin(np.linalg.norm(local[lid] - target, 1))]), 2.0
    )
    pushed.neurok.condition.use_frame_range = True
    pushed.neurok.condition.frame_start, pushed.neurok.condition.frame_end = 1, 9
    out["laptop"] = _simulated(laptop, RecordingLayout)
    flag, corner = _flag()
    flag.location = (0.0, 3.0, 1.0)
    flag.neurok.physics.mass, flag.neurok.physics.damping = 0.2, 0.8
    out["flag"] = _simulated(flag, RecordingLayout)
    # the drag handle at the corner, its target 5 m out along the flag's width
    scene.cursor.location = flag.matrix_world @ flag.data.vertices[corner].co
    activate(flag)
    bpy.ops.neurok.add_drag()
    drag = bpy.context.active_object
    drag.location.x += 5.0
    drag.neurok.condition.frame = 13
    out["torn"] = _simulated(bpy.data.objects["Flag"], RecordingLayout)
    return out
