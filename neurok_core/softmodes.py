"""Soft modes: the latent directions along which the object moves without straining.

A learned latent direction moves the object and, in general, also strains it: edges between
nearby surface points stretch or shrink. An articulated object's plausible motions (a lid
turning on its hinge, a door on its jamb) and a cloth's (bending, folding) keep those
distances; a crumple or a stretch does not. The active subspace (``space.active_subspace``)
orders directions by how much the prior moves the object along them and knows nothing of
strain, so a push excites whatever direction it finds: for a model whose space holds both, the
pushed lid twists and bends instead of turning (``docs/experiments/part_aware_space.md``).

This restricts the directions first, the same for every object. At z_rest, for tracked points
x_i with latent Jacobians J_i (3, k) (with pins, those of the clamped kinematics the dynamics
move: J' = J - C J_pins, ``neurok_core.pinclamp``) and the edges e = (a, b) between each point
and its nearest points of the same loose part (rest length l_e, direction u_e):

    strain rate  s_e(d) = u_e^T (J_a - J_b) d / l_e,
    motion       m(d)^2 = mean_i |J_i d|^2 / L^2,

each direction's strain per relative motion sigma is 0 for a rigid motion about the pins or an
isometric bend and about 2-3 for a uniform scaling. Each edge's strain is weighed by a Huber loss
of scale ``tolerance`` (``robust_soft_directions``; a hinge strains a few edges a lot, a crumple
many a little: squared strain alone ranks the rigid turn of a chest's lid, whose rim touches the
box's along its length, with a model's crumples, 0.43 against 0.35-0.9 at rest, the Huber
weighting at 0.09), and two terms are added to the strain: without pins, the rigid part of the
motion (the object moving as a whole, which the free translation of contact covers) counts as a
strain of ``tolerance`` per ANCHOR_TOLERANCE of motion; and a latent unit costs as much as a
strain of sqrt(IDLE_COST) ``tolerance`` along the direction that moves the object most (a
direction that barely moves the object has strain and motion both near zero, a ratio that says
nothing). Directions are found greedily (iteratively reweighted generalised eigenproblems); those
with

    sigma <= max(tolerance, slack * sigma_min)

span the soft subspace, in which the active subspace is searched: the object's own softest
direction sets the scale, so an elastic object (whose every motion strains) keeps its softest
directions while an object whose space also holds near-isometric motions keeps only those.
First order at rest.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .dynamics.shapekeep import neighbour_pairs
from .pinclamp import PinClamp, pin_clamp
from .space import KinematicSpace

NEIGHBORS = 6  # edges per tracked point
ROBUST_ITERATIONS = 4  # reweightings of the edges per start (robust_soft_directions)
EIGEN_RIDGE = 1e-9  # added to B, times its mean eigenvalue


def strain_rates(space: KinematicSpace, jac: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(G (E, k), B (k, k)) float64: each edge's strain rate per latent unit and the motion
    metric B of the module docstring, from the latent Jacobian ``jac`` (S, 3, k) of the space's
    dynamics points (world units)."""
    jac = jac.double().cpu()
    k = jac.shape[-1]
    points = space.dynamics_points.double().cpu().numpy()  # normalised
    pairs = neighbour_pairs(points, np.asarray(space.dynamics_islands), NEIGHBORS)
    moves = jac.reshape(-1, k)
    b = moves.T @ moves / len(points) / space.object_size**2
    if not len(pairs):
        return torch.zeros((0, k), dtype=torch.float64), b
    a_idx, b_idx = torch.as_tensor(pairs[:, 0]), torch.as_tensor(pairs[:, 1])
    d = torch.as_tensor(points[pairs[:, 0]] - points[pairs[:, 1]])  # (E, 3) normalised
    length = d.norm(dim=1, keepdim=True).clamp_min(1e-12)
    u = d / length
    rate = (u[:, :, None] * (jac[a_idx] - jac[b_idx])).sum(1)  # (E, k) metres per latent unit
    return rate / (length / space.normalization.scale), b  # strain per latent unit


