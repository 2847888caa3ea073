"""Several objects in real Blender with a real engine process: the selected meshes whose role
is Moves are simulated together and each is baked onto itself (its own bake mode), a selected
Static Collider holds them up, one undo step takes the whole bake back."""

import numpy as np
import pytest
from blender.harness import built_zip, run_engine_scenario

pytestmark = [pytest.mark.blender, pytest.mark.slow]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_selected_objects_move_together_and_bake_each_onto_itself(tmp_path, zip_path):
    out = run_engine_scenario("several_objects", tmp_path, zip_path)
    assert out["add_velocity"][0] == "FINISHED"
    assert out["arrow_z"] == pytest.approx([1.0, 0.0, 0.0], abs=1e-6)
    assert "Moves 2 selected objects together" in out["panel_labels"]  # the Floor is static
    assert out["simulate"][0] == "FINISHED", out["simulate"]
    assert out["results"] == {"Hit": "SHAPE_KEYS", "Still": "RIG", "Floor": "NONE"}
    assert out["modifiers"]["Still"] == ["ARMATURE"] and out["modifiers"]["Floor"] == []
    hit, still = np.asarray(out["hit"]), np.asarray(out["still"])
    assert hit.shape[0] == still.shape[0] == 16
    # thrown at the still cube: it hits it and passes its motion on; both stay on the floor
    assert still[-1, :, 0].mean() - still[0, :, 0].mean() > 0.05
    assert hit[-1, :, 0].mean() - hit[0, :, 0].mean() > 0.05
    gap = still[:, :, 0].min(1) - hit[:, :, 0].max(1)
    assert gap.min() > -0.01 * 0.2  # never deeper than 1% of a cube into the other
    for frames in (hit, still):
        assert frames[:, :, 2].min() > -0.01 * 0.2  # on the static floor, not through it
    assert out["floor_moved"] == 0.0
    assert out["results_after_undo"] == {"Hit": "NONE", "Still": "NONE", "Floor": "NONE"}
    # with Still a Static Collider the hit cube alone moves, and stops against it
    assert out["simulate_static"][0] == "FINISHED", out["simulate_static"]
    assert out["still_static_results"] == "NONE"
    alone = np.asarray(out["hit_static"])
    assert alone[:, :, 0].max() < still[0, :, 0].min() + 0.01 * 0.2
    # a selected floor with Blender's Collision physics is a collider, not a moving object
    assert out["simulate_physics"][0] == "FINISHED", out["simulate_physics"]
    assert out["results_physics"]["Floor"] == "NONE"
    assert out["results_physics"]["Still"] == "RIG"


def test_a_cloth_lying_on_a_moving_cube_is_carried_and_baked(tmp_path, zip_path):
    out = run_engine_scenario("cloth_on_cart", tmp_path, zip_path)
    assert out["add_velocity"][0] == "FINISHED"
    assert out["simulate"][0] == "FINISHED", out["simulate"]
    assert out["results"]["Cart"] != "NONE" and out["results"]["Cloth"] != "NONE"
    cart, cloth = np.asarray(out["cart"]), np.asarray(out["cloth"])
    travel = cart[-1, :, 0].mean() - cart[0, :, 0].mean()
    assert travel > 0.1
    # the cloth rides on the cube's top (0.2 m): moved along with it (slipping a little as the
    # throw starts), never through it
    assert cloth[-1, :, 0].mean() - cloth[0, :, 0].mean() > 0.3 * travel
    for c, k in zip(cloth, cart, strict=True):
        lo, hi = k.min(0), k.max(0)
        over = ((c[:, :2] > lo[:2]) & (c[:, :2] < hi[:2])).all(1)
        assert over.any() and c[over, 2].min() > hi[2] - 0.01 * 0.4


def test_a_flag_modelled_on_its_post_bakes_as_cloth_and_hangs(tmp_path, zip_path):
    out = run_engine_scenario("flag_on_post", tmp_path, zip_path)
    assert out["simulate"][0] == "FINISHED", out["simulate"]
    assert out["mode"] == "SHAPE_KEYS"  # Automatic: a mesh with cloth bakes as cloth
    frames, n = np.asarray(out["frames"]), out["post_vertices"]
    flag = frames[:, n:]
    fly = flag[0, :, 0] > 0.6  # the flag's far edge
    assert flag[0, fly, 2].mean() - flag[-1, fly, 2].mean() > 0.1  # it hangs
    assert np.abs(frames[:, :n] - frames[0, :n]).max() < 0.005  # the post stands
    hoist = flag[0, :, 0] < 0.051
    assert np.abs(flag[:, hoist] - flag[0, hoist]).max() < 0.005  # sewn to it
