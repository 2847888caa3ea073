"""The metrics of design section 6, fixed so that results compare across the project.

Shape metrics (chamfer, occupancy IoU) work in the normalised frame of the rest mesh M0
(``geometry.Normalization``); plausibility metrics (part rigidity, edge strain, energy drift,
drag alignment) score generated motion. All inputs are numpy arrays; results are Python floats or
float64 arrays.
"""

from __future__ import annotations

from typing import Any, TypedDict

import igl
import numpy as np
from scipy.spatial import cKDTree

from .errors import MeshError
from .geometry import (
    Normalization,
    as_points,
    sample_surface_points,
    unique_edges,
    validate_mesh,
)

DEFAULT_SAMPLES = 100_000


def _rng(rng: np.random.Generator | None) -> np.random.Generator:
    # A fixed default seed makes every reported number reproducible.
    return np.random.default_rng(0) if rng is None else rng


# --------------------------------------------------------------------------------------------
# Shape metrics


def chamfer_distance(points_a: Any, points_b: Any) -> tuple[float, float]:
    """Symmetric chamfer distances between point sets a (P, 3) and b (Q, 3).

    d(x, Y) = min_y |x - y|;
    L1 = 1/2 (mean_a d(a, B) + mean_b d(b, A)),  L2 = 1/2 (mean_a d(a, B)^2 + mean_b d(b, A)^2)
    (design section 6). Returns (L1, L2).
    """
    a = as_points(points_a, "points_a")
    b = as_points(points_b, "points_b")
    d_ab, _ = cKDTree(b).query(a, k=1, workers=-1)  # (P,)
    d_ba, _ = cKDTree(a).query(b, k=1, workers=-1)  # (Q,)
    l1 = 0.5 * (d_ab.mean() + d_ba.mean())
    l2 = 0.5 * ((d_ab**2).mean() + (d_ba**2).mean())
    return float(l1), float(l2)


def winding_numbers(vertices: Any, faces: Any, queries: Any) -> np.ndarray:
    """Generalized winding number of a triangle mesh at each query, (Q, 3) -> (Q,) float64.

    w(q) = 1/(4 pi) sum_f solid angle of f seen from q (Jacobson et al., "Robust inside-outside
    segmentation using generalized winding numbers", SIGGRAPH 2013): ~1 inside a closed,
    outward-oriented surface, ~0 outside, and still meaningful for small holes. Evaluated with
    libigl's fast (Barnes-Hut) approximation (Barill et al., SIGGRAPH 2018).
    """
    v = np.ascontiguousarray(vertices, dtype=np.float64)
    f = np.ascontiguousarray(faces, dtype=np.int64)
    q = np.ascontiguousarray(queries, dtype=np.float64)
    return np.asarray(igl.fast_winding_number(v, f, q), dtype=np.float64)


def occupancy_iou(
    vertices_a: Any,
    faces_a: Any,
    vertices_b: Any,
    faces_b: Any,
    *,
    samples: int = DEFAULT_SAMPLES,
    pad: float = 0.05,
    rng: np.random.Generator | None = None,
) -> float:
    """Volumetric IoU |A n B| / |A u B| of two closed meshes, estimated by uniform points.

    The points fill the union bounding box of both meshes grown on every side by ``pad`` times
    its longest side; a point is inside a mesh when its generalized winding number is > 0.5
    (design section 6). The padding only changes the estimator's variance, not its mean. ``rng``
    defaults to a fixed seed. Raises ``MeshError`` when no point lies inside either mesh (open or
    inside-out meshes).
    """
    if int(samples) < 1:
        raise MeshError(f"IoU needs at least 1 sample point, got {samples}")
    va, fa = validate_mesh(vertices_a, faces_a)
    vb, fb = validate_mesh(vertices_b, faces_b)
    both = np.concatenate([va[np.unique(fa)], vb[np.unique(fb)]])  # (U, 3)
    lo, hi = both.min(0), both.max(0)
    margin = pad * float((hi - lo).max())
    lo, hi = lo - margin, hi + margin
    queries = _rng(rng).uniform(lo, hi, size=(int(samples), 3))  # (S, 3)
    inside_a = winding_numbers(va, fa, queries) > 0.5  # (S,)
    inside_b = winding_numbers(vb, fb, queries) > 0.5  # (S,)
    union = int((inside_a | inside_b).sum())
    if union == 0:
        raise MeshError(
            "no sample point lies inside either mesh: IoU needs closed, outward-oriented meshes"
            " (recalculate normals outside, or report IoU only for closed sequences)"
        )
    return float((inside_a & inside_b).sum() / union)


class MeshComparison(TypedDict):
    """Scores of a predicted mesh against the ground truth (design section 6)."""

    chamfer_l1: float
    chamfer_l2: float
    iou: float | None


