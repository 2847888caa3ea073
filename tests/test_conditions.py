"""Simulation conditions: typed values, every bad value refused with a clear message, JSON."""

import json
import math

import pytest

from neurok_core.dynamics.conditions import (
    Anchor,
    Drag,
    Force,
    InitialVelocity,
    SimulationConditions,
    Wind,
    pin_subset,
)
from neurok_core.errors import ConditionError


def full_conditions() -> SimulationConditions:
    return SimulationConditions(
        forces=(Force(direction=(0, 0, 2), strength=3.0, vertex=4, start_frame=2, end_frame=10),),
        drags=(Drag(target=(0.1, 0.2, 0.3), frame=20, point=(0.0, 0.5, 1.0), start_frame=5),),
        velocities=(
            InitialVelocity(velocity=(1, 0, 0)),
            InitialVelocity(velocity=(0, 1, 0), vertex=7),
        ),
        winds=(Wind(direction=(1, 1, 0), strength=0.5),),
        gravity=(0, 0, -9.81),
        pins=(3, 1, 2, 1),
        mass=2.5,
        stiffness=1.5,
        damping=0.2,
        frames=48,
        fps=24,
        substeps=2,
        tolerance=1e-3,
        device="cpu",
        self_collision=True,
    )


def test_values_are_normalised():
    c = full_conditions()
    assert c.pins == (1, 2, 3)
    assert c.forces[0].direction == (0.0, 0.0, 2.0)
    assert c.forces[0].vector == (0.0, 0.0, 3.0)
    assert math.isclose(sum(v * v for v in c.winds[0].vector), 0.25)
    assert c.velocities[0].anchor is None and c.velocities[1].anchor == Anchor(vertex=7)
    assert c.fps == 24.0 and isinstance(c.fps, float)
    with pytest.raises(AttributeError):
        c.mass = 3.0  # frozen


def test_round_trip_through_json():
    c = full_conditions()
    text = json.dumps(c.to_dict())
    back = SimulationConditions.from_dict(json.loads(text))
    assert back == c
    assert SimulationConditions.from_dict({}) == SimulationConditions()


def test_self_collision_is_a_yes_or_no():
    assert SimulationConditions().self_collision is False
    with pytest.raises(ConditionError, match="self_collision must be true or false"):
        SimulationConditions(self_collision="yes")
    with pytest.raises(ConditionError, match="self_collision"):
        SimulationConditions.from_dict({"self_collision": 1})


def test_anchors_are_unique_and_ordered():
    c = SimulationConditions(
        forces=(
            Force(direction=(1, 0, 0), strength=1, vertex=5),
            Force(direction=(0, 1, 0), strength=1, vertex=5, start_frame=3),
        ),
        drags=(Drag(target=(0, 0, 1), frame=10, point=(1, 2, 3)),),
        velocities=(InitialVelocity(velocity=(1, 0, 0), vertex=2),),
        pins=(9, 8),
    )
    assert c.anchors() == (
        Anchor(vertex=5),
        Anchor(point=(1.0, 2.0, 3.0)),
        Anchor(vertex=2),
        Anchor(vertex=8),
        Anchor(vertex=9),
    )


def test_pin_subset_spreads_over_the_pinned_region():
    pins = tuple(range(100))
    verts = [(float(i), 0.0, 0.0) for i in range(100)]
    chosen = pin_subset(pins, verts, 3)
    assert chosen[0] == 0 and chosen[2] == 99 and chosen[1] in (49, 50)
    assert len(pin_subset(pins, None, 10)) == 10
    assert pin_subset((1, 2), verts, 10) == (1, 2)


BAD = [
    ("mass", dict(mass=-1.0), "mass"),
    ("zero mass", dict(mass=0.0), "mass"),
    ("nan mass", dict(mass=float("nan")), "mass"),
    ("negative stiffness", dict(stiffness=-0.1), "stiffness"),
    ("huge stiffness", dict(stiffness=1e6), "stiffness"),
    ("negative damping", dict(damping=-1.0), "damping"),
    ("inf damping", dict(damping=float("inf")), "damping"),
    ("zero frames", dict(frames=0), "frames"),
    ("negative frames", dict(frames=-5), "frames"),
    ("fractional frames", dict(frames=2.5), "frames"),
    ("bool frames", dict(frames=True), "frames"),
    ("zero fps", dict(fps=0), "fps"),
    ("negative fps", dict(fps=-24), "fps"),
    ("zero substeps", dict(substeps=0), "substeps"),
    ("zero tolerance", dict(tolerance=0.0), "tolerance"),
    ("unknown device", dict(device="tpu"), "device"),
    ("nan gravity", dict(gravity=(0, float("nan"), 0)), "gravity"),
    ("short gravity", dict(gravity=(0, 0)), "gravity"),
    ("pins not a list", dict(pins=5), "pins"),
    ("negative pin", dict(pins=(-1,)), "pinned vertex"),
    ("force not a list", dict(forces=Force(direction=(1, 0, 0), strength=1, vertex=0)), "forces"),
    ("two uniform velocities", dict(velocities=(InitialVelocity((1, 0, 0)),) * 2), "uniform"),
]


@pytest.mark.parametrize("name,kwargs,needle", BAD, ids=[b[0] for b in BAD])
def test_bad_values_are_refused(name, kwargs, needle):
    with pytest.raises(ConditionError, match=needle):
        SimulationConditions(**kwargs)


