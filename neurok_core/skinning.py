"""Dual-quaternion skinning of every vertex from the skinning points' motions, as a sparse
matrix product.

Each vertex n blends the unit DQs of its K nearest skinning points with fixed weights w_nk
(:func:`~neurok_core.dualquat.dq_skin`): b_n = sum_k w_nk s_nk q_k, s_nk = sign(r_k . r_pivot(n))
the hemisphere signs relative to its heaviest point, then p' = (b_n / |b_n|) applied to p_n.
Gathering (B, N, K, 8) DQs for that costs far more than the arithmetic. But q and -q are the
same motion, and the applied motion is unchanged when b_n changes sign (it is quadratic in b_n
over |r_n|^2). So the DQs are first brought to one hemisphere (r_w >= 0): where every pair
(neighbour, pivot) that some vertex blends then has r_k . r_pivot > 0, all signs are +1 up to
the vertex's common sign c_pivot, and b_n = (S Q)_n with S the sparse (N, Q) matrix of the
weights: one sparse product for all frames of a batch, exactly the same result. A frame with a
pair in opposite hemispheres (two nearby points turned by nearly 180 degrees, in opposite
senses) is skinned the general way (:func:`dq_skin`).

The blended DQs come out as (N, 8, B), so each of their components is a contiguous (N, B)
plane and applying them is a few dozen plane-wide operations instead of operations over
interleaved channels.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy.spatial import cKDTree
from torch import Tensor

from .dualquat import _EPS, dq_skin
from .geometry import nearest_neighbors


def blend_neighbors(
    points: np.ndarray,
    point_islands: np.ndarray,
    queries: np.ndarray,
    query_islands: np.ndarray,
    k: int,
    clearance: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Each query's ``k`` skinning points: (distances (Q, k), indices (Q, k) into ``points``).

    points (M, 3) / queries (Q, 3) with their island labels (M,) / (Q,)
    (:func:`~neurok_core.geometry.vertex_islands`). A query blends only points of its own island,
    and of those, where the island has at least ``k`` of them, only points at least
    ``clearance`` from every other island's points: the k nearest such. The learned field is
    continuous, so near where two parts touch (a door in its frame) it mixes their motions, and
    a vertex at a part's edge blended from there loses its part's motion; a point inside the part
    carries it, and its dual quaternion, a rigid motion, moves the vertex with the part. So
    clearance suits dual quaternions (0 for displacements, which do not carry over).
    A query whose island has no point takes the k nearest of all (as does every query of a mesh
    that is one island); an island with fewer than k points repeats its farthest one (so the
    indices stay within the island).
    """
    dist, index = nearest_neighbors(points, queries, k)  # (Q, k) each: the fallback
    if len(np.unique(point_islands)) < 2 and len(np.unique(query_islands)) < 2:
        return dist, index
    clear = np.ones(len(points), dtype=bool)
    if clearance > 0:  # each island's points against a tree of the other islands' points
        for island in np.unique(point_islands):
            own = point_islands == island
            if own.all():
                continue
            gap, _ = cKDTree(points[~own]).query(points[own], k=1, distance_upper_bound=clearance)
            clear[own] = ~(gap < clearance)  # (inf: none within reach)
    # group by island once (sorting), so that a mesh of many loose parts costs O(N log N)
    q_order = np.argsort(query_islands, kind="stable")
    q_ids, q_start = np.unique(query_islands[q_order], return_index=True)
    p_order = np.argsort(point_islands, kind="stable")
    p_ids, p_start = np.unique(point_islands[p_order], return_index=True)
    p_groups = dict(zip(p_ids.tolist(), np.split(p_order, p_start[1:]), strict=True))
    for island, rows in zip(q_ids.tolist(), np.split(q_order, q_start[1:]), strict=True):
        own = p_groups.get(island)
        if own is None:
            continue  # no skinning point on this island: the k nearest of all
        candidates = own[clear[own]]
        if len(candidates) < k:
            candidates = own
        kk = min(k, len(candidates))
        d, i = nearest_neighbors(points[candidates], queries[rows], kk)  # (R, kk)
        if kk < k:
            d = np.concatenate([d, np.repeat(d[:, -1:], k - kk, axis=1)], axis=1)
            i = np.concatenate([i, np.repeat(i[:, -1:], k - kk, axis=1)], axis=1)
        dist[rows], index[rows] = d, candidates[i]
    return dist, index


def row_matrix(index: Tensor, weights: Tensor, columns: int) -> Tensor:
    """The sparse CSR matrix (N, columns) with ``weights`` (N, K) at ``index`` (N, K) in each
    row, built directly (rows in order, each row's columns sorted: no coalescing pass) unless a
    row repeats a column (an island with fewer skinning points than K), which is coalesced
    (summed) since not every backend sums repeats."""
    n, k = index.shape
    order = index.argsort(dim=1)
    cols, values = index.gather(1, order), weights.gather(1, order)
    with warnings.catch_warnings():  # (torch calls its sparse CSR support "beta")
        warnings.simplefilter("ignore", UserWarning)
        if bool((cols[:, 1:] == cols[:, :-1]).any()):
            rows = torch.arange(n, device=index.device).repeat_interleave(k)
            coo = torch.sparse_coo_tensor(
                torch.stack([rows, cols.reshape(-1)]), values.reshape(-1), (n, columns)
            )
            return coo.coalesce().to_sparse_csr()
        crow = torch.arange(0, n * k + 1, k, device=index.device)
        return torch.sparse_csr_tensor(
            crow, cols.reshape(-1), values.reshape(-1), (n, columns), check_invariants=False
        )


