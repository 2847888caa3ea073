"""MuJoCo-simulated deformable families: format, pins, gravity, closed surfaces, determinism."""

import mujoco
import numpy as np
import pytest
import torch
from bounds import assert_within
from torch.testing import assert_close

from neurok_core.errors import SimulationError
from neurok_core.sequence import validate_sequence
from training.data import cloth, elastic, mujoco_util, rope
from training.data.deformables import DEFORMABLE_FAMILIES, UNSEEN
from training.data.registry import all_families

FRAMES = 6


def _close(a, b, **kw):
    assert_close(
        torch.tensor(np.asarray(a, np.float64)), torch.tensor(np.asarray(b, np.float64)), **kw
    )


@pytest.fixture(scope="module")
def tiny_sequences():
    return {
        name: fn(np.random.default_rng(7), FRAMES, tiny=True)
        for name, fn in DEFORMABLE_FAMILIES.items()
    }


def test_families_registered_with_splits():
    fams = all_families()
    for name in DEFORMABLE_FAMILIES:
        assert name in fams, name
        assert fams[name].split == ("unseen" if name in UNSEEN else "train")
    cats = {fams[n].category for n in DEFORMABLE_FAMILIES}
    assert cats == {"cloth", "elastic", "continuum"}
    assert {fams[n].category for n in UNSEEN} >= {"cloth"}


@pytest.mark.parametrize("name", sorted(DEFORMABLE_FAMILIES))
def test_tiny_sequence_format(tiny_sequences, name):
    seq = tiny_sequences[name]
    validate_sequence(seq)
    fam = all_families()[name]
    assert seq.category == fam.category
    assert seq.num_frames == FRAMES
    assert seq.vertices.dtype == np.float32 and seq.faces.dtype == np.int32
    assert (seq.parts == -1).all()
    assert seq.source.startswith(f"mujoco-{mujoco.__version__}:")
    # The simulation moves the body (gravity, wind, pulses all act from the first step).
    assert np.abs(seq.vertices[-1] - seq.vertices[0]).max() > 1e-3
    if seq.category in ("elastic", "continuum"):
        assert seq.closed
        for t in (0, FRAMES - 1):
            assert elastic.signed_volume(seq.vertices[t].astype(np.float64), seq.faces) > 0
    else:
        assert not seq.closed


def test_same_seed_same_arrays():
    for name in ("cloth_flag", "elastic_poked", "rope_clamped"):
        fn = DEFORMABLE_FAMILIES[name]
        a = fn(np.random.default_rng(3), FRAMES, tiny=True)
        b = fn(np.random.default_rng(3), FRAMES, tiny=True)
        np.testing.assert_array_equal(a.vertices, b.vertices)
        np.testing.assert_array_equal(a.faces, b.faces)
        c = fn(np.random.default_rng(4), FRAMES, tiny=True)
        assert c.vertices.shape != a.vertices.shape or not np.array_equal(c.vertices, a.vertices)


def _sheet(n=4, z=1.0):
    return cloth.Sheet(
        0.6, 0.6, n, n, np.array([0.0, 0.0, z]), np.array([1.0, 0, 0]), np.array([0, 1.0, 0])
    )


MATERIAL = cloth.ClothMaterial(
    membrane=1000.0, thickness=1e-3, poisson=0.3, damping=1e-3, areal_density=0.2, friction=0.5
)


def test_cloth_free_fall_matches_discrete_gravity():
    """A free, unstrained sheet falls as x_n = x_0 - g h^2 n (n + 1) / 2 (velocity stepping)."""
    sheet = _sheet()
    seq = cloth.simulate_cloth("fall", sheet, MATERIAL, np.zeros(0, int), FRAMES)
    rest = sheet.points()
    _close(seq.vertices[0], rest, rtol=0, atol=1e-6)
    h = cloth.STEP.timestep
    n = (FRAMES - 1) * cloth.STEP.substeps
    expected = rest - [0, 0, mujoco_util.GRAVITY * h * h * n * (n + 1) / 2]
    _close(seq.vertices[-1], expected, rtol=0, atol=1e-4)


def test_cloth_pins_hold_and_the_rest_falls():
    sheet = _sheet(n=5)
    pins = sheet.index([0, 4], [4, 4])  # two corners of one edge
    seq = cloth.simulate_cloth("hang", sheet, MATERIAL, pins, FRAMES)
    v = seq.vertices.astype(np.float64)
    _close(v[:, pins], np.broadcast_to(v[0, pins], v[:, pins].shape), rtol=0, atol=1e-7)
    free = np.setdiff1d(np.arange(v.shape[1]), pins)
    fall = np.diff(v[:, free, 2].mean(1))  # the free part keeps falling
    assert_within(fall, below=0, strict=True, what="free part's mean height per frame")
    # Consistent orientation: every rest triangle faces along e_u x e_v = +z.
    n = np.cross(
        v[0, seq.faces[:, 1]] - v[0, seq.faces[:, 0]], v[0, seq.faces[:, 2]] - v[0, seq.faces[:, 0]]
    )
    assert_within(n[:, 2], above=0, strict=True, what="rest triangles' normal z")


