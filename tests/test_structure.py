"""An object's structure (neurok_core.structure): joints from the interfaces' shapes, the JSON
file and its refusals, the CLI command, and the evaluation's adjusted Rand index."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import trimesh
from mesh_pieces import box_mesh, join_meshes

from neurok_core.cli import main
from neurok_core.errors import StructureError
from neurok_core.structure import (
    JOINT_TYPES,
    Part,
    PartJoint,
    Structure,
    clarity,
    find_structure,
)
from training.eval.structure_eval import adjusted_rand_index, line_angle


def _laptop(angle_deg=100.0):
    """A base box and a lid slab open by ``angle_deg``, touching along the base's back edge
    (the x axis at y = 0.1, z = 0.02)."""
    base = box_mesh((0.3, 0.2, 0.02), (0.0, 0.0, 0.01), 1)
    lid_v, lid_f = box_mesh((0.28, 0.18, 0.008), (0.0, 0.0, 0.0), 1)
    lid_v = lid_v + (0.0, -0.09, 0.004)  # its back bottom edge on the x axis
    rot = trimesh.transformations.rotation_matrix(-math.radians(angle_deg), (1, 0, 0))[:3, :3]
    return join_meshes(base, (lid_v @ rot.T + (0.0, 0.1, 0.02), lid_f))


def test_a_laptop_hinges_along_the_shared_edge():
    v, f = _laptop()
    s = find_structure(v, f, learned=False)
    assert [p.kind for p in s.parts] == ["rigid", "rigid"]
    (joint,) = s.joints
    assert joint.type == "hinge" and {joint.part_a, joint.part_b} == {0, 1}
    assert line_angle(np.asarray(joint.axis), np.array([1.0, 0.0, 0.0])) < 3.0
    np.testing.assert_allclose(joint.point[1:], (0.1, 0.02), atol=0.003)  # on the edge
    assert 0.5 < joint.confidence <= 1.0


def test_two_boxes_sunk_into_each_other_are_fixed():
    v, f = join_meshes(
        box_mesh((0.3, 0.3, 0.2), (0, 0, 0), 1), box_mesh((0.3, 0.3, 0.05), (0, 0, 0.12), 1)
    )
    s = find_structure(v, f, learned=False)
    (joint,) = s.joints
    assert joint.type == "fixed" and joint.axis is None
    assert s.bodies().max() == 0  # the weld makes them one body


def _cylinder(radius, height, centre, axis=(0.0, 0.0, 1.0)):
    m = trimesh.creation.cylinder(radius, height, sections=32)
    rot = trimesh.geometry.align_vectors((0.0, 0.0, 1.0), axis)[:3, :3]
    return np.asarray(m.vertices) @ rot.T + centre, np.asarray(m.faces, dtype=np.int64)


@pytest.mark.parametrize("axis", [(0.0, 0.0, 1.0), (0.6, 0.0, 0.8)])
def test_a_pin_through_a_plate_is_a_hinge_about_the_pin(axis):
    """A round pin through a plate (an axle through a hub, a scissors' rivet): the overlap is
    centred on the pin's axis, so the plate turns about it (the rig space's "axle")."""
    plate = box_mesh((0.3, 0.2, 0.02), (0.0, 0.0, 0.0), subdivisions=2)
    v, f = join_meshes(plate, _cylinder(0.02, 0.06, (0.05, 0.0, 0.0), axis))
    (joint,) = find_structure(v, f, learned=False).joints
    assert joint.type == "hinge"
    assert line_angle(np.asarray(joint.axis), np.asarray(axis)) < 3.0
    assert np.linalg.norm(np.cross(np.asarray(joint.point) - (0.05, 0, 0), axis)) < 0.005
    assert joint.confidence > 0.6


def test_a_rod_sunk_by_its_end_and_an_off_centre_pin_are_fixed():
    """A long rod whose end is sunk into a block (a spoke in a rim) and a pin whose overlap is
    off its axis (half of it in the block's corner) stay welded."""
    block = box_mesh((0.1, 0.1, 0.1), (0.0, 0.0, 0.0), subdivisions=2)
    rod = _cylinder(0.01, 0.4, (0.0, 0.0, 0.23))  # 2 cm wide, 3 cm of it in the block
    corner = _cylinder(0.03, 0.05, (0.05, 0.05, 0.0))  # a quarter of it inside
    for other in (rod, corner):
        (joint,) = find_structure(*join_meshes(block, other), learned=False).joints
        assert joint.type == "fixed"


def test_a_sphere_resting_on_a_box_turns_about_the_vertical():
    """The sphere touches the box on a small disc: the rig space glues it on the disc's normal
    (its "revolute" kind), so it may spin about the vertical only: a hinge along z."""
    sphere = trimesh.creation.icosphere(3, 0.05)
    ball = (np.asarray(sphere.vertices) + (0.0, 0.0, 0.15), np.asarray(sphere.faces))
    v, f = join_meshes(box_mesh((0.3, 0.3, 0.2), (0, 0, 0), 1), ball)
    (joint,) = find_structure(v, f, learned=False).joints
    assert joint.type == "hinge"
    assert line_angle(np.asarray(joint.axis), np.array([0.0, 0.0, 1.0])) < 5.0


def test_pins_hold_a_part_to_the_world_and_a_slab_on_it_only_touches():
    base = box_mesh((0.3, 0.3, 0.2), (0, 0, 0), 1)
    v, f = join_meshes(base, box_mesh((0.3, 0.3, 0.05), (0, 0, 0.125), 1))
    s = find_structure(v, f, pins=range(len(base[0])), learned=False)
    types = {(j.part_a, j.part_b): j.type for j in s.joints}
    assert types == {(0, -1): "fixed", (1, -1): "contact"}
    fixed = next(j for j in s.joints if j.type == "fixed")
    assert fixed.confidence == 1.0  # the user's pin
    assert s.bodies()[len(base[0]) :].max() == 1  # the slab apart from the pinned box


def test_confidence_is_half_at_a_threshold_and_grows_away_from_it():
    assert clarity(1.0, 1.0) == pytest.approx(0.5)
    assert clarity(2.0, 1.0) == pytest.approx(0.75) == clarity(0.5, 1.0)
    assert clarity(10.0, 1.0) > clarity(3.0, 1.0) > 0.5


def test_the_json_round_trip_keeps_every_field(tmp_path):
    v, f = _laptop()
    s = find_structure(v, f, learned=False)
    back = Structure.from_json(s.to_json(), len(v))
    np.testing.assert_array_equal(back.labels, s.labels)
    assert back.parts == s.parts and back.joints == s.joints
    hand = Structure(
        np.array([0, 0, 1]),
        (Part("rigid", 0.9), Part("rope", 0.6)),
        (PartJoint("slider", 0, 1, (0.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.3), 0.7),),
    )
    again = Structure.from_json(hand.to_json(), 3)
    assert again.joints == hand.joints and again.parts == hand.parts


def _doc():
    return {
        "format": "neurok-structure",
        "version": 1,
        "num_vertices": 3,
        "parts": [{"kind": "rigid", "confidence": 1.0}, {"kind": "cloth", "confidence": 0.8}],
        "vertex_parts": [0, 0, 1],
        "joints": [
            {"type": "hinge", "parts": [0, 1], "axis": [1, 0, 0], "point": [0, 0, 0],
             "limits": None, "confidence": 0.9}
        ],
    }  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(vertex_parts=[0, 1]), "for 2 vertices, the mesh has 3"),
        (lambda d: d["joints"][0].update(type="screw"), "type 'screw' is none of"),
        (lambda d: d["joints"][0].update(axis=[1, 1, 0]), "is not a unit vector"),
        (lambda d: d["joints"][0].update(parts=[0, 2]), "part 2 out of range"),
        (lambda d: d.update(vertex_parts=[0, 5, 1]), "part 5 out of range"),
        (lambda d: d["parts"][0].update(kind="jelly"), "kind 'jelly' is none of"),
        (lambda d: d["joints"][0].update(axis=None), "a hinge needs an axis"),
        (lambda d: d["joints"][0].update(limits=[1.0, 0.0]), "lower <= upper"),
        (lambda d: d["joints"][0].update(confidence=2), "not within 0 to 1"),
        (lambda d: d.update(format="other"), '"format": "neurok-structure"'),
    ],
)
def test_a_bad_file_is_refused_with_what_is_wrong(change, message):
    doc = _doc()
    Structure.from_json(json.dumps(doc), 3)  # the file as it is is fine
    change(doc)
    with pytest.raises(StructureError, match=message.replace("(", r"\(")):
        Structure.from_json(json.dumps(doc), 3)
    with pytest.raises(StructureError, match="not JSON"):
        Structure.from_json("{", 3)


