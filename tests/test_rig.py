"""The motion as a rig (``neurok_core.rig``): a skinned space's bones per frame and the vertex
weights play back the engine's vertices; rig-only runs skip the vertices; files round-trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import trimesh
from bounds import assert_within
from test_bones import skinned_model

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.errors import ConditionError, NeuROKError
from neurok_core.results import load_result, save_result
from neurok_core.rig import (
    BoneRig,
    quat_apply,
    quat_from_matrix,
    quat_mul,
    quat_to_matrix,
    quats_from_matrices,
)
from neurok_core.simulate import simulate
from neurok_core.space import SpaceSettings, build_space

D = torch.float64


@pytest.fixture(scope="module")
def plate():
    """A subdivided 0.4 x 0.2 x 0.05 m slab, shifted and scaled off the origin (the rig's
    transforms must be in the caller's frame, not the normalised one)."""
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide().subdivide()
    vertices = mesh.vertices * 3.0 + np.array([2.0, -1.0, 0.5])
    settings = SpaceSettings(
        dynamics_points=48, skinning_points=256, subspace_samples=16, rest_steps=20
    )
    space = build_space(
        skinned_model(dtype=D, randomize=True), vertices, mesh.faces, settings=settings
    )
    return space, vertices


def push(frames: int = 7, **extra) -> SimulationConditions:
    return SimulationConditions(
        frames=frames,
        fps=24.0,
        forces=(Force(point=(2.6, -1.0, 0.6), direction=(0, 0, -1), strength=40.0),),
        **extra,
    )


def test_quaternion_helpers_agree_with_matrices():
    rng = np.random.default_rng(0)
    q = rng.normal(size=(5, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    p = rng.normal(size=(5, 3))
    rotated = np.einsum("nij,nj->ni", quat_to_matrix(q), p)
    np.testing.assert_allclose(quat_apply(q, p), rotated, atol=1e-12)
    r = rng.normal(size=(5, 4))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    both = np.einsum("nij,njk->nik", quat_to_matrix(q), quat_to_matrix(r))
    np.testing.assert_allclose(quat_to_matrix(quat_mul(q, r)), both, atol=1e-12)
    half_turns = np.array([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.6, 0.8]])  # w = 0: other branches
    for one in [*q, *r, *half_turns]:
        back = quat_from_matrix(quat_to_matrix(one))
        assert min(np.abs(back - one).max(), np.abs(back + one).max()) < 1e-12 and back[0] >= 0


def test_the_rig_plays_back_the_engines_vertices(plate):
    space, vertices = plate
    result = simulate(space, push(), rig=True)
    rig = result.rig
    nb = space.model.config.bones
    assert rig.heads.shape == (nb, 3) and rig.rotations.shape == (7, nb, 4)
    # the heads are the bone centres in the caller's frame: inside the object's box
    low, high = vertices.min(0) - 1e-9, vertices.max(0) + 1e-9
    assert_within(rig.heads, above=low, below=high, what="bone heads vs the object's box")
    np.testing.assert_allclose(rig.rotations[0], np.tile([1.0, 0, 0, 0], (nb, 1)))
    np.testing.assert_allclose(rig.translations[0], 0.0)
    np.testing.assert_allclose(np.linalg.norm(rig.rotations, axis=-1), 1.0, atol=1e-9)
    moved = np.abs(result.positions[-1] - vertices).max()
    assert moved > 1e-3 * space.object_size  # it moved, so the check below means something
    for t in range(7):
        np.testing.assert_allclose(rig.skin(vertices, t), result.positions[t], atol=1e-5)
    assert result.info["rig_error"] < 1e-5
    assert result.info["rig_bones"] == nb
    np.testing.assert_allclose(rig.vertex_weights.sum(1), 1.0, atol=1e-6)
    assert rig.vertex_bones.shape[1] == 4  # a rig's usual four influences


def test_rig_only_runs_skip_the_vertices_and_give_the_same_bones(plate):
    space, _ = plate
    both = simulate(space, push(), rig=True)
    seen = []
    only = simulate(
        space, push(), rig=True, vertices=False, on_frame=lambda i, x, e: seen.append(x)
    )
    assert only.positions is None and seen == [None] * 7
    np.testing.assert_allclose(only.rig.rotations, both.rig.rotations, atol=1e-12)
    np.testing.assert_allclose(only.rig.translations, both.rig.translations, atol=1e-12)
    # checked on a sample of decoded vertices instead
    assert only.info["rig_error"] < 1e-5


def test_pinned_vertices_hold_still_on_a_bone_of_their_own(plate):
    space, vertices = plate
    pins = tuple(int(i) for i in np.flatnonzero(vertices[:, 0] < vertices[:, 0].min() + 0.05))
    result = simulate(space, push(pins=pins), rig=True)
    rig = result.rig
    assert rig.num_bones == space.model.config.bones + 1
    np.testing.assert_allclose(rig.rotations[:, -1], np.tile([1.0, 0, 0, 0], (7, 1)))
    for t in range(7):
        np.testing.assert_allclose(
            rig.skin(vertices, t)[list(pins)], vertices[list(pins)], atol=1e-9
        )
    # the pins' clamp is applied to the bones, so the rig plays back the engine's vertices
    assert result.info["rig_error"] < 1e-5
    for t in range(7):
        np.testing.assert_allclose(rig.skin(vertices, t), result.positions[t], atol=1e-5)
        np.testing.assert_array_equal(
            result.positions[t][list(pins)], vertices[list(pins)].astype(np.float32)
        )
    assert rig.vertex_bones.shape[1] == 5  # the vertex's own four and the still bone
    np.testing.assert_allclose(rig.vertex_weights.sum(1), 1.0, atol=1e-6)
    near = rig.vertex_weights[:, -1]
    assert bool((near[list(pins)] == 1.0).all()) and 0.0 < float(near.mean()) < 1.0
    only = simulate(space, push(pins=pins), rig=True, vertices=False)
    assert only.info["rig_error"] < 1e-5


def test_a_rig_needs_bones(tiny_slab_space):
    with pytest.raises(ConditionError, match="bones"):
        simulate(tiny_slab_space, SimulationConditions(frames=3), rig=True)
    with pytest.raises(ConditionError, match="vertices, the rig or both"):
        simulate(tiny_slab_space, SimulationConditions(frames=3), vertices=False)


def test_rig_files_round_trip(plate, tmp_path):
    space, vertices = plate
    result = simulate(space, push(frames=4), rig=True, vertices=False)
    save_result(result, tmp_path / "r.npz")
    back = load_result(tmp_path / "r.npz")
    assert back.positions is None
    np.testing.assert_array_equal(back.rig.translations, result.rig.translations)
    result.rig.save_json(tmp_path / "rig.json", result.times)
    again = BoneRig.load_json(tmp_path / "rig.json")
    np.testing.assert_allclose(again.skin(vertices, 3), result.rig.skin(vertices, 3), atol=1e-5)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(NeuROKError, match="not a readable NeuROK rig"):
        BoneRig.load_json(tmp_path / "bad.json")


def test_a_separate_part_near_the_pins_keeps_its_own_bones():
    """The still bone holds the pins' own loose part near them, never another part (a drawer
    beside its pinned cabinet moves as its bones do)."""
    from neurok_core.vertexclamp import VertexClamp

    a = trimesh.creation.box((0.2, 0.2, 0.2)).subdivide()
    b = trimesh.creation.box((0.2, 0.2, 0.2)).subdivide()
    b.apply_translation((0.21, 0.0, 0.0))  # 1 cm from the first box
    vertices = np.concatenate([a.vertices, b.vertices])
    faces = np.concatenate([a.faces, b.faces + len(a.vertices)])
    settings = SpaceSettings(
        dynamics_points=48, skinning_points=256, subspace_samples=8, rest_steps=10
    )
    space = build_space(skinned_model(dtype=D, randomize=True), vertices, faces, settings=settings)
    near = vertices[:, 0] >= vertices[: len(a.vertices), 0].max() - 1e-9  # a's face at x = 0.1
    pins = tuple(int(i) for i in np.flatnonzero(near[: len(a.vertices)]))
    clamp = VertexClamp(space, SimulationConditions(frames=2, pins=pins))
    share = clamp.vertex_weights[:, -1].numpy()
    assert bool((share[list(pins)] == 1.0).all())
    assert (
        float(share[: len(a.vertices)].max()) == 1.0
        and float(share[len(a.vertices) :].max()) == 0.0
    )


def test_quaternions_of_a_stack_of_rotations_are_each_ones():
    """The vectorised conversion gives each matrix's quaternion, half turns (each branch of
    Shepperd's method) included."""
    from scipy.spatial.transform import Rotation

    turns = Rotation.random(500, random_state=3).as_matrix()
    halves = np.stack([np.diag(d) for d in ([1.0, -1, -1], [-1.0, 1, -1], [-1.0, -1, 1])])
    stack = np.concatenate([turns, halves, np.eye(3)[None]]).reshape(-1, 4, 3, 3)
    got = quats_from_matrices(stack)
    assert got.shape == (len(stack), 4, 4)
    want = np.array([[quat_from_matrix(m) for m in row] for row in stack])
    np.testing.assert_allclose(got, want, atol=1e-12)
