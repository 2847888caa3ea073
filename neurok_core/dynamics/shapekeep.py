"""A generic shape-keeping potential: springs between neighbouring tracked points.

The learned space decides which shapes are reachable; within it, motions that stretch or crumple
the surface should cost energy while motions that keep it isometric (a lid turning on its hinge,
a flag folding, a rope swinging) should not. So every object gets the same potential over pairs
of nearby mass points of one loose part (design section 7, "Potentials"):

    V_k = 1/2 sum_e k_e (|x_a - x_b| - l_e)^2,    k_e = omega^2 (m_a / n_a + m_b / n_b) / 2,

with l_e the rest distance, m the point masses and n the number of springs at a point: a point
held by its springs alone oscillates at about ``omega`` whatever the object's mass and size
(a frequency, like the stiffness setting). Its force on the points is -dV/dx, entering the
dynamics as J^T f like gravity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor


def neighbour_pairs(points: np.ndarray, groups: np.ndarray, k: int) -> np.ndarray:
    """Unique pairs (E, 2), a < b, of each point with its ``k`` nearest others of its own group.

    points: (S, 3); groups: (S,) int (e.g. the loose part of each point). Pairs are never formed
    across groups, so separate parts move freely relative to each other.
    """
    points = np.asarray(points, dtype=np.float64)
    groups = np.asarray(groups)
    pairs = []
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        if len(members) < 2:
            continue
        kk = min(k, len(members) - 1)
        _, idx = cKDTree(points[members]).query(points[members], kk + 1)  # (n, kk + 1)
        a = np.repeat(members, kk)
        b = members[idx[:, 1:].reshape(-1)]
        pairs.append(np.stack([np.minimum(a, b), np.maximum(a, b)], 1))
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    out = np.unique(np.concatenate(pairs), axis=0)
    return out[out[:, 0] != out[:, 1]].astype(np.int64)


@dataclass(frozen=True)
class EdgeSprings:
    """The springs of the module docstring. a, b: (E,) rows; rest_length, stiffness: (E,) m and
    N/m (work dtype, on the points' device); omega: the highest frequency (rad/s) they give the
    reduced coordinates at rest (sets the integration step, like the stiffness setting's)."""

    a: Tensor
    b: Tensor
    rest_length: Tensor
    stiffness: Tensor
    omega: float

    def energy_and_forces(self, x: Tensor) -> tuple[float, Tensor]:
        """(V_k in joules, point forces -dV_k/dx (S, 3)) at positions x (S, 3)."""
        d = x[self.a] - x[self.b]  # (E, 3)
        length = d.norm(dim=1).clamp_min(1e-12 * float(self.rest_length.max()))
        stretch = length - self.rest_length  # (E,)
        energy = 0.5 * float((self.stiffness * stretch * stretch).sum())
        pull = (self.stiffness * stretch / length).unsqueeze(1) * d  # (E, 3) dV/dx_a
        forces = torch.zeros_like(x)
        forces.index_add_(0, self.a, -pull)
        forces.index_add_(0, self.b, pull)
        return energy, forces

    def as_numpy(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(a, b, rest_length, stiffness) as NumPy arrays (float64) for the NumPy RHS."""
        return (
            self.a.cpu().numpy(),
            self.b.cpu().numpy(),
            self.rest_length.detach().cpu().double().numpy(),
            self.stiffness.detach().cpu().double().numpy(),
        )


def numpy_energy_and_forces(
    springs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], x: np.ndarray
) -> tuple[float, np.ndarray]:
    """:meth:`EdgeSprings.energy_and_forces` on NumPy arrays (float64)."""
    a, b, rest, k = springs
    d = x[a] - x[b]
    length = np.maximum(np.sqrt((d * d).sum(1)), 1e-12 * float(rest.max()))
    stretch = length - rest
    pull = (k * stretch / length)[:, None] * d
    forces = np.zeros_like(x)
    np.add.at(forces, a, -pull)
    np.add.at(forces, b, pull)
    return 0.5 * float((k * stretch * stretch).sum()), forces


def build_edge_springs(
    pairs: Tensor, rest_x: Tensor, masses: Tensor, rest_jac: Tensor, metric: Tensor, hz: float
) -> EdgeSprings | None:
    """The springs over ``pairs`` (E, 2) at rest positions ``rest_x`` (S, 3) with point masses
    (S,), or None when there are none or ``hz`` is 0. rest_jac: (S, 3, kq) J at rest and metric
    (kq, kq) G + ridge, float64 CPU: omega^2 = the largest eigenvalue of G^-1 K with
    K = sum_e k_e g_e g_e^T, g_e = u_e^T (J_a - J_b) (the springs' stiffness in q at rest)."""
    if hz <= 0 or pairs.numel() == 0:
        return None
    omega = 2.0 * math.pi * hz
    a, b = pairs[:, 0].to(rest_x.device), pairs[:, 1].to(rest_x.device)
    count = torch.zeros(rest_x.shape[0], dtype=rest_x.dtype, device=rest_x.device)
    ones = torch.ones(a.shape[0], dtype=rest_x.dtype, device=rest_x.device)
    count.index_add_(0, a, ones)
    count.index_add_(0, b, ones)
    share = masses / count.clamp_min(1.0)  # (S,)
    stiffness = omega * omega * 0.5 * (share[a] + share[b])  # (E,) N/m
    d = rest_x[a] - rest_x[b]
    rest_length = d.norm(dim=1)
    keep = rest_length > 0
    a, b, d, rest_length, stiffness = a[keep], b[keep], d[keep], rest_length[keep], stiffness[keep]
    if a.numel() == 0:
        return None
    u = (d / rest_length.unsqueeze(1)).to("cpu", torch.float64)  # (E, 3)
    jac = rest_jac.to("cpu", torch.float64)
    g = (u.unsqueeze(2) * (jac[a.cpu()] - jac[b.cpu()])).sum(1)  # (E, kq)
    kmat = g.T @ (stiffness.to("cpu", torch.float64).unsqueeze(1) * g)  # (kq, kq)
    chol = torch.linalg.cholesky(metric)
    scaled = torch.linalg.solve_triangular(chol, kmat, upper=False)
    scaled = torch.linalg.solve_triangular(chol, scaled.T, upper=False)
    lam = float(torch.linalg.eigvalsh(0.5 * (scaled + scaled.T)).max())
    return EdgeSprings(
        a=a,
        b=b,
        rest_length=rest_length,
        stiffness=stiffness,
        omega=math.sqrt(max(lam, 0.0)),
    )
