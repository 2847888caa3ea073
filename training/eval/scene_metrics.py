"""Scores of one simulated object in a plausibility scene (design sections 6 and 10).

Every length is divided by L, the longest side of the rest bounding box, so scores compare across
object sizes. Inputs: rest (N, 3) metres (frame 0), frames (T, N, 3) metres, faces (F, 3), parts
(N,) int (-1: no label), pins (P,) vertex indices. The rigid fits, edge strain, energy drift and
drag alignment are those of :mod:`neurok_core.metrics`; this module adds what the scenes need
beyond them: motion extent, per-part residuals, the turn of a hinged part and the opening of a lid,
the volume ratio of a closed mesh and the drift of pinned vertices.

:func:`score_motion` computes every score that applies to an object; the demo reports the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neurok_core.metrics import (
    best_rotations,
    drag_alignment,
    edge_strain,
    energy_drift,
    rigid_fit_residual,
    self_crossings,
)

from .scene_meshes import Hinge


def object_size(rest: np.ndarray) -> float:
    """L = the longest side of the rest bounding box (metres)."""
    x = np.asarray(rest, dtype=np.float64)
    return float((x.max(0) - x.min(0)).max())


def displacements(rest: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """|x_t(v) - x_0(v)| (T, N) metres."""
    x0 = np.asarray(rest, dtype=np.float64)
    return np.linalg.norm(np.asarray(frames, dtype=np.float64) - x0, axis=-1)


def motion_extent(rest: np.ndarray, frames: np.ndarray, pins=()) -> float:
    """max over frames and free (unpinned) vertices of |x_t - x_0| / L."""
    d = displacements(rest, frames)  # (T, N)
    free = np.ones(d.shape[1], dtype=bool)
    free[np.asarray(pins, dtype=np.int64)] = False
    return float(d[:, free].max() / object_size(rest)) if free.any() else 0.0


def pinned_drift(rest: np.ndarray, frames: np.ndarray, pins) -> float:
    """max over frames and pinned vertices of |x_t - x_0| / L (0 without pins)."""
    pins = np.asarray(pins, dtype=np.int64)
    if len(pins) == 0:
        return 0.0
    return float(displacements(rest, frames)[:, pins].max() / object_size(rest))


def part_residuals(rest: np.ndarray, frames: np.ndarray, parts) -> dict[int, np.ndarray]:
    """Part label -> (T,) RMS residual of the part's best rigid fit from frame 0 to frame t, / L
    (``rigid_fit_residual``: min over R in SO(3), t of sqrt(mean_i |R x_i + t - y_i|^2))."""
    x0 = np.asarray(rest, dtype=np.float64)
    x = np.asarray(frames, dtype=np.float64)
    labels = np.asarray(parts).reshape(-1)
    size = object_size(x0)
    return {
        int(p): rigid_fit_residual(x0[labels == p], x[:, labels == p]) / size
        for p in np.unique(labels[labels >= 0])
    }


def rotation_angles(rotations: np.ndarray) -> np.ndarray:
    """Angles (T,) in degrees of rotation matrices (T, 3, 3): theta = acos((tr R - 1) / 2)."""
    cos = (np.trace(rotations, axis1=1, axis2=2) - 1.0) / 2.0  # (T,)
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def rotation_axes(rotations: np.ndarray) -> np.ndarray:
    """Unit axes (T, 3) of rotation matrices (T, 3, 3), from the skew part
    (R32 - R23, R13 - R31, R21 - R12) / (2 sin theta); zero where theta ~ 0."""
    r = rotations
    w = np.stack([r[:, 2, 1] - r[:, 1, 2], r[:, 0, 2] - r[:, 2, 0], r[:, 1, 0] - r[:, 0, 1]], 1)
    n = np.linalg.norm(w, axis=1, keepdims=True)  # (T, 1) = 2 sin theta
    return np.divide(w, n, out=np.zeros_like(w), where=n > 1e-9)


def part_rotations(rest: np.ndarray, frames: np.ndarray, parts, part: int) -> np.ndarray:
    """(T, 3, 3) rotations of the best rigid fits of ``part`` from frame 0 to each frame."""
    sel = np.asarray(parts).reshape(-1) == part
    x = np.asarray(frames, dtype=np.float64)[:, sel]  # (T, n, 3)
    return best_rotations(np.asarray(rest, dtype=np.float64)[sel], x)


def opening_angles(rest: np.ndarray, frames: np.ndarray, parts, hinge: Hinge) -> np.ndarray:
    """The lid's opening (T,) in degrees: the angle between R_lid(t) d_lid and R_base(t) d_base,
    the rest directions from the hinge along the lid and along the base (``Hinge.lid``,
    ``Hinge.base``) carried by each part's best-fit rotation. It falls as the lid closes."""
    r_lid = part_rotations(rest, frames, parts, hinge.moving_part)  # (T, 3, 3)
    r_base = part_rotations(rest, frames, parts, hinge.fixed_part)  # (T, 3, 3)
    lid = r_lid @ np.asarray(hinge.lid, dtype=np.float64)  # (T, 3)
    base = r_base @ np.asarray(hinge.base, dtype=np.float64)  # (T, 3)
    cos = (lid * base).sum(1) / (np.linalg.norm(lid, axis=1) * np.linalg.norm(base, axis=1))
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def turn_scores(rest: np.ndarray, frames: np.ndarray, parts, hinge: Hinge) -> dict[str, Any]:
    """The hinged part's turn: degrees of its best-fit rotation (max over frames and final), how
    well the rotation axis at the largest turn lines up with the hinge (|cos|, 1 = about the
    hinge), and for a lid the opening (rest, min, final) and the closing (rest opening minus
    opening: max over frames, final), ``toward_base`` when it closes at all (closing > 0.5 deg
    at the frame of the largest turn)."""
    rot = part_rotations(rest, frames, parts, hinge.moving_part)  # (T, 3, 3)
    turn = rotation_angles(rot)  # (T,)
    k = int(np.argmax(turn))
    axis = rotation_axes(rot[k : k + 1])[0]
    out: dict[str, Any] = {
        "turn_max_deg": float(turn[k]),
        "turn_final_deg": float(turn[-1]),
        "turn_axis_cos": float(abs(axis @ np.asarray(hinge.axis, dtype=np.float64))),
    }
    if hinge.lid is not None and hinge.base is not None:
        opening = opening_angles(rest, frames, parts, hinge)  # (T,)
        closing = opening[0] - opening  # (T,)
        out.update(
            opening_rest_deg=float(opening[0]),
            opening_min_deg=float(opening.min()),
            opening_final_deg=float(opening[-1]),
            closing_max_deg=float(closing.max()),
            closing_final_deg=float(closing[-1]),
            toward_base=bool(closing[k] > 0.5),
        )
    return out


