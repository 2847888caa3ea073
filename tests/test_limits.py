"""Bounded simulations: loads the space cannot follow are refused before any work with the value
that would pass, every frame has a budget of work, and the CLI ends every run from 1e-3 N to
1e9 N on objects from 1 mm to 1 km with frames or a one-line message."""

import math

import numpy as np
import pytest
import trimesh

from neurok_core.cli import main
from neurok_core.dynamics import DynamicsSettings, Force, InitialVelocity, SimulationConditions
from neurok_core.dynamics.limits import check_bounded
from neurok_core.errors import ConditionError, SimulationError
from neurok_core.results import load_result
from neurok_core.simulate import simulate
from neurok_core.space import SpaceSettings, build_space

SETTINGS = DynamicsSettings()


def _conditions(**kw):
    return SimulationConditions(frames=4, **kw)


def test_loads_beyond_the_reach_per_frame_are_refused_with_the_value_that_passes():
    # 1 m object, 1 kg, 24 fps: 4 sizes a frame is a = 2 * 4 * 1 * 24^2 = 4608 m/s^2
    ok = _conditions(forces=(Force(vertex=0, direction=(0, 0, 1), strength=4000.0),))
    check_bounded(ok, 1.0, 1.0, SETTINGS)
    strong = _conditions(forces=(Force(vertex=0, direction=(0, 0, 1), strength=5000.0),))
    with pytest.raises(ConditionError, match=r"below 4608 N or raise the mass above 1\.085 kg"):
        check_bounded(strong, 1.0, 1.0, SETTINGS)
    check_bounded(strong, 2.0, 1.0, SETTINGS)  # twice the mass: half the acceleration
    # the same force on an object 100x smaller moves it 100x as many sizes
    small = _conditions(forces=(Force(vertex=0, direction=(0, 0, 1), strength=100.0),))
    check_bounded(small, 1.0, 1.0, SETTINGS)
    with pytest.raises(ConditionError, match="times its size"):
        check_bounded(small, 1.0, 0.01, SETTINGS)
    with pytest.raises(ConditionError, match=r"gravity .* 1 mm object .* turn it off"):
        check_bounded(_conditions(gravity=(0, 0, -9.81)), 1.0, 0.001, SETTINGS)
    fast = _conditions(velocities=(InitialVelocity(velocity=(0.0, 200.0, 0.0)),))
    with pytest.raises(ConditionError, match="below 96 m/s"):
        check_bounded(fast, 1.0, 1.0, SETTINGS)


def test_stiffness_and_damping_that_need_too_many_steps_are_refused():
    # stiffness is at most 100 Hz: it needs too many steps only at a low frame rate
    limit_hz = SETTINGS.steps.max_substeps * SETTINGS.steps.oscillation_step * 1.0 / (2 * math.pi)
    check_bounded(
        _conditions(stiffness=0.9 * limit_hz, fps=1.0, gravity=(0, 0, 0)), 1.0, 1.0, SETTINGS
    )
    with pytest.raises(ConditionError, match="stiffness .* lower it below"):
        check_bounded(
            _conditions(stiffness=1.1 * limit_hz, fps=1.0, gravity=(0, 0, 0)), 1.0, 1.0, SETTINGS
        )
    with pytest.raises(ConditionError, match="damping .* lower it below"):
        check_bounded(_conditions(damping=1e6), 1.0, 1.0, SETTINGS)


def test_a_frame_over_its_budget_stops_the_run_with_a_message(tiny_checkpoint):
    from neurok_core.checkpoint import load_checkpoint

    model, _ = load_checkpoint(tiny_checkpoint)
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    space = build_space(
        model, mesh.vertices, mesh.faces, settings=SpaceSettings(dynamics_points=32)
    )
    cond = SimulationConditions(
        frames=4, forces=(Force(vertex=0, direction=(0, 0, 1), strength=5.0),), gravity=(0, 0, 0)
    )
    budget = DynamicsSettings().with_overrides(max_frame_evaluations=3)  # less than one RK4 step
    with pytest.raises(SimulationError, match=r"stopped at frame 0 of 3: .* limit of work"):
        simulate(space, cond, settings=budget)
    result = simulate(space, cond)  # the default budget is far above what this needs
    assert result.positions.shape[0] == 4


def test_progress_moves_within_frames(tiny_checkpoint, monkeypatch):
    """A frame that takes many steps reports its progress while it is integrated, not only
    at its end: fractions between frame boundaries, never going back."""
    from neurok_core.checkpoint import load_checkpoint
    from neurok_core.dynamics import integrator

    monkeypatch.setattr(integrator, "WORK_INTERVAL", 0.0)  # report after every step
    model, _ = load_checkpoint(tiny_checkpoint)
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    space = build_space(
        model, mesh.vertices, mesh.faces, settings=SpaceSettings(dynamics_points=32)
    )
    cond = SimulationConditions(
        frames=4,
        forces=(Force(vertex=0, direction=(0, 0, 1), strength=5.0),),
        gravity=(0, 0, 0),
        substeps=8,  # at least 8 steps a frame: several reports inside each
    )
    seen = []
    simulate(space, cond, on_progress=lambda stage, f: seen.append(f))
    assert seen == sorted(seen) and seen[-1] == 1.0
    inside = [f for f in seen if abs(f * 4 - round(f * 4)) > 1e-9]
    assert len(inside) >= 3, seen  # progress inside frames, not only at their ends


