"""Motions the rig space, now the default dynamics, does not integrate right yet: each a strict
expected failure, so that the fix shows (as an unexpected pass) and the marker goes with it."""

import numpy as np
import pytest
import trimesh

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.errors import SimulationError
from neurok_core.rigspace import simulate_rig


def _sheet(cols: int, rows: int, size: float):
    """A free horizontal sheet of cols x rows vertices, ``size`` m along x (as Blender's Add
    Grid makes it): (vertices (N, 3), faces (F, 3))."""
    x, y = np.meshgrid(np.linspace(-1, 1, cols), np.linspace(-1, 1, rows))
    vertices = 0.5 * size * np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], 1)
    idx = np.arange(rows * cols).reshape(rows, cols)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel(), idx[1:, 1:].ravel(), idx[1:, :-1]
    faces = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d.ravel()], 1)])
    return vertices, faces


@pytest.mark.xfail(
    strict=True, raises=SimulationError, reason="the implicit step does not converge (rig space)"
)
def test_a_coarse_free_sheet_falls_under_gravity():
    """A 2 m sheet of 7 x 5 vertices (25 bones) falling with nothing to meet: a motion of
    the whole, yet its steps stop converging within the first second."""
    vertices, faces = _sheet(7, 5, 2.0)
    result = simulate_rig(vertices, faces, SimulationConditions(frames=48))
    fall = vertices[:, 2].mean() - result.positions[-1, :, 2].mean()
    assert fall == pytest.approx(0.5 * 9.81 * (47 / 24) ** 2, rel=0.05)


@pytest.mark.xfail(strict=True, reason="a push too strong for its steps moves the slab 5 cm")
def test_a_push_beyond_the_steps_is_integrated_or_refused():
    """1e9 N on a 1 kg slab for 3 frames would carry it some 8e6 m: the run must either do so
    or say it cannot; it returns a slab moved by about 5 cm, with no sign of trouble."""
    mesh = trimesh.creation.box((1.0, 0.5, 0.1)).subdivide()
    push = Force(vertex=0, direction=(0, 0, 1), strength=1e9)
    try:
        result = simulate_rig(
            mesh.vertices, mesh.faces, SimulationConditions(frames=4, forces=(push,))
        )
    except SimulationError:
        return
    moved = np.abs(result.positions[-1] - result.positions[0]).max()
    assert moved > 0.5 * 0.5 * 1e9 * (3 / 24) ** 2
