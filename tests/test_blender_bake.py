"""Baking frames onto an object in real Blender: shape keys keyed on the timeline or a PC2 point
cache; re-baking and Clear touch only what the bake added."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_bake_replace_clear(tmp_path, zip_path):
    out = run_scenario("bake_roundtrip", tmp_path, zip_path)
    count = 12
    ours = [f"NeuROK {f:04d}" for f in range(1, count + 1)]
    assert out["keys_after_bake"] == ["Basis", "User Key", *ours]
    # every frame shows its own key exactly (world space through parent, rotation, scale)
    assert out["moving"] > 0.05
    assert max(out["shape_key_errors"]) < 1e-4, out["shape_key_errors"]
    assert out["active_key"] == "User Key"
    assert out["fcurves"] == count + 1 and out["user_fcurve_kept"]
    assert out["mixed_error"] < 1e-4
    assert out["keys_after_rebake"] == ["Basis", "User Key", *ours]
    assert out["rebake_error"] < 1e-4
    assert out["keys_after_pc2"] == ["Basis", "User Key"]
    assert out["modifiers_after_pc2"] == ["NeuROK Cache", "User Subsurf"]
    assert out["cache_exists"] and out["cache_in_user_folder"]
    assert out["pc2_moves"] > 0.05
    assert out["clear"][0] == "FINISHED"
    cleared = out["after_clear"]["mesh"]
    assert cleared["modifiers"] == ["User Subsurf"] and cleared["keys"] == ["Basis", "User Key"]
    assert cleared["results"] == "NONE"
    assert out["cache_exists_after_clear"]  # kept, so that undoing Clear still plays
    assert out["user_action"] in out["after_clear"]["actions"]
    assert out["location_animated"]
    assert out["after_undo_clear"] == ["NeuROK Cache", "User Subsurf"]
    assert out["pc2_moves_after_undo"] > 0.05
    assert out["plain_keys"] == count + 1
    assert out["plain_errors"] < 1e-4 and out["plain_after_end"] < 1e-4
    assert out["plain_restored"] and not out["plain_has_key"]
    assert out["plain_pc2_errors"] < 1e-4 and out["plain_pc2_restored"]


def test_linked_duplicates(tmp_path, zip_path):
    """Shape keys on a shared mesh would move every user: refused naming the others; a point
    cache bakes the one object; keys baked before the mesh was shared clear from any user."""
    out = run_scenario("linked_duplicates", tmp_path, zip_path)
    status, message = out["simulate_shared"]
    assert status == "ERROR" and out["untouched"], out
    assert "shares its mesh" in message and "'B'" in message and "point cache" in message
    assert out["point_cache_allowed"]
    assert out["a_moves"] > 0.05 and out["b_moves"] < 1e-6
    assert out["d_has_results"]
    assert out["d_simulate"][0] == "ERROR" and "'C'" in out["d_simulate"][1]
    assert out["d_clear"][0] == "FINISHED"
    assert out["keys_after_clear"] in ([], ["Basis"]) and out["c_results"] == "NONE"
