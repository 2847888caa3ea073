"""Geometry-derived baselines of the inverse-kinematics evaluation (design section 6).

Each baseline gets what NeuROK's inverse kinematics gets: the rest mesh M0 and points sampled on
the target surface (no correspondences), and the same budget: ``steps`` Adam steps for each of
``restarts`` starts (all starts in one batch), ``points`` area-uniform samples of M0 in the loss,
the same symmetric squared chamfer (:func:`neurok_core.ik.chamfer_loss`), all in the normalised
frame of M0. The start with the lowest final objective wins.

- ``unchanged``: M0 as it is (no optimisation); the floor every method must beat.
- ``rigid``: the best rigid motion x -> R (x - c) + c + t (c the centroid of the M0 samples),
  R = R_r exp([w]x); restart r starts from a rotation R_r: the identity, then rotations by
  r / (R - 1) * 90 degrees about random axes.
- ``per_vertex_arap``: free per-vertex displacements d, from the same rotated starts, minimising
  chamfer + ``arap_weight`` * E_arap with the as-rigid-as-possible energy (Sorkine and Alexa,
  "As-rigid-as-possible surface modeling", SGP 2007) with uniform edge weights, normalised by
  the rest edges so it is dimensionless:

      E_arap = sum_(i,j) |(y_i - y_j) - R_i (x_i - x_j)|^2 / sum_(i,j) |x_i - x_j|^2,

  R_i the best rotation of the 1-ring of i (Kabsch, recomputed every step: the "local" step;
  the gradient step on y is then exact, since E is stationary in R_i). Meshes with more than
  ``max_control`` vertices are optimised on a control set (farthest-point samples of the
  vertices); the graph joins two controls when a mesh edge joins their (nearest-control)
  Voronoi cells, and every vertex moves by inverse-distance blending of its ``blend_neighbors``
  nearest controls' displacements (as the kinematic space blends its skinning points).

``arap_weight`` = 0.01 with Adam step 0.01 (normalised units; radians for the rotations of
``rigid``): on one training sequence of each of nine families (door, laptop, cabinet, two cloths,
two elastic bodies, a rope, a robot arm; last frame as the target, 150 steps x 2 starts) the mean
Chamfer-L1 was 0.027 with weight 0, 0.016 with 0.01, 0.023 with 0.1 and 0.075 with 1 (rigid:
0.057, unchanged: 0.217); a smaller step (0.003) was worse for the large motions. Lower weights
let the surface crumple onto the target samples, higher ones keep cloth and ropes from bending.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from neurok_core.geometry import (
    Normalization,
    as_points,
    farthest_point_subsample,
    locate,
    nearest_neighbors,
    sample_surface,
    validate_mesh,
)
from neurok_core.ik import chamfer_loss
from neurok_core.metrics import unique_edges

BASELINES = ("unchanged", "rigid", "per_vertex_arap")


@dataclass(frozen=True)
class BaselineSettings:
    """steps, restarts, points, seed: the shared budget (as ``IKSettings``); lr: Adam step in
    normalised units; arap_weight: weight of E_arap; max_control: largest vertex count optimised
    directly; blend_neighbors: controls blended per vertex above that."""

    steps: int = 150
    restarts: int = 8
    points: int = 512
    seed: int = 0
    lr: float = 0.01
    arap_weight: float = 0.01
    max_control: int = 2048
    blend_neighbors: int = 4


@dataclass(frozen=True)
class BaselineFit:
    """vertices: (N, 3) float64 fitted mesh in the caller's frame; loss: final chamfer
    (normalised units^2) of the winning start, without the regulariser."""

    vertices: np.ndarray
    loss: float


# --------------------------------------------------------------------------------------------
# Loss


# --------------------------------------------------------------------------------------------
# Rotations


def skew(w: Tensor) -> Tensor:
    """(..., 3) -> (..., 3, 3) cross-product matrices [w]x."""
    zero = torch.zeros_like(w[..., 0])
    rows = (
        torch.stack([zero, -w[..., 2], w[..., 1]], -1),
        torch.stack([w[..., 2], zero, -w[..., 0]], -1),
        torch.stack([-w[..., 1], w[..., 0], zero], -1),
    )
    return torch.stack(rows, -2)


def start_rotations(restarts: int, seed: int) -> Tensor:
    """(R, 3, 3) float64: the identity, then r / (R - 1) * 90 degrees about random axes."""
    gen = torch.Generator().manual_seed(seed)
    axes = torch.randn((restarts, 3), generator=gen, dtype=torch.float64)
    axes = axes / axes.norm(dim=1, keepdim=True)
    angles = torch.arange(restarts, dtype=torch.float64) / max(restarts - 1, 1) * (math.pi / 2)
    return torch.linalg.matrix_exp(skew(axes * angles[:, None]))  # (R, 3, 3)


def best_rotations(rest_edges: Tensor, edges: Tensor, owner: Tensor, count: int) -> Tensor:
    """Per-vertex rotations R_i = argmin sum_j |e_ij - R e0_ij|^2 (Kabsch), no gradient.

    rest_edges: (E, 3) e0; edges: (B, E, 3) e; owner: (E,) the vertex i of each edge.
    Returns (B, count, 3, 3).
    """
    with torch.no_grad():
        cov = rest_edges[None, :, :, None] * edges[:, :, None, :]  # (B, E, 3, 3) e0 e^T
        s = torch.zeros((edges.shape[0], count, 3, 3), dtype=edges.dtype, device=edges.device)
        s.index_add_(1, owner, cov)
        u, _, vt = torch.linalg.svd(s)  # S = U S V^T; R = V U^T with det(R) = +1
        v = vt.transpose(-1, -2)
        det = torch.linalg.det(v @ u.transpose(-1, -2))  # (B, C)
        fix = torch.ones_like(s[..., 0])  # (B, C, 3)
        fix[..., 2] = torch.where(det < 0, -1.0, 1.0)
        return v @ (fix[..., None] * u.transpose(-1, -2))


# --------------------------------------------------------------------------------------------
# The problem in the normalised frame


class _Problem:
    """M0's loss samples and the target in the normalised frame of M0, float64 tensors."""

    def __init__(self, vertices, faces, target_points, settings: BaselineSettings):
        self.vertices, self.faces = validate_mesh(vertices, faces)
        self.norm = Normalization.from_vertices(self.vertices)
        self.rest = torch.as_tensor(self.norm.apply(self.vertices))  # (N, 3)
        target = as_points(target_points, "target points")
        self.target = torch.as_tensor(self.norm.apply(target))[None]  # (1, Q, 3)
        self.rng = np.random.default_rng(settings.seed)
        self.samples = sample_surface(self.vertices, self.faces, settings.points, self.rng)
        self.points = locate(self.rest, self.faces, self.samples)  # (P, 3)
        self.centre = self.points.mean(0)  # (3,)
        self.starts = start_rotations(settings.restarts, settings.seed)  # (R, 3, 3)

    def rotated(self, x: Tensor) -> Tensor:
        """The starts' rotations about the centre applied to x (Q, 3) -> (R, Q, 3)."""
        return (x - self.centre) @ self.starts.transpose(1, 2) + self.centre

    def result(self, vertices: Tensor, loss: float) -> BaselineFit:
        return BaselineFit(vertices=self.norm.invert(vertices.detach().numpy()), loss=loss)