def signed_volumes(frames: np.ndarray, faces) -> np.ndarray:
    """Signed volume (T,) of a triangle mesh in each frame (T, N, 3):
    V = 1/6 sum_f x_a . (x_b x x_c) (divergence theorem; > 0 for outward-facing triangles)."""
    x = np.asarray(frames, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64)
    a, b, c = x[:, f[:, 0]], x[:, f[:, 1]], x[:, f[:, 2]]  # (T, F, 3) each
    return np.einsum("tfi,tfi->t", a, np.cross(b, c)) / 6.0


def volume_ratios(rest: np.ndarray, frames: np.ndarray, faces) -> np.ndarray:
    """V_t / V_0 (T,) of a closed mesh (``signed_volumes``)."""
    v0 = signed_volumes(np.asarray(rest)[None], faces)[0]
    if not abs(v0) > 0.0:
        raise ValueError("the rest mesh encloses no volume; volume ratios need a closed mesh")
    return signed_volumes(frames, faces) / v0


def _over_frames(values: np.ndarray) -> dict[str, float]:
    """Mean and max over frames 1.. (frame 0 is the rest, where the errors are 0)."""
    v = np.asarray(values, dtype=np.float64)[1:]
    return {"mean": float(v.mean()), "max": float(v.max())} if len(v) else {"mean": 0.0, "max": 0.0}


