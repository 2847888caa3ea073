"""Soft modes: the latent directions along which the object moves without straining.

A learned latent direction moves the object and, in general, also strains it: edges between
nearby surface points stretch or shrink. An articulated object's plausible motions (a lid
turning on its hinge, a door on its jamb) and a cloth's (bending, folding) keep those
distances; a crumple or a stretch does not. The active subspace (``space.active_subspace``)
orders directions by how much the prior moves the object along them and knows nothing of
strain, so a push excites whatever direction it finds: for a model whose space holds both, the
pushed lid twists and bends instead of turning (``docs/experiments/part_aware_space.md``).

This restricts the directions first, the same for every object. At z_rest, for tracked points
x_i with latent Jacobians J_i (3, k) and the edges e = (a, b) between each point and its
nearest points of the same loose part (rest length l_e, direction u_e):

    strain rate  s_e(d) = u_e^T (J_a - J_b) d / l_e,
    motion       m(d)^2 = mean_i |J_i d|^2 / L^2,
    anchor       h(d)^2 = mean_p |J_p d|^2 / L^2 over the pinned points p, or, without pins,
                 the part of m(d)^2 that the best rigid motion of the whole object explains,

and the generalised eigenproblem  (A + c H) d = sigma^2 B d  (A, B, H the Gram matrices of s,
m, h; c = (tolerance / ANCHOR_TOLERANCE)^2) gives each direction's strain per relative motion
sigma: 0 for a rigid motion about the pins or an isometric bend; about 2-3 for a uniform
scaling; a direction that moves what holds the object (the pins, or the object as a whole when
nothing does, which the free translation of contact covers) counts as straining as much as
``tolerance`` per ANCHOR_TOLERANCE of motion. The directions with

    sigma <= max(tolerance, slack * sigma_min)

span the soft subspace, in which the active subspace is searched: the object's own softest
direction sets the scale, so an elastic object (whose every motion strains) keeps its softest
directions while an object whose space also holds near-isometric motions keeps only those.
First order at rest. With pins the clamp of the kinematics (``neurok_core.pinclamp``) still
holds them exactly.
"""

from __future__ import annotations

import numpy as np
import torch

from .dynamics.shapekeep import neighbour_pairs
from .space import KinematicSpace

NEIGHBORS = 6  # edges per tracked point


def strain_metrics(space: KinematicSpace, jac: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) (k, k) float64 of the module docstring from the latent Jacobian ``jac`` (S, 3, k)
    of the space's dynamics points (world units)."""
    jac = jac.double().cpu()
    k = jac.shape[-1]
    points = space.dynamics_points.double().cpu().numpy()  # normalised
    pairs = neighbour_pairs(points, np.asarray(space.dynamics_islands), NEIGHBORS)
    moves = jac.reshape(-1, k)
    b = moves.T @ moves / len(points) / space.object_size**2
    if not len(pairs):
        return torch.zeros_like(b), b
    a_idx, b_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
    d = torch.as_tensor(points[pairs[:, 0]] - points[pairs[:, 1]])  # (E, 3) normalised
    length = d.norm(dim=1, keepdim=True).clamp_min(1e-12)
    u = d / length
    rate = (u[:, :, None] * (jac[a_idx] - jac[b_idx])).sum(1)  # (E, k) metres per latent unit
    rate = rate / (length / space.normalization.scale)  # strain per latent unit
    return rate.T @ rate / len(pairs), b