def strain_metrics(space: KinematicSpace, jac: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(A, B) (k, k) float64 of the module docstring (squared strain, every edge alike)."""
    rate, b = strain_rates(space, jac)
    if not len(rate):
        return torch.zeros_like(b), b
    return rate.T @ rate / len(rate), b


def huber_sigma(
    rate: torch.Tensor, b: torch.Tensor, h: torch.Tensor, c: float, d: torch.Tensor, delta: float
) -> float:
    """sigma of direction ``d`` (k,) with each edge's strain per relative motion s_e weighed by
    the Huber loss of scale ``delta`` (s^2 within it, delta (2 |s| - delta) beyond) and the
    anchor's share c h: sqrt(mean_e rho(s_e) + c d^T H d / d^T B d)."""
    norm = float(d @ b @ d)
    if norm <= 0.0:
        return math.inf
    strain = (rate @ d).abs() / math.sqrt(norm)  # (E,)
    rho = torch.where(strain <= delta, strain * strain, delta * (2.0 * strain - delta))
    mean = float(rho.mean()) if len(rho) else 0.0
    return math.sqrt(max(mean + c * float(d @ h @ d) / norm, 0.0))


def robust_soft_directions(
    rate: torch.Tensor,
    b: torch.Tensor,
    h: torch.Tensor,
    c: float,
    *,
    tolerance: float,
    slack: float,
    iterations: int = ROBUST_ITERATIONS,
) -> tuple[torch.Tensor, np.ndarray]:
    """The soft directions with edges weighed robustly (:func:`huber_sigma`, scale
    ``tolerance``): a hinge strains a few edges a lot, a crumple many a little, and squared
    strain alone ranks a lid turning on a hinge whose two sides touch along their length (a
    chest) with the crumples. Greedy: the softest direction is found by iteratively reweighted
    least squares from every eigen-direction of the squared problem (weights w_e = min(1,
    delta / |s_e|) of the current direction, then its weighted problem's softest direction),
    then the next one B-orthogonal to those found, while sigma stays within max(tolerance,
    slack x the first). Returns the orthonormal basis (k, f) of the directions kept and the
    sigmas of the greedy directions (the kept ones, then the first one beyond the limit when
    the search stopped at it)."""
    from .pinning import generalized_eigh

    k = b.shape[0]
    e = max(len(rate), 1)
    squared = rate.T @ rate / e + c * h
    found: list[torch.Tensor] = []
    sigmas: list[float] = []
    for _ in range(k):
        within = None
        if found:  # the null space of f^T B: the directions B-orthogonal to those found
            f = torch.stack(found, 1)  # (k, n)
            within = torch.linalg.svd(f.T @ b).Vh[len(found) :].T  # (k, k - n) orthonormal
        _, starts = generalized_eigh(squared, b, within, ridge=EIGEN_RIDGE)
        best, best_d = math.inf, None
        for j in range(starts.shape[1]):
            d = starts[:, j]
            for _ in range(iterations):
                value = huber_sigma(rate, b, h, c, d, tolerance)
                if value < best:
                    best, best_d = value, d
                strain = (rate @ d).abs() / math.sqrt(max(float(d @ b @ d), 1e-300))
                w = (tolerance / strain.clamp_min(1e-300)).clamp(max=1.0)
                weighted = (rate * w[:, None]).T @ rate / e
                _, vecs = generalized_eigh(weighted + c * h, b, within, ridge=EIGEN_RIDGE)
                d = vecs[:, 0]
            value = huber_sigma(rate, b, h, c, d, tolerance)
            if value < best:
                best, best_d = value, d
        if sigmas and best > max(float(tolerance), float(slack) * sigmas[0]):
            sigmas.append(best)  # the first direction beyond the limit ends the search
            break
        found.append(best_d / math.sqrt(max(float(best_d @ b @ best_d), 1e-300)))
        sigmas.append(best)
    basis, _ = torch.linalg.qr(torch.stack(found, 1))
    return basis, np.array(sigmas)


def strain_ratios(a: torch.Tensor, b: torch.Tensor, directions: torch.Tensor) -> torch.Tensor:
    """sigma (m,) of each column of ``directions`` (k, m): strain per relative motion."""
    d = directions.double()
    num = torch.einsum("km,kl,lm->m", d, a, d)
    den = torch.einsum("km,kl,lm->m", d, b, d).clamp_min(1e-300)
    return (num / den).clamp_min(0.0).sqrt()


def rigid_metric(space: KinematicSpace, jac: torch.Tensor) -> torch.Tensor:
    """H (k, k) float64 of the module docstring without pins: the part of the dynamics points'
    motion ``jac`` (S, 3, k) that the best rigid motion of the whole object explains, over
    L^2."""
    jac = jac.double().cpu()
    x = torch.as_tensor(space.normalization.invert(space.dynamics_points.double().cpu().numpy()))
    x = x - x.mean(0)
    eye = torch.eye(3, dtype=torch.float64)
    fields = [eye[j].expand_as(x) for j in range(3)]  # translations
    fields += [torch.linalg.cross(eye[j].expand_as(x), x) for j in range(3)]  # rotations
    rigid, _ = torch.linalg.qr(torch.stack([f.reshape(-1) for f in fields], 1))  # (3S, 6)
    part = rigid.T @ jac.reshape(-1, jac.shape[-1])  # (6, k)
    return part.T @ part / len(x) / space.object_size**2


IDLE_COST = 0.1  # see motion_subspace
ANCHOR_TOLERANCE = 0.05  # motion of what holds the object, relative to its own, that counts
# as straining it by the strain tolerance


def motion_subspace(
    space: KinematicSpace,
    pins: tuple[int, ...] | list[int] = (),
    *,
    soft: bool = False,
    tolerance: float = 0.05,
    slack: float = 2.0,
    clamp: PinClamp | None = None,
) -> tuple[KinematicSpace, dict, dict]:
    """The view of ``space`` a simulation moves in and two reports (pins, soft modes): with
    ``soft``, the active subspace searched among the soft directions (module docstring); else,
    with pins, the pinned subspace (``neurok_core.pinning``). clamp: the pin clamp of ``pins``
    (:func:`~neurok_core.pinclamp.pin_clamp`) when the caller has built it already; None: built
    here when soft modes need it."""
    from .pinning import latent_jacobian, pinned_subspace

    if soft and not (tolerance > 0 and slack >= 1):
        raise ValueError(
            f"soft modes need strain_tolerance > 0 and strain_slack >= 1, got {tolerance!r} and"
            f" {slack!r}"
        )
    if not soft:
        if not pins:
            return space, {}, {}
        view, pin_report = pinned_subspace(space, pins)
        return view, pin_report, {}
    jac = latent_jacobian(space, space.dynamics_points)  # (S, 3, k)
    if len(pins):  # the motion the dynamics see: clamped around the pins, which it holds
        jac = _clamped(space, pin_clamp(space, pins) if clamp is None else clamp, jac)
        h, c = torch.zeros(jac.shape[-1], jac.shape[-1], dtype=torch.float64), 0.0
    else:  # the object as a whole moving counts against a direction
        h, c = rigid_metric(space, jac), (tolerance / ANCHOR_TOLERANCE) ** 2
    rate, b = strain_rates(space, jac)
    # directions that barely move the object: their strain and motion are both near zero, so
    # their ratio says nothing; a latent unit costs as much as a strain of
    # sqrt(IDLE_COST) x tolerance along the latent direction that moves the object most
    k = b.shape[0]
    idle = IDLE_COST * tolerance**2 * float(torch.linalg.eigvalsh(b).max())
    cost = c * h + idle * torch.eye(k, dtype=torch.float64)
    basis, sigma = robust_soft_directions(rate, b, cost, 1.0, tolerance=tolerance, slack=slack)
    W, spectrum = space.active_subspace(space.covariance, within=basis)
    view = space.with_subspace(W, spectrum)
    wd = W.double().cpu()
    report = {
        "soft_dims": int(basis.shape[1]),
        "sigmas": [round(float(x), 4) for x in sigma],
        "active_sigmas": [
            round(huber_sigma(rate, b, cost, 1.0, wd[:, j], tolerance), 4)
            for j in range(wd.shape[1])
        ],
        "active_motion": [
            round(float(x), 6) for x in torch.einsum("km,kl,lm->m", wd, b, wd).sqrt()
        ],
        "active_rigid": [round(float(x), 4) for x in strain_ratios(h, b, wd)],
    }
    return view, {}, report


def _clamped(space: KinematicSpace, clamp: PinClamp, jac: torch.Tensor) -> torch.Tensor:
    """The dynamics points' latent Jacobian (S, 3, k) after the pin clamp
    (``neurok_core.pinclamp``): J' = J - C J_pins, as the simulation clamps them."""
    from .pinning import latent_jacobian

    world = space.normalization.invert(space.dynamics_points.double().cpu().numpy())
    matrix = torch.as_tensor(clamp.weights(world), dtype=torch.float64)  # (S, P)
    pts = torch.as_tensor(space.normalization.apply(clamp.pins), dtype=space.dtype)
    jp = latent_jacobian(space, pts).double().cpu()  # (P, 3, k)
    return jac.double().cpu() - torch.einsum("sp,pak->sak", matrix, jp)