BAD_CONDITIONS = [
    ("nan direction", lambda: Force(direction=(float("nan"), 0, 0), strength=1, vertex=0), "NaN"),
    ("inf direction", lambda: Force(direction=(math.inf, 0, 0), strength=1, vertex=0), "NaN"),
    ("zero direction", lambda: Force(direction=(0, 0, 0), strength=1, vertex=0), "zero length"),
    ("negative strength", lambda: Force(direction=(1, 0, 0), strength=-2, vertex=0), "strength"),
    ("no anchor", lambda: Force(direction=(1, 0, 0), strength=1), "exactly one"),
    (
        "two anchors",
        lambda: Force(direction=(1, 0, 0), strength=1, vertex=0, point=(0, 0, 0)),
        "exactly one",
    ),
    ("float vertex", lambda: Force(direction=(1, 0, 0), strength=1, vertex=1.5), "whole number"),
    ("negative vertex", lambda: Force(direction=(1, 0, 0), strength=1, vertex=-3), ">= 0"),
    (
        "reversed force frames",
        lambda: Force(direction=(1, 0, 0), strength=1, vertex=0, start_frame=9, end_frame=3),
        "after start_frame",
    ),
    (
        "reversed drag frames",
        lambda: Drag(target=(0, 0, 0), frame=3, vertex=0, start_frame=5),
        "after",
    ),
    ("nan target", lambda: Drag(target=(0, float("nan"), 0), frame=3, vertex=0), "NaN"),
    ("nan velocity", lambda: InitialVelocity(velocity=(0, 0, float("inf"))), "NaN"),
    ("zero wind", lambda: Wind(direction=(0, 0, 0), strength=1), "zero length"),
    ("nan wind strength", lambda: Wind(direction=(1, 0, 0), strength=float("nan")), "finite"),
    ("point with 2 numbers", lambda: Drag(target=(0, 0, 0), frame=3, point=(1, 2)), "3 numbers"),
]


@pytest.mark.parametrize("name,make,needle", BAD_CONDITIONS, ids=[b[0] for b in BAD_CONDITIONS])
def test_bad_conditions_are_refused(name, make, needle):
    with pytest.raises(ConditionError, match=needle):
        make()


def test_frame_ranges_must_lie_in_the_animation():
    late_force = Force(direction=(1, 0, 0), strength=1, vertex=0, start_frame=5, end_frame=30)
    with pytest.raises(ConditionError, match="outside the animation"):
        SimulationConditions(forces=(late_force,), frames=20)
    with pytest.raises(ConditionError, match="outside the animation"):
        SimulationConditions(forces=(Force((1, 0, 0), 1, vertex=0, start_frame=19),), frames=20)
    with pytest.raises(ConditionError, match="after the last frame"):
        SimulationConditions(drags=(Drag(target=(0, 0, 0), frame=20, vertex=0),), frames=20)
    with pytest.raises(ConditionError, match="outside the animation"):
        SimulationConditions(winds=(Wind((1, 0, 0), 1, start_frame=0),), frames=1)
    ok = SimulationConditions(forces=(late_force,), frames=31)
    assert ok.forces[0].end_frame == 30


def test_conflicting_conditions_are_refused():
    a = Drag(target=(0, 0, 0), frame=10, vertex=2)
    b = Drag(target=(1, 0, 0), frame=20, vertex=2, start_frame=5)
    with pytest.raises(ConditionError, match="overlapping"):
        SimulationConditions(drags=(a, b))
    SimulationConditions(drags=(a, Drag(target=(1, 0, 0), frame=20, vertex=2, start_frame=10)))
    with pytest.raises(ConditionError, match="pinned"):
        SimulationConditions(drags=(a,), pins=(2,))
    v = InitialVelocity(velocity=(1, 0, 0), vertex=3)
    with pytest.raises(ConditionError, match="same point"):
        SimulationConditions(velocities=(v, v))


def test_validate_against_the_mesh():
    c = full_conditions()
    assert c.validate(100) is c
    with pytest.raises(ConditionError, match="vertex 7, but the mesh has 5"):
        c.validate(5)
    with pytest.raises(ConditionError, match="pinned vertex 3 out of range"):
        SimulationConditions(pins=(3,)).validate(3)
    with pytest.raises(ConditionError, match="every vertex is pinned"):
        SimulationConditions(pins=(0, 1, 2)).validate(3)
    with pytest.raises(ConditionError, match="no vertices"):
        SimulationConditions().validate(0)


def test_from_dict_is_strict():
    with pytest.raises(ConditionError, match="unknown key"):
        SimulationConditions.from_dict({"mass": 1.0, "colour": "red"})
    with pytest.raises(ConditionError, match="unknown key"):
        SimulationConditions.from_dict(
            {"forces": [{"direction": [1, 0, 0], "strength": 1, "vertex": 0, "extra": 1}]}
        )
    with pytest.raises(ConditionError, match="missing key"):
        SimulationConditions.from_dict({"forces": [{"direction": [1, 0, 0], "vertex": 0}]})
    with pytest.raises(ConditionError, match="JSON object"):
        SimulationConditions.from_dict([1, 2])
    with pytest.raises(ConditionError, match="mass"):
        SimulationConditions.from_dict({"mass": "heavy"})


def test_conditions_import_without_torch():
    """The Blender side (no torch) can build, validate and serialise conditions."""
    import subprocess
    import sys

    code = (
        "import importlib.abc, sys\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'torch', 'numpy'}:\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from neurok_core.dynamics import SimulationConditions, Force\n"
        "c = SimulationConditions(forces=(Force((0, 0, 1), 2.0, vertex=1),)).validate(5)\n"
        "print(SimulationConditions.from_dict(c.to_dict()) == c)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True"
