"""The add-on's side of the worker protocol, in plain Python (no Blender, no torch needed):
its request files are what the engine's worker reads, its conditions what the engine accepts."""

import json
import sys

import numpy as np
import pytest

from neurok_blender.core import Drag, Force, InitialVelocity, SimulationConditions
from neurok_blender.engine.job import SimulationJob
from neurok_blender.request import SimulationRequest, load_frames
from neurok_core.dynamics import conditions as engine_conditions
from neurok_core.worker import load_mesh, read_request


def conditions() -> SimulationConditions:
    return SimulationConditions(
        forces=(
            Force(direction=(0, 0, 2), strength=5.0, vertex=3),
            Force(
                direction=(1, 0, 0), strength=1.5, point=(0.1, 0.2, 0.3), start_frame=2, end_frame=6
            ),
        ),
        drags=(Drag(target=(1, 1, 1), frame=8, point=(0.0, 0.0, 0.5), start_frame=1),),
        velocities=(InitialVelocity(velocity=(0, 1, 0)), InitialVelocity((1, 0, 0), vertex=2)),
        gravity=(0, 0, -9.81),
        pins=(5, 0, 5),
        mass=2.0,
        stiffness=1.5,
        damping=0.3,
        frames=12,
        fps=30.0,
        device="cpu",
    )


def test_the_add_on_builds_the_engines_own_conditions():
    """One schema: the add-on's conditions are the engine's classes, not a mirror of them."""
    assert SimulationConditions is engine_conditions.SimulationConditions
    assert Force is engine_conditions.Force and Drag is engine_conditions.Drag


