"""Obstacles on a path (neurok_core.dynamics.moving) and a cloth that meets the solids of its
scene as they move (neurok_core.rigspace.objects): the fitted rigid paths, the moving distance
grid against a static one of the posed mesh, and a cart that carries the cloth lying on it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mesh_pieces import box_mesh
from scipy.spatial.transform import Rotation

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.moving import MovingMesh, RigidTrack, fit_track
from neurok_core.dynamics.obstacles import MeshDistance, Obstacles
from neurok_core.rigspace.objects import SceneObject, simulate_objects
from training.eval.scene_meshes import grid_box, sheet


def _turns(angles_deg, axis=(0.0, 0.0, 1.0)) -> np.ndarray:
    axis = np.asarray(axis) / np.linalg.norm(axis)
    return Rotation.from_rotvec(np.radians(angles_deg)[:, None] * axis).as_matrix()


def test_a_fitted_path_recovers_each_frames_turn_and_shift():
    rng = np.random.default_rng(3)
    rest = rng.normal(size=(40, 3))
    rot = _turns(np.array([0.0, 30.0, 170.0]), axis=(1.0, 2.0, 0.5))
    shift = np.array([[0.0, 0.0, 0.0], [0.1, -0.2, 0.3], [1.0, 0.5, -2.0]])
    frames = np.einsum("tij,vj->tvi", rot, rest) + shift[:, None]
    track, residual = fit_track(rest, frames, np.array([0.0, 0.5, 1.0]))
    assert residual < 1e-9
    np.testing.assert_allclose(track.rotations, rot, atol=1e-9)
    for t, r, c in zip(track.times, rot, shift, strict=True):
        got_r, got_c = track.pose(t)
        want = r @ rest.T + c[:, None]
        np.testing.assert_allclose(got_r @ rest.T + got_c[:, None], want, atol=1e-9)
    # a bent frame is not a rigid motion: the residual says how far off
    bent = frames.copy()
    bent[1, 0, 0] += 0.05  # one point of one frame 5 cm off
    assert 0.04 < fit_track(rest, bent, np.array([0.0, 0.5, 1.0]))[1] < 0.05


def test_a_pose_between_frames_turns_part_of_the_way():
    track = RigidTrack(
        np.array([0.0, 1.0]), _turns(np.array([0.0, 90.0])), np.array([[0.0, 0, 0], [2.0, 0, 0]])
    )
    rot, c = track.pose(0.5)
    np.testing.assert_allclose(rot, _turns(np.array([45.0]))[0], atol=1e-12)
    np.testing.assert_allclose(c, [1.0, 0.0, 0.0])
    np.testing.assert_allclose(track.pose(-1.0)[0], np.eye(3))  # held before and after
    np.testing.assert_allclose(track.pose(5.0)[1], [2.0, 0.0, 0.0])


def test_a_moving_mesh_measures_as_the_posed_mesh_does():
    v, f = box_mesh((0.4, 0.3, 0.2), np.zeros(3), subdivisions=2)
    rot = _turns(np.array([0.0, 40.0]), axis=(0.3, 1.0, 0.2))
    shift = np.array([[0.0, 0.0, 0.0], [0.5, 0.2, 0.1]])
    track = RigidTrack(np.array([0.0, 1.0]), rot, shift)
    cell, band = 0.005, 0.05
    moving = MovingMesh(MeshDistance(v, f, cell, band), track)
    moving.at(1.0)
    posed = MeshDistance(v @ rot[1].T + shift[1], f, cell, band)
    rng = np.random.default_rng(0)
    # points near the posed box's faces (the grids differ by their cells near edges only)
    x = posed.vertices[rng.choice(len(v), 200)] + rng.normal(scale=0.01, size=(200, 3))
    both = moving.near(x) & posed.near(x)
    d_exact = moving.exact(x[both])
    np.testing.assert_allclose(d_exact, posed.exact(x[both]), atol=1e-9)
    d, n = moving.query(x[both])
    d2, n2 = posed.query(x[both])
    assert np.abs(d - d_exact).max() < 2 * cell
    np.testing.assert_allclose(d, d2, atol=2 * cell)
    # the gradients point the same way where both are well defined
    unit = (n * n2).sum(1) / np.linalg.norm(n, axis=1) / np.linalg.norm(n2, axis=1)
    assert np.median(unit) > 0.99
    # a point carried over the move: where the body's rest point went
    moving_from_start = MovingMesh(MeshDistance(v, f, cell, band), track)
    moving_from_start.at(0.0)
    moving_from_start.at(1.0)
    p = np.array([[0.2, 0.15, 0.1]])
    np.testing.assert_allclose(p + moving_from_start.motion(p), p @ rot[1].T + shift[1], atol=1e-12)
    world = Obstacles(None, [moving_from_start])
    assert world.speed(0.0, 1.0) >= np.linalg.norm(shift[1])
    on = posed.vertices[:1]  # on the posed surface: carried as the body moves
    speed = moving_from_start.velocity(on)
    np.testing.assert_allclose(world.carried(on, 0.01, velocity=True), speed)
    assert np.linalg.norm(speed) > 0.1


def _cart_scene(push: float):
    v, f, _ = sheet(0.4, 0.4, 0.05)
    v = v[:, [0, 2, 1]] + [-0.2, -0.2, 0.21]  # lying 1 cm above the cart's top
    f = f[:, [0, 2, 1]]
    box_v, box_f = grid_box((0.3, 0.3, 0.2), (0.0, 0.0, 0.1), 0.1)
    back = int(np.argmin(np.linalg.norm(box_v - [-0.15, 0.0, 0.1], axis=1)))
    forces = (Force((1.0, 0.0, 0.0), push, vertex=back, end_frame=10),) if push else ()
    objects = [
        SceneObject("cloth", v, f, SimulationConditions(mass=0.1)),
        SceneObject("cart", box_v, box_f, SimulationConditions(mass=5.0, forces=forces)),
    ]
    scene = SimulationConditions(frames=30, fps=24, damping=0.5, ground=0.0, friction=0.5)
    return objects, scene


@pytest.mark.parametrize("push", [0.0, 35.0])
def test_a_moving_cart_carries_the_cloth_lying_on_it(push):
    objects, scene = _cart_scene(push)
    results = simulate_objects(objects, scene)
    cloth, cart = results["cloth"].positions, results["cart"].positions
    travel = float(cart[-1, :, 0].mean() - cart[0, :, 0].mean())
    carried = float(cloth[-1, :, 0].mean() - cloth[0, :, 0].mean())
    info = results["cloth"].info
    assert info["moving_obstacles"] == ["cart:0"] and info["moving_obstacles_fit"] < 1e-3
    assert info["penetration_max"] <= 0.01  # nothing of the cloth inside the cart or ground
    # the cloth lies on the cart's top (0.2 m), not fallen through it
    assert np.median(cloth[-1, :, 2]) > 0.19
    if push:
        assert travel > 0.2 and abs(carried - travel) < 0.2 * travel
    else:  # a cart at rest: the cloth settles on it where it lay
        assert abs(travel) < 1e-3 and abs(carried) < 0.01


def test_a_flags_hoist_pinned_on_a_pushed_pillar_goes_with_it():
    pillar_v, pillar_f = grid_box((0.3, 0.3, 1.0), (0.0, 0.0, 0.5), 0.1)
    v, f, _ = sheet(0.4, 0.3, 0.05)  # in the xz plane: x along, z up
    v = np.stack([np.zeros(len(v)), 0.1505 + v[:, 0], 0.55 + v[:, 2]], 1)  # off the +y face
    hoist = np.flatnonzero(v[:, 1] < 0.151)
    loose = np.flatnonzero(v[:, 1] > 0.55 - 1e-9)  # the far edge: pinned in the air
    bottom = int(np.argmin(np.linalg.norm(pillar_v - [-0.15, 0.0, 0.05], axis=1)))
    push = Force((1.0, 0.0, 0.0), 15.0, vertex=bottom, end_frame=12)
    pins = tuple(np.concatenate([hoist, loose]).tolist())
    objects = [
        SceneObject("flag", v, f, SimulationConditions(mass=0.1, pins=pins)),
        SceneObject("pillar", pillar_v, pillar_f, SimulationConditions(mass=5.0, forces=(push,))),
    ]
    scene = SimulationConditions(frames=24, fps=24, damping=0.2, ground=0.0, friction=0.2)
    results = simulate_objects(objects, scene)
    flag, pillar = results["flag"].positions, results["pillar"].positions
    travel = pillar[-1, :, 0].mean() - pillar[0, :, 0].mean()
    assert travel > 0.1
    # the hoist where the pillar takes it (the push off the middle turns it too): in the
    # pillar's own frame, the hoist stays where it was
    track, _ = fit_track(pillar[0], pillar, np.arange(len(pillar)) / 24.0)
    local = np.einsum("tji,tvj->tvi", track.rotations, flag[:, hoist] - track.translations[:, None])
    assert np.abs(local - v[hoist]).max() < 1e-3
    # the pin in the air, on no body, stays where it was
    np.testing.assert_allclose(flag[:, loose], np.broadcast_to(v[loose], flag[:, loose].shape))
    assert results["flag"].rig is not None


def test_an_undamped_cloth_on_a_moving_cart_keeps_its_energy_bounded():
    """No damping: the cloth is carried, never flung (an undamped cloth run restores the
    energy its loads account for; a moving body's work is not among them, so with moving
    bodies it keeps none)."""
    objects, scene = _cart_scene(35.0)
    scene = dataclasses.replace(scene, damping=0.0)
    results = simulate_objects(objects, scene)
    cloth, cart = results["cloth"].positions, results["cart"].positions
    speed = np.linalg.norm(np.diff(cloth, axis=0), axis=2).max() * scene.fps
    assert speed < 5.0  # m/s: never flung (the cart moves at about 1 m/s)
    assert np.median(cloth[-1, :, 2]) > 0.19  # still lying on the cart
    travel = cart[-1, :, 0].mean() - cart[0, :, 0].mean()
    assert abs(cloth[-1, :, 0].mean() - cloth[0, :, 0].mean() - travel) < 0.3 * travel
