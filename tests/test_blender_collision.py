"""The Collision section in real Blender: what it hands the engine."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = [pytest.mark.blender]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_collision_section_gathers_world_space_colliders(tmp_path, zip_path):
    out = run_scenario("collision_gather", tmp_path, zip_path, timeout=300)
    default = out["default"]
    # by default: no ground, the meshes with Blender's Collision physics, in world space
    assert default["ground"] is None and default["names"] == ["Table"]
    assert default["bounds"] == pytest.approx([2.0, 1.0, 0.5])
    assert default["centre"] == pytest.approx([0.2, 0.0, 0.3])
    assert default["faces"] == 12 and default["friction"] == pytest.approx(0.5)
    assert out["ground_lowest"] == pytest.approx(1.0)  # the flat sheet's lowest point
    assert out["ground_height"] == pytest.approx(-0.25) and out["friction"] == pytest.approx(0.9)
    missing = out["no_collection"]
    assert missing["status"] == "ERROR" and "collection" in missing["message"]
    assert missing["untouched"]
    assert out["collection_names"] == ["Bystander"]
    moving = out["moving"]
    assert moving["status"] == "ERROR" and "static for now" in moving["message"]
    assert moving["untouched"]
