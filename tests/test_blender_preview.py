"""The live preview in real Blender with a real preview engine (``sc_preview``): it follows a
dragged strength, the newest change cancels an older preview, and nothing of the scene changes."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = [pytest.mark.blender, pytest.mark.slow]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_the_preview_follows_a_drag_and_leaves_the_scene_alone(tmp_path, zip_path):
    (tmp_path / "tmpdir").mkdir()
    (tmp_path / "no_model").mkdir()
    out = run_scenario(
        "live_preview",
        tmp_path,
        zip_path,
        timeout=600,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tmp_path / "no_model"),
    )
    assert out["add_force"][0] == "FINISHED"
    assert out["start"][0] == "FINISHED" and out["active"]
    assert out["first"] == {"frames": 10, "state": "done"}
    assert any(label.startswith("Preview: 10 frames in") for label in out["labels"]), out
    # the push moves the cube, and a stronger push (the dragged gizmo) further
    assert out["travel_weak"] > 0.0
    assert out["travel_strong"] > 2.0 * out["travel_weak"]
    assert out["older"] == "superseded" and out["newer"] == "done"
    assert out["travel_weak"] < out["travel_last"] < out["travel_strong"]
    assert out["runs_unchanged"] == 0  # no change, no new preview
    assert "pin group 'nope' does not exist" in out["bad_setting"]
    assert out["setting_back"].startswith("10 frames in"), out["setting_back"]
    assert out["pins_first"] == [0] and out["pins_edited"] == [0, 1]
    assert out["during"] and out["after"]  # the object and the frame were never touched
    assert out["stop"][0] == "FINISHED" and not out["active_after"]
    assert not out["engine_alive_after"]
    # a crashing engine: one run, its failure shown, no engine started again without a change
    assert out["crash_runs"] == 1 and not out["crash_engine"]
    assert "preview engine stopped" in out["crash_status"], out["crash_status"]
    assert "boom" in out["crash_status"]