def test_the_cli_writes_a_structure_that_reads_back(tmp_path, capsys):
    v, f = _laptop()
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "laptop.obj")
    out = tmp_path / "structure.json"
    assert main(["structure", str(tmp_path / "laptop.obj"), "--out", str(out)]) == 0
    assert "2 parts" in capsys.readouterr().out
    s = Structure.from_json(out.read_text(), len(v))
    assert [j.type for j in s.joints] == ["hinge"]
    base = ",".join(str(i) for i in range(len(box_mesh((0.3, 0.2, 0.02), (0, 0, 0), 1)[0])))
    assert main(["structure", str(tmp_path / "laptop.obj"), "--out", str(out), "--pin", base]) == 0
    s = Structure.from_json(out.read_text(), len(v))
    assert {(j.type, j.part_b) for j in s.joints} == {("fixed", -1), ("hinge", -1)}
    assert set(j.type for j in s.joints) <= set(JOINT_TYPES)
    assert main(["structure", str(tmp_path / "laptop.obj"), "--out", str(tmp_path / "a.txt")]) == 2
    assert (
        main(["structure", str(tmp_path / "laptop.obj"), "--out", str(out), "--pin", "9999"]) == 2
    )
    assert "out of range" in capsys.readouterr().err


def test_the_adjusted_rand_index_by_hand():
    a = np.array([0, 0, 1, 1, 2, 2])
    assert adjusted_rand_index(a, a) == pytest.approx(1.0)
    assert adjusted_rand_index(a, 7 - a) == pytest.approx(1.0)  # names do not matter
    # truth {0,1,2},{3,4,5}; found {0,1},{2,3},{4,5}: index sum C(n_ij, 2) = 1 + 0 + 0 + 1 = 2,
    # rows C(3,2) * 2 = 6, columns C(2,2) * 3 = 3, expected 6 * 3 / C(6,2) = 1.2,
    # ARI = (2 - 1.2) / (0.5 * (6 + 3) - 1.2) = 0.8 / 3.3
    truth = np.array([0, 0, 0, 1, 1, 1])
    found = np.array([0, 0, 1, 1, 2, 2])
    assert adjusted_rand_index(truth, found) == pytest.approx(0.8 / 3.3)