def _optimise(params: list[Tensor], objective, steps: int, lr: float):
    """Adam on ``objective() -> (total (R,), chamfer (R,))``; keeps each start's best iterate.

    Returns (best total (R,), chamfer at that iterate (R,), best parameters per start).
    """
    opt = torch.optim.Adam(params, lr=lr)
    best = torch.full((params[0].shape[0],), math.inf, dtype=torch.float64)
    best_chamfer = best.clone()
    kept = [p.detach().clone() for p in params]
    for _ in range(steps + 1):
        opt.zero_grad()
        total, chamfer = objective()
        with torch.no_grad():
            better = total < best
            best = torch.where(better, total, best)
            best_chamfer = torch.where(better, chamfer, best_chamfer)
            for k, p in zip(kept, params, strict=True):
                k[better] = p[better]
        total.sum().backward()
        opt.step()
    return best, best_chamfer, kept


# --------------------------------------------------------------------------------------------
# Baselines


def fit_unchanged(vertices, faces, target_points, settings: BaselineSettings) -> BaselineFit:
    """M0 as it is; its loss is the chamfer of M0's samples to the target."""
    prob = _Problem(vertices, faces, target_points, settings)
    loss = float(chamfer_loss(prob.points[None], prob.target)[0])
    return prob.result(prob.rest, loss)


def fit_rigid(vertices, faces, target_points, settings: BaselineSettings) -> BaselineFit:
    """The best rigid motion of M0 onto the target (see the module docstring)."""
    prob = _Problem(vertices, faces, target_points, settings)
    r = settings.restarts
    w = torch.zeros((r, 3), dtype=torch.float64, requires_grad=True)
    t = torch.zeros((r, 3), dtype=torch.float64, requires_grad=True)

    def transform(x: Tensor, w: Tensor, t: Tensor) -> Tensor:
        rot = prob.starts @ torch.linalg.matrix_exp(skew(w))  # (R, 3, 3)
        return (x - prob.centre) @ rot.transpose(1, 2) + prob.centre + t[:, None]  # (R, Q, 3)

    def objective():
        chamfer = chamfer_loss(transform(prob.points, w, t), prob.target)
        return chamfer, chamfer.detach()

    best, chamfer, (bw, bt) = _optimise([w, t], objective, settings.steps, settings.lr)
    i = int(best.argmin())
    with torch.no_grad():
        moved = transform(prob.rest, bw[i : i + 1], bt[i : i + 1])[0]  # (N, 3)
    return prob.result(moved, float(chamfer[i]))