def strain_ratios(a: torch.Tensor, b: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """sigma (m,) of each column of ``directions`` (k, m): strain per relative motion."""
    d = directions.double()
    num = torch.einsum("km,kl,lm->m", d, a, d)
    den = torch.einsum("km,kl,lm->m", d, b, d).clamp_min(1e-300)
    return (num / den).clamp_min(0.0).sqrt()


def soft_directions(
    a: torch.Tensor,
    b: torch.Tensor,
    within: torch.Tensor,
    *,
    tolerance: float,
    slack: float,
) -> tuple[torch.Tensor, np.ndarray]:
    """An orthonormal basis (k, f) of the soft directions inside the span of ``within`` (k, m)
    (orthonormal columns) and the sigmas (m,) of the eigen-directions, ascending."""
    w = within.double()
    a2, b2 = w.T @ a @ w, w.T @ b @ w
    m = a2.shape[0]
    ridge = 1e-9 * float(torch.trace(b2)) / m + 1e-300
    chol = torch.linalg.cholesky(b2 + ridge * torch.eye(m, dtype=torch.float64))
    s = torch.linalg.solve_triangular(chol, a2, upper=False)
    s = torch.linalg.solve_triangular(chol, s.T, upper=False)  # L^-1 A L^-T
    rho, vecs = torch.linalg.eigh(0.5 * (s + s.T))  # ascending
    sigma = rho.clamp_min(0.0).sqrt()
    limit = max(float(tolerance), float(slack) * float(sigma[0]))
    count = max(1, int((sigma <= limit).sum()))
    dirs = torch.linalg.solve_triangular(chol.T, vecs[:, :count], upper=True)  # (m, count)
    basis, _ = torch.linalg.qr(w @ dirs)
    return basis, sigma.numpy()


def anchor_metric(
    space: KinematicSpace, pins, jac: torch.Tensor, *, max_pins: int = 64, seed: int = 0
) -> torch.Tensor:
    """H (k, k) float64 of the module docstring: the pinned points' motion (a well-spread subset
    of at most ``max_pins``), or without pins the rigid part of the dynamics points' motion
    ``jac`` (S, 3, k), both over L^2."""
    from .geometry import farthest_point_subsample
    from .pinning import latent_jacobian

    size2 = space.object_size**2
    if len(pins):
        rest_n = space.rest_normalized.cpu().double().numpy()
        pinned = rest_n[np.asarray(pins, dtype=np.int64)]
        if len(pinned) > max_pins:
            pinned = pinned[farthest_point_subsample(pinned, max_pins, np.random.default_rng(seed))]
        jp = latent_jacobian(space, torch.as_tensor(pinned, dtype=space.dtype)).double().cpu()
        flat = jp.reshape(-1, jp.shape[-1])
        return flat.T @ flat / len(pinned) / size2
    jac = jac.double().cpu()
    x = torch.as_tensor(space.normalization.invert(space.dynamics_points.double().cpu().numpy()))
    x = x - x.mean(0)
    eye = torch.eye(3, dtype=torch.float64)
    fields = [eye[j].expand_as(x) for j in range(3)]  # translations
    fields += [torch.linalg.cross(eye[j].expand_as(x), x) for j in range(3)]  # rotations
    rigid, _ = torch.linalg.qr(torch.stack([f.reshape(-1) for f in fields], 1))  # (3S, 6)
    part = rigid.T @ jac.reshape(-1, jac.shape[-1])  # (6, k)
    return part.T @ part / len(x) / size2


ANCHOR_TOLERANCE = 0.05  # motion of what holds the object, relative to its own, that counts
# as straining it by the strain tolerance


def motion_subspace(
    space: KinematicSpace,
    pins: tuple[int, ...] | list[int] = (),
    *,
    soft: bool = False,
    tolerance: float = 0.05,
    slack: float = 2.0,
) -> tuple[KinematicSpace, dict, dict]:
    """The view of ``space`` a simulation moves in and two reports (pins, soft modes): with
    ``soft``, the active subspace searched among the soft directions (module docstring); else,
    with pins, the pinned subspace (``neurok_core.pinning``)."""
    from .pinning import latent_jacobian, pinned_subspace

    if not soft:
        if not pins:
            return space, {}, {}
        view, pin_report = pinned_subspace(space, pins)
        return view, pin_report, {}
    jac = latent_jacobian(space, space.dynamics_points)  # (S, 3, k)
    a, b = strain_metrics(space, jac)
    h = anchor_metric(space, pins, jac)
    c = (tolerance / ANCHOR_TOLERANCE) ** 2
    k = space.z_rest.shape[0]
    basis, sigma = soft_directions(
        a + c * h, b, torch.eye(k, dtype=torch.float64), tolerance=tolerance, slack=slack
    )
    W, spectrum = space.active_subspace(space.covariance, within=basis)
    view = space.with_subspace(W, spectrum)
    wd = W.double().cpu()
    report = {
        "soft_dims": int(basis.shape[1]),
        "sigmas": [round(float(x), 4) for x in sigma],
        "active_sigmas": [round(float(x), 4) for x in strain_ratios(a + c * h, b, wd)],
        "active_strain": [round(float(x), 4) for x in strain_ratios(a, b, wd)],
        "active_anchor": [round(float(x), 4) for x in strain_ratios(h, b, wd)],
    }
    return view, {}, report
