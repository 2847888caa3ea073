"""The part-aware (skinned) decoder: bone placement, rest-shape skinning weights, the bone blend,
its kinematic space, checkpoints and a two-part fit whose hinge turns rigidly."""

import dataclasses
import math

import numpy as np
import pytest
import torch
import trimesh
from scipy.spatial import cKDTree
from test_model import hinge_bar
from torch.testing import assert_close

from neurok_core.checkpoint import load_checkpoint, save_checkpoint
from neurok_core.dualquat import dq_apply, dq_from_rt
from neurok_core.metrics import best_rotations, rigid_fit_residual
from neurok_core.model import LossConfig, ModelConfig, NeuROKModel
from neurok_core.model.bones import about_centers, blend_bones, farthest_point_centers
from neurok_core.space import SpaceSettings, build_space

D = torch.float64


def skinned_model(seed: int = 0, *, dtype=torch.float32, randomize: bool = False, **overrides):
    torch.manual_seed(seed)
    model = NeuROKModel(ModelConfig.preset("tiny", deformation="skinned", **overrides)).to(dtype)
    if randomize:  # the bone head and the weights' modulation start at zero
        with torch.no_grad():
            model.decoder.head.weight.normal_(0.0, 0.2)
            model.decoder.head.bias.normal_(0.0, 0.05)
            model.decoder.skin.to_point.weight.normal_(0.0, 0.5)
    return model.eval()


def test_farthest_point_centers_are_deterministic_and_greedy():
    gen = torch.Generator().manual_seed(0)
    pts = torch.rand(2, 200, 3, generator=gen)
    centers = farthest_point_centers(pts, 12)
    assert centers.shape == (2, 12, 3)
    assert_close(centers, farthest_point_centers(pts.clone(), 12), rtol=0, atol=0)
    for b in range(2):  # a plain greedy reference
        p = pts[b]
        chosen = [int(((p - p.mean(0)) ** 2).sum(-1).argmax())]
        for _ in range(11):
            d = torch.cdist(p, p[chosen]).min(-1).values
            chosen.append(int(d.argmax()))
        assert_close(centers[b], p[chosen], rtol=0, atol=0)
    # spread: no two centres closer than a random pick's typical nearest pair
    gaps = torch.cdist(centers[0], centers[0]) + 10 * torch.eye(12)
    assert float(gaps.min()) > 0.2
    with pytest.raises(ValueError, match="bones"):
        farthest_point_centers(pts[:, :5], 6)


def test_motion_about_a_centre_keeps_the_centre_fixed():
    angle = torch.tensor(0.7)
    rot = torch.stack([torch.cos(angle / 2), 0 * angle, 0 * angle, torch.sin(angle / 2)])
    motion = dq_from_rt(rot, torch.tensor([0.0, 0.0, 0.0]))[None]  # (1, 8) about the origin
    c = torch.tensor([[0.3, -0.2, 0.1]])
    world = about_centers(motion, c)
    assert_close(dq_apply(world, c), c)
    p = torch.tensor([[0.3 + 1.0, -0.2, 0.1]])  # one unit along x from the centre
    expected = c + torch.tensor([[math.cos(0.7), math.sin(0.7), 0.0]])
    assert_close(dq_apply(world, p), expected)


def test_untrained_skinned_decoder_is_the_identity_with_gaussian_weights():
    model = skinned_model()
    rest = torch.rand(2, 64, 3) - 0.5
    shape = model.encode_shape(rest)
    assert shape.centers.shape == (2, model.config.bones, 3)
    z = 3.0 * torch.randn(2, model.config.latent_dim)
    query = torch.rand(2, 30, 3) - 0.5
    assert_close(model.deform(z, shape, query), query)
    weights = model.skin_weights(shape, query)  # (2, 30, nb)
    assert_close(weights.sum(-1), torch.ones(2, 30))
    d2 = ((query[:, :, None] - shape.centers[:, None]) ** 2).sum(-1)
    sigma = model.config.bone_sigma
    assert_close(weights, torch.softmax(-d2 / (2 * sigma**2), -1))