def score_motion(
    rest: np.ndarray,
    frames: np.ndarray,
    faces,
    parts=None,
    pins=(),
    *,
    strain: bool = False,
    volume: bool = False,
    hinge: Hinge | None = None,
    drag: tuple[int, Any, int] | None = None,
    energy=None,
    obstacles=None,
    fps: float = 24.0,
    thickness: float = 0.0,
) -> dict[str, Any]:
    """Every score of one simulated object that applies to it (module docstring).

    Always: ``motion`` (largest free-vertex displacement / L) and, with pins, ``pinned_drift``.
    With part labels >= 0: ``part_residual`` (worst part's max over frames) and
    ``part_residuals`` (per part: max). ``strain``: ``edge_strain`` mean and max over frames of
    the mean |l/l0 - 1|, and ``through_itself``: the frames in which an edge passes through
    one of the cloth's own triangles (``neurok_core.metrics.self_crossings``). ``volume``:
    ``volume_ratio`` min and max of V_t / V_0. ``hinge``: the
    :func:`turn_scores`. ``drag`` = (vertex, target (3,), frame): ``drag_miss`` |x_frame -
    target| / L (None if the run ended before that frame). ``energy`` (T,): ``energy_drift``.
    ``obstacles`` (``neurok_core.dynamics.obstacles.Obstacles``): the :func:`contact_scores`
    (``thickness``: the object's collision thickness, m), and with ``strain`` and colliders
    the cloth's :func:`drape`.
    """
    rest = np.asarray(rest, dtype=np.float64)
    frames = np.asarray(frames, dtype=np.float64)
    size = object_size(rest)
    out: dict[str, Any] = {"frames": int(len(frames)), "motion": motion_extent(rest, frames, pins)}
    if len(pins):
        out["pinned_drift"] = pinned_drift(rest, frames, pins)
    if parts is not None and (np.asarray(parts) >= 0).any():
        per_part = {p: float(r.max()) for p, r in part_residuals(rest, frames, parts).items()}
        out["part_residual"] = max(per_part.values())
        out["part_residuals"] = {str(p): r for p, r in per_part.items()}
    if strain:
        out["edge_strain"] = _over_frames(edge_strain(rest, frames, faces))
        # frames in which the cloth passes through itself (reported; no target yet)
        out["through_itself"] = sum(self_crossings(x, faces) > 0 for x in frames)
    if volume:
        ratio = volume_ratios(rest, frames, faces)
        out["volume_ratio"] = {"min": float(ratio.min()), "max": float(ratio.max())}
    if hinge is not None:
        out.update(turn_scores(rest, frames, parts, hinge))
    if drag is not None:
        vertex, target, frame = drag
        reached = frame < len(frames)
        out["drag_miss"] = (
            drag_alignment(frames[:, vertex], target, frame, size) if reached else None
        )
        out["drag_distance"] = float(np.linalg.norm(np.subtract(target, rest[vertex])) / size)
    if energy is not None:
        out["energy_drift"] = energy_drift(energy)
    if obstacles is not None:
        out.update(contact_scores(rest, frames, obstacles, fps, thickness))
        if strain and getattr(obstacles, "meshes", None):
            out["drape"] = drape(rest, frames[-1], faces, obstacles)
    if parts is not None and len(np.unique(np.asarray(parts)[np.asarray(parts) >= 0])) > 1:
        out.update(part_contact_scores(rest, frames, faces, parts))
    return out


def drape(rest: np.ndarray, last: np.ndarray, faces, obstacles) -> float | None:
    """How far a cloth's free edges (the edges of one face) hang below the top of the
    colliders at the last frame, in units of the cloth's half-width (half its longest rest
    side): (top - median edge height) / half-width; None for a closed mesh."""
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), 1)
    unique, counts = np.unique(edges, axis=0, return_counts=True)
    border = np.unique(unique[counts == 1])
    if not len(border):
        return None
    top = max(float(m.vertices[:, 2].max()) for m in obstacles.meshes)
    half = 0.5 * float(np.ptp(rest, axis=0).max())
    return float((top - np.median(last[border, 2])) / half)


PART_TOUCH = 0.01  # L: parts closer than this at rest touch
PART_SAMPLES = 400  # vertices of a part checked against another part, per frame