def test_request_files_are_what_the_worker_reads(tmp_path):
    vertices = np.random.default_rng(0).normal(size=(7, 3))
    faces = np.array([[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    request = SimulationRequest(
        vertices,
        faces,
        conditions(),
        checkpoint=None,
        device="cpu",
        cache_dir=str(tmp_path / "cache"),
    )
    path = request.write(tmp_path / "job")
    parsed = read_request(path)
    assert parsed["mesh"] == str((tmp_path / "job" / "mesh.npz").resolve())
    assert parsed["output"]["frames"] == str((tmp_path / "job" / "frames.npy").resolve())
    assert parsed["checkpoint"] is None and parsed["device"] == "cpu"
    v, f = load_mesh(parsed["mesh"])
    assert v.dtype == np.float32 and f.dtype == np.int32
    np.testing.assert_allclose(v, vertices.astype(np.float32))
    np.testing.assert_array_equal(f, faces)
    engine = SimulationConditions.from_dict(parsed["conditions"])
    engine.validate(len(v))
    assert engine == conditions()  # the request carries the conditions unchanged


def test_the_dynamics_choice_reaches_the_worker(tmp_path):
    """The request carries the dynamics as the engine names them (the rig space unless told,
    the engine's one default); a request without any gets the worker's, the same; the worker
    refuses a name it does not know."""
    from neurok_blender import core
    from neurok_core.dynamics.conditions import DEFAULT_DYNAMICS, DYNAMICS
    from neurok_core.worker import RequestError

    vertices = np.random.default_rng(0).normal(size=(7, 3))
    faces = np.array([[0, 1, 2], [2, 3, 4], [4, 5, 6]])
    assert DYNAMICS == ("latent", "rig") and DEFAULT_DYNAMICS == core.DEFAULT_DYNAMICS == "rig"
    for dynamics in (None, *DYNAMICS):
        extra = {} if dynamics is None else {"dynamics": dynamics}
        request = SimulationRequest(vertices, faces, conditions(), **extra)
        parsed = read_request(request.write(tmp_path / f"job_{dynamics}"))
        assert parsed["dynamics"] == (dynamics or "rig")
    path = SimulationRequest(vertices, faces, conditions()).write(tmp_path / "job_unsaid")
    payload = json.loads(path.read_text())
    del payload["dynamics"]
    path.write_text(json.dumps(payload))
    assert read_request(path)["dynamics"] == "rig"
    request = SimulationRequest(vertices, faces, conditions(), dynamics="verlet")
    with pytest.raises(RequestError, match="'dynamics' must be one of latent, rig"):
        read_request(request.write(tmp_path / "job_bad"))


def test_load_frames_checks_shape_and_values(tmp_path):
    path = tmp_path / "frames.npy"
    frames = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(4, 5, 3))
    frames[:] = 1.0
    frames.flush()
    assert load_frames(path, 4, 5).shape == (4, 5, 3)
    with pytest.raises(ValueError, match="expected"):
        load_frames(path, 4, 6)
    frames[2, 1, 0] = np.nan
    frames.flush()
    with pytest.raises(ValueError, match="NaN"):
        load_frames(path, 4, 5)


def _fake_worker(tmp_path, lines: list[dict], code: int) -> list[str]:
    script = tmp_path / "fake_worker.py"
    script.write_text(
        "import json, sys\n"
        f"for line in {lines!r}:\n"
        "    print(json.dumps(line), flush=True)\n"
        "print('stray text on stdout', flush=True)\n"
        f"sys.exit({code})\n"
    )
    return [sys.executable, str(script)]


def test_simulation_job_turns_messages_into_progress_and_a_result(tmp_path):
    lines = [
        {"type": "status", "stage": "load", "message": "loading the model"},
        {"type": "progress", "stage": "subspace", "fraction": 0.5},
        {"type": "frame", "index": 0, "count": 4, "energy": 1.0},
        {"type": "frame", "index": 3, "count": 4, "energy": 1.0},
        {
            "type": "done",
            "frames": "f.npy",
            "result": None,
            "pc2": None,
            "count": 4,
            "seconds": 1.5,
            "info": {},
        },
    ]
    job = SimulationJob(tmp_path / "job", 4)
    job.start(_fake_worker(tmp_path, lines, 0))
    fractions = []
    while not job.poll():
        fractions.append(job.fraction)
    assert job.result["count"] == 4 and job.error is None and job.fraction == 1.0
    assert job.frames_done == 4
    assert fractions == sorted(fractions)
    job.cleanup()
    assert not (tmp_path / "job").exists()


def test_simulation_job_estimates_the_time_left_from_the_frames_pace(tmp_path):
    job = SimulationJob(tmp_path / "job", 10)
    job.frames_done = 1
    assert job._estimate(10, now=100.0) == ""  # the first frame: no pace yet
    job.frames_done = 3
    assert job._estimate(10, now=104.0) == ", about 14 s left"  # 2 s a frame, 7 to go
    job.frames_done = 10
    assert job._estimate(10, now=118.0) == ", under a second left"


def test_simulation_job_error_and_bad_exit(tmp_path):
    job = SimulationJob(tmp_path / "a", 4)
    job.start(
        _fake_worker(
            tmp_path, [{"type": "error", "kind": "MeshError", "message": "the mesh is flat"}], 2
        )
    )
    job.wait()
    assert job.error == "the mesh is flat" and job.error_kind == "MeshError"
    # a 'done' with a failing exit status is not a result
    job = SimulationJob(tmp_path / "b", 4)
    job.start(_fake_worker(tmp_path, [{"type": "done", "frames": "f.npy"}], 1))
    job.wait()
    assert job.result is None and "exit status 1" in job.error
    # an interpreter that does not exist
    job = SimulationJob(tmp_path / "c", 4)
    job.start([str(tmp_path / "no_python"), "-m", "neurok_core.worker"])
    assert job.finished and "cannot start" in job.error


def test_simulate_report_warns_when_the_result_is_doubtful():
    """In the learned space a warning needs both: the motion pressed against the learned limits
    in over a quarter of the frames, and the mesh stretched there (a lid resting at its stop is
    not doubtful)."""
    from neurok_blender.core import edge_strain, frames_on_barrier, short_warning
    from neurok_blender.request import simulate_report
    from neurok_core.doubts import doubtful

    strained = {"edge_strain_max": 0.19, "edge_strain_frame": 8}
    kind, text = simulate_report("Sheet", 48, 2.5, "4 shape keys", {"frames_on_barrier": 3})
    assert kind == "INFO" and text == (
        "Simulated 48 frames of 'Sheet' in 2.5 s; baked as 4 shape keys"
    )
    info = {"frames_on_barrier": 30, **strained}
    kind, text = simulate_report("Sheet", 48, 2.5, "4 shape keys", info)
    assert kind == "WARNING" and "In 30 of 48 frames" in text and "gentler forces" in text
    assert "stretched by 19% on average by frame 8" in text
    # on the barrier with the mesh intact, or stretched without pressing: no warning
    intact = {"frames_on_barrier": 30, "edge_strain_max": 0.01, "edge_strain_frame": 3}
    assert simulate_report("Sheet", 48, 2.5, "x", intact)[0] == "INFO"
    assert simulate_report("Sheet", 48, 2.5, "x", {"frames_on_barrier": 3, **strained})[0] == "INFO"
    assert simulate_report("Sheet", 48, 2.5, "x", {"frames_on_barrier": 30.0, **strained})[0] == (
        "WARNING"
    )
    assert doubtful(13, 48, 0.06) and not doubtful(12, 48, 0.06) and not doubtful(13, 48, 0.05)
    assert short_warning(False, 12, 6, 0.12, 0.0) == (
        "Beyond the learned shapes in 6 of 12 frames (stretched 12%)"
    )
    assert short_warning(False, 12, 6, 0.01, 0.5) is None  # the learned space has no depth
    assert frames_on_barrier({"frames_on_barrier": 7}) == 7
    assert frames_on_barrier({"frames_on_barrier": -1}) == frames_on_barrier(None) == 0
    assert edge_strain(strained) == (0.19, 8)
    assert edge_strain({"edge_strain_max": float("nan")}) == edge_strain(None) == (0.0, 0)
    # an engine that does not report them (or a malformed info) just gives the summary
    for info in ({}, None, {"frames_on_barrier": "many"}, {"frames_on_barrier": True}):
        assert simulate_report("Sheet", 48, 2.5, "4 shape keys", info)[0] == "INFO"


def test_simulate_report_warns_when_a_rig_space_figure_fails_its_target():
    """In the rig space one figure is enough: a mean edge strain over 5% in some frame, or a
    vertex deeper than 1% of the object's size in the ground or a collider; at the targets, or
    with the figures absent, the report is the summary alone."""
    from neurok_blender.core import penetration, short_warning
    from neurok_blender.request import simulate_report

    rig = {"dynamics": "rig", "frames_on_barrier": 0}
    fine = {**rig, "edge_strain_max": 0.05, "edge_strain_frame": 3, "penetration_max": 0.01}
    assert simulate_report("Flag", 24, 1.0, "a rig", fine)[0] == "INFO"
    assert simulate_report("Flag", 24, 1.0, "a rig", rig)[0] == "INFO"
    stretched = {**fine, "edge_strain_max": 0.08, "edge_strain_frame": 18}
    kind, text = simulate_report("Flag", 24, 1.0, "a rig", stretched)
    assert kind == "WARNING" and text.startswith("Simulated 24 frames of 'Flag' in 1.0 s; baked")
    assert "In the rig space the mesh stretched by 8% on average by frame 18" in text
    assert "likely implausible" in text and "into the ground" not in text
    sunk = {**fine, "penetration_max": 0.034, "penetration_frame": 7}
    kind, text = simulate_report("Box", 24, 1.0, "a rig", sunk)
    assert kind == "WARNING" and "stretched" not in text
    assert "it went 3.4% of its size into the ground or a collider by frame 7" in text
    both = {**stretched, "penetration_max": 0.034, "penetration_frame": 7}
    assert " and it went 3.4%" in simulate_report("Box", 24, 1.0, "a rig", both)[1]
    # the learned space's rule does not apply: no barrier needed, and none counts
    assert simulate_report("Box", 24, 1.0, "a rig", {**fine, "frames_on_barrier": 24})[0] == (
        "INFO"
    )
    assert penetration(sunk) == (0.034, 7)
    assert penetration({"penetration_max": -1.0}) == penetration(None) == (0.0, 0)
    assert short_warning(True, 24, 0, 0.08, 0.0) == "Likely implausible: stretched 8%"
    assert short_warning(True, 24, 0, 0.01, 0.034) == "Likely implausible: 3.4% into an obstacle"
    assert short_warning(True, 24, 0, 0.05, 0.01) is None