def test_a_time_limit_stops_the_integration_before_its_next_step(tiny_checkpoint):
    """The time limit is checked before every RK4 step, not between frames or batches of
    decoded frames: a limit that has passed before the first step stops the run there, with
    the rest frame alone, cancelled and timed out; without one the same run gives every frame."""
    from neurok_core.checkpoint import load_checkpoint

    model, _ = load_checkpoint(tiny_checkpoint)
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide()
    space = build_space(
        model, mesh.vertices, mesh.faces, settings=SpaceSettings(dynamics_points=32)
    )
    cond = SimulationConditions(
        frames=12, forces=(Force(vertex=0, direction=(0, 0, 1), strength=5.0),), substeps=8
    )
    stopped = simulate(space, cond, time_limit=0.0)
    assert stopped.positions.shape[0] == 1
    assert stopped.info["timed_out"] and stopped.info["cancelled"]
    assert stopped.info["substeps"] == 0
    whole = simulate(space, cond, time_limit=None)
    assert whole.positions.shape[0] == 12 and not whole.info["timed_out"]


SIZES = {"1mm": 1e-3, "1m": 1.0, "1km": 1e3}
FORCES = (1e-3, 1.0, 1e3, 1e6, 1e9)


def test_cli_stress_every_run_ends_with_frames_or_a_message(tmp_path, capsys, tiny_checkpoint):
    """Forces from 1e-3 N to 1e9 N on objects from 1 mm to 1 km, under gravity: each run either
    writes its frames, within the budget of work per frame, or prints one line that says what
    to change (never a traceback)."""
    base = trimesh.creation.box((1.0, 0.5, 0.1)).subdivide()
    outcomes = {}
    for name, scale in SIZES.items():
        mesh = base.copy()
        mesh.apply_scale(scale)
        path = tmp_path / f"slab_{name}.obj"
        mesh.export(path)
        for newtons in FORCES:
            out = tmp_path / f"{name}_{newtons:g}.npz"
            args = ["simulate", str(path), "--checkpoint", str(tiny_checkpoint)]
            args += ["--dynamics", "latent"]  # its reach and its budget of decoder evaluations
            args += ["--force", f"0:0,0,1:{newtons:g}", "--frames", "4", "--quiet"]
            args += ["--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
            rc = main(args)
            err = capsys.readouterr().err
            assert "Traceback" not in err
            if rc == 0:
                info = load_result(out).info
                frames = load_result(out).positions.shape[0]
                assert frames == 4
                assert info["decoder_evaluations"] <= 3 * SETTINGS.limits.max_frame_evaluations + 64
                assert np.isfinite(load_result(out).positions).all()
                outcomes[name, newtons] = "frames"
            else:
                lines = [line for line in err.splitlines() if line.strip()]
                assert rc == 2 and len(lines) == 1 and "lower" in lines[0], err
                outcomes[name, newtons] = "refused"
    # what is refused is what the reach per frame says: the 1 m slab takes 1 kN, not 1 MN;
    # gravity alone refuses the 1 mm one
    assert outcomes["1m", 1e3] == "frames" and outcomes["1m", 1e6] == "refused"
    assert outcomes["1km", 1e-3] == "frames" and outcomes["1km", 1e9] == "refused"
    assert all(outcomes["1mm", f] == "refused" for f in FORCES)


def test_cli_time_limit_stops_with_a_message_and_writes_nothing(tmp_path, capsys, tiny_checkpoint):
    mesh = trimesh.creation.box((1.0, 0.5, 0.1)).subdivide()
    mesh.export(tmp_path / "slab.obj")
    out = tmp_path / "out.npz"
    args = ["simulate", str(tmp_path / "slab.obj"), "--checkpoint", str(tiny_checkpoint)]
    args += ["--frames", "30", "--quiet", "--out", str(out)]
    assert main([*args, "--time-limit", "1e-9"]) == 2
    err = capsys.readouterr().err
    assert "time limit of 1e-09 s (--time-limit)" in err and "Traceback" not in err
    assert not out.exists()
    assert main([*args, "--time-limit", "-1"]) == 2
    assert "--time-limit: expected seconds >= 0" in capsys.readouterr().err


def test_both_dynamics_refuse_a_start_inside_the_ground_before_any_work(
    tmp_path, capsys, monkeypatch, tiny_checkpoint, tiny_slab_space
):
    """An object that starts deeper than ``max_start_depth`` inside the ground is refused with
    one line by the CLI and the API in the rig space as in the latent one, before the rig
    space is built (building it raises here)."""
    import neurok_core.rigspace.simulate
    from neurok_core.api import NeuROK

    class Built(Exception):
        pass

    def build_rig_space(*args, **kwargs):
        raise Built

    monkeypatch.setattr(neurok_core.rigspace.simulate, "build_rig_space", build_rig_space)
    ball = trimesh.creation.icosphere(subdivisions=2, radius=0.1)
    ball.export(tmp_path / "ball.obj")
    args = ["simulate", str(tmp_path / "ball.obj"), "--checkpoint", str(tiny_checkpoint)]
    args += ["--frames", "4", "--quiet", "--out", str(tmp_path / "a.npz"), "--ground", "0"]
    for dynamics in ("latent", "rig"):
        assert main([*args, "--dynamics", dynamics]) == 2, dynamics
        err = capsys.readouterr().err
        assert "the object starts 0.1 m inside the ground" in err, (dynamics, err)
        assert len(err.strip().splitlines()) == 1, (dynamics, err)
    with pytest.raises(Built):  # a start above the ground goes on to the rig space
        main([*args[:-1], "-0.2", "--dynamics", "rig"])
    engine = NeuROK.load(tiny_checkpoint)
    slab = tiny_slab_space  # 0.4 m long, 0.025 m (6% of that) below z = 0
    for dynamics in ("latent", "rig"):
        with pytest.raises(ConditionError, match="starts 0.025 m inside the ground"):
            engine.simulate(slab, _conditions(ground=0.0), dynamics=dynamics)
    with pytest.raises(Built):
        engine.simulate(slab, _conditions(ground=-0.03), dynamics="rig")
