"""Whether a rig-space motion is plausible: figures of its frames, computed once at the end of a
run from the bones' rigid motions (design section 12), cheap at any mesh size.

- ``edge_strain_max``, ``edge_strain_frame``: the largest mean edge strain |l / l0 - 1| over the
  frames and its frame (:func:`~neurok_core.metrics.edge_strain`), on the edges of a fixed,
  seeded sample of at most ``SAMPLE_FACES`` faces (the latent dynamics report the same keys);
- ``penetration_max``, ``penetration_frame``: the deepest any vertex of that sample goes into
  the ground or a collider, in object sizes, and its frame (the ground exactly; a collider by
  the contact's distance grid, the deepest few points again exactly);
- ``integration``: "complete", "steps halved" (some steps did not converge at first and were
  split, ``halvings`` times) or "cut short" (stopped before the last frame: cancelled, or the
  time limit).

Only the vertices of the sample are skinned (x_i = sum_b w_ib (R_b X_i + t_b), as the result's
vertices are), a few frames at a time, so the cost grows with the frames but not with the mesh.
"""

from __future__ import annotations

import numpy as np

from ..dynamics.conditions import SimulationConditions
from ..dynamics.obstacles import MeshDistance
from ..metrics import edge_strain
from .space import RigSpace, _sparse_rows

SAMPLE_FACES = 10_000  # faces whose edges and vertices are checked (a seeded sample)
CHUNK_POINTS = 2_000_000  # vertex positions skinned at once (frames x sampled vertices)
GRID_CELLS = 100  # a collider's distance grid: cells per object size, as the contact's
EXACT_POINTS = 16  # the deepest points by the grid, measured again exactly


def sample_faces(faces: np.ndarray, seed: int = 0) -> np.ndarray:
    """Rows of at most ``SAMPLE_FACES`` of ``faces`` (F, 3), all of them when there are fewer."""
    if len(faces) <= SAMPLE_FACES:
        return np.arange(len(faces))
    return np.sort(np.random.default_rng(seed).choice(len(faces), SAMPLE_FACES, replace=False))


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
    colliders = [
        MeshDistance(c.vertices, c.faces, size / GRID_CELLS, 4 * size / GRID_CELLS, c.name)
        for c in conditions.colliders
    ]
    count = len(rotations)
    strain = np.zeros(count)  # (T,)
    depth = np.zeros(count)  # (T,) metres, into the ground or a collider
    inside = []  # (grid depth, frame, collider, position): the deepest points in colliders
    step = max(1, CHUNK_POINTS // max(len(used), 1))
    for lo in range(0, count, step):
        frames = _skin(rows, rotations[lo : lo + step], translations[lo : lo + step])
        if len(local):
            strain[lo : lo + len(frames)] = edge_strain(rest, frames, local)
        if conditions.ground is not None:
            below = conditions.ground - frames[..., 2].min(1)  # (t,)
            depth[lo : lo + len(frames)] = np.maximum(below, 0.0)
        for mesh in colliders:
            inside += _inside(mesh, frames, lo)
    inside.sort(key=lambda entry: -entry[0])
    for rank, (grid, frame, mesh, point) in enumerate(inside[: EXACT_POINTS + 1]):
        # the deepest by the grid measured again exactly; the next one's grid depth bounds the
        # others' (the grid is off near a collider's edges, and clipped to its band)
        found = grid if rank == EXACT_POINTS else -float(mesh.exact(point[None])[0])
        depth[frame] = max(depth[frame], found)
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


def _inside(mesh: MeshDistance, frames: np.ndarray, first: int) -> list:
    """(grid depth, frame, mesh, position) of the points of ``frames`` (t, V, 3; frame
    ``first`` first) that the grid of ``mesh`` puts inside it, the ``EXACT_POINTS`` + 1 deepest."""
    points = frames.reshape(-1, 3)
    near = np.flatnonzero(mesh.near(points))
    if not len(near):
        return []
    d, _ = mesh.query(points[near])
    inside = np.flatnonzero(d < 0)
    inside = inside[np.argsort(d[inside])[: EXACT_POINTS + 1]]
    width = frames.shape[1]
    return [
        (-float(d[i]), first + int(near[i]) // width, mesh, points[near[i]].copy()) for i in inside
    ]
