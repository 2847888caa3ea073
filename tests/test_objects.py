"""Several objects in one simulation (neurok_core.rigspace.objects): the merged space, contact
and momentum between objects, each object's own conditions, static colliders, the split
results and the errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from mesh_pieces import box_mesh

from neurok_core.dynamics import Force, InitialVelocity, SimulationConditions
from neurok_core.errors import ConditionError
from neurok_core.rigspace import build_rig_space
from neurok_core.rigspace.objects import SceneObject, merge_spaces, simulate_objects
from training.eval.multi_scenes import swing_door

NO_GRAVITY = (0.0, 0.0, 0.0)


def _box(name, centre, extents=(0.2, 0.2, 0.2), **conditions) -> SceneObject:
    v, f = box_mesh(extents, np.asarray(centre, dtype=np.float64), subdivisions=1)
    return SceneObject(name, v, f, SimulationConditions(**conditions))


def test_merged_space_keeps_each_objects_bones_parts_and_joints_apart():
    door_v, door_f, _, door_pins = swing_door(edge=0.25)  # a panel hinged on a pinned post
    ball_v, ball_f = box_mesh((0.1, 0.1, 0.1), np.array([1.0, 0.0, 0.05]))
    a = build_rig_space(door_v, door_f, mass=2.0, pins=door_pins)
    b = build_rig_space(ball_v, ball_f, mass=0.5, elastic=True)
    merged, bones = merge_spaces([a, b])
    assert merged.num_bones == a.num_bones + b.num_bones
    assert [j.kind for j in merged.joints] == [j.kind for j in a.joints] == ["hinge"]
    rows = merged.rows.toarray().reshape(len(merged.vertices), -1, 4)
    used = np.abs(rows).sum(2) > 0  # (N, B) the bones each vertex moves with
    na = len(door_v)
    assert not used[:na][:, bones[1]].any() and not used[na:][:, bones[0]].any()
    # every vertex sits at its own row times the rest state, as in its own space
    rest = merged.rest().reshape(-1, 3)
    np.testing.assert_allclose(merged.rows @ rest, merged.vertices, atol=1e-12)
    assert merged.masses[:na].sum() == pytest.approx(2.0)
    assert merged.masses[na:].sum() == pytest.approx(0.5)
    assert merged.fixed[bones[0]].any() and not merged.fixed[bones[1]].any()


def test_objects_whose_vertices_have_more_bones_merge_with_the_others():
    import dataclasses

    a = build_rig_space(*box_mesh((0.2, 0.2, 0.2), np.zeros(3)), mass=1.0)
    b = build_rig_space(*box_mesh((0.2, 0.2, 0.2), np.array([1.0, 0.0, 0.0])), mass=1.0)
    # b's vertices with a fifth bone slot at weight 0 (a space may give its vertices more)
    wide = np.concatenate([b.vertex_bones, b.vertex_bones[:, :1]], axis=1)
    b = dataclasses.replace(
        b, vertex_bones=wide, vertex_weights=np.pad(b.vertex_weights, ((0, 0), (0, 1)))
    )
    merged, bones = merge_spaces([a, b])
    assert merged.vertex_bones.shape == (len(a.vertices) + len(b.vertices), 5)
    na = len(a.vertices)
    np.testing.assert_array_equal(merged.vertex_weights[:na, 4], 0.0)
    np.testing.assert_array_equal(merged.vertex_bones[na:, :4], bones[1][b.vertex_bones[:, :4]])


def test_a_box_hitting_a_resting_box_passes_its_momentum_on():
    """Head-on, frictionless, no gravity: the moving box stops nearly dead and the one it hits
    moves off (bounciness 0.1: 0.45 and 0.55 of the speed), the total momentum kept."""
    speed = 1.0
    scene = SimulationConditions(
        frames=24, fps=24.0, gravity=NO_GRAVITY, friction=0.0, damping=0.0, bounciness=0.1
    )
    objects = [
        _box("hit", (-0.3, 0.0, 0.0), velocities=(InitialVelocity((speed, 0.0, 0.0)),)),
        _box("still", (0.0, 0.0, 0.0)),
    ]
    out = simulate_objects(objects, scene)
    v_hit = (out["hit"].positions[-1] - out["hit"].positions[-2]).mean(0)[0] * 24.0
    v_still = (out["still"].positions[-1] - out["still"].positions[-2]).mean(0)[0] * 24.0
    assert v_hit + v_still == pytest.approx(speed, rel=0.05)
    assert v_hit == pytest.approx(0.45 * speed, abs=0.05 * speed)
    assert v_still == pytest.approx(0.55 * speed, abs=0.05 * speed)
    gap = out["still"].positions[:, :, 0].min(1) - out["hit"].positions[:, :, 0].max(1)
    assert gap.min() > -0.01 * 0.2  # no deeper than 1% of a box into the other


def test_each_objects_conditions_move_only_it():
    scene = SimulationConditions(frames=8, fps=24.0, gravity=NO_GRAVITY)
    pushed = _box("pushed", (0.0, 0.0, 0.0), forces=(Force((0.0, 1.0, 0.0), 5.0, vertex=0),))
    thrown = _box("thrown", (1.0, 0.0, 0.0), velocities=(InitialVelocity((0.0, 0.0, 1.0)),))
    idle = _box("idle", (2.0, 0.0, 0.0))
    out = simulate_objects([pushed, thrown, idle], scene)
    moved = {n: np.abs((r.positions[-1] - r.positions[0]).mean(0)) for n, r in out.items()}
    assert moved["pushed"][1] > 0.01 and moved["pushed"][2] < 1e-3
    assert moved["thrown"][2] > 0.2 and moved["thrown"][1] < 1e-3
    assert moved["idle"].max() < 1e-6
    # each result is its own object's: its vertices, its rig replaying them
    for o in (pushed, thrown, idle):
        r = out[o.name]
        assert r.positions.shape == (8, len(o.vertices), 3)
        np.testing.assert_allclose(r.rig.skin(o.vertices, 7), r.positions[7], atol=1e-5)


def test_a_box_dropped_on_a_static_box_rests_on_it():
    scene = SimulationConditions(frames=36, fps=24.0, ground=0.0, damping=0.5)
    base = SceneObject("base", *box_mesh((0.4, 0.4, 0.2), np.array([0.0, 0.0, 0.1])), static=True)
    top = _box("top", (0.05, 0.0, 0.35))
    out = simulate_objects([base, top], scene)
    assert set(out) == {"top"}
    bottom = out["top"].positions[:, :, 2].min(1)
    assert bottom[-1] == pytest.approx(0.2, abs=0.01 * 0.2)
    assert bottom.min() > 0.2 - 0.01 * 0.2


def test_a_scene_refuses_what_it_cannot_run():
    scene = SimulationConditions(frames=4)
    box = _box("box", (0.0, 0.0, 0.0))
    with pytest.raises(ConditionError, match="differ"):
        simulate_objects([box, _box("box", (1.0, 0.0, 0.0))], scene)
    with pytest.raises(ConditionError, match="static"):
        simulate_objects([SceneObject("s", box.vertices, box.faces, static=True)], scene)
    with pytest.raises(ConditionError, match="at least one"):
        simulate_objects([], scene)
    sheet_v = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]], dtype=np.float64) + 2.0
    cloth = SceneObject("cloth", sheet_v, np.array([[0, 1, 2], [1, 3, 2]]))
    other = SceneObject("other", sheet_v + 1.0, np.array([[0, 1, 2], [1, 3, 2]]))
    with pytest.raises(ConditionError, match="one cloth"):
        simulate_objects([box, cloth, other], scene)
    with pytest.raises(ConditionError, match="vertex"):
        simulate_objects([_box("far", (0, 0, 0), pins=(10_000,)), cloth], scene)


def test_the_command_line_simulates_several_meshes(tmp_path, capsys):
    import trimesh

    from neurok_core.cli import main

    for name, centre in (("hit", (-0.3, 0.0, 0.1)), ("still", (0.0, 0.0, 0.1))):
        v, f = box_mesh((0.2, 0.2, 0.2), np.array(centre), subdivisions=1)
        trimesh.Trimesh(v, f, process=False).export(tmp_path / f"{name}.obj")
    v, f = box_mesh((1.0, 1.0, 0.1), np.array([0.0, 0.0, -0.05]))
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "floor.obj")
    meshes = [str(tmp_path / f"{n}.obj") for n in ("hit", "still", "floor")]
    out = tmp_path / "out"
    argv = ["simulate", *meshes, "--static", "floor", "--velocity", "hit:all:2,0,0"]
    assert main([*argv, "--mass", "still:2", "--frames", "12", "--out", str(out), "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["hit.npz", "still.npz"]
    hit, still = (np.load(out / f"{n}.npz")["positions"] for n in ("hit", "still"))
    assert hit.shape == still.shape == (12, 26, 3)  # a cube split once: 26 vertices
    assert hit[-1, :, 0].mean() > hit[0, :, 0].mean() + 0.05  # thrown along +x
    assert hit[:, :, 2].min() > -0.01 * 0.2  # on the static floor, not through it
    capsys.readouterr()
    for bad, says in (
        (["--velocity", "0:1,0,0"], "name the object first"),
        (["--static", "nope"], "not a mesh of the scene"),
        (["--mass", "ghost:2"], "name the object first"),
    ):
        assert main(["simulate", *meshes[:2], *bad, "--out", str(tmp_path / "o2")]) == 2
        assert says in capsys.readouterr().err
    assert main(["simulate", *meshes[:2], "--out", str(tmp_path / "x.npz")]) == 2
    assert "folder" in capsys.readouterr().err
    (tmp_path / "taken").write_text("")
    assert main(["simulate", *meshes[:2], "--out", str(tmp_path / "taken")]) == 2
    assert "a file is there" in capsys.readouterr().err
    forces = tmp_path / "forces.json"
    forces.write_text('{"forces": [{"direction": [1, 0, 0], "strength": 1, "vertex": 0}]}')
    argv = ["simulate", *meshes[:2], "--conditions", str(forces), "--out", str(tmp_path / "o3")]
    assert main(argv) == 2 and "per object" in capsys.readouterr().err
    # a plain --mass is every object's, the last one given as for one mesh; STEM:KG one's
    argv = ["simulate", *meshes[:2], "--mass", "2", "--mass", "5", "--mass", "hit:3"]
    assert main([*argv, "--frames", "2", "--out", str(tmp_path / "o4"), "--quiet"]) == 0
    masses = {
        n: json.loads(str(np.load(tmp_path / "o4" / f"{n}.npz")["conditions"]))["mass"]
        for n in ("hit", "still")
    }
    assert masses == {"hit": 3.0, "still": 5.0}


def test_every_contact_point_belongs_to_its_part():
    """Contact points (picked vertices, and surface points for parts of few vertices) each
    carry their own part's label: its row moves only that part's bones, its place is on it."""
    from neurok_core.rigspace import RigSettings
    from neurok_core.rigspace.simulate import _contact
    from neurok_core.rigspace.space import build_rig_space

    v, f = (
        np.concatenate(
            [box_mesh((0.2, 0.2, 0.2), np.array(c))[0] for c in ((0, 0, 0.1), (1, 0, 0.1))]
        ),
        np.concatenate([box_mesh((0.2, 0.2, 0.2), np.zeros(3))[1] + 8 * i for i in range(2)]),
    )
    space = build_rig_space(v, f, mass=2.0)
    conditions = SimulationConditions(ground=0.0, frames=2)
    contacts = _contact(space, conditions, RigSettings(), 10.0)
    assert contacts
    for contact in contacts:
        rows = contact.points.rows.reshape(len(contact.points.rows), -1, 4)
        moved = np.abs(rows).sum(2) > 0  # (P, B) the bones each point moves with
        for point, part in enumerate(contact.points.owners):
            assert set(np.flatnonzero(moved[point])) <= set(
                np.flatnonzero(space.bone_parts == part)
            )