def compare_meshes(
    rest_vertices: Any,
    pred_vertices: Any,
    pred_faces: Any,
    gt_vertices: Any,
    gt_faces: Any,
    *,
    closed: bool,
    samples: int = DEFAULT_SAMPLES,
    rng: np.random.Generator | None = None,
) -> MeshComparison:
    """Chamfer-L1/L2 and IoU of a prediction against the ground truth, in the frame of M0.

    rest_vertices: (N0, 3) the rest mesh M0, which fixes the normalisation (centre of its bounding
    box, longest side 1) applied to both meshes. pred: (Np, 3), (Fp, 3); gt: (Ng, 3), (Fg, 3).
    Chamfer uses ``samples`` area-uniform surface points per mesh; IoU (``samples`` uniform
    points) only when ``closed``, else None. ``rng`` defaults to a fixed seed.
    """
    rng = _rng(rng)
    norm = Normalization.from_vertices(rest_vertices)
    pv, pf = validate_mesh(norm.apply(pred_vertices), pred_faces)
    gv, gf = validate_mesh(norm.apply(gt_vertices), gt_faces)
    l1, l2 = chamfer_distance(
        sample_surface_points(pv, pf, samples, rng), sample_surface_points(gv, gf, samples, rng)
    )
    iou = occupancy_iou(pv, pf, gv, gf, samples=samples, rng=rng) if closed else None
    return MeshComparison(chamfer_l1=l1, chamfer_l2=l2, iou=iou)


# --------------------------------------------------------------------------------------------
# Plausibility of generated motion


def _motion(rest: Any, frames: Any) -> tuple[np.ndarray, np.ndarray]:
    x0 = np.asarray(rest, dtype=np.float64)
    x = np.asarray(frames, dtype=np.float64)
    if x0.ndim != 2 or x0.shape[1] != 3 or len(x0) == 0:
        raise MeshError(f"rest must be a non-empty (N, 3) array, got shape {x0.shape}")
    if x.ndim != 3 or x.shape[1:] != x0.shape:
        raise MeshError(f"frames must have shape (T, {len(x0)}, 3), got {x.shape}")
    if not (np.isfinite(x0).all() and np.isfinite(x).all()):
        raise MeshError("rest or frames contain NaN or infinite coordinates")
    return x0, x