def test_points_of_one_bone_move_rigidly_and_the_decoder_differentiates():
    model = skinned_model(dtype=D, randomize=True)
    rest = torch.rand(1, 64, 3, dtype=D) - 0.5
    shape = model.encode_shape(rest)
    z = torch.randn(3, model.config.latent_dim, dtype=D)
    bones = model.bones(z, shape)  # (3, nb, 8)
    one_hot = torch.zeros(1, 40, model.config.bones, dtype=D)
    one_hot[..., 2] = 1.0
    query = torch.rand(1, 40, 3, dtype=D) - 0.5
    moved = dq_apply(blend_bones(bones, one_hot), query).detach()  # (3, 40, 3)
    for b in range(3):  # one bone: exactly rigid
        residual = rigid_fit_residual(query[0].numpy(), moved[b : b + 1].numpy())
        assert float(residual[0]) < 1e-10
        assert float((moved[b] - query[0]).abs().max()) > 1e-3

    # first and second directional derivatives against differences (float64)
    def deform(latent):
        return model.deform(latent, shape, query)

    v = torch.randn_like(z)
    with torch.no_grad():
        _, first = torch.func.jvp(deform, (z,), (v,))
        h = 1e-5
        assert_close(first, (deform(z + h * v) - deform(z - h * v)) / (2 * h), rtol=1e-6, atol=1e-8)

        def directional(latent):
            return torch.func.jvp(deform, (latent,), (v,))[1]

        _, second = torch.func.jvp(directional, (z,), (v,))
        h2 = 1e-4
        fd = (directional(z + h2 * v) - directional(z - h2 * v)) / (2 * h2)
        assert_close(second, fd, rtol=1e-6, atol=1e-8)
    assert_close(torch.func.jacfwd(deform)(z), torch.func.jacrev(deform)(z))


@pytest.fixture(scope="module")
def skinned_space():
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide().subdivide()
    settings = SpaceSettings(
        dynamics_points=48, skinning_points=256, subspace_samples=16, rest_steps=20
    )
    model = skinned_model(dtype=D, randomize=True)
    return build_space(model, mesh.vertices, mesh.faces, settings=settings), mesh


def test_skinned_space_rests_exactly_and_moves_by_bones(skinned_space):
    space, mesh = skinned_space
    rest = space.decode_vertices(space.z_rest[None])[0]
    assert_close(rest, torch.as_tensor(mesh.vertices, dtype=D), rtol=0, atol=1e-12)
    assert_close(
        space.bone_motions(space.z_rest[None])[0, :, 0],
        torch.ones(space.model.config.bones, dtype=D),
    )
    assert space.rest_inverse_skin.shape == (256, space.model.config.bones)  # weights
    q = torch.full((1, space.reduced_dims), 0.5, dtype=D)
    moved = space.decode_vertices(space.latent(q))[0]
    assert float((moved - rest).abs().max()) > 1e-3  # the subspace moves the mesh
    # the per-point motion is the blend of the corrected bones with the points' weights
    pts, weights = space.dynamics_points, space.rest_inverse_dyn
    z = space.latent(q)
    expected = _blended_bones_moved(space.bone_motions(z)[0].numpy(), weights.numpy(), pts.numpy())
    assert_close(space.deform_points(z, pts, weights)[0], torch.as_tensor(expected))


