"""Slider joints (neurok_core.rigspace.joints.find_slider, energies.SliderGlue): a box in a
sleeve slides along the sleeve and nowhere else; the slider glue's derivatives."""

from __future__ import annotations

import numpy as np
import pytest
from mesh_pieces import box_mesh, join_meshes

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.rigspace import build_rig_space, simulate_rig
from neurok_core.rigspace.energies import SliderGlue
from neurok_core.structure import find_structure

WIDTH, HEIGHT, DEPTH, WALL = 0.3, 0.15, 0.6, 0.02


def _box_in_open_box():
    """(vertices, faces, the open box's vertex count): a 30 x 15 cm opening, 60 cm deep (y),
    open at -y, its five 2 cm panels; a 30 x 50 x 15 cm box in it touching its four sides,
    15 cm out of the opening, 10 cm short of the back."""
    w, h, d, t = WIDTH, HEIGHT, DEPTH, WALL
    panels = [
        ((w + 2 * t, d, t), (0, 0, -h / 2 - t / 2)),
        ((w + 2 * t, d, t), (0, 0, h / 2 + t / 2)),
        ((t, d, h), (-w / 2 - t / 2, 0, 0)),
        ((t, d, h), (w / 2 + t / 2, 0, 0)),
        ((w, t, h), (0, d / 2 + t / 2, 0)),
    ]
    sleeve = join_meshes(*[box_mesh(*p) for p in panels])
    v, f = join_meshes(sleeve, box_mesh((w, 0.5, h), (0, -d / 2 + 0.15, 0)))
    return v, f, len(sleeve[0])


def test_a_box_in_an_open_box_is_a_slider_along_the_opening():
    v, f, n_outer = _box_in_open_box()
    space = build_rig_space(v, f, mass=1.0, pins=np.arange(n_outer))
    assert [j.kind for j in space.joints] == ["slider"]
    angle = np.degrees(np.arccos(min(abs(float(space.joints[0].axis[1])), 1.0)))
    assert angle < 3.0, angle
    joints = find_structure(v, f, pins=range(n_outer)).joints  # the panels one world body
    slider = [j for j in joints if j.type == "slider"]
    assert len(slider) == 1 and abs(slider[0].axis[1]) > np.cos(np.radians(3))


@pytest.mark.parametrize("direction", [(0, -1, 0), (1, 0, 0), (0, 0, 1)])
def test_a_pushed_slider_slides_along_its_axis_only(direction):
    v, f, n_outer = _box_in_open_box()
    box = np.arange(n_outer, len(v))
    front = box[np.argmin(v[box, 1])]
    cond = SimulationConditions(
        forces=(Force(direction, 2.0, vertex=int(front), end_frame=12),),
        gravity=(0.0, 0.0, 0.0),  # no weight and no friction: the joint alone decides (a
        friction=0.0,  # snug box rubs its sleeve: with friction 0.5 it holds 2 N)
        pins=tuple(range(n_outer)),
        mass=1.0,
        frames=24,
        fps=24.0,
        damping=0.5,
    )
    x = simulate_rig(v, f, cond).positions.astype(np.float64)[:, box]
    moved = x - v[box]  # (T, N, 3)
    size = DEPTH
    across = np.abs(moved[..., [0, 2]]).max()
    if direction[1]:  # pulled out: it slides out by several cm, straight
        assert moved[-1, :, 1].mean() < -0.05 * size
        assert across < 0.01 * size, across
    else:  # pushed across: it stays in its sleeve
        assert np.abs(moved).max() < 0.01 * size, np.abs(moved).max()


@pytest.mark.parametrize("world", [False, True])
def test_slider_glue_gradient_and_hessian_match_finite_differences(world):
    rng = np.random.default_rng(7)
    bones, pairs = 3, 4
    rows = rng.normal(size=(pairs, 4 * bones))
    if world:  # the world holds the axis: constant normals, a quadratic energy
        normal_rows = np.zeros((pairs, 2, 4 * bones))
        normals = rng.normal(size=(pairs, 2, 3))
    else:
        normal_rows = rng.normal(size=(pairs, 2, 4 * bones))
        normals = np.zeros((pairs, 2, 3))
    glue = SliderGlue(
        rows, rng.normal(size=(pairs, 3)), normal_rows, normals, rng.uniform(1, 2, pairs), omega=1.0
    )
    q = rng.normal(size=(bones, 4, 3))
    _, grad, hess = glue(q, True, project=False)
    eps = 1e-6
    num_grad, num_hess = np.zeros(q.size), np.zeros((q.size, q.size))
    for i in range(q.size):
        step = np.zeros(q.size)
        step[i] = eps
        plus, g_plus, _ = glue(q + step.reshape(q.shape), False)
        minus, g_minus, _ = glue(q - step.reshape(q.shape), False)
        num_grad[i] = (plus - minus) / (2 * eps)
        num_hess[:, i] = (g_plus - g_minus).reshape(-1) / (2 * eps)
    np.testing.assert_allclose(grad.reshape(-1), num_grad, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(hess, num_hess, rtol=1e-5, atol=1e-5 * np.abs(hess).max())
    projected = glue(q, True)[2]
    assert np.linalg.eigvalsh(projected).min() > -1e-9 * np.abs(projected).max()
    # the rows the integrator takes for the joint's allowed velocities are grad c
    c_grad = glue.joint_rows(q)
    assert c_grad.shape == (2 * pairs, q.size)
