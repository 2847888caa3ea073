"""The whole flow in real Blender with a real engine process (a tiny untrained model, so the
test is fast; the motion's physics is checked where it does not depend on training)."""

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = [pytest.mark.blender, pytest.mark.slow]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_simulate_bake_undo_cancel(tmp_path, zip_path, tiny_checkpoint):
    (tmp_path / "tmpdir").mkdir()
    out = run_scenario(
        "simulate_flow",
        tmp_path,
        zip_path,
        timeout=600,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tiny_checkpoint),
    )
    assert out["check"][0] == "FINISHED" and out["status"][0] == "ready", out["status"]
    assert out["simulate"][0] == "FINISHED", out["simulate"]
    ours = [f"NeuROK {f:04d}" for f in range(1, 5)]
    assert out["keys"] == ["Basis", "User Key", *ours]
    assert out["modifiers"] == ["User Subsurf"]
    assert out["selection_kept"] and out["location_animated"]
    # frame 1 is the rest shape; the force moves the object; the pushed point moves along it
    assert out["rest_error_first"] < 1e-4
    assert max(out["motion"]) > 1e-3, out["motion"]
    along = out["forced_point_along_force"]
    assert along[0] == pytest.approx(0, abs=1e-5) and along[1] > 0 and along[-1] > 0, along
    # undo takes the whole bake back in one step
    assert out["keys_after_undo"] == ["Basis", "User Key"]
    assert out["results_after_undo"] == "NONE"
    # the point cache plays the same motion
    assert out["simulate_pc2"][0] == "FINISHED", out["simulate_pc2"]
    assert out["modifiers_pc2"] == ["NeuROK Cache", "User Subsurf"]
    assert out["keys_pc2"] == ["Basis", "User Key"]
    assert out["pc2_vs_shape_keys"] < 1e-3
    # no load: exactly at rest; re-simulating replaced the point cache by shape keys
    assert out["simulate_still"][0] == "FINISHED", out["simulate_still"]
    assert out["still_error"] < 1e-4
    assert out["modifiers_still"] == ["User Subsurf"]
    assert out["cancel"][0] == "CANCELLED" and out["cancel_untouched"]
    assert out["cancel_pid_alive"] is False
    bad = out["bad_checkpoint"]
    assert bad["status"] == "ERROR" and bad["untouched"] and "Traceback" not in bad["message"]
    assert "config.json" in bad["message"] or "checkpoint" in bad["message"].lower()
    assert out["jobs_left"] == [] and out["leftover_job_dirs"] == []
    # the point cache of the unsaved file went with the session
    assert not list((tmp_path / "blender_user").rglob("*.pc2"))
    # one warm engine served every run from Start Engine on; cancelling ended it (the pid
    # above); the next run started a fresh one, which answered the bad checkpoint with an
    # error about the request and stays for the next run
    assert out["start_engine"][0] == "FINISHED"
    pids = out["warm_pids"]
    assert pids[0] is not None and pids == [pids[0]] * 3, pids
    assert out["warm_after_failure"] not in (None, pids[0])
    assert out["warm_after_failure_alive"]
    assert out["warm_timer_registered"] and out["warm_timer_once"]
    assert out["warm_after_timer"] and out["warm_timer_after"] is None