def _blended_bones_moved(bones: np.ndarray, weights: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Independent float64 reference of dual-quaternion blending (Kavan et al. 2008): per point
    b = sum_k w_k s_k q_k (signs to the heaviest bone's hemisphere), x = R(r/|r|) p + t with
    t = 2 vec(d conj(r)) / |r|^2; bones (nb, 8) as (w, x, y, z | dw, dx, dy, dz)."""
    from scipy.spatial.transform import Rotation

    heaviest = bones[weights.argmax(1), :4]  # (P, 4)
    signs = np.where(heaviest @ bones[:, :4].T < 0, -1.0, 1.0)  # (P, nb)
    b = (weights * signs) @ bones  # (P, 8)
    r, d = b[:, :4], b[:, 4:]
    rotation = Rotation.from_quat(r[:, [1, 2, 3, 0]])  # scipy: scalar last, normalises
    w, v, dw, dv = r[:, :1], r[:, 1:], d[:, :1], d[:, 1:]
    t = 2.0 * (w * dv - dw * v + np.cross(v, dv)) / (r * r).sum(1, keepdims=True)
    return rotation.apply(points) + t


def test_skinned_checkpoint_round_trip(tmp_path):
    model = skinned_model(randomize=True)
    path = save_checkpoint(model, tmp_path / "ckpt", training={"steps": 1})
    loaded, _ = load_checkpoint(path)
    assert loaded.config == model.config and loaded.skinned
    rest = torch.rand(1, 64, 3) - 0.5
    z = torch.randn(2, model.config.latent_dim)
    with torch.no_grad():
        a = model.deform(z, model.encode_shape(rest), rest)
        b = loaded.deform(z, loaded.encode_shape(rest), rest)
    assert_close(a, b, rtol=0, atol=0)


def _turn_degrees(rotation: np.ndarray) -> float:
    return math.degrees(math.acos(np.clip((np.trace(rotation) - 1) / 2, -1, 1)))


def test_two_part_fit_gives_sharp_weights_and_a_rigid_hinge():
    """A bar whose half x > 0 swings about a hinge: after a short fit the skinning weights are
    nearly one-hot and the swung half turns rigidly, by most of each sample's angle.

    The fit varies with the CPU's float kernels (ATEN_CPU_CAPABILITY) and the seeds, most at
    small angles (the 7.05 deg sample turns 6.7 to 8.2 deg on four machines), so the bounds are
    on the batch. Over 3 capabilities x 40 seed sets: sharpness >= 0.978, turn share 0.74 to 1.14,
    correlation with the true angles >= 0.958, residual share <= 0.068; bones that only
    translate give a residual share of 0.119 to 0.159, an encoder blind to the deformation a
    correlation of 0.22 or less, still bones a turn share of 0.
    """
    torch.set_num_threads(1)
    model = skinned_model(seed=0).train()
    loss_config = LossConfig.preset("tiny", skin_entropy_weight=0.01)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(14)
    for step in range(160):
        rest, deformed = hinge_bar(16, model.config.num_points, 100 + step)
        opt.zero_grad()
        model.loss(rest, deformed, generator=gen, loss_config=loss_config)["loss"].backward()
        opt.step()
    model.eval()
    rest, deformed = hinge_bar(6, model.config.num_points, 7)
    with torch.no_grad():
        shape = model.encode_shape(rest)
        mu, _ = model.encode_posterior(rest, deformed, shape)
        pred = model.deform(mu, shape, rest).numpy()
        sharpness = float(model.skin_weights(shape, rest).max(-1).values.mean())
    assert sharpness > 0.95, sharpness
    truth, turn, motion, residual = (np.zeros(6) for _ in range(4))
    for b in range(6):
        x, p, d = rest[b].numpy(), pred[b], deformed[b].numpy()
        swung = x[:, 0] > 0.1  # away from the hinge's own blend
        truth[b] = _turn_degrees(best_rotations(x[swung], d[swung][None])[0])
        turn[b] = _turn_degrees(best_rotations(x[swung], p[swung][None])[0])
        motion[b] = np.sqrt(((d[swung] - x[swung]) ** 2).sum(-1).mean())
        residual[b] = rigid_fit_residual(x[swung], p[swung][None])[0]
    share = turn.sum() / truth.sum()
    assert 0.6 < share < 1.35, (turn, truth)
    assert np.corrcoef(turn, truth)[0, 1] > 0.9, (turn, truth)  # each sample's own angle
    assert residual.sum() < 0.09 * motion.sum(), (residual, motion)


def test_separate_parts_never_share_a_bone():
    """Two boxes 2 cm apart: every point and vertex blends bones of its own box only (with
    ``bones_by_part``), and the vertices follow their bones' blend exactly."""
    a = trimesh.creation.box((0.3, 0.2, 0.05)).subdivide()
    b = a.copy()
    b.apply_translation((0.32, 0.0, 0.0))
    mesh = trimesh.util.concatenate([a, b])
    settings = SpaceSettings(dynamics_points=48, skinning_points=256, subspace_samples=8)
    space = build_space(
        skinned_model(dtype=D, randomize=True), mesh.vertices, mesh.faces, settings=settings
    )
    assert set(space.bone_islands.tolist()) == {0, 1}
    for weights, islands in (
        (space.rest_inverse_dyn, space.dynamics_islands),
        (space.rest_inverse_skin, None),
    ):
        if islands is None:  # the skinning points' islands: their nearest vertex's
            _, near = cKDTree(space.rest_normalized.numpy()).query(space.skinning_points.numpy())
            islands = space.vertex_islands[near]
        other = islands[:, None] != space.bone_islands[None]
        assert float(weights.numpy()[other].max()) == 0.0
    vertex_bone_islands = space.bone_islands[space.vertex_bones.numpy()]  # (N, k)
    heavy = space.vertex_bone_weights.numpy() > 0
    assert (vertex_bone_islands == space.vertex_islands[:, None])[heavy].all()
    z = space.latent(torch.full((1, space.reduced_dims), 0.4, dtype=D))
    bones = space.bone_motions(z)[0]  # (nb, 8)
    dense = torch.zeros(len(mesh.vertices), space.model.config.bones, dtype=D)
    dense.scatter_(1, space.vertex_bones, space.vertex_bone_weights)
    rest = space.rest_normalized
    # the vertices are the blend of their bones' motions (the independent float64 reference)
    moved = _blended_bones_moved(bones.numpy(), dense.numpy(), rest.numpy())
    expected = space.normalization.invert(torch.as_tensor(moved)[None])
    assert_close(space.decode_vertices(z), expected)
    without = build_space(
        space.model,
        mesh.vertices,
        mesh.faces,
        settings=dataclasses.replace(settings, bones_by_part=False),
    )
    leak = without.dynamics_islands[:, None] != without.bone_islands[None]
    assert float(without.rest_inverse_dyn.numpy()[leak].max()) > 1e-6  # the rule holds them apart


def test_part_inconsistency_measures_weights_shared_within_each_part():
    from neurok_core.model.bones import part_inconsistency

    w = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.8]]])  # (1, 4, 2)
    parts = torch.tensor([[0, 0, 1, -1]])
    # part 0: mean (0.5, 0.5), each point off by 0.5 in both weights: 2 x 0.5; part 1: one point
    assert_close(part_inconsistency(w, parts), torch.tensor([1.0]))
    shared = torch.tensor([[[0.3, 0.7], [0.3, 0.7], [0.9, 0.1], [0.0, 1.0]]])
    assert_close(part_inconsistency(shared, parts), torch.tensor([0.0]))
    assert_close(part_inconsistency(w, torch.full((1, 4), -1)), torch.tensor([0.0]))


