"""The rig-space dynamics from the extension, in real Blender with a real engine process: a
two-box laptop with Dynamics = Rig Space and bake Automatic becomes an armature whose playback
is the engine's vertices, its lid closing rigidly onto the base; no model is needed."""

import numpy as np
import pytest
from blender.harness import built_zip, run_scenario

from neurok_core.metrics import best_rotations

pytestmark = [pytest.mark.blender, pytest.mark.slow]

PLAYBACK_TOLERANCE = 1e-4  # of the object's size: the rig is the engine's own skinning
RIGID_TOLERANCE = 0.01  # of the object's size: the lid's vertices keep their distances
BASE_TOP = 0.015  # the base's top (local z), as the scenario builds it


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def _local(frames, matrix):
    """World-space frames (..., 3) back in the object's space."""
    m = np.asarray(matrix)
    return (np.asarray(frames) - m[:3, 3]) @ np.linalg.inv(m[:3, :3]).T


def test_a_laptop_in_the_rig_space_bakes_as_a_rig_and_closes_rigidly(tmp_path, zip_path):
    (tmp_path / "tmpdir").mkdir()
    (tmp_path / "no_model").mkdir()
    out = run_scenario(
        "rig_space_laptop",
        tmp_path,
        zip_path,
        timeout=600,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tmp_path / "no_model"),
    )
    # the choice: the engine's names, the rig space by default, carried by the request
    assert out["dynamics_items"] == ["latent", "rig"] and out["default_dynamics"] == "rig"
    assert out["request_dynamics"] == "rig"
    arrow = np.array(out["arrow_local_z"]) / np.linalg.norm(out["arrow_local_z"])
    np.testing.assert_allclose(arrow, (0.0, -1.0, 0.0), atol=1e-6)  # towards the base
    # the latent dynamics need the model the folder lacks: refused, the scene untouched
    latent = out["latent"]
    assert latent["status"] == "ERROR" and latent["untouched"], latent
    assert "config.json" in latent["message"] and "Traceback" not in latent["message"]
    # Automatic bakes the rig space's result as a rig (Armature, linear blend), every frame keyed
    assert out["auto_resolves_to"] == "RIG"
    assert out["auto"][0] == "FINISHED", out["auto"]
    assert out["auto_results"] == "RIG" and out["auto_modifiers"][0] == "ARMATURE"
    assert out["armature"] == "Laptop NeuROK Rig" and out["bones"] == 2
    assert out["preserve_volume"] is False
    assert out["fcurves"] == 7 * out["bones"] and out["keys_per_fcurve"] == [24]
    # shape keys and a point cache stay explicit choices, of the same motion
    assert out["keys"][0] == "FINISHED" and out["keys_results"] == "SHAPE_KEYS"
    assert out["cache"][0] == "FINISHED" and out["cache_results"] == "POINT_CACHE"
    assert "ARMATURE" not in out["keys_modifiers"] + out["cache_modifiers"]
    rig, keys = np.array(out["rig_frames"]), np.array(out["key_frames"])
    cache = np.array(out["cache_frames"])
    rest = np.array(out["rest"])  # (N, 3) the object's own vertices
    size = float(np.ptp(rest, axis=0).max())
    assert np.abs(rig[-1] - keys[-1]).max() < PLAYBACK_TOLERANCE * size  # the engine's vertices
    assert np.abs(rig - keys).max() < PLAYBACK_TOLERANCE * size
    assert np.abs(cache - keys).max() < PLAYBACK_TOLERANCE * size
    x = _local(rig, out["matrix_world"])  # (T, N, 3)
    nb = out["nb"]
    base, lid = np.arange(nb), np.arange(nb, len(rest))
    np.testing.assert_allclose(x[:, base], np.broadcast_to(rest[base], x[:, base].shape), atol=1e-5)
    # the lid turns about the hinge (local x) towards the base, by more than 30 degrees
    rot = best_rotations(rest[lid], x[-1:, lid])[0]
    angle = np.degrees(np.arccos(np.clip((np.trace(rot) - 1) / 2, -1, 1)))
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    assert angle > 30.0, angle
    assert abs(axis[0]) / np.linalg.norm(axis) > 0.99, axis
    centre = rest[base].mean(0)
    assert np.linalg.norm(x[-1, lid].mean(0) - centre) < np.linalg.norm(rest[lid].mean(0) - centre)
    assert x[-1, lid, 2].min() > BASE_TOP - RIGID_TOLERANCE * size  # on the base, not through
    # rigid: every pair of the lid's vertices keeps its distance, on every frame
    d0 = np.linalg.norm(rest[lid, None] - rest[None, lid], axis=-1)
    for frame in x:
        d = np.linalg.norm(frame[lid, None] - frame[None, lid], axis=-1)
        assert np.abs(d - d0).max() < RIGID_TOLERANCE * size
    print(  # the timings, for the report (pytest -s)
        f"rig space laptop: auto {out['auto_seconds']:.2f} s, shape keys"
        f" {out['keys_seconds']:.2f} s, point cache {out['cache_seconds']:.2f} s, closed by"
        f" {angle:.1f} deg"
    )


def test_the_rig_space_warns_only_of_a_likely_implausible_motion(tmp_path, zip_path):
    """Out of the box (the rig space, the default; no model), a 1 m cube with the default 10 N
    arrow under gravity, a laptop pushed shut and a flag hanging from its pole each bake with
    one INFO report and no warning in the panel; a flag dragged 5 m from its pole stretches far
    beyond a cloth's 5%: the report is a WARNING that says so, and the panel shows it."""
    (tmp_path / "no_model").mkdir()
    out = run_scenario(
        "rig_space_warnings",
        tmp_path,
        zip_path,
        timeout=600,
        env={"OMP_NUM_THREADS": "1"},
        checkpoint=str(tmp_path / "no_model"),
    )
    assert out["cube_defaults"] == ["rig", 10.0, True]
    for name in ("cube", "laptop", "flag"):
        run = out[name]
        assert run["result"] == "FINISHED", (name, run["report"])
        assert [level for level, _ in run["report"]] == ["INFO"], (name, run["report"])
        figures = run["figures"]
        assert figures["dynamics"] == "rig" and figures["integration"] != "cut short", name
        assert figures["edge_strain_max"] < 0.02 and figures["penetration_max"] < 0.005, name
        assert run["results"][0] == "rig"
        assert not any("implausible" in line for line in run["panel"]), (name, run["panel"])
    torn = out["torn"]
    assert torn["result"] == "FINISHED", torn["report"]
    (level, text), *_ = torn["report"]
    strain = torn["figures"]["edge_strain_max"]
    assert level == "WARNING" and strain > 0.05, torn
    assert f"In the rig space the mesh stretched by {strain:.0%}" in text, text
    assert "likely implausible" in text and "drag targets closer" in text
    assert torn["results"] == ["rig", pytest.approx(strain, rel=1e-6)]
    assert f"Likely implausible: stretched {strain:.0%}" in torn["panel"], torn["panel"]
    print(  # the figures, for the report (pytest -s)
        "rig-space warnings: "
        + ", ".join(
            f"{name} strain {out[name]['figures']['edge_strain_max']:.2%} depth"
            f" {out[name]['figures']['penetration_max']:.2%}"
            for name in ("cube", "laptop", "flag", "torn")
        )
    )
