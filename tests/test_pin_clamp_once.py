"""The learned-space simulation builds its pin clamp once per run and hands it down (the soft
modes' search, the mechanical system and the vertices share it); the soft modes do not import
the simulation (no import circle)."""

import ast
import dataclasses
from pathlib import Path

import numpy as np

from neurok_core import pinclamp
from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.conditions import TRACKED_PINS, pin_subset
from neurok_core.dynamics.settings import DEFAULT_SETTINGS
from neurok_core.simulate import simulate


def test_a_run_with_pins_and_soft_modes_builds_one_clamp(tiny_slab_space, monkeypatch):
    space = tiny_slab_space
    v = space.vertices
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    tip = int(np.argmax(v[:, 0]))
    built = []
    build = pinclamp.PinClamp.build

    def counted(*args, **kwargs):
        built.append(build(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(pinclamp.PinClamp, "build", staticmethod(counted))
    cond = SimulationConditions(
        forces=(Force(direction=(0, 0, 1), strength=0.5, vertex=tip),),
        pins=pins,
        gravity=(0.0, 0.0, 0.0),
        frames=3,
        fps=24,
    )
    settings = dataclasses.replace(DEFAULT_SETTINGS, soft_modes=True)
    result = simulate(space, cond, settings=settings)
    assert len(built) == 1 and result.info["soft_modes"]["soft_dims"] >= 1
    assert built[0].tracked == pin_subset(pins, v, TRACKED_PINS)
    np.testing.assert_array_equal(
        result.positions[:, list(pins)], np.repeat(v[None, pins], 3, 0).astype(np.float32)
    )


def test_pin_clamp_without_pins_is_none(tiny_slab_space):
    assert pinclamp.pin_clamp(tiny_slab_space, ()) is None


def test_soft_modes_do_not_import_the_simulation():
    source = Path(__file__).resolve().parents[1] / "neurok_core" / "softmodes.py"
    imported = {
        node.module
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.ImportFrom)
    }
    assert "simulate" not in imported and "neurok_core.simulate" not in imported