class ControlGraph:
    """Controls, their ARAP graph and the blending of their displacements onto the mesh.

    rest: (N, 3) normalised; faces: (F, 3). ``index`` (C,) vertex of each control;
    ``edges`` (E, 2) directed control pairs (both directions); ``blend`` None when every
    vertex is a control, else (index (N, K), weights (N, K)) into the controls.
    """

    def __init__(self, rest: Tensor, faces: np.ndarray, settings: BaselineSettings, rng):
        x = rest.numpy()
        used = np.unique(faces)
        mesh_edges = unique_edges(faces)  # (M, 2)
        if len(used) <= settings.max_control:
            self.index = np.arange(len(x))
            pairs = mesh_edges
            self.blend = None
        else:
            self.index = used[farthest_point_subsample(x[used], settings.max_control, rng)]
            ctrl = x[self.index]  # (C, 3)
            cell = nearest_neighbors(ctrl, x, 1)[1][:, 0]  # (N,) Voronoi cell of each vertex
            a, b = cell[mesh_edges[:, 0]], cell[mesh_edges[:, 1]]
            pairs = np.unique(np.sort(np.stack([a, b], 1)[a != b], axis=1), axis=0)
            k = min(settings.blend_neighbors, len(ctrl))
            dist, idx = nearest_neighbors(ctrl, x, k)  # (N, K)
            spacing = float(np.median(nearest_neighbors(ctrl, ctrl, 2)[0][:, 1]))
            weights = 1.0 / (dist + 0.5 * spacing + 1e-12) ** 2
            weights /= weights.sum(1, keepdims=True)
            self.blend = (torch.as_tensor(idx), torch.as_tensor(weights))
        directed = np.concatenate([pairs, pairs[:, ::-1]])  # (E, 2)
        self.edges = torch.as_tensor(directed)
        ctrl_rest = rest[torch.as_tensor(self.index)]  # (C, 3)
        self.rest_edges = ctrl_rest[self.edges[:, 1]] - ctrl_rest[self.edges[:, 0]]  # (E, 3)
        self.scale = float((self.rest_edges**2).sum()) or 1.0

    @property
    def count(self) -> int:
        return len(self.index)

    def vertex_offsets(self, d: Tensor, rows: Tensor) -> Tensor:
        """Control displacements (B, C, 3) -> displacements (B, M, 3) of the vertices ``rows``."""
        if self.blend is None:
            return d[:, rows]
        idx, w = self.blend
        return (w[rows][None, :, :, None] * d[:, idx[rows]]).sum(2)

    def energy(self, y: Tensor) -> Tensor:
        """E_arap of control positions y (B, C, 3) against the rest, (B,) dimensionless."""
        if len(self.edges) == 0:
            return y.new_zeros(y.shape[0])
        i, j = self.edges[:, 0], self.edges[:, 1]
        e = y[:, j] - y[:, i]  # (B, E, 3)
        rot = best_rotations(self.rest_edges, e, i, self.count)  # (B, C, 3, 3)
        residual = e - (rot[:, i] @ self.rest_edges[None, :, :, None])[..., 0]  # (B, E, 3)
        return (residual**2).sum((1, 2)) / self.scale


def fit_per_vertex_arap(vertices, faces, target_points, settings: BaselineSettings) -> BaselineFit:
    """Per-vertex displacements with an ARAP regulariser (see the module docstring)."""
    prob = _Problem(vertices, faces, target_points, settings)
    graph = ControlGraph(prob.rest, prob.faces, settings, prob.rng)
    start = prob.rotated(prob.rest)  # (R, N, 3)
    ctrl_start = start[:, torch.as_tensor(graph.index)]  # (R, C, 3)
    d = torch.zeros_like(ctrl_start, requires_grad=True)
    # The loss only needs the corners of the sampled faces: move those M vertices while fitting.
    corners = prob.faces[prob.samples.face_ids]  # (P, 3)
    rows, local = np.unique(corners, return_inverse=True)
    rows, local = torch.as_tensor(rows), torch.as_tensor(local.reshape(corners.shape))
    bary = torch.as_tensor(prob.samples.barycentrics)  # (P, 3)

    def objective():
        moved = start[:, rows] + graph.vertex_offsets(d, rows)  # (R, M, 3)
        points = (bary[None, :, :, None] * moved[:, local]).sum(2)  # (R, P, 3)
        chamfer = chamfer_loss(points, prob.target)
        total = chamfer + settings.arap_weight * graph.energy(ctrl_start + d)
        return total, chamfer.detach()

    best, chamfer, (bd,) = _optimise([d], objective, settings.steps, settings.lr)
    i = int(best.argmin())
    with torch.no_grad():
        everything = torch.arange(len(prob.rest))
        verts = start[i] + graph.vertex_offsets(bd[i : i + 1], everything)[0]  # (N, 3)
    return prob.result(verts, float(chamfer[i]))


FITTERS = {
    "unchanged": fit_unchanged,
    "rigid": fit_rigid,
    "per_vertex_arap": fit_per_vertex_arap,
}


def fit_baseline(name: str, vertices, faces, target_points, settings: BaselineSettings):
    """Run the baseline ``name`` (one of ``BASELINES``) -> :class:`BaselineFit`."""
    return FITTERS[name](vertices, faces, target_points, settings)