def test_cloth_wind_pushes_downwind():
    sheet = cloth.Sheet(
        0.5, 0.5, 4, 4, np.array([0, 0, 1.0]), np.array([1.0, 0, 0]), np.array([0, 0, 1.0])
    )
    pins = sheet.index(np.arange(4), 3)
    calm = cloth.simulate_cloth("calm", sheet, MATERIAL, pins, FRAMES)
    windy = cloth.simulate_cloth(
        "windy", sheet, MATERIAL, pins, FRAMES, wind=(np.array([0, -1.0, 0]), lambda t: 3.0)
    )
    # The sheet's normal is e_u x e_v = -y; wind along -y blows the free part to -y.
    assert windy.vertices[-1, :, 1].mean() < calm.vertices[-1, :, 1].mean() - 1e-3


def test_boundary_of_tet_grid_is_closed_and_outward():
    points, tets = elastic.grid_tets((3, 4, 5))
    assert (elastic.tet_volumes(points, tets) != 0).all()
    faces = elastic.boundary_faces(points, tets)
    ids, compact = elastic.compact(faces)
    assert elastic.is_closed_oriented(compact)
    _close(elastic.signed_volume(points[ids], compact), 8.0)  # the cube [-1, 1]^3
    interior = (np.abs(points) < 1 - 1e-9).all(1)
    assert not np.isin(np.flatnonzero(interior), ids).any()
    ball = elastic.make_body("sphere", np.full(3, 2.0), 6)
    bf = elastic.boundary_faces(ball.points, ball.tets)
    v = elastic.signed_volume(ball.points, bf)
    assert 0.8 * 4 / 3 * np.pi < v < 4 / 3 * np.pi  # inscribed polyhedron of the unit ball


def test_elastic_surface_is_the_flex_boundary():
    """Frame 0 of an elastic sequence is the boundary of the compiled flex, outward."""
    rng = np.random.default_rng(0)
    seq = elastic.elastic_cantilever(rng, FRAMES, tiny=True)
    assert seq.closed and elastic.is_closed_oriented(seq.faces)
    # Clamped end: the vertices that never move are exactly one planar face of the beam.
    moved = np.abs(seq.vertices - seq.vertices[0]).max(axis=(0, 2))
    fixed = seq.vertices[0, moved == 0]
    assert len(fixed) >= 4
    centred = fixed - fixed.mean(0)
    assert np.linalg.svd(centred, compute_uv=False)[-1] < 1e-5  # coplanar


def test_tube_is_watertight_with_the_prism_volume():
    length, radius, ring = 1.3, 0.05, rope.RING
    centre = rope.rope_points(np.zeros(3), np.array([1.0, 2.0, 0.5]), length, 7)[None]
    verts = rope.tube_vertices(centre, radius)[0]
    faces = rope.tube_faces(7)
    assert elastic.is_closed_oriented(faces)
    prism = 0.5 * ring * radius**2 * np.sin(2 * np.pi / ring) * length  # flat caps
    _close(elastic.signed_volume(verts, faces), prism)


def test_transport_frames_do_not_spin_for_a_rigidly_moving_curve():
    s = np.linspace(0, 4 * np.pi, 30)
    helix = np.stack([np.cos(s), np.sin(s), 0.3 * s], 1)
    moved = np.stack([helix + [0.1 * k, 0, 0] for k in range(5)])  # (5, 30, 3)
    tan, u, w = rope.transport_frames(moved)
    _close((u * tan).sum(-1), np.zeros((5, 30)), atol=1e-12, rtol=0)
    _close(u, np.broadcast_to(u[0], u.shape), atol=1e-12, rtol=0)
    _close(np.linalg.norm(w, axis=-1), np.ones((5, 30)))


def test_rope_pinned_end_stays_put():
    seq = rope.rope_swinging(np.random.default_rng(1), FRAMES, tiny=True)
    p = (seq.num_vertices - 2) // rope.RING
    start_cap = p * rope.RING  # centre of the start cap = the pinned point
    v = seq.vertices.astype(np.float64)
    _close(v[:, start_cap], np.broadcast_to(v[0, start_cap], (FRAMES, 3)), atol=1e-7, rtol=0)
    assert np.abs(v[-1, start_cap + 1] - v[0, start_cap + 1]).max() > 1e-3  # the free end moves


def test_unstable_simulation_raises():
    pts = rope.rope_points(np.array([0, 0, 1.0]), np.array([1.0, 0, 0]), 0.5, 6)
    mat = rope.RopeMaterial(0.005, 500.0, 1e7, 0.3, 1e-3, 0.5)
    with pytest.raises(SimulationError, match="m/s"):
        rope.simulate_rope(
            "thrown", pts, mat, np.zeros(0, int), FRAMES, initial_velocity=np.full((6, 3), 500.0)
        )
    with pytest.raises(SimulationError, match="rejected"):
        mujoco_util.compile_model("<mujoco><worldbody><geom/></worldbody>", "bad")
