"""Bake as a rig in real Blender with a real engine process (a tiny skinned model with random
bones, so the test is fast): the armature plays back the engine's vertices, is editable, and
undo, re-simulate and Clear leave exactly the user's data."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = [pytest.mark.blender, pytest.mark.slow]

PLAYBACK_TOLERANCE = 0.005  # of the object's size (the rig issue's target)


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_rig_bake(tmp_path, zip_path, tiny_skinned_checkpoint):
    (tmp_path / "tmpdir").mkdir()
    out = run_scenario(
        "rig_flow",
        tmp_path,
        zip_path,
        timeout=900,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tiny_skinned_checkpoint),
    )
    before = out["before"]
    assert out["simulate"][0] == "FINISHED", out["simulate"]
    after = out["after_rig"]
    # an armature beside the mesh, with its world transform, bones named clear of the user's
    # vertex group "NeuROK.000", one bone collection, an Armature modifier on top
    assert out["armature"] == "Sheet NeuROK Rig" and out["armature_matrix_error"] < 1e-6
    bones = out["bones"]
    assert bones and all(b.startswith("NeuROK_2.") for b in bones), bones
    assert out["bone_collections"] == ["NeuROK"] and out["bones_in_collection"] == len(bones)
    assert out["modifier"] == ["ARMATURE", True, True]
    assert after["modifiers"] == ["NeuROK Rig", "User Subsurf"]
    assert after["groups"][0] == "NeuROK.000" and set(after["groups"][1:]) <= set(bones)
    assert out["user_group_weights"] == [0.25, 0.25, 0.25, 0.0]
    # every pose bone's location (3) and rotation (4) keyed on each of the 5 frames
    assert out["fcurves"] == 7 * len(bones) and out["keys_per_fcurve"] == [5]
    assert out["edited_key_moves"] > 1e-3  # a real rig: editing a key changes the playback
    assert out["after_undo"] == before  # one undo step takes the whole bake back
    # the rig plays the engine's vertices back (the same run baked as shape keys)
    for tag in ("sheet", "box", "pinned"):
        assert out[f"{tag}_rig"][0] == "FINISHED" and out[f"{tag}_keys"][0] == "FINISHED"
        assert out[f"{tag}_motion"] > 0.01, out[f"{tag}_motion"]  # it moved
        assert out[f"{tag}_playback_error"] < PLAYBACK_TOLERANCE, out[f"{tag}_playback_error"]
    assert out["auto"][0] == "FINISHED" and out["auto_mode"] == "RIG"  # the default, bones
    assert out["auto_clear"][0] == "FINISHED"
    # re-simulating as shape keys replaced the rig: no armature, groups or action of ours left
    keys_state = out["sheet_state_keys"]
    assert keys_state["armatures"] == [] and keys_state["groups"] == ["NeuROK.000"]
    assert keys_state["modifiers"] == ["User Subsurf"]
    # Clear after a rig bake leaves exactly the user's data
    assert out["simulate_again"][0] == "FINISHED" and out["clear"][0] == "FINISHED"
    cleared = out["after_clear"]
    assert cleared["groups"] == ["NeuROK.000"] and cleared["modifiers"] == ["User Subsurf"]
    assert cleared["armatures"] == [] and cleared["results"] == "NONE"
    assert not any("NeuROK Rig" in o for o in cleared["objects"])
    assert out["user_group_after_clear"] == [0.25, 0.25, 0.25, 0.0]
    # an unequally scaled object is refused with a message, nothing changes
    assert out["unequal_scale"][0] == "ERROR" and "scaled unequally" in out["unequal_scale"][1]
    assert out["after_refusal"] == cleared