# -- a structure as the rig step's input (neurok_core.rigspace.structure_joints) -----------------
def _pushed_lid(v, base_count: int, frames: int = 16):
    """Conditions: the base pinned, the lid's top edge pushed toward the base."""
    from neurok_core.dynamics import Force, SimulationConditions

    lid = np.arange(base_count, len(v))
    top = int(lid[np.argmax(v[lid, 2])])
    return SimulationConditions(
        pins=tuple(range(base_count)),
        forces=(Force((0.0, -1.0, -0.3), 2.0, vertex=top),),
        frames=frames,
        damping=0.5,
        gravity=(0.0, 0.0, 0.0),
    )


def test_the_rig_step_holds_a_given_structures_joints():
    """The structure the geometry gives, fed back, moves as the geometry's own joints do; the
    hinge made "fixed" holds the lid where it is; made "contact" the lid falls off its edge."""
    import dataclasses

    from neurok_core.rigspace import simulate_rig

    v, f = _laptop()
    nb = len(box_mesh((0.3, 0.2, 0.02), (0, 0, 0), 1)[0])
    cond = _pushed_lid(v, nb)
    found = find_structure(v, f, pins=cond.pins)
    assert {j.type for j in found.joints} == {"fixed", "hinge"}
    own = simulate_rig(v, f, cond).positions
    given = simulate_rig(v, f, cond, structure=found).positions
    size = float(np.ptp(v, axis=0).max())
    assert np.abs(given - own).max() < 0.01 * size
    assert np.abs(given[-1] - given[0]).max() > 0.1 * size  # the lid closes

    def retyped(kind):
        joints = tuple(
            dataclasses.replace(j, type=kind, axis=None) if j.type == "hinge" else j
            for j in found.joints
        )
        return Structure(found.labels, found.parts, joints)

    welded = simulate_rig(v, f, cond, structure=retyped("fixed")).positions
    assert np.abs(welded[-1] - welded[0]).max() < 0.002 * size
    loose = simulate_rig(v, f, cond, structure=retyped("contact")).positions
    lid = np.arange(nb, len(v))
    off_line = np.hypot(v[lid, 1] - 0.1, v[lid, 2] - 0.02)
    hinge_side = lid[off_line < 1e-3]  # the lid's vertices on the hinge line
    held = np.abs(given[-1, hinge_side] - given[0, hinge_side]).max()
    slid = np.abs(loose[-1, hinge_side] - loose[0, hinge_side]).max()
    assert held < 0.01 * size < slid  # no glue: its edge leaves the hinge line


