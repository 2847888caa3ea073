"""Scenario: several selected objects simulated together (role Moves), each baked onto itself
in its own bake mode, with a selected Static Collider under them; one undo step takes it all
back."""

from __future__ import annotations

import bpy
import numpy as np
from bl_helpers import activate, call, engine_scene, evaluated_positions, scenario
from mathutils import Vector
from sc_rig_space import _box


def _cube(name: str, centre, size=(0.2, 0.2, 0.2), cuts: int = 2):
    vertices, faces = _box(size, (0.0, 0.0, 0.0), cuts)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices.tolist(), [], faces)
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = centre
    return obj


def _frames(name: str) -> np.ndarray:
    scene = bpy.context.scene
    obj = bpy.data.objects[name]
    return np.stack(
        [evaluated_positions(obj, f) for f in range(scene.frame_start, scene.frame_end + 1)]
    )


@scenario
def several_objects(params) -> dict:
    scene = engine_scene(params, 16)
    hit = _cube("Hit", (-0.35, 0.0, 0.1005))
    still = _cube("Still", (0.0, 0.0, 0.1005))
    floor = _cube("Floor", (0.0, 0.0, -0.05), size=(1.5, 1.0, 0.1), cuts=0)
    floor.neurok.physics.role = "STATIC"
    for obj in (hit, still):
        obj.neurok.physics.collider_source = "NONE"  # the selected Static Collider alone
        obj.neurok.physics.use_ground = False
    still.neurok.output.bake_mode = "RIG"
    hit.neurok.output.bake_mode = "SHAPE_KEYS"
    # a whole-object velocity of 2 m/s along +x: the arrow on the Hit cube's +x face
    activate(hit)
    scene.cursor.location = Vector((-0.25, 0.0, 0.1005))
    out = {"add_velocity": call(bpy.ops.neurok.add_velocity)}
    arrow = hit.children[0]
    arrow.neurok.condition.whole_object = True
    arrow.neurok.condition.speed = 2.0
    bpy.context.view_layer.update()
    out["arrow_z"] = list(arrow.matrix_world.col[2].xyz)
    for obj in (hit, still, floor):
        obj.select_set(True)
    bpy.context.view_layer.objects.active = hit
    from sc_panels import _draw_all

    out["panel_labels"] = _draw_all()["labels"]
    bpy.ops.ed.undo_push(message="before simulate")
    out["simulate"] = call(bpy.ops.neurok.simulate, undo=True)
    out["results"] = {o.name: o.neurok.results.mode for o in bpy.data.objects if o.type == "MESH"}
    out["modifiers"] = {
        o.name: [m.type for m in o.modifiers] for o in bpy.data.objects if o.type == "MESH"
    }
    out["hit"] = _frames("Hit").tolist()
    out["still"] = _frames("Still").tolist()
    out["floor_moved"] = float(np.abs(_frames("Floor") - _frames("Floor")[0]).max())
    bpy.ops.ed.undo()
    out["results_after_undo"] = {
        o.name: o.neurok.results.mode for o in bpy.data.objects if o.type == "MESH"
    }
    # the role alone decides: Still as a Static Collider, the hit cube moves by itself
    bpy.data.objects["Still"].neurok.physics.role = "STATIC"
    for name in ("Hit", "Still", "Floor"):
        bpy.data.objects[name].select_set(True)
    bpy.context.view_layer.objects.active = bpy.data.objects["Hit"]
    out["simulate_static"] = call(bpy.ops.neurok.simulate)
    out["still_static_results"] = bpy.data.objects["Still"].neurok.results.mode
    out["hit_static"] = _frames("Hit").tolist()
    # a selected mesh with Blender's Collision physics stays a collider, whatever its role
    bpy.data.objects["Still"].neurok.physics.role = "MOVES"
    floor = bpy.data.objects["Floor"]
    floor.neurok.physics.role = "MOVES"
    floor.modifiers.new("Collision", "COLLISION")
    for name in ("Hit", "Still"):
        bpy.data.objects[name].neurok.physics.collider_source = "PHYSICS"
    for name in ("Hit", "Still", "Floor"):
        bpy.data.objects[name].select_set(True)
    bpy.context.view_layer.objects.active = bpy.data.objects["Hit"]
    out["simulate_physics"] = call(bpy.ops.neurok.simulate)
    out["results_physics"] = {
        o.name: o.neurok.results.mode for o in bpy.data.objects if o.type == "MESH"
    }
    return out


@scenario
def cloth_on_cart(params) -> dict:
    """A cloth (a grid) lying on a cube thrown along the floor: both move, each baked onto
    itself; the cube carries the cloth."""
    scene = engine_scene(params, 16)
    cart = _cube("Cart", (0.0, 0.0, 0.1005), size=(0.3, 0.3, 0.2))
    bpy.ops.mesh.primitive_grid_add(
        x_subdivisions=12, y_subdivisions=12, size=0.4, location=(0.0, 0.0, 0.21)
    )
    cloth = bpy.context.active_object
    cloth.name = "Cloth"
    for obj in (cart, cloth):
        obj.neurok.physics.collider_source = "NONE"
        obj.neurok.physics.use_ground = True
    activate(cart)
    scene.cursor.location = Vector((0.15, 0.0, 0.1))  # on its +x face: thrown along +x
    out = {"add_velocity": call(bpy.ops.neurok.add_velocity)}
    arrow = cart.children[0]
    arrow.neurok.condition.whole_object = True
    arrow.neurok.condition.speed = 1.5
    for obj in (cart, cloth):
        obj.select_set(True)
    bpy.context.view_layer.objects.active = cart
    out["simulate"] = call(bpy.ops.neurok.simulate)
    out["results"] = {o.name: o.neurok.results.mode for o in bpy.data.objects if o.type == "MESH"}
    out["cart"] = _frames("Cart").tolist()
    out["cloth"] = _frames("Cloth").tolist()
    return out


@scenario
def flag_on_post(params) -> dict:
    """A flag modelled on its post as one mesh (the post's foot pinned by a vertex group):
    Automatic bakes it as cloth is baked, and the flag hangs from the post."""
    scene = engine_scene(params, 16)
    post_v, post_f = _box((0.1, 0.1, 1.2), (0.0, 0.0, 0.6), 4)
    flag = [(0.05 + 0.05 * i, 0.0, 0.75 + 0.05 * j) for i in range(13) for j in range(9)]
    quads = [
        (i * 9 + j, (i + 1) * 9 + j, (i + 1) * 9 + j + 1, i * 9 + j + 1)
        for i in range(12)
        for j in range(8)
    ]
    n = len(post_v)
    faces = [tuple(int(k) for k in face) for face in post_f]
    faces += [tuple(n + k for k in quad) for quad in quads]
    mesh = bpy.data.meshes.new("FlagOnPost")
    mesh.from_pydata([tuple(map(float, x)) for x in post_v] + flag, [], faces)
    mesh.update()
    obj = bpy.data.objects.new("FlagOnPost", mesh)
    scene.collection.objects.link(obj)
    foot = obj.vertex_groups.new(name="Foot")
    foot.add([i for i in range(n) if post_v[i][2] < 1e-6], 1.0, "REPLACE")
    obj.neurok.physics.pin_group = "Foot"
    obj.neurok.physics.collider_source = "NONE"
    obj.neurok.physics.use_ground = False
    activate(obj)
    out = {"simulate": call(bpy.ops.neurok.simulate)}
    out["mode"] = obj.neurok.results.mode
    out["frames"] = _frames("FlagOnPost").tolist()
    out["post_vertices"] = n
    return out
