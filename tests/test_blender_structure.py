"""The Structure panel's path in real Blender with a real engine (``sc_structure``): Find
Structure, the panel and the viewport's joints, a Simulate that follows an edited joint, the
edit saved with the .blend and undone, a changed mesh refused."""

import pytest
from blender.harness import built_zip, run_engine_scenario, run_scenario

from neurok_core.structure import JOINT_TYPES

pytestmark = [pytest.mark.blender, pytest.mark.slow]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_the_panel_s_joint_types_are_the_engine_s():
    import ast
    from pathlib import Path

    from conftest import ROOT

    tree = ast.parse(Path(ROOT, "neurok_blender/properties/structure.py").read_text())
    items = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and node.targets[0].id == "JOINT_TYPE_ITEMS"
    )
    assert tuple(item.elts[0].value for item in items.elts) == JOINT_TYPES


def test_the_panel_s_part_kinds_are_the_engine_s():
    import ast
    from pathlib import Path

    from conftest import ROOT

    from neurok_core.structure import PART_KINDS

    tree = ast.parse(Path(ROOT, "neurok_blender/properties/structure.py").read_text())
    kinds = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and node.targets[0].id == "PART_KINDS"
    )
    assert sorted(item.value for item in kinds.elts) == sorted(PART_KINDS)


def test_a_part_made_rigid_in_the_panel_is_simulated_rigid_and_saved(tmp_path, zip_path):
    out = run_engine_scenario("part_kind", tmp_path, zip_path)
    assert out["find"][0] == "FINISHED", out["find"]
    assert out["kinds"] == ["rope"]
    assert out["simulate_found"][0] == "FINISHED", out["simulate_found"]
    assert out["simulate_rigid"][0] == "FINISHED", out["simulate_rigid"]
    assert out["drop_found"] > 0.05  # a rope held at one end droops
    assert out["drop_rigid"] < 0.002  # made rigid, held at one end, it stays straight
    assert out["kind_after_edit"] == "rigid"
    assert out["reloaded"] == ["rigid", "rope", "RIGID"]


def test_an_edited_structure_is_simulated_saved_and_undone(tmp_path, zip_path):
    out = run_engine_scenario("structure_panel", tmp_path, zip_path)
    assert out["find"][0] == "FINISHED", out["find"]
    assert [kind for kind, _ in out["parts"]] == ["rigid", "rigid"]
    assert sum(count for _, count in out["parts"]) == 2 * out["nb"]
    assert sorted(t for t, _, _ in out["joints"]) == ["fixed", "hinge"]  # base to world, lid
    assert out["hinge_axis"] is not None and abs(abs(out["hinge_axis"][0]) - 1.0) < 0.05
    assert sorted(out["segments"]) == ["fixed", "hinge"]
    assert out["colors"] == [2 * out["nb"], 2]  # a colour per vertex, one per part
    assert "2 parts: 2 rigid" in out["panel_labels"]
    assert out["simulate_hinge"][0] == "FINISHED", out["simulate_hinge"]
    assert out["simulate_fixed"][0] == "FINISHED", out["simulate_fixed"]
    # the found hinge lets the pushed lid turn; welded, it stays (the base is pinned)
    assert out["travel_hinge"] > 0.02
    assert out["travel_fixed"] < 0.002
    assert sorted(map(tuple, out["reloaded_joints"])) == [("fixed", "fixed"), ("fixed", "hinge")]
    assert sorted(out["after_undo"]) == ["fixed", "fixed"]
    assert out["changed_mesh"][0] != "FINISHED"
    assert "Find Structure again" in out["changed_mesh"][1]
    assert out["clear"][0] == "FINISHED" and out["parts_after_clear"] == 0


def test_a_solid_preset_sets_the_physics_from_the_volume(tmp_path, zip_path):
    out = run_scenario("solid_presets", tmp_path, zip_path, timeout=300)
    assert out["steel"][0] == "FINISHED"
    mass, stiffness, friction, bounciness = out["steel_fields"]
    assert mass == pytest.approx(7850.0 * 0.4 * 0.2 * 0.2, rel=1e-4)  # the world volume
    assert (stiffness, friction, bounciness) == pytest.approx((0.0, 0.4, 0.2))
    assert out["jelly_fields"][0] == pytest.approx(1050.0 * 0.016, rel=1e-4)
    assert out["jelly_fields"][1] == pytest.approx(4.0)
    assert out["open"][0] != "FINISHED" and out["open_mass_unchanged"]