class DQSkinning:
    """Skins N points (e.g. the mesh vertices) from Q skinning points' motions.

    index: (N, K) each point's skinning points; weights: (N, K) their weights; points: (N, 3)
    the rest positions (same frame as the motions). ``__call__(motions (B, Q, 8))`` returns the
    moved points (B, N, 3), equal to :func:`~neurok_core.dualquat.dq_skin` with the pivots at the
    heaviest weights (``tests/test_skinning.py``). The sparse product runs on the CPU and on CUDA
    in float32 and float64 (otherwise every frame is skinned the general way).
    """

    def __init__(self, index: Tensor, weights: Tensor, points: Tensor, num_skinning: int):
        self.index, self.weights, self.points = index, weights, points
        heaviest = weights.argmax(dim=1, keepdim=True)  # (N, 1)
        self.pivot = index.gather(1, heaviest)[:, 0]  # (N,)
        n, k = index.shape
        # sparse products: CPU and CUDA (elsewhere the general way for every frame)
        self.sparse = None
        if points.device.type in ("cpu", "cuda") and weights.dtype in (
            torch.float32,
            torch.float64,
        ):
            self.sparse = row_matrix(index, weights, num_skinning)  # (N, Q)
        # the pairs (neighbour, pivot) some point blends, each once; a point with itself
        # needs no check
        first = index.cpu().numpy().astype(np.int64).reshape(-1)  # (N K,)
        second = self.pivot.cpu().numpy().astype(np.int64).repeat(k)  # (N K,)
        keep = first != second
        codes = first[keep] * num_skinning + second[keep]  # one int per pair
        if num_skinning * num_skinning <= 1 << 26:  # a mask over every pair: no sort
            seen = np.zeros(num_skinning * num_skinning, dtype=bool)
            seen[codes] = True
            codes = np.flatnonzero(seen)  # (P,) sorted, each once
        else:
            codes = np.unique(codes)
        pairs = np.stack([codes // num_skinning, codes % num_skinning])  # (2, P)
        self.pairs = torch.as_tensor(pairs, device=index.device)
        self.planes = points.T.contiguous()[:, :, None]  # (3, N, 1)

    def __call__(self, motions: Tensor) -> Tensor:
        """Moved points (B, N, 3) for unit DQs ``motions`` (B, Q, 8) of the skinning points."""
        if self.sparse is None:
            return self._general(motions)
        r = motions[..., :1]
        same = torch.where(r < 0, -motions, motions)  # (B, Q, 8): one hemisphere, r_w >= 0
        rot = same[..., :4]
        dots = (rot[:, self.pairs[0]] * rot[:, self.pairs[1]]).sum(-1)  # (B, P)
        # (B,) frames whose signs are all +1 (a pair at exactly 90 degrees, dot 0, takes the
        # general way: there dq_skin's sign is +1 whatever the hemispheres)
        simple = (dots > 0).all(dim=1)
        if bool(simple.all()):
            return self._sparse(same)
        out = motions.new_empty(motions.shape[0], *self.points.shape)  # (B, N, 3)
        if bool(simple.any()):
            out[simple] = self._sparse(same[simple])
        out[~simple] = self._general(motions[~simple])
        return out

    def _general(self, motions: Tensor) -> Tensor:
        return dq_skin(motions, self.index, self.weights[None], self.pivot, self.points[None])

    def _sparse(self, motions: Tensor) -> Tensor:
        """dq_skin of DQs whose blend signs are all +1: b = S Q, then applied plane by plane
        (the formula of :func:`~neurok_core.dualquat.dq_skin`)."""
        b, q = motions.shape[:2]
        columns = motions.permute(1, 2, 0).reshape(q, 8 * b)  # (Q, 8 B): (component, frame)
        blended = (self.sparse @ columns).view(self.points.shape[0], 8, b)  # (N, 8, B)
        w, v0, v1, v2, dw, d0, d1, d2 = blended.unbind(1)  # each (N, B)
        p0, p1, p2 = self.planes  # each (N, 1)
        vv = v0 * v0 + v1 * v1 + v2 * v2
        inverse = 1.0 / (w * w + vv).clamp(min=_EPS * _EPS)
        along = w * w - vv  # R p = (w^2 - |v|^2) p + 2 (v . p) v + 2 w v x p, over |r|^2
        dot2 = 2.0 * (v0 * p0 + v1 * p1 + v2 * p2)
        w2 = 2.0 * w
        x = along * p0 + dot2 * v0 + w2 * (v1 * p2 - v2 * p1)
        y = along * p1 + dot2 * v1 + w2 * (v2 * p0 - v0 * p2)
        z = along * p2 + dot2 * v2 + w2 * (v0 * p1 - v1 * p0)
        # t = 2 (w d_v - d_w v + v x d_v), over |r|^2
        x = x + 2.0 * (w * d0 - dw * v0 + v1 * d2 - v2 * d1)
        y = y + 2.0 * (w * d1 - dw * v1 + v2 * d0 - v0 * d2)
        z = z + 2.0 * (w * d2 - dw * v2 + v0 * d1 - v1 * d0)
        moved = torch.stack((x * inverse, y * inverse, z * inverse))  # (3, N, B)
        return moved.permute(2, 1, 0).contiguous()  # (B, N, 3)
