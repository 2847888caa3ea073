"""The active subspace of a pinned object: latent directions that leave the pinned vertices still.

The kinematic space's W comes from prior samples of the whole object and knows nothing about the
user's pins, so every one of its directions may move the pinned vertices (the prior of a flat
sheet mixes flags held at any edge). With pins, the directions are first restricted to those
along which the pinned points barely move compared with the object as a whole, the generalised
eigenproblem

    A d = rho B d,   A = J_p^T J_p / P,   B = J_s^T J_s / S,

J_p (3P, k) and J_s (3S, k) the latent Jacobians at z_rest of the pinned points and of points
spread over the surface: rho is the mean squared pin motion over the mean squared motion of the
object. The directions with rho <= tolerance^2 span the free latent subspace F (orthonormalised),
and the active subspace of method.md is computed inside it, from the eigenvectors of F^T C F
(C the space's gradient covariance). The pins themselves are held by clamping the kinematics
around them (``neurok_core.pinclamp``), with or without this subspace: inside it the clamp only
blends out what the curvature of the kinematics still moves at the pins, instead of the pins'
share of every direction of motion.
"""

from __future__ import annotations

import numpy as np
import torch

from .geometry import farthest_point_subsample
from .model.jets import DecoderKinematics
from .space import KinematicSpace


def latent_jacobian(space: KinematicSpace, points: torch.Tensor) -> torch.Tensor:
    """d x / d z (Q, 3, k) at z_rest of normalised ``points`` (Q, 3), world units."""
    pts, inverse = space.tracked_points(space.normalization.invert(points.cpu().double().numpy()))
    k = space.z_rest.shape[0]
    eye = torch.eye(k, dtype=space.dtype, device=space.device)
    kin = DecoderKinematics(space, pts, inverse, directions=eye)
    zero = torch.zeros(k, dtype=space.dtype, device=space.device)
    return kin(zero, zero)[1]  # (Q, 3, k)


def pin_free_basis(
    space: KinematicSpace,
    pins: tuple[int, ...] | list[int],
    *,
    tolerance: float = 0.05,
    max_pins: int = 64,
    probe_points: int = 64,
    seed: int = 0,
) -> tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]:
    """The orthonormal basis (k, f) float64 of the latent directions along which the pins move
    at most ``tolerance`` of the object's motion (None when there are none), and the pinned
    and probe points' latent Jacobians (3P, k), (3S, k) (see the module docstring)."""
    rng = np.random.default_rng(seed)
    rest_n = space.rest_normalized.cpu().double().numpy()  # (N, 3)
    pinned = rest_n[np.asarray(pins, dtype=np.int64)]  # (P, 3)
    if len(pinned) > max_pins:
        pinned = pinned[farthest_point_subsample(pinned, max_pins, rng)]
    probes = space.dynamics_points.cpu().double().numpy()
    if len(probes) > probe_points:
        probes = probes[farthest_point_subsample(probes, probe_points, rng)]
    points = torch.as_tensor(np.concatenate([pinned, probes]), dtype=space.dtype)
    jac = latent_jacobian(space, points).double().cpu()  # (P + S, 3, k)
    k = jac.shape[-1]
    jp = jac[: len(pinned)].reshape(-1, k)  # (3P, k)
    js = jac[len(pinned) :].reshape(-1, k)  # (3S, k)
    a = jp.T @ jp / len(pinned)  # (k, k)
    b = js.T @ js / len(probes)  # (k, k)
    rho, dirs = generalized_eigh(a, b, ridge=1e-6)
    count = int((rho <= tolerance**2).sum())
    if count == 0:
        return None, jp, js
    return torch.linalg.qr(dirs[:, :count])[0], jp, js  # (k, count) orthonormal


def generalized_eigh(
    a: torch.Tensor, b: torch.Tensor, within: torch.Tensor | None = None, *, ridge: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Eigenpairs of A d = rho B d (float64 (k, k) symmetric, B positive semi-definite plus
    ``ridge`` x its mean eigenvalue), inside the span of ``within`` (k, m) orthonormal columns
    if given: (rho (m,) ascending, directions (k, m), B-orthonormal)."""
    if within is not None:
        a, b = within.T @ a @ within, within.T @ b @ within
    m = a.shape[0]
    shift = ridge * float(torch.trace(b)) / m + 1e-300
    chol = torch.linalg.cholesky(b + shift * torch.eye(m, dtype=torch.float64))
    s = torch.linalg.solve_triangular(chol, a, upper=False)
    s = torch.linalg.solve_triangular(chol, s.T, upper=False)  # L^-1 A L^-T
    rho, vecs = torch.linalg.eigh(0.5 * (s + s.T))  # ascending
    dirs = torch.linalg.solve_triangular(chol.T, vecs, upper=True)
    return rho, dirs if within is None else within @ dirs


def pinned_subspace(
    space: KinematicSpace,
    pins: tuple[int, ...] | list[int],
    *,
    tolerance: float = 0.05,
    min_share: float = 0.1,
) -> tuple[KinematicSpace, dict]:
    """A view of ``space`` whose active subspace keeps the vertices ``pins`` still (see the
    module docstring), or ``space`` itself when its latent has no such directions worth the
    name, and a report {used, free_dims, reduced_dims, pin_motion, share}.

    tolerance: largest RMS motion of the pins relative to the RMS motion of the object along a
    kept latent direction (first order at rest).
    min_share: the pinned subspace is used only if the spectrum it keeps (the sum of its kq
    eigenvalues of C) is at least this share of the space's own; a model that cannot move the
    object without moving the pins keeps its own subspace, and the clamp of the kinematics
    (``neurok_core.pinclamp``) alone holds the pins still along all of its directions.
    """
    if not pins:
        return space, {}
    free, jp, js = pin_free_basis(space, pins, tolerance=tolerance)
    count = 0 if free is None else int(free.shape[1])
    report = {"used": False, "free_dims": count}
    if free is None:
        return space, report
    W, spectrum = space.active_subspace(space.covariance, within=free)
    kept = float(spectrum[: W.shape[1]].sum())
    own = float(space.spectrum[: space.reduced_dims].sum())
    share = kept / own if own > 0 else 0.0
    # First-order pin motion of the kept directions relative to the object's motion.
    wd = W.double().cpu()
    ratio = float(((jp @ wd).pow(2).sum() / len(jp)) / ((js @ wd).pow(2).sum() / len(js)))
    report.update(reduced_dims=int(W.shape[1]), pin_motion=ratio**0.5, share=share)
    if share < min_share:
        return space, report
    report["used"] = True
    return space.with_subspace(W, spectrum), report