def test_a_given_slider_lets_its_part_slide_along_its_axis_only():
    """Two boxes, one lying in a sleeve-less tray: the geometry sees only contact; the
    structure's joint made a slider along x, a push along (1, 1, 0) moves the part along x."""
    import dataclasses

    from neurok_core.dynamics import Force, SimulationConditions
    from neurok_core.rigspace import simulate_rig

    tray = box_mesh((0.6, 0.3, 0.02), (0.0, 0.0, 0.01), 1)
    block_v, block_f = box_mesh((0.2, 0.2, 0.1), (0.0, 0.0, 0.07), 1)
    v, f = join_meshes(tray, (block_v, block_f))
    nt = len(tray[0])
    push = Force((1.0, 1.0, 0.0), 3.0, vertex=nt, end_frame=8)
    cond = SimulationConditions(
        pins=tuple(range(nt)), forces=(push,), frames=16, damping=0.5, gravity=(0, 0, 0)
    )
    found = find_structure(v, f, pins=cond.pins)
    slider = tuple(
        dataclasses.replace(j, type="slider", axis=(1.0, 0.0, 0.0))
        if j.part_b == -1 and j.type != "fixed"
        else j
        for j in found.joints
    )
    assert [j.type for j in slider].count("slider") == 1
    p = simulate_rig(v, f, cond, structure=Structure(found.labels, found.parts, slider))
    moved = (p.positions[-1] - p.positions[0])[nt:].mean(0)
    assert moved[0] > 0.01 and abs(moved[1]) < 0.02 * moved[0] and abs(moved[2]) < 0.02 * moved[0]


def test_a_structure_that_does_not_fit_is_refused(tmp_path, capsys):
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace import simulate_rig

    v, f = _laptop()
    found = find_structure(v, f)
    cond = SimulationConditions(frames=4)
    split = found.labels.copy()
    split[:4] = 2  # a part the geometry does not have
    with pytest.raises(StructureError, match="parts must be those"):
        simulate_rig(v, f, cond, structure=Structure(split, (*found.parts, Part("rigid", 1.0))))
    cloth = (Part("cloth", 1.0), found.parts[1])  # a solid part cannot become a cloth
    with pytest.raises(StructureError, match="cannot be made a cloth"):
        simulate_rig(v, f, cond, structure=Structure(found.labels, cloth, found.joints))
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "laptop.obj")
    (tmp_path / "s.json").write_text(found.to_json())
    argv = ["simulate", str(tmp_path / "laptop.obj"), "--frames", "4", "--quiet"]
    ok = [*argv, "--structure", str(tmp_path / "s.json"), "--out", str(tmp_path / "a.npz")]
    assert main(ok) == 0
    capsys.readouterr()
    (tmp_path / "bad.json").write_text("{}")
    bad = [*argv, "--structure", str(tmp_path / "bad.json"), "--out", str(tmp_path / "b.npz")]
    assert main(bad) == 2
    assert "format" in capsys.readouterr().err


def test_the_worker_finds_a_structure_and_simulates_with_an_edited_one(tmp_path, capsys):
    """``"task": "structure"`` writes the mesh's structure; a simulation request carrying it
    with the hinge made "fixed" holds the lid (the extension's Structure panel's path)."""
    from neurok_core.worker import read_request, run_any

    v, f = _laptop()
    nb = len(box_mesh((0.3, 0.2, 0.02), (0, 0, 0), 1)[0])
    cond = _pushed_lid(v, nb)
    np.savez(tmp_path / "mesh.npz", vertices=v.astype(np.float32), faces=f.astype(np.int32))
    request = {
        "protocol": 1,
        "task": "structure",
        "mesh": "mesh.npz",
        "pins": list(cond.pins),
        "output": {"structure": "structure.json"},
    }
    (tmp_path / "find.json").write_text(json.dumps(request))
    done = run_any(read_request(tmp_path / "find.json"))
    assert done["type"] == "done" and done["info"]["types"] == {"fixed": 1, "hinge": 1}, done
    found = json.loads((tmp_path / "structure.json").read_text())
    for joint in found["joints"]:
        if joint["type"] == "hinge":
            joint["type"], joint["axis"] = "fixed", None
    request = {
        "protocol": 1,
        "mesh": "mesh.npz",
        "conditions": cond.to_dict(),
        "dynamics": "rig",
        "structure": found,
        "output": {"frames": "frames.npy"},
    }
    (tmp_path / "simulate.json").write_text(json.dumps(request))
    done = run_any(read_request(tmp_path / "simulate.json"))
    frames = np.load(done["frames"])
    assert np.abs(frames[-1] - frames[0]).max() < 0.002 * float(np.ptp(v, axis=0).max())
    request["dynamics"] = "latent"
    (tmp_path / "latent.json").write_text(json.dumps(request))
    with pytest.raises(Exception, match="rig"):
        read_request(tmp_path / "latent.json")


