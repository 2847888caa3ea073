"""One mesh of solid parts and cloth sheets (neurok_core.rigspace.mixed): which parts are
sheets, the conditions split between the two, and a flag modelled on its post that hangs from
it as cloth, sewn to it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from neurok_core.dynamics import Drag, Force, InitialVelocity, SimulationConditions
from neurok_core.rigspace.mixed import sheet_vertices, split_conditions
from neurok_core.rigspace.simulate import simulate_rig
from training.eval.scene_meshes import grid_box, sheet


def _flag_on_post(gap: float = 0.0):
    """A 10 x 10 x 120 cm post and a 60 x 40 cm flag whose hoist lies ``gap`` m off its +x
    face; (vertices, faces, the post's vertex count)."""
    pv, pf = grid_box((0.1, 0.1, 1.2), (0.0, 0.0, 0.6), 0.1)
    fv, ff, _ = sheet(0.6, 0.4, 0.05)  # in the xz plane: x along, z up
    fv = fv + [0.05 + gap, 0.0, 0.75]
    return np.concatenate([pv, fv]), np.concatenate([pf, ff + len(pv)]), len(pv)


def test_the_sheets_of_a_mesh_are_found_and_a_mesh_of_one_kind_is_left_alone():
    v, f, n = _flag_on_post()
    mask = sheet_vertices(v, f)
    assert mask is not None and not mask[:n].any() and mask[n:].all()
    pv, pf = grid_box((0.1, 0.1, 1.2), (0.0, 0.0, 0.6), 0.1)
    assert sheet_vertices(pv, pf) is None  # a solid alone
    assert sheet_vertices(v[n:], f[len(pf) :] - n) is None  # a sheet alone
    two = np.concatenate([pv, pv + [1.0, 0.0, 0.0]])
    assert sheet_vertices(two, np.concatenate([pf, pf + len(pv)])) is None


def test_conditions_go_to_the_part_they_act_on_and_the_rim_on_the_post_is_sewn():
    v, f, n = _flag_on_post()
    tip = int(np.argmax(v[:, 0]))  # a corner of the flag's fly
    foot = int(np.argmin(v[:, 2]))
    cond = SimulationConditions(
        mass=2.0,
        pins=(foot,),
        forces=(Force((0, 1, 0), 1.0, vertex=tip),),
        velocities=(InitialVelocity((1.0, 0.0, 0.0)),),
    )
    mask = sheet_vertices(v, f)
    solid, cloth, sewn, share = split_conditions(cond, v, f, mask)
    assert solid.forces == () and cloth.forces[0].vertex == tip - n
    assert solid.pins == (foot,)
    assert len(solid.velocities) == len(cloth.velocities) == 1  # the whole object's: both
    # the hoist's rim on the post's face: pinned (a column of the flag's vertices)
    hoist = np.flatnonzero(np.abs(v[n:, 0] - 0.05) < 1e-9)
    assert sewn == len(hoist) and set(hoist) <= set(cloth.pins)
    assert solid.mass + cloth.mass == pytest.approx(2.0) and 0 < cloth.mass < solid.mass
    assert cloth.mass == pytest.approx(2.0 * share)
    # a drag on a rim vertex on the post: it follows its handle, not sewn
    held = n + int(np.flatnonzero(np.abs(v[n:, 0] - 0.05) < 1e-9)[0])
    drag = Drag(target=tuple(v[held] + [0.0, 0.3, 0.0]), frame=10, vertex=held)
    _, dragged, sewn_then, _ = split_conditions(
        dataclasses.replace(cond, drags=(drag,)), v, f, mask
    )
    assert sewn_then == sewn - 1 and held - n not in dragged.pins
    assert dragged.drags[0].vertex == held - n
    # a flag 10 cm off the post is not sewn to it
    far_v, far_f, _ = _flag_on_post(gap=0.1)
    assert split_conditions(cond, far_v, far_f, sheet_vertices(far_v, far_f))[2] == 0


def test_a_flag_on_a_post_held_everywhere_hangs_from_it():
    """Every vertex of the post pinned: the post is the cloth's collider (no run of its own,
    which would refuse an object pinned everywhere), the flag sewn to it."""
    v, f, n = _flag_on_post()
    cond = SimulationConditions(frames=12, fps=24, mass=1.0, damping=0.2, pins=tuple(range(n)))
    result = simulate_rig(v, f, cond)
    p = result.positions.astype(np.float64)
    assert np.abs(p[:, :n] - v[:n]).max() < 1e-6
    fly = n + np.flatnonzero(v[n:, 0] > 0.6)
    assert v[fly, 2].mean() - p[-1, fly, 2].mean() > 0.05
    hoist = n + np.flatnonzero(np.abs(v[n:, 0] - 0.05) < 1e-9)
    assert np.abs(p[:, hoist] - v[hoist]).max() < 0.002
    assert result.rig is not None and np.abs(result.rig.skin(v, 11) - p[-1]).max() < 0.01


def test_a_flag_modelled_on_its_post_hangs_from_it_as_cloth():
    v, f, n = _flag_on_post()
    foot = tuple(int(i) for i in np.flatnonzero(v[:n, 2] < 1e-9))
    cond = SimulationConditions(frames=24, fps=24, mass=1.0, damping=0.2, pins=foot)
    result = simulate_rig(v, f, cond)
    p = result.positions.astype(np.float64)
    assert p.shape == (24, len(v), 3) and result.info["space"]["kind"] == "mixed"
    fly = n + np.flatnonzero(v[n:, 0] > 0.6)  # the flag's far edge
    hoist = n + np.flatnonzero(np.abs(v[n:, 0] - 0.05) < 1e-9)
    # the far edge falls as cloth does (a rigid flag on its post would not move)
    assert v[fly, 2].mean() - p[-1, fly, 2].mean() > 0.2
    assert np.abs(p[:, hoist] - v[hoist]).max() < 0.002  # sewn to the post
    assert np.abs(p[:, :n] - v[:n]).max() < 0.002  # the post, pinned at its foot, stands
    assert result.info["edge_strain_max"] < 0.05
    # one rig of the whole mesh replays it
    rig = result.rig
    assert rig is not None and rig.vertex_bones.shape[0] == len(v)
    assert np.abs(rig.skin(v, 23) - p[-1]).max() < 0.01


def test_the_command_line_simulates_a_flag_on_its_post(tmp_path, capsys):
    import trimesh

    from neurok_core.cli import main
    from neurok_core.results import load_result

    v, f, n = _flag_on_post()
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "flagpost.obj")
    args = ["simulate", str(tmp_path / "flagpost.obj"), "--pin-below", "0.001", "--frames", "6"]
    args += ["--material", "silk", "--quiet", "--out", str(tmp_path / "out.npz")]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote ") and "rig space" in out
    info = load_result(tmp_path / "out.npz").info
    assert info["space"]["kind"] == "mixed" and info["sewn"] > 0


def test_a_mesh_of_cloth_and_solids_moves_alone_in_a_scene():
    from neurok_core.errors import ConditionError
    from neurok_core.rigspace.objects import SceneObject, simulate_objects

    v, f, n = _flag_on_post()
    pv, pf = grid_box((0.2, 0.2, 0.2), (1.0, 0.0, 0.1), 0.1)
    objects = [SceneObject("flagpost", v, f), SceneObject("box", pv, pf)]
    with pytest.raises(ConditionError, match="moves alone"):
        simulate_objects(objects, SimulationConditions(frames=4))
