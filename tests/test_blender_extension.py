"""The extension installed into real Blender: registration, conditions, gizmos, bad cases."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_register_unregister_twice_under_bl_ext(tmp_path, zip_path):
    out = run_scenario("register_cycle", tmp_path, zip_path)
    for cycle in out["cycles"]:
        assert not any(cycle["disabled"].values()), cycle
        assert all(cycle["enabled"].values()), cycle
    assert out["modules"] and all(
        m.startswith("bl_ext.user_default.neurok") for m in out["modules"]
    )
    assert out["addon_package"] == "bl_ext.user_default.neurok"
    assert "extensions" in out["user_dir"] and str(tmp_path) in out["user_dir"]
    assert out["extension_root_has_core"]
    assert not out["torch_loaded"]


def test_conditions_and_gizmos(tmp_path, zip_path):
    out = run_scenario("conditions", tmp_path, zip_path)
    assert out["add_force"][0] == "FINISHED", out["add_force"]
    force = out["force"]
    assert force["parent"] == "Sheet" and force["kind"] == "FORCE"
    assert force["display"] == "SINGLE_ARROW"
    assert abs(force["local"][2]) < 1e-5  # snapped onto the sheet (local z = 0)
    assert abs(force["local"][0] - 0.1) < 1e-5 and abs(force["local"][1] - 0.2) < 1e-5
    assert force["z_dot_normal"] > 0.9999  # local Z = outward normal
    assert force["anchor_vertex"] == -1
    assert force["selected"] == [force["name"]]
    assert out["target_with_force_active"] == "Sheet"
    assert out["add_drag_edit"][0] == "FINISHED" and out["add_velocity_edit"][0] == "FINISHED"
    assert out["drag"]["anchor_vertex"] == 5 and out["drag"]["at_vertex"] < 1e-5
    assert out["drag"]["display"] == "SPHERE"
    assert 1 < out["drag"]["frame"] <= 12
    assert out["velocity"]["anchor_vertex"] == 5
    assert len(out["conditions"]) == 3
    # gizmos: an arrow bound to the strength of each force, to the speed of each velocity, a
    # move gizmo bound to each drag handle's location; all drawn where the Empties are
    assert out["gizmo_poll_active"]
    by_type = {(g["type"], g["prop"]) for g in out["gizmos"]}
    assert by_type == {
        ("GIZMO_GT_arrow_3d", "strength"),
        ("GIZMO_GT_arrow_3d", "speed"),
        ("GIZMO_GT_move_3d", "location"),
    }
    strength = next(g for g in out["gizmos"] if g["prop"] == "strength")
    assert strength["value"] == 42.0 and strength["data_is_condition"]
    assert all(g["origin_error"] < 1e-5 for g in out["gizmos"]), out["gizmos"]
    assert out["gizmo_follows"] < 1e-5
    assert not out["gizmo_poll_other"] and out["specs_other"] == 0
    assert out["select"][0] == "FINISHED"
    assert out["active_after_select"].startswith("NeuROK Drag")
    assert out["remove"][0] == "FINISHED" and len(out["after_remove"]) == 2
    assert out["remove_missing"][0] == "ERROR" and "no NeuROK condition" in out["remove_missing"][1]
    assert out["add_force_cube"][0] == "FINISHED"
    assert out["add_force_camera"][0] == "ERROR"


def test_refusals_leave_the_scene_untouched(tmp_path, zip_path):
    out = run_scenario("refusals", tmp_path, zip_path)
    expected = {
        "no_active": "no active object",
        "camera": "camera object",
        "empty_mesh": "has no vertices",
        "no_faces": "has no faces",
        "over_limit": "more than the limit of 10",
        "missing_checkpoint": "checkpoint folder",
        "missing_python": "does not exist",
        "edit_mode": "Edit Mode",
        "one_frame": "at least two frames",
        "missing_pin_group": "pin group 'Missing' does not exist",
        "drag_out_of_range": "arrives at frame 40",
        "nan_mesh": "25 of 25 vertices at NaN or infinite positions",
    }
    for case, words in expected.items():
        got = out[case]
        assert got["status"] == "ERROR", (case, got)
        assert words in got["message"], (case, got["message"])
        assert "Traceback" not in got["message"]
        assert got["untouched"], case
    assert not out["worker_started"]


def test_gather_world_space_request(tmp_path, zip_path):
    import numpy as np

    out = run_scenario("gather_world_space", tmp_path, zip_path)
    assert out["vertex_error"] < 1e-5  # parent, rotation, non-uniform scale
    # two octagon caps (6 triangles each) and 8 side quads (2 each)
    assert out["faces"] == [28, 3] and out["faces_max"] == 15 and out["polygons"] == 10
    cond = out["conditions"]
    assert cond["pins"] == [0, 1, 2, 3]  # weight 0.3 is not pinned
    assert cond["gravity"] == [0.0, 0.0, -5.0]
    assert cond["frames"] == 20 and abs(cond["fps"] - 30 / 1.001) < 1e-4
    assert cond["mass"] == 3.0 and cond["stiffness"] == 2.0 and cond["damping"] == 0.5
    (force,) = cond["forces"]
    assert force["vertex"] == 6 and force["point"] is None and force["strength"] == 7.0
    assert (force["start_frame"], force["end_frame"]) == (2, 7)  # scene 13..18, first 11
    np.testing.assert_allclose(force["direction"], out["force_world_z"], atol=1e-6)
    (drag,) = cond["drags"]
    assert drag["frame"] == 5 and drag["vertex"] is None
    np.testing.assert_allclose(drag["target"], out["drag_target"], atol=1e-5)
    np.testing.assert_allclose(drag["point"], out["grabbed"], atol=1e-5)
    (velocity,) = cond["velocities"]
    assert velocity["vertex"] is None and velocity["point"] is None
    assert abs(np.linalg.norm(velocity["velocity"]) - 2.0) < 1e-6
    assert out["frame_start"] == 11 and out["frame_count"] == 20
    assert out["moved_force"]["vertex"] is None
    np.testing.assert_allclose(out["moved_force"]["point"], out["moved_force_location"], atol=1e-5)
    assert out["gravity_off"] == [0.0, 0.0, 0.0]
    assert out["plain_warnings"] == []
    (posed,) = out["posed_warnings"]
    assert "deformed by Armature 'Pose'" in posed and "rest" in posed and "Smooth It" not in posed
    assert "extensions" in out["cache_dir"]
    # the Dynamics choice: the rig space unless told; the learned space alone needs the model
    assert out["dynamics"] == "rig" and out["latent_dynamics"] == "latent"
    assert "checkpoint folder" in out["latent_missing_checkpoint"]
    assert out["rig_missing_checkpoint"].endswith("nowhere")
    assert out["default_material"] == "" and out["denim"] == "denim"
    assert out["default_self_collision"] is False and out["self_collision"] is True


def test_panels_and_preferences_lay_out_existing_properties(tmp_path, zip_path):
    out = run_scenario("panels", tmp_path, zip_path)
    for state, log in out.items():
        assert log["errors"] == [], (state, log["errors"])
    assert "Select a mesh object to simulate" in out["nothing"]["labels"]
    assert "neurok.simulate" not in out["nothing"]["operators"]
    mesh = out["mesh"]
    assert {"neurok.add_force", "neurok.add_drag", "neurok.add_velocity"} <= set(mesh["operators"])
    assert {"mass", "stiffness", "damping", "use_gravity", "pin_group", "dynamics"} <= set(
        mesh["props"]
    )
    assert {"cloth_material", "cloth_self_collision"} <= set(mesh["props"])
    assert "bake_mode" in mesh["props"]
    assert "neurok.simulate" in mesh["operators"]
    assert {"strength", "use_frame_range", "frame_start", "frame_end"} <= set(
        out["active_FORCE"]["props"]
    )
    assert "frame" in out["active_DRAG"]["props"]
    assert {"speed", "whole_object"} <= set(out["active_VELOCITY"]["props"])
    assert out["active_VELOCITY"]["operators"].count("neurok.remove_condition") == 3
    assert "neurok.clear_results" in out["results"]["operators"]
    pressed = "Beyond the learned shapes in 6 of 12 frames (stretched 12%)"
    assert pressed in out["results_pressed"]["labels"] and pressed not in out["results"]["labels"]
    running = out["running"]
    assert running["progress"] == [[0.4, "Simulating: frame 3 of 12"]]
    assert "neurok.cancel" in running["operators"] and "neurok.simulate" not in running["operators"]
    prefs = out["preferences"]
    assert {"python_path", "device", "checkpoint", "max_vertices"} <= set(prefs["props"])
    assert {"neurok.install_dependencies", "neurok.check_engine"} <= set(prefs["operators"])
