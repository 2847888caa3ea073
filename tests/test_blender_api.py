"""The scripting API in real Blender, background mode, on the installed extension: a rig-space
simulation started with ``neurok.api.simulate``, its progress, report and figures, a run refused
while another goes on, and a run cancelled that leaves the object as it was."""

import pytest
from blender.harness import built_zip, run_scenario
from bounds import assert_within

pytestmark = [pytest.mark.blender, pytest.mark.slow]


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_a_script_simulates_follows_and_cancels_through_the_api(tmp_path, zip_path):
    (tmp_path / "tmpdir").mkdir()
    (tmp_path / "no_model").mkdir()
    out = run_scenario(
        "api_simulate",
        tmp_path,
        zip_path,
        timeout=600,
        env={"TMPDIR": str(tmp_path / "tmpdir"), "OMP_NUM_THREADS": "1"},
        checkpoint=str(tmp_path / "no_model"),
    )
    assert out["api_is_module"]
    # baked, and the operator's own report: one INFO line naming the object and the frames
    assert out["done"] and out["result"] == "FINISHED" and not out["cancelled"], out["report"]
    assert out["error"] is None
    assert [level for level, _ in out["report"]] == ["INFO"], out["report"]
    assert "Simulated 12 frames of 'Laptop'" in out["report"][0][1]
    assert out["results_mode"] == "RIG"  # Automatic bakes the rig space as a rig
    # progress seen through on_progress: never decreasing, ending at 1, more than one step
    fractions = out["fractions"]
    assert len(fractions) >= 2 and fractions == sorted(fractions), fractions
    assert_within(fractions, above=0.0, below=1.0, what="progress fractions")
    assert fractions[-1] == 1.0
    assert out["progress"][0] == 1.0 and out["progress"][1] == out["statuses"][-1]
    figures = out["figures"]
    assert figures["frames"] == 12 and figures["seconds"] > 0.0
    assert figures["dynamics"] == "rig" and "rig" in figures["baked"].lower()
    # one simulation at a time: refused at once, with the operator's message
    done, result, error = out["refused"]
    assert done and result == "CANCELLED" and "already running" in error
    # cancelled: over at once, a WARNING, no figures, the object untouched, nothing left running
    second = out["second"]
    assert not out["second_started_done"]
    assert second["done"] and second["cancelled"] and second["result"] == "CANCELLED"
    assert second["error"] is None and second["figures"] == {} and second["wait"] is True
    assert [level for level, _ in second["report"]] == ["WARNING"]
    assert "cancelled" in second["report"][0][1]
    assert out["unchanged"] and out["nothing_running"]
    print(  # for the report (pytest -s)
        f"api: {len(fractions)} progress steps, {figures['seconds']:.2f} s, {out['report'][0][1]}"
    )
