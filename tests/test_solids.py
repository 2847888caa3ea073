"""Solid material presets (``neurok_core.solids``) and ``--material`` on the command line."""

import json

import numpy as np
import pytest
import trimesh

from neurok_core.cli import main
from neurok_core.errors import ConditionError
from neurok_core.solids import SOLID_MATERIALS, is_closed, mesh_volume, solid_fields


def test_the_volume_of_a_closed_mesh_whatever_its_placement():
    box = trimesh.creation.box((0.2, 0.3, 0.4))
    box.apply_transform(trimesh.transformations.rotation_matrix(0.7, (1.0, 2.0, 0.5)))
    box.apply_translation((3.0, -2.0, 5.0))
    assert mesh_volume(box.vertices, box.faces) == pytest.approx(0.024, rel=1e-9)
    assert mesh_volume(box.vertices, box.faces[:, ::-1]) == pytest.approx(0.024, rel=1e-9)
    assert is_closed(box.faces) and not is_closed(box.faces[:-1])


def test_a_preset_weighs_the_mesh_and_refuses_an_open_one():
    box = trimesh.creation.box((0.1, 0.1, 0.1))
    fields = solid_fields("Steel", box.vertices, box.faces, True)
    assert fields["mass"] == pytest.approx(7.85, rel=1e-9)
    m = SOLID_MATERIALS["steel"]
    assert (fields["stiffness"], fields["friction"], fields["bounciness"]) == (
        m.stiffness,
        m.friction,
        m.bounciness,
    )
    with pytest.raises(ConditionError, match="not closed"):
        solid_fields("wood", box.vertices, box.faces[:-1], False)
    with pytest.raises(ConditionError, match="unknown solid material"):
        solid_fields("granite", box.vertices, box.faces, True)


def test_the_cli_material_is_a_solid_s_or_a_cloth_s_by_the_mesh(tmp_path):
    box = trimesh.creation.box((0.1, 0.1, 0.1))
    box.apply_translation((0.0, 0.0, 0.05))
    box.export(tmp_path / "box.obj")
    sheet = trimesh.creation.box((1.0, 1.0, 0.001))
    flat = trimesh.Trimesh(sheet.vertices * (1, 1, 0), sheet.faces[sheet.face_normals[:, 2] > 0])
    flat.apply_translation((0.0, 0.0, 1.0))
    flat.export(tmp_path / "sheet.obj")

    def run(mesh, *flags):
        out = tmp_path / f"{mesh}.npz"
        code = main(
            ["simulate", str(tmp_path / f"{mesh}.obj"), "--out", str(out), "--frames", "3"]
            + ["--dynamics", "rig", "--quiet", *flags]
        )
        return code, out

    code, out = run("box", "--material", "rubber", "--friction", "0.2")
    assert code == 0
    conditions = json.loads(str(np.load(out, allow_pickle=False)["conditions"]))
    assert conditions["mass"] == pytest.approx(1.1, rel=1e-6)  # 1100 kg/m^3 x 1 litre
    assert conditions["stiffness"] == SOLID_MATERIALS["rubber"].stiffness
    assert conditions["friction"] == 0.2  # a flag given wins
    assert conditions["material"] == ""
    code, out = run("box", "--material", "steel", "--mass", "2")
    conditions = json.loads(str(np.load(out, allow_pickle=False)["conditions"]))
    assert code == 0 and conditions["mass"] == 2.0
    code, out = run("sheet", "--material", "rubber")  # a cloth: Blender's cloth preset
    conditions = json.loads(str(np.load(out, allow_pickle=False)["conditions"]))
    assert code == 0 and conditions["material"] == "rubber" and conditions["mass"] == 1.0
    code, _ = run("sheet", "--material", "steel")
    assert code != 0