def test_the_part_term_makes_a_labelled_part_share_its_weights():
    """The hinge bar with its two halves labelled: with the part term the swung half's points
    share their weights (so it moves by one rigid motion), far more than without."""
    from neurok_core.model.bones import part_inconsistency

    torch.set_num_threads(1)
    spread = {}
    for weight in (0.0, 1.0):
        model = skinned_model(seed=0).train()
        loss_config = LossConfig.preset("tiny", skin_part_weight=weight)
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(14)
        for step in range(60):
            rest, deformed = hinge_bar(16, model.config.num_points, 100 + step)
            parts = (rest[..., 0] > 0).long()  # (B, P)
            opt.zero_grad()
            out = model.loss(rest, deformed, parts=parts, generator=gen, loss_config=loss_config)
            out["loss"].backward()
            opt.step()
        rest, _ = hinge_bar(4, model.config.num_points, 7)
        with torch.no_grad():
            weights = model.skin_weights(model.encode_shape(rest), rest)
        spread[weight] = float(part_inconsistency(weights, (rest[..., 0] > 0).long()).mean())
    assert spread[1.0] < 0.3 * spread[0.0], spread


def test_bone_disagreement_is_zero_iff_each_parts_bones_move_it_alike():
    from neurok_core.model.bones import bone_disagreement

    gen = torch.Generator().manual_seed(3)
    points = torch.rand(1, 6, 3, generator=gen, dtype=D)
    parts = torch.tensor([[0, 0, 0, 1, 1, -1]])
    bone_parts = torch.tensor([[0, 0, 1, -1]])
    turn = torch.tensor([math.cos(0.3), 0.0, math.sin(0.3), 0.0], dtype=D)
    one = dq_from_rt(turn, torch.tensor([0.1, -0.2, 0.05], dtype=D))
    other = dq_from_rt(turn, torch.tensor([0.1, 0.3, 0.05], dtype=D))
    # part 0's two bones move alike; part 1 has one bone; the free bone touches no part
    alike = torch.stack([one, one, other, other])[None]  # (1, 4, 8)
    assert_close(bone_disagreement(alike, points, parts, bone_parts), torch.zeros(1, dtype=D))
    # part 0's bones differ by a translation of 0.5 along y: each point's two images are 0.5
    # apart, 0.25^2 each from their mean: 3 points x 0.0625
    apart = torch.stack([one, other, other, one])[None]
    assert_close(
        bone_disagreement(apart, points, parts, bone_parts), torch.tensor([3 * 0.0625], dtype=D)
    )


