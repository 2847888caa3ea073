"""Scenario: the Structure panel's path in real Blender with a real engine: Find Structure on a
two-box laptop (its base pinned), the lid's hinge drawn and listed, Simulate following it; the
hinge edited to Fixed, and Simulate holding the lid; the edit undone, saved and reloaded with
the .blend; a mesh that changed refused with what to do."""

from __future__ import annotations

from pathlib import Path

import bpy
import numpy as np
from bl_helpers import activate, addon, call, empty_scene, engine_scene, scenario
from sc_rig import _frames
from sc_rig_space import _laptop, _push_lid


def _lid_travel(obj, nb: int) -> float:
    """The most a lid vertex moves over the baked frames (m)."""
    frames = _frames(obj)
    return float(np.abs(frames[:, nb:] - frames[0, nb:]).max())


def _simulate(out: dict, tag: str) -> None:
    obj = bpy.data.objects["Laptop"]
    activate(obj)
    out[tag] = call(bpy.ops.neurok.simulate, undo=True)


@scenario
def structure_panel(params) -> dict:
    engine_scene(params, 16)
    obj, nb = _laptop()
    obj.location = (0.2, 0.1, 0.3)
    obj.neurok.physics.pin_group = "Base"
    obj.neurok.physics.use_gravity = False
    obj.neurok.output.bake_mode = "SHAPE_KEYS"
    bpy.context.view_layer.update()
    _push_lid(obj, nb)
    activate(obj)
    out = {"nb": nb}
    out["find"] = call(bpy.ops.neurok.find_structure, undo=True)
    obj = bpy.data.objects["Laptop"]
    s = obj.neurok.structure
    out["parts"] = [(part.kind, part.vertex_count) for part in s.parts]
    out["joints"] = [(j.type, j.part_a, j.part_b) for j in s.joints]
    hinge = next((j for j in s.joints if j.type == "hinge"), None)
    out["hinge_axis"] = None if hinge is None else list(hinge.axis)
    out["hinge_point"] = None if hinge is None else list(hinge.point)
    draw = addon("neurok_blender.structure_draw")
    out["segments"] = [kind for kind, _, _ in draw.joint_segments(obj)]
    labels = addon("neurok_blender.structure_data").vertex_labels(s)
    colors = draw.part_colors(labels)
    out["colors"] = [len(colors), len(set(colors))]
    from sc_panels import RecordingLayout

    log = {"labels": [], "props": [], "operators": [], "progress": [], "errors": []}

    class Panel:
        layout = RecordingLayout(log)
        draw_joint = staticmethod(bpy.types.NEUROK_PT_structure.draw_joint)
        draw_part = staticmethod(bpy.types.NEUROK_PT_structure.draw_part)

    bpy.types.NEUROK_PT_structure.draw(Panel(), bpy.context)
    out["panel_labels"] = log["labels"]
    _simulate(out, "simulate_hinge")
    out["travel_hinge"] = _lid_travel(bpy.data.objects["Laptop"], nb)
    # the artist welds the lid: Simulate holds it
    bpy.ops.ed.undo_push(message="before the edit")
    obj = bpy.data.objects["Laptop"]
    for joint in obj.neurok.structure.joints:
        if joint.type == "hinge":
            joint.type = "fixed"
    bpy.ops.ed.undo_push(message="welded")
    _simulate(out, "simulate_fixed")
    out["travel_fixed"] = _lid_travel(bpy.data.objects["Laptop"], nb)
    # the edit is kept with the .blend
    path = str(Path(params["tmp"]) / "structure.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    obj = bpy.data.objects["Laptop"]
    out["reloaded_joints"] = [(j.type, j.found_type) for j in obj.neurok.structure.joints]
    # undo takes an edit back
    bpy.ops.ed.undo_push(message="loaded")
    obj.neurok.structure.joints[0].type = "ball"
    bpy.ops.ed.undo_push(message="ball")
    bpy.ops.ed.undo()
    obj = bpy.data.objects["Laptop"]
    out["after_undo"] = [j.type for j in obj.neurok.structure.joints]
    # a structure found on another mesh is refused, with what to do
    mesh = obj.data
    mesh.vertices.add(1)
    mesh.update()
    activate(obj)
    out["changed_mesh"] = call(bpy.ops.neurok.simulate)
    out["clear"] = call(bpy.ops.neurok.clear_structure)
    out["parts_after_clear"] = len(obj.neurok.structure.parts)
    return out


@scenario
def part_kind(params) -> dict:
    """A 1.2 m rod held at one end: Find Structure calls it a rope (it droops); the artist
    makes it Rigid in the panel, and Simulate holds it straight; the choice saved and
    reloaded with the .blend."""
    scene = engine_scene(params, 12)
    # a closed tube along +x at 1 m: 25 rings of 10 vertices, a centre on each cap
    sides, rings = 10, 25
    t = 2 * np.pi * np.arange(sides) / sides
    co = [
        (1.2 * i / (rings - 1), 0.0125 * np.cos(a), 1.0 + 0.0125 * np.sin(a))
        for i in range(rings)
        for a in t
    ]
    co += [(0.0, 0.0, 1.0), (1.2, 0.0, 1.0)]
    faces = [
        (
            i * sides + j,
            i * sides + (j + 1) % sides,
            (i + 1) * sides + (j + 1) % sides,
            (i + 1) * sides + j,
        )
        for i in range(rings - 1)
        for j in range(sides)
    ]
    start, end = rings * sides, rings * sides + 1
    faces += [(start, (j + 1) % sides, j) for j in range(sides)]
    last = (rings - 1) * sides
    faces += [(end, last + j, last + (j + 1) % sides) for j in range(sides)]
    mesh = bpy.data.meshes.new("Rod")
    mesh.from_pydata([tuple(map(float, c)) for c in co], [], faces)
    mesh.update()
    obj = bpy.data.objects.new("Rod", mesh)
    scene.collection.objects.link(obj)
    held = obj.vertex_groups.new(name="Held")
    held.add([v.index for v in obj.data.vertices if v.co.x < 0.01], 1.0, "REPLACE")
    obj.neurok.physics.pin_group = "Held"
    obj.neurok.physics.collider_source = "NONE"
    obj.neurok.physics.use_ground = False
    obj.neurok.output.bake_mode = "SHAPE_KEYS"
    activate(obj)
    out = {"vertices": len(obj.data.vertices)}
    out["find"] = call(bpy.ops.neurok.find_structure)
    s = obj.neurok.structure
    out["kinds"] = [part.kind for part in s.parts]

    def tip_drop() -> float:
        frames = _frames(bpy.data.objects["Rod"])
        far = frames[0, :, 0] > frames[0, :, 0].max() - 0.01
        return float(frames[0, far, 2].mean() - frames[-1, far, 2].mean())

    out["simulate_found"] = call(bpy.ops.neurok.simulate)
    out["drop_found"] = tip_drop()
    obj = bpy.data.objects["Rod"]
    obj.neurok.structure.parts[0].kind_choice = "RIGID"
    out["kind_after_edit"] = obj.neurok.structure.parts[0].kind
    activate(obj)
    out["simulate_rigid"] = call(bpy.ops.neurok.simulate)
    out["drop_rigid"] = tip_drop()
    path = str(Path(params["tmp"]) / "kind.blend")
    bpy.ops.wm.save_as_mainfile(filepath=path)
    bpy.ops.wm.open_mainfile(filepath=path)
    part = bpy.data.objects["Rod"].neurok.structure.parts[0]
    out["reloaded"] = [part.kind, part.found_kind, part.kind_choice]
    return out


@scenario
def solid_presets(params) -> dict:
    """Apply Solid Preset on a 20 cm cube scaled 2x along x (world volume 0.016 m^3), and on
    an open grid (no volume: refused, nothing changed)."""
    empty_scene()
    from sc_objects import _cube

    cube = _cube("Cube", (0.0, 0.0, 0.5))
    cube.scale = (2.0, 1.0, 1.0)
    bpy.context.view_layer.update()
    activate(cube)
    out = {"steel": call(bpy.ops.neurok.apply_solid_preset, material="steel")}
    p = cube.neurok.physics
    out["steel_fields"] = [p.mass, p.stiffness, p.friction, p.bounciness]
    out["jelly"] = call(bpy.ops.neurok.apply_solid_preset, material="jelly")
    out["jelly_fields"] = [p.mass, p.stiffness, p.friction, p.bounciness]
    from bl_helpers import add_grid

    grid = add_grid("Sheet")
    activate(grid)
    before = grid.neurok.physics.mass
    out["open"] = call(bpy.ops.neurok.apply_solid_preset, material="wood")
    out["open_mass_unchanged"] = grid.neurok.physics.mass == before
    return out
