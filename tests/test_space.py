"""The kinematic space and inverse kinematics, on a small real (randomly initialised) model."""

import numpy as np
import pytest
import torch
import trimesh
from bounds import assert_within

from neurok_core.ik import IKSettings, inverse_kinematics
from neurok_core.model import build_model
from neurok_core.space import SpaceSettings, build_space

SETTINGS = SpaceSettings(
    dynamics_points=64, skinning_points=256, subspace_samples=16, rest_steps=40
)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    m = build_model("tiny").double()
    with torch.no_grad():  # a decoder that moves things (a fresh one decodes to the identity)
        m.decoder.head.weight.normal_(0.0, 0.1)
        m.decoder.head.bias.normal_(0.0, 0.02)
    return m.eval()


@pytest.fixture(scope="module")
def slab():
    mesh = trimesh.creation.box((0.4, 0.2, 0.05)).subdivide().subdivide()
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


@pytest.fixture(scope="module")
def space(model, slab):
    return build_space(model, *slab, settings=SETTINGS)


def test_rest_state_decodes_exactly_to_the_input(space, slab):
    with torch.no_grad():
        v = space.decode_vertices(space.z_rest[None])[0].numpy()
    np.testing.assert_allclose(v, slab[0], atol=1e-9)


def test_subspace_is_orthonormal_and_moves_the_mesh(space, slab):
    W = space.W
    torch.testing.assert_close(W.T @ W, torch.eye(W.shape[1], dtype=W.dtype), atol=1e-9, rtol=0)
    assert 1 <= space.reduced_dims <= SETTINGS.max_dims
    evals = space.spectrum
    assert_within(evals[:-1], above=evals[1:] - 1e-12, what="spectrum vs its next value")
    with torch.no_grad():
        v = space.decode_vertices(space.latent(torch.ones(1, space.reduced_dims).double()))[0]
    assert np.abs(v.numpy() - slab[0]).max() > 1e-3


def test_world_transform_is_respected(model, slab):
    """The same mesh moved and scaled gives the same motion, moved and scaled."""
    v, f = slab
    a = build_space(model, v, f, settings=SETTINGS)
    b = build_space(model, 2.0 * v + np.array([1.0, -3.0, 0.5]), f, settings=SETTINGS)
    q = torch.full((1, a.reduced_dims), 0.7, dtype=torch.float64)
    with torch.no_grad():
        va = a.decode_vertices(a.latent(q))[0].numpy()
        vb = b.decode_vertices(b.latent(q))[0].numpy()
    np.testing.assert_allclose(vb, 2.0 * va + np.array([1.0, -3.0, 0.5]), atol=1e-6)


def test_cache_round_trip(model, slab, tmp_path):
    a = build_space(model, *slab, settings=SETTINGS, cache_dir=tmp_path, model_fingerprint="m1")
    assert len(list(tmp_path.glob("space-*.npz"))) == 1
    b = build_space(model, *slab, settings=SETTINGS, cache_dir=tmp_path, model_fingerprint="m1")
    torch.testing.assert_close(a.W, b.W)
    torch.testing.assert_close(a.z_rest, b.z_rest)
    # A corrupt entry is rebuilt, not fatal.
    next(tmp_path.glob("space-*.npz")).write_bytes(b"garbage")
    c = build_space(model, *slab, settings=SETTINGS, cache_dir=tmp_path, model_fingerprint="m1")
    torch.testing.assert_close(a.W, c.W)


def test_ik_recovers_a_prior_sample(space, slab):
    gen = torch.Generator().manual_seed(3)
    q_true = 0.8 * torch.randn((1, space.reduced_dims), generator=gen, dtype=torch.float64)
    with torch.no_grad():
        target = space.decode_vertices(space.latent(q_true))[0].numpy()
    size = space.object_size
    result = inverse_kinematics(space, target, settings=IKSettings(steps=120, restarts=4))
    err = np.abs(result.vertices - target).max() / size
    moved = np.abs(target - slab[0]).max() / size
    assert moved > 0.02, "the test state must actually move the mesh"
    assert err < 0.25 * moved, (err, moved)


