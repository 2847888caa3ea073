"""Terms of the NeuROK training loss that do not depend on the networks.

Shapes: B batch, P points, K neighbours.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..dualquat import dq_apply


def knn_indices(points: Tensor, k: int) -> Tensor:
    """Indices (B, P, k) of the ``k`` nearest other points of each point of ``points`` (B, P, 3).

    Brute force (``torch.cdist`` + ``topk``) inside each shape, the point itself excluded; no
    gradient flows through the selection.
    """
    if not 0 < k < points.shape[-2]:
        raise ValueError(f"k must be in [1, {points.shape[-2] - 1}] for {points.shape[-2]} points")
    with torch.no_grad():
        dist = torch.cdist(points, points)  # (B, P, P)
        self_mask = torch.eye(points.shape[-2], dtype=torch.bool, device=points.device)
        dist = dist.masked_fill(self_mask, float("inf"))
        return dist.topk(k, dim=-1, largest=False).indices


def gather_points(points: Tensor, index: Tensor) -> Tensor:
    """``points[b, index[b, p, j]]``: (B, P, 3) with index (B, P, K) -> (B, P, K, 3)."""
    flat = index.flatten(-2)  # (B, P K)
    picked = torch.gather(points, -2, flat[..., None].expand(*flat.shape, points.shape[-1]))
    return picked.unflatten(-2, index.shape[-2:])


def squared_error_sum(predicted: Tensor, target: Tensor) -> Tensor:
    """``sum_p |predicted_p - target_p|^2`` per shape: (B, P, 3) -> (B,)."""
    return ((predicted - target) ** 2).sum(dim=(-1, -2))


def rigidity_error(
    dualquats: Tensor,
    rest_points: Tensor,
    deformed_points: Tensor,
    neighbors: Tensor,
    *,
    robust: float = 0.0,
) -> Tensor:
    """Local rigidity of a dual-quaternion field, per shape: (B,).

    ``sum_p 1/K sum_{j in N(p)} |dq_p(x0_j) - x_j|^2``: each point's rigid motion, applied to its
    K nearest rest neighbours ``x0_j``, should land on their deformed positions ``x_j``. This makes
    the rotation part of each dual quaternion match the local motion, which is what blending the
    K nearest sample points' dual quaternions onto mesh vertices relies on.
    dualquats: (B, P, 8) unit; rest_points, deformed_points: (B, P, 3); neighbors: (B, P, K).
    robust: c > 0 sums the Charbonnier penalty sqrt(d^2 + c^2) - c of each misfit d instead of
    d^2 (about d^2 / (2 c) below c, |d| beyond it).
    """
    rest_nb = gather_points(rest_points, neighbors)  # (B, P, K, 3)
    target_nb = gather_points(deformed_points, neighbors)  # (B, P, K, 3)
    moved = dq_apply(dualquats[..., None, :], rest_nb)  # (B, P, K, 3)
    misfit = ((moved - target_nb) ** 2).sum(-1)  # (B, P, K) d^2
    if robust > 0:
        misfit = torch.sqrt(misfit + robust * robust) - robust
    return misfit.mean(-1).sum(-1)
