"""The rig space's plausibility figures (``rigspace.plausibility``) and the warning they give
(``doubts.warning``): none for plausible motions, one for a cloth made to stretch and for an
object made to sink; the depth agrees with the exact depth of every vertex."""

import numpy as np
import pytest
import trimesh
from conftest import flag_mesh

from neurok_core.doubts import warning
from neurok_core.dynamics import Collider, Force, SimulationConditions
from neurok_core.dynamics.obstacles import MeshDistance, Obstacles
from neurok_core.metrics import edge_strain
from neurok_core.rigspace import RigSettings, simulate_rig
from neurok_core.rigspace.cloth import ClothMaterial
from neurok_core.rigspace.cloth_simulate import simulate_cloth
from neurok_core.rigspace.plausibility import SAMPLE_FACES, sample_faces


def test_a_plausible_motion_has_no_warning():
    """A 1 m cube pushed by 10 N under gravity, and a flag hanging from its pole: strain and
    depth far below their targets, the steps complete."""
    cube = trimesh.creation.box((1.0, 1.0, 1.0))
    push = Force(vertex=0, direction=(0, 0, 1), strength=10.0)
    result = simulate_rig(
        cube.vertices, cube.faces, SimulationConditions(frames=24, forces=(push,))
    )
    info = result.info
    assert info["edge_strain_max"] < 1e-6 and info["penetration_max"] == 0.0
    assert info["integration"] == "complete" and warning(info, 24) is None
    vertices, faces, pole, _ = flag_mesh()
    hanging = SimulationConditions(frames=24, pins=tuple(pole.tolist()), mass=0.2, damping=0.8)
    info = simulate_rig(vertices, faces, hanging).info
    assert info["edge_strain_max"] < 0.02 and warning(info, 24) is None


def test_a_cloth_made_to_stretch_is_warned_of():
    """The flag (a cloth) with its stretching frequency 800x too low sags like rubber: the
    strain is the mesh's own (every edge, every frame) and its warning says so."""
    vertices, faces, pole, _ = flag_mesh()
    conditions = SimulationConditions(frames=24, pins=tuple(pole.tolist()), mass=0.2, damping=0.8)
    soft = ClothMaterial(stretch_hz=ClothMaterial().stretch_hz / 800)
    result = simulate_cloth(vertices, faces, conditions, settings=RigSettings(), material=soft)
    info = result.info
    strain = edge_strain(vertices, result.positions, faces)  # (T,) all edges
    assert info["edge_strain_max"] == pytest.approx(strain.max(), rel=1e-4)
    assert info["edge_strain_frame"] == int(strain.argmax()) and strain.max() > 0.05
    text = warning(info, 24)
    assert text.startswith(f"In the rig space the mesh stretched by {strain.max():.0%}")
    assert "into the ground" not in text


@pytest.mark.parametrize("obstacle", ["ground", "collider"])
def test_an_object_made_to_sink_is_warned_of(obstacle):
    """A slab resting on the ground or on a box collider whose contact is made 200x too soft
    sinks into it: the figure is the deepest any vertex goes (the exact depth of every vertex
    of every frame, within a hair), in object sizes, and the warning says so."""
    slab = trimesh.creation.box((0.2, 0.2, 0.05)).subdivide()
    vertices = np.asarray(slab.vertices) + (0.0, 0.0, 0.025)  # resting on z = 0
    box = trimesh.creation.box((0.3, 0.3, 0.3))
    box.apply_translation((0.0, 0.0, -0.15))  # its top at z = 0
    collider = Collider(tuple(map(tuple, box.vertices)), tuple(map(tuple, box.faces)), "box")
    where = {"ground": 0.0} if obstacle == "ground" else {"colliders": (collider,)}
    soft = RigSettings(contact_hz=0.3, contact_depth=1.0)
    result = simulate_rig(
        vertices, slab.faces, SimulationConditions(frames=24, **where), settings=soft
    )
    info = result.info
    size = 0.2
    world = Obstacles(
        where.get("ground"),
        [MeshDistance(box.vertices, box.faces, 0.002, 0.02)] if obstacle == "collider" else [],
    )
    depth = np.array([world.exact_depth(x).max() for x in result.positions]) / size
    assert depth.max() > 0.01
    assert info["penetration_max"] == pytest.approx(depth.max(), rel=1e-3, abs=1e-5)
    assert info["penetration_frame"] == int(depth.argmax())
    text = warning(info, 24)
    assert f"it went {depth.max():.1%} of its size into the ground or a collider" in text


def test_a_run_cut_short_says_so():
    cube = trimesh.creation.box((1.0, 1.0, 1.0))
    result = simulate_rig(
        cube.vertices, cube.faces, SimulationConditions(frames=24), on_frame=lambda i, x, e: i < 3
    )
    assert len(result.times) == 4 and result.info["integration"] == "cut short"


def test_the_sample_is_fixed_and_bounded():
    """Whatever the mesh's size, at most SAMPLE_FACES faces (all of a smaller mesh), the same
    ones every run: the figures cost the same at a million vertices."""
    assert np.array_equal(sample_faces(np.zeros((50, 3))), np.arange(50))
    big = np.zeros((2_000_000, 3), dtype=np.int64)
    rows = sample_faces(big)
    assert len(rows) == SAMPLE_FACES and np.array_equal(rows, sample_faces(big))
    assert np.all(np.diff(rows) > 0)


def test_a_collider_depth_is_exact_inside_and_nothing_past_an_open_rim():
    """Under a plane's face a point is inside it by its distance; past the plane's edge (a
    cloth hanging over a table top made of a plane) it is not; inside a box, however deep."""
    from neurok_core.rigspace.plausibility import _Collider

    plane = _Collider(
        [(-0.5, -0.5, 0), (0.5, -0.5, 0), (0.5, 0.5, 0), (-0.5, 0.5, 0)],
        [(0, 1, 2), (0, 2, 3)],
        1e-6,
    )
    points = np.array([(0.0, 0.1, -0.01), (0.6, 0.0, -0.01), (0.5, 0.0, -0.02), (0, 0, 0.01)])
    np.testing.assert_allclose(plane.depth(points), [0.01, 0.0, 0.0, 0.0], atol=1e-12)
    box = trimesh.creation.box((1.0, 1.0, 1.0))
    solid = _Collider(box.vertices, box.faces, 1e-6)
    np.testing.assert_allclose(
        solid.depth(np.array([(0.0, 0.0, 0.3), (0.45, 0.0, 0.0), (0.0, 0.0, 0.7)])),
        [0.2, 0.05, 0.0],
        atol=1e-12,
    )