def test_active_subspace_within_a_given_subspace(space):
    k = space.z_rest.shape[0]
    gen = torch.Generator().manual_seed(0)
    within = torch.linalg.qr(torch.randn(k, 5, dtype=torch.float64, generator=gen))[0]  # (k, 5)
    W, spectrum = space.active_subspace(space.covariance, within=within)
    torch.testing.assert_close(W.T @ W, torch.eye(W.shape[1], dtype=W.dtype), atol=1e-9, rtol=0)
    # the columns lie in the span of ``within``
    torch.testing.assert_close(within @ (within.T @ W), W, atol=1e-9, rtol=0)
    assert spectrum.shape == (5,)
    assert_within(spectrum[:-1], above=spectrum[1:] - 1e-12, what="spectrum vs its next value")
    # and they are the top eigenvectors of the projected covariance
    projected = within.T @ space.covariance @ within
    top = torch.linalg.eigvalsh(projected).flip(0)
    torch.testing.assert_close(spectrum, top.clamp_min(0), atol=1e-9, rtol=1e-6)


def test_pinned_subspace_keeps_the_pins_still_or_falls_back(space, slab):
    from neurok_core.pinning import latent_jacobian, pinned_subspace

    v = slab[0]
    pins = tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])
    for tolerance, min_share in ((0.3, 0.0), (0.3, 2.0), (1e-12, 0.0)):
        view, report = pinned_subspace(space, pins, tolerance=tolerance, min_share=min_share)
        if not report["used"]:
            assert view is space
            continue
        assert min_share <= report["share"]
        assert report["pin_motion"] <= tolerance + 1e-9
        # first order check with the view's own W: the pins move little against the rest
        pts = torch.as_tensor(space.normalization.apply(v), dtype=space.dtype)
        jac = latent_jacobian(space, pts)  # (N, 3, k)
        motion = (jac @ view.W).pow(2).sum(1)  # (N, kq)
        pinned = motion[list(pins)].mean(0)
        bound = (tolerance * 2) ** 2 * motion.mean(0) + 1e-18
        assert_within(pinned, below=bound, what="pins' motion vs the mean's share")
        assert torch.equal(view.z_rest, space.z_rest)
    # a tolerance nothing meets: no free direction, the space's own subspace stays
    view, report = pinned_subspace(space, pins, tolerance=1e-12)
    assert view is space and report["used"] is False


def test_no_rest_steps_start_from_the_posterior_mean_and_more_steps_fit_better(model, slab):
    import dataclasses

    start = build_space(model, *slab, settings=dataclasses.replace(SETTINGS, rest_steps=0))
    assert np.isfinite(start.rest_residual)
    with torch.no_grad():  # q = 0 is still the input shape (the rest inverse corrects it)
        v = start.decode_vertices(start.z_rest[None])[0].numpy()
    np.testing.assert_allclose(v, slab[0], atol=1e-9)
    space = build_space(model, *slab, settings=SETTINGS)
    assert space.rest_residual < start.rest_residual
    with pytest.raises(ValueError, match="rest_steps"):
        SpaceSettings(rest_steps=-1)


def test_vertices_are_skinned_from_their_own_loose_part(model):
    """A lid hinged above a base as two loose parts: every vertex blends skinning points of its
    own part only; with a clearance, only points at least that far from the other part (in the
    normalised frame), which changes some vertices' blends; q = 0 is still exactly the input
    shape either way."""
    import dataclasses

    from scipy.spatial import cKDTree

    base = trimesh.creation.box((0.4, 0.3, 0.04)).subdivide()
    lid = trimesh.creation.box((0.4, 0.3, 0.02)).subdivide()
    lid.apply_translation((0.0, 0.0, 0.035))  # 0.005 above the base
    vertices = np.concatenate([base.vertices, lid.vertices])
    faces = np.concatenate([base.faces, lid.faces + len(base.vertices)])
    part = np.repeat([0, 1], [len(base.vertices), len(lid.vertices)])
    blends = {}
    for clearance in (0.0, 0.05):
        settings = dataclasses.replace(SETTINGS, skin_clearance=clearance)
        space = build_space(model, vertices, faces, settings=settings)
        skin = space.normalization.invert(space.skinning_points.numpy())
        skin_part = (skin[:, 2] > 0.0225).astype(int)  # above the gap: the lid's
        index = blends[clearance] = space.blend_index.numpy()
        assert (skin_part[index] == part[:, None]).all()
        normalised = space.skinning_points.numpy()
        for p in (0, 1):  # each chosen point's distance from the other part's points
            gap, _ = cKDTree(normalised[skin_part != p]).query(normalised[index[part == p]])
            assert_within(gap, above=clearance, what=f"part {p}'s points' gap to the other")
        with torch.no_grad():
            v = space.decode_vertices(space.z_rest[None])[0].numpy()
        np.testing.assert_allclose(v, vertices, atol=1e-9)
    assert (blends[0.0] != blends[0.05]).any(axis=1).mean() > 0.2  # the gap's vertices
    with pytest.raises(ValueError, match="skin_clearance"):
        SpaceSettings(skin_clearance=-0.1)