def test_a_part_s_kind_given_by_the_structure_is_how_it_moves():
    """A 1.2 m rod held at one end droops as the rope the geometry calls it, also with the
    structure found (its joint to the world is its pins'); made rigid in the structure, it
    stays straight; made a bending solid, it droops under its own stiffness."""
    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace import simulate_rig
    from training.eval.scene_meshes import tube

    v, f = tube(0.0125, 1.2, 0.05)
    v = v[:, [2, 1, 0]] + [0.0, 0.0, 1.0]  # along x, 1 m up
    f = f[:, [0, 2, 1]]
    pins = tuple(int(i) for i in np.flatnonzero(v[:, 0] < 0.051))
    cond = SimulationConditions(frames=24, fps=24, mass=1.0, damping=0.5, pins=pins)
    found = find_structure(v, f, pins=pins)
    assert [p.kind for p in found.parts] == ["rope"]
    tip = v[:, 0] > 1.19

    def drop(structure) -> float:
        result = simulate_rig(v, f, cond, structure=structure)
        return float(1.0 - result.positions[-1, tip, 2].mean())

    assert drop(found) > 0.5  # a rope held at one end hangs
    rigid = Structure(found.labels, (Part("rigid", 1.0),), found.joints)
    assert drop(rigid) < 1e-3
    bending = Structure(found.labels, (Part("bending solid", 1.0),), found.joints)
    assert 1e-3 < drop(bending)


def test_pieces_a_gap_apart_are_bridged_and_pieces_far_apart_are_not():
    """A block 1 cm above a base (a robot's links built a few millimetres apart): nothing
    touches, so the two are joined across the gap by a ball at its middle; 6 cm apart (20% of
    the size) they stay loose; touching, the contact's joint is the only one."""
    base = box_mesh((0.3, 0.3, 0.2), (0.0, 0.0, 0.0), 1)
    for gap, want in ((0.01, 1), (0.06, 0)):
        v, f = join_meshes(base, box_mesh((0.1, 0.1, 0.05), (0.0, 0.0, 0.125 + gap), 1))
        s = find_structure(v, f, learned=False)
        assert len(s.joints) == want
        if want:
            (joint,) = s.joints
            assert joint.type == "ball" and {joint.part_a, joint.part_b} == {0, 1}
            assert abs(joint.point[2] - (0.1 + gap / 2)) < 0.004  # in the gap
            assert s.bodies().max() == 1  # a ball: two bodies that hang together
            assert len(find_structure(v, f).joints) == 1  # the typer may type it, not drop it
    v, f = join_meshes(base, box_mesh((0.1, 0.1, 0.05), (0.0, 0.0, 0.125), 1))
    assert [j.type for j in find_structure(v, f, learned=False).joints] == ["contact"]


def test_a_bridge_to_a_pinned_piece_holds_across_its_gap_in_the_rig_step():
    """A block 1 cm under a pinned base: its structure (a bridge to the base, the base's pins)
    simulates, the bridge holding the block up across the gap where alone it falls; a joint
    to a pinned piece far away is still refused."""
    import dataclasses

    from neurok_core.dynamics import SimulationConditions
    from neurok_core.rigspace import simulate_rig

    base = box_mesh((0.3, 0.3, 0.2), (0.0, 0.0, 0.0), 1)
    v, f = join_meshes(base, box_mesh((0.1, 0.1, 0.05), (0.0, 0.0, -0.135), 1))
    nb = len(base[0])
    cond = SimulationConditions(pins=tuple(range(nb)), frames=12, damping=0.5)
    found = find_structure(v, f, pins=cond.pins, learned=False)
    assert sorted(j.type for j in found.joints) == ["ball", "fixed"]
    held = simulate_rig(v, f, cond, structure=found).positions
    fell = simulate_rig(v, f, cond).positions  # no structure: nothing holds the block
    drop = lambda p: float(p[0, nb:, 2].mean() - p[-1, nb:, 2].mean())  # noqa: E731
    assert drop(held) < 0.005 < 0.05 < drop(fell)
    far_v, far_f = join_meshes(base, box_mesh((0.1, 0.1, 0.05), (0.0, 0.0, 0.4), 1))
    far = find_structure(far_v, far_f, pins=cond.pins, learned=False)
    to_world = (dataclasses.replace(far.joints[0], type="ball", part_a=1, part_b=-1),)
    with pytest.raises(StructureError, match="touches no pinned part"):
        simulate_rig(far_v, far_f, cond, structure=Structure(far.labels, far.parts, to_world))
