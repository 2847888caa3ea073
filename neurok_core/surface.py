"""The vertices a mesh's faces use, and the loose ones carried along unmoved.

A mesh file may hold vertices that no face uses (a stray point, a duplicate left by a merge).
They have no surface, so nothing can act on them: the simulation runs on the vertices the faces
use (the surface), and every output gives the loose ones back at their rest positions, in the
file's numbering. Two numberings meet here:

- file indices i in [0, N): every vertex of the file, in its order (what the user names with
  ``--pin`` / ``--force`` and what a point cache holds);
- surface indices s in [0, U): the vertices the faces use, in the same order; ``used[s] = i``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .dynamics.conditions import SimulationConditions
from .errors import ConditionError
from .rig import BoneRig


@dataclass(frozen=True)
class Surface:
    """num_vertices: N, the file's vertices; used: (U,) int64 ascending file indices of the
    vertices some face uses; faces: (F, 3) int64 triangles in surface indices."""

    num_vertices: int
    used: np.ndarray
    faces: np.ndarray

    @classmethod
    def of(cls, num_vertices: int, faces: np.ndarray) -> Surface:
        """The surface of a mesh of ``num_vertices`` vertices and triangles ``faces`` (F, 3)."""
        faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
        referenced = np.zeros(num_vertices, dtype=bool)
        referenced[faces.reshape(-1)] = True
        used = np.flatnonzero(referenced)  # (U,)
        surface_index = np.cumsum(referenced) - 1  # (N,) surface index of each used vertex
        return cls(num_vertices, used, surface_index[faces])

    @property
    def loose(self) -> np.ndarray:
        """(N - U,) file indices of the vertices no face uses."""
        return np.setdiff1d(np.arange(self.num_vertices), self.used)

    @property
    def complete(self) -> bool:
        """Whether every vertex is on the surface (then nothing needs renumbering)."""
        return len(self.used) == self.num_vertices

    def conditions(self, conditions: SimulationConditions) -> SimulationConditions:
        """``conditions`` (validated against the file's N vertices) in surface indices: pins on
        loose vertices are dropped (they stay still anyway); a force, drag or initial velocity
        on one is refused (ConditionError), as nothing there can move."""
        if self.complete:
            return conditions
        surface_index = np.full(self.num_vertices, -1, dtype=np.int64)
        surface_index[self.used] = np.arange(len(self.used))

        def moved(items, what):
            out = []
            for c in items:
                if c.vertex is None:
                    out.append(c)
                    continue
                s = int(surface_index[c.vertex])
                if s < 0:
                    raise ConditionError(
                        f"{what} on vertex {c.vertex}, which no face uses: a loose vertex is"
                        " carried along unmoved; choose a vertex of the surface or a point"
                    )
                out.append(dataclasses.replace(c, vertex=s))
            return tuple(out)

        pins = surface_index[np.asarray(conditions.pins, dtype=np.int64)]
        body = dataclasses.replace(
            conditions,
            forces=moved(conditions.forces, "force"),
            drags=moved(conditions.drags, "drag"),
            velocities=moved(conditions.velocities, "initial velocity"),
            pins=tuple(int(p) for p in pins[pins >= 0]),
        )
        return body.validate(len(self.used))

    def positions(self, moved: np.ndarray, rest: np.ndarray) -> np.ndarray:
        """(T, N, 3) frames of every file vertex: the surface's ``moved`` (T, U, 3) and the
        loose vertices at ``rest`` (N, 3)."""
        if self.complete:
            return moved
        out = np.broadcast_to(rest.astype(moved.dtype), (len(moved), *rest.shape)).copy()
        out[:, self.used] = moved
        return out

    def rig(self, rig: BoneRig, rest: np.ndarray) -> BoneRig:
        """``rig`` of the surface with every file vertex: the loose ones on one more bone that
        never moves (at their centroid), so the rig plays the file's mesh back."""
        if self.complete:
            return rig
        loose = self.loose
        frames = rig.num_frames
        still = rig.num_bones
        bones = np.full((self.num_vertices, rig.vertex_bones.shape[1]), still, np.int32)
        weights = np.zeros((self.num_vertices, rig.vertex_weights.shape[1]), np.float32)
        bones[self.used], weights[self.used] = rig.vertex_bones, rig.vertex_weights
        weights[loose, 0] = 1.0
        identity = np.zeros((frames, 1, 4))
        identity[:, :, 0] = 1.0  # (w, x, y, z)
        return dataclasses.replace(
            rig,
            heads=np.concatenate([rig.heads, rest[loose].mean(0, keepdims=True)]),
            rotations=np.concatenate([rig.rotations, identity], 1),
            translations=np.concatenate([rig.translations, np.zeros((frames, 1, 3))], 1),
            vertex_bones=bones,
            vertex_weights=weights,
        )