def part_contact_scores(rest: np.ndarray, frames: np.ndarray, faces, parts) -> dict:
    """How labelled parts stay together, lengths in L, over every frame:

    - ``detached``: for each pair of parts that touch at rest (within ``PART_TOUCH``), how much
      farther apart they come than at rest (the smallest distance from one part's vertices to
      the other's surface, in the other's own frame: its best rigid fit), the worst pair;
    - ``penetration_parts``: the deepest a part's vertex lies inside another (closed) part.
    """
    from neurok_core.dynamics.obstacles import MeshDistance

    rest = np.asarray(rest, dtype=np.float64)
    frames = np.asarray(frames, dtype=np.float64)
    parts = np.asarray(parts)
    faces = np.asarray(faces, dtype=np.int64)
    size = object_size(rest)
    labels = [int(p) for p in np.unique(parts) if p >= 0]
    rng = np.random.default_rng(0)
    face_part = parts[faces[:, 0]]
    meshes, samples = {}, {}
    for p in labels:
        f = faces[face_part == p]
        meshes[p] = MeshDistance(rest, f, size / 50, size / 50) if len(f) else None
        own = np.flatnonzero(parts == p)
        samples[p] = own if len(own) <= PART_SAMPLES else rng.choice(own, PART_SAMPLES, False)
    detached, depth = 0.0, 0.0
    for b in labels:
        if meshes[b] is None:
            continue
        own_b = np.flatnonzero(parts == b)
        rot = best_rotations(rest[own_b], frames[:, own_b])  # (T, 3, 3)
        cb0 = rest[own_b].mean(0)
        cbt = frames[:, own_b].mean(1)  # (T, 3)
        for a in labels:
            if a == b:
                continue
            pts = samples[a]
            d0 = meshes[b].exact(rest[pts])
            touching = float(np.abs(d0).min()) <= PART_TOUCH * size
            for t in range(1, len(frames)):
                # part a's points in part b's rest frame
                local = (frames[t, pts] - cbt[t]) @ rot[t] + cb0
                d = meshes[b].exact(local)
                depth = max(depth, float(-d.min()) - max(float(-d0.min()), 0.0))
                if touching:
                    detached = max(detached, float(np.abs(d).min() - np.abs(d0).min()))
    return {"detached": max(detached, 0.0) / size, "penetration_parts": max(depth, 0.0) / size}


REST_WINDOW = 10  # frames over which an object at rest moves by at most REST_MOTION
REST_MOTION = 0.005  # L
TOUCH = 0.005  # L: a vertex this close to an obstacle touches it


def contact_scores(
    rest: np.ndarray, frames: np.ndarray, obstacles, fps: float, thickness: float = 0.0
) -> dict:
    """Scores of an object meeting ``obstacles`` (a ground and colliders), lengths in L:

    - ``penetration``: the deepest any vertex lies inside an obstacle, over every frame;
    - ``rest_motion``: the largest vertex motion over the last ``REST_WINDOW`` frames (the
      largest distance from the last frame's position);
    - ``touch_frame``: the first frame a vertex comes within ``TOUCH`` of an obstacle, or
      within its collision ``thickness`` (m) and ``TOUCH`` where it keeps one (a cloth rests
      that far off, as Blender's cloth does) (None: never);
    - ``settle_seconds``: from that frame to the first frame from which the object stays at
      rest (every later window of ``REST_WINDOW`` frames moves it by at most ``REST_MOTION``);
      None when it never touches or is still moving at the end.
    """
    size = object_size(rest)
    clear = np.array([obstacles.clearance(f) for f in frames])  # (T, N)
    depth = np.maximum(-clear, 0.0).max(1) / size  # (T,)
    touching = np.flatnonzero(clear.min(1) <= TOUCH * size + thickness)
    touch = int(touching[0]) if len(touching) else None
    t = len(frames)
    moving = np.zeros(t, dtype=bool)  # window ending at g moves more than REST_MOTION
    for g in range(t):
        lo = max(0, g - REST_WINDOW)
        span = np.linalg.norm(frames[lo : g + 1] - frames[g], axis=2).max() / size
        moving[g] = g < REST_WINDOW or span > REST_MOTION
    settle = None
    if touch is not None and not moving[-1]:
        last_moving = np.flatnonzero(moving)
        still_from = (int(last_moving[-1]) + 1 if len(last_moving) else 0) - REST_WINDOW
        settle = max(0.0, (still_from - touch) / fps)
    lo = max(0, t - 1 - REST_WINDOW)
    rest_motion = np.linalg.norm(frames[lo:] - frames[-1], axis=2).max() / size
    return {
        "penetration": float(depth.max()),
        "penetration_frame": int(depth.argmax()),
        "rest_motion": float(rest_motion),
        "touch_frame": touch,
        "settle_seconds": settle,
    }