def test_own_part_mask_keeps_each_point_on_its_loose_part():
    from neurok_core.model.bones import own_part_mask

    own = own_part_mask(torch.tensor([[0, 1, 2]]), torch.tensor([[0, 0, 1]]))
    expected = torch.tensor([[[True, True, False], [False, False, True], [True, True, True]]])
    assert torch.equal(own, expected)  # island 2 has no bone: all of them


def test_agreement_terms_make_a_labelled_parts_bones_move_together():
    """The hinge bar with its halves labelled and on separate loose parts: with the agreement
    terms, the bones of the swung half move it alike, at posterior and at prior latents, far
    more than without; points never blend the other half's bones."""
    from neurok_core.model.bones import bone_disagreement, own_part_mask

    torch.set_num_threads(1)
    spread = {}
    for weight in (0.0, 1.0):
        model = skinned_model(seed=0).train()
        loss_config = LossConfig.preset(
            "tiny", part_agreement_weight=weight, prior_agreement_weight=weight
        )
        opt = torch.optim.Adam(model.parameters(), lr=3e-3)
        gen = torch.Generator().manual_seed(14)
        for step in range(60):
            rest, deformed = hinge_bar(16, model.config.num_points, 100 + step)
            parts = (rest[..., 0] > 0).long()  # (B, P)
            out = model.loss(
                rest, deformed, parts=parts, islands=parts, generator=gen, loss_config=loss_config
            )
            assert float(out["agree"]) >= 0 and float(out["prior_agree"]) >= 0
            opt.zero_grad()
            out["loss"].backward()
            opt.step()
        rest, _ = hinge_bar(4, model.config.num_points, 7)
        parts = (rest[..., 0] > 0).long()
        with torch.no_grad():
            shape = model.encode_shape(rest)
            index = torch.cdist(shape.centers, rest).argmin(-1)
            bone_parts = torch.gather(parts, 1, index)
            weights = model.skin_weights(shape, rest, own_part_mask(parts, bone_parts))
            across = parts[..., None] != bone_parts[:, None, :]  # (4, P, nb)
            assert float(weights[across].abs().max()) == 0.0
            z = model.sample_prior(shape, 8, torch.Generator().manual_seed(1))  # (4, 8, k)
            values = [
                bone_disagreement(model.bones(z[:, i], shape), rest, parts, bone_parts)
                for i in range(8)
            ]
        spread[weight] = float(torch.stack(values).mean())
    assert spread[1.0] < 0.3 * spread[0.0], spread
