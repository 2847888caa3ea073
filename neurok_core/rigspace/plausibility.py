"""Whether a rig-space motion is plausible: figures of its frames, computed once at the end of a
run from the bones' rigid motions (design section 12), cheap at any mesh size.

- ``edge_strain_max``, ``edge_strain_frame``: the largest mean edge strain |l / l0 - 1| over the
  frames and its frame (:func:`~neurok_core.metrics.edge_strain`), on the edges of a fixed,
  seeded sample of at most ``SAMPLE_FACES`` faces (the latent dynamics report the same keys);
- ``penetration_max``, ``penetration_frame``: the deepest any vertex of that sample goes into
  the ground or a collider, in object sizes, and its frame (exact distances: a collider's by
  libigl's AABB tree, its sign by the angle-weighted pseudo-normal, as the contact's grid has
  it near the surface, and deep inside too; a point nearest an open collider's rim, as a cloth
  hanging past a plane's edge, is outside it);
- ``integration``: "complete", "steps halved" (some steps did not converge at first and were
  split, ``halvings`` times) or "cut short" (stopped before the last frame: cancelled, or the
  time limit).

Only the vertices of the sample are skinned (x_i = sum_b w_ib (R_b X_i + t_b), as the result's
vertices are), a few frames at a time, so the cost grows with the frames but not with the mesh.
"""

from __future__ import annotations

import igl
import numpy as np

from ..dynamics.conditions import SimulationConditions
from ..metrics import edge_strain
from .space import RigSpace, _sparse_rows

SAMPLE_FACES = 10_000  # faces whose edges and vertices are checked (a seeded sample)
CHUNK_POINTS = 2_000_000  # vertex positions skinned at once (frames x sampled vertices)


def sample_faces(faces: np.ndarray, seed: int = 0, count: int = SAMPLE_FACES) -> np.ndarray:
    """Rows of at most ``count`` of ``faces`` (F, 3), all of them when there are fewer."""
    if len(faces) <= count:
        return np.arange(len(faces))
    return np.sort(np.random.default_rng(seed).choice(len(faces), count, replace=False))


def plausibility(
    space: RigSpace,
    conditions: SimulationConditions,
    rotations: np.ndarray,
    translations: np.ndarray,
    *,
    halvings: int,
    cancelled: bool,
) -> dict:
    """The module docstring's figures of the frames whose bones move by R (T, B, 3, 3), t (T,
    B, 3) (x -> R x + t), as a dict to merge into the result's info."""
    faces = np.asarray(space.faces)[sample_faces(np.asarray(space.faces))]  # (S, 3)
    used, local = np.unique(faces, return_inverse=True)
    local = local.reshape(faces.shape)  # the sample's faces on its own vertices
    rest = space.vertices[used]  # (V, 3)
    origin = np.zeros_like(space.heads)  # the skinning rows about the origin, as the result's
    rows = _sparse_rows(rest, space.vertex_bones[used], space.vertex_weights[used], origin)
    size = space.object_size
    colliders = [_Collider(c.vertices, c.faces, 1e-6 * size) for c in conditions.colliders]
    count = len(rotations)
    strain = np.zeros(count)  # (T,)
    depth = np.zeros(count)  # (T,) metres, into the ground or a collider
    step = max(1, CHUNK_POINTS // max(len(used), 1))
    for lo in range(0, count, step):
        frames = _skin(rows, rotations[lo : lo + step], translations[lo : lo + step])
        if len(local):
            strain[lo : lo + len(frames)] = edge_strain(rest, frames, local)
        chunk = depth[lo : lo + len(frames)]  # (t,) a view
        if conditions.ground is not None:
            np.maximum(chunk, conditions.ground - frames[..., 2].min(1), out=chunk)
        for collider in colliders:
            inside = collider.depth(frames.reshape(-1, 3)).reshape(len(frames), -1)  # (t, V)
            np.maximum(chunk, inside.max(1), out=chunk)
    steps = "steps halved" if halvings else "complete"
    return {
        "edge_strain_max": float(strain.max()) if count else 0.0,
        "edge_strain_frame": int(strain.argmax()) if count else 0,
        "penetration_max": float(depth.max() / size) if count else 0.0,
        "penetration_frame": int(depth.argmax()) if count else 0,
        "integration": "cut short" if cancelled else steps,
    }


def _skin(rows, rotations: np.ndarray, translations: np.ndarray) -> np.ndarray:
    """Vertices (t, V, 3) of the skinning rows (V, 4B) about the origin under R (t, B, 3, 3),
    t (t, B, 3): the result's skinning (``simulate.skin_frames``) kept in float64, so that a
    mesh far from the origin shows no float32 rounding as strain."""
    t_count, nb = rotations.shape[:2]
    stack = np.concatenate([np.swapaxes(rotations, 2, 3), translations[:, :, None, :]], 2)
    stack = stack.reshape(t_count, 4 * nb, 3).transpose(1, 0, 2).reshape(4 * nb, -1)
    return (rows @ stack).reshape(rows.shape[0], t_count, 3).transpose(1, 0, 2)


class _Collider:
    """A collider's exact depth of points: vertices (V, 3), faces (F, 3) as the conditions
    have them; points within ``rim`` metres of one of its boundary edges count as on its rim."""

    def __init__(self, vertices, faces, rim: float):
        self.vertices = np.asarray(vertices, dtype=np.float64)
        self.faces = np.asarray(faces, dtype=np.int64)
        edges = np.sort(np.stack([self.faces, np.roll(self.faces, -1, 1)], -1), -1)  # (F, 3, 2)
        _, inverse, counts = np.unique(
            edges.reshape(-1, 2), axis=0, return_inverse=True, return_counts=True
        )
        self.open = (counts[inverse.reshape(-1)] == 1).reshape(-1, 3)  # (F, 3) boundary edges
        self.rim = rim

    def depth(self, points: np.ndarray) -> np.ndarray:
        """(P,) how deep each point (P, 3) lies inside (0 outside, and on an open rim)."""
        signed, face, closest, _ = igl.signed_distance(
            points, self.vertices, self.faces, igl.SIGNED_DISTANCE_TYPE_PSEUDONORMAL
        )
        inside = np.flatnonzero(signed < 0)
        if self.open.any() and len(inside):
            f, c = face[inside], closest[inside]  # the nearest face and point of each
            a = self.vertices[self.faces[f]]  # (I, 3, 3) its corners
            b = np.roll(a, -1, 1)  # each edge's other end
            u = np.clip(
                np.einsum("ikj,ikj->ik", c[:, None] - a, b - a)
                / np.maximum(np.einsum("ikj,ikj->ik", b - a, b - a), 1e-300),
                0.0,
                1.0,
            )
            gap = np.linalg.norm(c[:, None] - a - u[..., None] * (b - a), axis=-1)  # (I, 3)
            on_rim = (self.open[f] & (gap <= self.rim)).any(1)
            inside = inside[~on_rim]
        out = np.zeros(len(points))
        out[inside] = -signed[inside]
        return out
