"""Soft modes: latent directions ranked by the strain they cause per unit of motion."""

import numpy as np
import pytest
import test_space
import torch
from bounds import assert_within

from neurok_core.softmodes import motion_subspace, strain_metrics, strain_ratios

# the tiny model's space of test_space (pytest fixtures)
model, slab, space = test_space.model, test_space.slab, test_space.space


def _field_jacobian(space, fields) -> torch.Tensor:
    """(S, 3, m) world-unit Jacobian whose column j moves each dynamics point x by fields[j](x)."""
    x = torch.as_tensor(space.normalization.invert(space.dynamics_points.double().numpy()))
    return torch.stack([f(x) for f in fields], dim=-1)


def test_a_rotation_does_not_strain_a_stretch_does(space):
    x0 = torch.tensor(np.array(space.normalization.center))
    omega = torch.tensor([0.3, -1.0, 0.5], dtype=torch.float64)
    jac = _field_jacobian(
        space,
        [
            lambda x: torch.linalg.cross(omega.expand_as(x), x - x0),  # a rigid turn
            lambda x: x - x0,  # a uniform scaling: strain 1 per latent unit
            lambda x: (x - x0) * torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64),  # a stretch
        ],
    )
    a, b = strain_metrics(space, jac)
    sigma = strain_ratios(a, b, torch.eye(3, dtype=torch.float64))
    assert float(sigma[0]) < 1e-9
    # scaling: every edge strains by 1 per unit; motion |x - x0| / L
    motion = float(((jac[..., 1] ** 2).sum(1).mean() / space.object_size**2).sqrt())
    assert float(sigma[1]) == pytest.approx(1.0 / motion, rel=1e-9)
    assert 0.0 < float(sigma[2]) < float(sigma[1]) * 1.5


def test_motion_subspace_with_soft_modes(space):
    off, pin_report, soft_report = motion_subspace(space, (), soft=False)
    assert off is space and pin_report == {} and soft_report == {}
    for pins in ((), _end_pins(space)):
        view, _, report = motion_subspace(space, pins, soft=True, tolerance=0.05, slack=1.5)
        assert 1 <= view.reduced_dims <= report["soft_dims"] <= len(report["sigmas"])
        assert torch.equal(view.z_rest, space.z_rest)
        # the active directions are soft ones: none strains (with the anchor's share) more
        # than the slack allows
        limit = max(0.05, 1.5 * report["sigmas"][0])
        active = report["sigmas"][: report["soft_dims"]]
        assert_within(active, below=limit * (1 + 1e-6), what="active directions' strain")
    with pytest.raises(ValueError, match="strain_tolerance"):
        motion_subspace(space, (), soft=True, tolerance=0.0)


def test_the_rigid_share_of_the_motion_is_part_of_it(space):
    from neurok_core.pinning import latent_jacobian
    from neurok_core.softmodes import rigid_metric

    jac = latent_jacobian(space, space.dynamics_points)
    k = jac.shape[-1]
    free = rigid_metric(space, jac)  # the rigid share of the motion
    _, b = strain_metrics(space, jac)
    dirs = torch.randn(k, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    rigid = torch.einsum("km,kl,lm->m", dirs, free, dirs)
    total = torch.einsum("km,kl,lm->m", dirs, b, dirs)
    assert_within(rigid, above=-1e-12, below=total * (1 + 1e-9), what="rigid share vs the total")
    assert float(rigid.max()) > 0.0
    # a rigid field is all rigid share
    x = torch.as_tensor(space.normalization.invert(space.dynamics_points.double().numpy()))
    omega = torch.tensor([0.2, 1.0, -0.4], dtype=torch.float64)
    turn = torch.linalg.cross(omega.expand_as(x), x - x.mean(0))[..., None]  # (S, 3, 1)
    _, b1 = strain_metrics(space, turn)
    torch.testing.assert_close(rigid_metric(space, turn), b1, atol=1e-12, rtol=1e-9)


def _end_pins(space) -> tuple[int, ...]:
    v = space.vertices
    return tuple(int(i) for i in np.nonzero(v[:, 0] <= v[:, 0].min() + 1e-9)[0])


def test_the_robust_strain_weighs_a_hinge_below_a_crumple(space):
    """A hinge strains a few edges a lot, a crumple all of them a little: squared strain ranks
    them the other way round, the Huber-weighted strain of the soft modes does not."""
    from neurok_core.softmodes import huber_sigma, robust_soft_directions, strain_rates

    x = torch.as_tensor(space.normalization.invert(space.dynamics_points.double().numpy()))
    c = x.mean(0)
    half = x[:, 0] > c[0]  # the +x half turns about the y axis through the centre
    axis = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
    hinge = torch.where(half[:, None], torch.linalg.cross(axis.expand_as(x), x - c), 0.0 * x)
    # a little strain everywhere, carried by a large motion of the whole
    along = torch.tensor([0.5 * space.object_size, 0.0, 0.0], dtype=torch.float64)
    crumple = along + 0.1 * (x - c)
    jac = torch.stack([hinge, crumple], -1)  # (S, 3, 2)
    rate, b = strain_rates(space, jac)
    eye = torch.eye(2, dtype=torch.float64)
    plain = strain_ratios(rate.T @ rate / len(rate), b, eye)
    assert float(plain[1]) < float(plain[0])  # squared strain: the "crumple" is softer
    zero = torch.zeros(2, 2, dtype=torch.float64)
    robust = [huber_sigma(rate, b, zero, 0.0, eye[j], 0.05) for j in range(2)]
    assert robust[0] < 0.75 * robust[1]  # Huber: the hinge is
    basis, sigmas = robust_soft_directions(rate, b, zero, 0.0, tolerance=0.05, slack=1.0)
    assert basis.shape == (2, 1) and abs(float(basis[0, 0])) > 0.99  # the hinge found
    assert sigmas[0] <= robust[0] * (1 + 1e-9) and sigmas[1] > sigmas[0]


def test_the_greedy_search_finds_each_axis_once():
    """Edges that each strain one latent axis (B = I): the search takes the axes one by one,
    softest first, and stops at the first beyond the limit."""
    from neurok_core.softmodes import robust_soft_directions

    rate = torch.zeros(40, 4, dtype=torch.float64)
    for axis, strain in enumerate((0.01, 0.02, 0.3, 1.0)):
        rate[10 * axis : 10 * axis + 10, axis] = strain * 2.0  # mean over 40 edges
    b, zero = torch.eye(4, dtype=torch.float64), torch.zeros(4, 4, dtype=torch.float64)
    basis, sigmas = robust_soft_directions(rate, b, zero, 0.0, tolerance=0.05, slack=2.0)
    assert basis.shape == (4, 2)
    assert torch.allclose(basis[2:].abs(), torch.zeros(2, 2, dtype=torch.float64), atol=1e-9)
    assert len(sigmas) == 3 and sigmas[0] < sigmas[1] <= 0.05 < sigmas[2]