def best_rotations(source: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(T, 3, 3) the proper rotations R of the best rigid motions x -> R x + t mapping ``source``
    (n, 3) onto each target (T, n, 3), by the Kabsch algorithm (Kabsch 1976; Umeyama 1991 for
    the det correction)."""
    xs = source - source.mean(0)  # (n, 3)
    ys = targets - targets.mean(1, keepdims=True)  # (T, n, 3)
    h = np.einsum("ni,tnj->tij", xs, ys)  # (T, 3, 3) cross-covariance sum x y^T
    u, _, vt = np.linalg.svd(h)  # (T, 3, 3) each
    d = np.sign(np.linalg.det(np.swapaxes(vt, 1, 2) @ np.swapaxes(u, 1, 2)))  # (T,)
    d[d == 0] = 1.0
    fix = np.ones((len(h), 3))
    fix[:, 2] = d
    return np.swapaxes(vt, 1, 2) @ (fix[:, :, None] * np.swapaxes(u, 1, 2))  # R = V D U^T


def rigid_fit_residual(source: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """RMS residual of the best rigid motion mapping ``source`` (n, 3) onto each target (T, n, 3):
    min over proper rotations R and translations t of sqrt(mean_i |R x_i + t - y_i|^2)
    (:func:`best_rotations`). Returns (T,).
    """
    rot = best_rotations(source, targets)  # (T, 3, 3)
    xs = source - source.mean(0)  # (n, 3)
    ys = targets - targets.mean(1, keepdims=True)  # (T, n, 3)
    residual = ys - np.einsum("tij,nj->tni", rot, xs)  # (T, n, 3)
    return np.sqrt((residual**2).sum(-1).mean(-1))


def part_rigidity_error(rest: Any, frames: Any, parts: Any) -> np.ndarray:
    """How far each frame is from moving its labelled parts rigidly, (T,) float64.

    rest: (N, 3) frame 0; frames: (T, N, 3); parts: (N,) int, label >= 0 for rigid parts, -1 for
    vertices without one. For each part p with n_p vertices, e_p(t) = RMS residual of the best
    rigid (proper rotation, no scaling) fit from rest to frame t (``rigid_fit_residual``);
    error(t) = sum_p n_p e_p(t) / sum_p n_p, divided by the longest side of the rest bounding box
    (design section 6).
    """
    x0, x = _motion(rest, frames)
    labels = np.asarray(parts).reshape(-1)
    if labels.shape != (len(x0),):
        raise MeshError(f"parts must have shape ({len(x0)},), got {np.shape(parts)}")
    ids = np.unique(labels[labels >= 0])
    if len(ids) == 0:
        raise MeshError("no vertex has a part label >= 0; part rigidity needs labelled parts")
    size = float((x0.max(0) - x0.min(0)).max())
    if not size > 0.0:
        raise MeshError("the rest shape has zero size")
    total = np.zeros(len(x))  # (T,)
    count = 0
    for pid in ids:
        sel = labels == pid
        total += sel.sum() * rigid_fit_residual(x0[sel], x[:, sel])
        count += int(sel.sum())
    return total / count / size


def edge_strain(rest: Any, frames: Any, faces: Any) -> np.ndarray:
    """Mean edge strain per frame, (T,): mean over unique edges of |l / l0 - 1|.

    rest: (N, 3); frames: (T, N, 3); faces: (F, 3). l0 = rest edge length, l = that edge in frame
    t (design section 6). Edges of zero rest length are skipped.
    """
    x0, x = _motion(rest, frames)
    e = unique_edges(faces)  # (E, 2)
    l0 = np.linalg.norm(x0[e[:, 1]] - x0[e[:, 0]], axis=-1)  # (E,)
    keep = l0 > 0.0
    if not keep.any():
        raise MeshError("every edge has zero rest length; edge strain is undefined")
    e, l0 = e[keep], l0[keep]
    d = x.take(e[:, 1], axis=1)  # (T, E, 3); take, not x[:, e]: several times faster
    d -= x.take(e[:, 0], axis=1)
    lengths = np.sqrt(np.einsum("tei,tei->te", d, d))  # (T, E)
    return np.abs(lengths / l0 - 1.0).mean(axis=1)


def energy_drift(energy: Any) -> float:
    """Relative energy drift of an undamped trajectory: max_t |E_t - E_0| / |E_0|.

    energy: (T,) total energy per frame (design section 6). When E_0 is zero (energy is only
    defined up to a constant, so a reference can land on 0) the scale is max_t |E_t| instead;
    an all-zero trajectory has drift 0. A non-finite energy (a blow-up) gives inf.
    """
    e = np.asarray(energy, dtype=np.float64).reshape(-1)
    if len(e) == 0:
        raise MeshError("energy drift needs at least one energy value")
    if not np.isfinite(e).all():
        return float("inf")
    change = float(np.abs(e - e[0]).max())
    scale = abs(float(e[0]))
    if scale == 0.0:
        scale = float(np.abs(e).max())
    return 0.0 if change == 0.0 else change / scale


def drag_alignment(point_positions: Any, target: Any, frame: int, object_size: float) -> float:
    """Action alignment: |x_frame - target| / object_size (design section 6).

    point_positions: (T, 3) trajectory of the dragged point; target: (3,) where it should be at
    ``frame``; object_size: the object's size (e.g. its longest bounding-box side), > 0.
    """
    p = np.asarray(point_positions, dtype=np.float64)
    goal = np.asarray(target, dtype=np.float64).reshape(-1)
    if p.ndim != 2 or p.shape[1] != 3 or goal.shape != (3,):
        raise MeshError(f"need positions (T, 3) and target (3,), got {p.shape} and {goal.shape}")
    if not -len(p) <= int(frame) < len(p):
        raise MeshError(f"frame {frame} is outside the {len(p)} simulated frames")
    if not (np.isfinite(object_size) and object_size > 0.0):
        raise MeshError(f"object_size must be positive, got {object_size}")
    return float(np.linalg.norm(p[int(frame)] - goal) / object_size)


def self_crossings(vertices: Any, faces: Any) -> int:
    """How many edges of a surface pass through one of its triangles that shares no vertex
    with them (a cloth's fold through itself); vertices (N, 3), faces (F, 3). Candidate
    pairs are the triangles whose centres lie within an edge's half-length plus the largest
    triangle's radius of the edge's midpoint (a k-d tree); each is tested exactly (the segment
    against the triangle's plane, then against its edges)."""
    x = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    e = unique_edges(f)
    if not len(e) or not len(f):
        return 0
    corners = x[f]  # (F, 3, 3)
    centre = corners.mean(1)
    radius = float(np.linalg.norm(corners - centre[:, None], axis=2).max())
    a, b = x[e[:, 0]], x[e[:, 1]]
    mid, half = (a + b) / 2, np.linalg.norm(b - a, axis=1) / 2
    tree = cKDTree(centre)
    near = tree.query_ball_point(mid, half + radius)
    counts = np.fromiter((len(n) for n in near), dtype=np.int64, count=len(near))
    if not counts.sum():
        return 0
    edge = np.repeat(np.arange(len(e)), counts)  # (P,)
    tri = np.concatenate([np.asarray(n, dtype=np.int64) for n in near if len(n)])
    ends = e[edge]  # (P, 2)
    shared = (f[tri][:, :, None] == ends[:, None, :]).any((1, 2))
    edge, tri = edge[~shared], tri[~shared]
    p, q = x[e[edge, 0]], x[e[edge, 1]]
    t0, t1, t2 = x[f[tri, 0]], x[f[tri, 1]], x[f[tri, 2]]
    n = np.cross(t1 - t0, t2 - t0)
    sp, sq = ((p - t0) * n).sum(1), ((q - t0) * n).sum(1)
    across = sp * sq < 0  # the ends on the two sides of the plane
    s = sp[across] / (sp[across] - sq[across])
    hit = p[across] + s[:, None] * (q[across] - p[across])
    n, t0, t1, t2 = n[across], t0[across], t1[across], t2[across]
    inside = np.ones(len(hit), dtype=bool)
    for u, w in ((t0, t1), (t1, t2), (t2, t0)):
        inside &= (np.cross(w - u, hit - u) * n).sum(1) >= 0
    return int(inside.sum())
