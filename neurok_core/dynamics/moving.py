"""Obstacles that move rigidly on a known path: the parts of a scene's solid objects as a cloth
meets them (design section 16).

A solid object of a scene is simulated first; each of its loose parts then moves as a rigid
body, x(t) = R(t) X + c(t) for its rest points X (:class:`RigidTrack`, fitted to the part's
frames by the least-squares rotation: Kabsch, "A solution for the best rotation to relate two
sets of vectors", 1976). A cloth meets the part through the distance grid of its rest shape
(:class:`~neurok_core.dynamics.obstacles.MeshDistance`), queried at R(t)^T (x - c(t)), its
gradient turned back by R(t) (:class:`MovingMesh`). Between two frames the pose is
interpolated (the rotation along the shorter arc between the two, the centre linearly).

The coupling is one way, as in Blender (a collision object moves its cloth; the cloth does not
move it): the solids' motion does not feel the cloth's weight.

Shapes: rest points (V, 3), frames (T, V, 3) metres; rotations (T, 3, 3); translations (T, 3).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from ..metrics import best_rotations
from .obstacles import MeshDistance


@dataclass(frozen=True)
class RigidTrack:
    """A rigid body's path: at ``times[k]`` (T,) s its points are R_k X + c_k (``rotations``
    (T, 3, 3), ``translations`` (T, 3)); before the first time it stays at the first pose,
    after the last at the last."""

    times: np.ndarray
    rotations: np.ndarray
    translations: np.ndarray

    def pose(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(R (3, 3), c (3,)) at time ``t`` (s)."""
        times = self.times
        if len(times) == 1 or t <= times[0]:
            return self.rotations[0], self.translations[0]
        if t >= times[-1]:
            return self.rotations[-1], self.translations[-1]
        k = int(np.searchsorted(times, t, side="right")) - 1
        s = (t - times[k]) / (times[k + 1] - times[k])
        # the turn from pose k to pose k + 1 (R_{k+1} = D R_k), a share s of it
        turn = Rotation.from_matrix(self.rotations[k + 1] @ self.rotations[k].T).as_rotvec()
        rot = Rotation.from_rotvec(s * turn).as_matrix() @ self.rotations[k]
        c = (1.0 - s) * self.translations[k] + s * self.translations[k + 1]
        return rot, c

    def carry(self, points: np.ndarray, t: float) -> np.ndarray:
        """(P, 3): where the body takes ``points`` (P, 3), given at its pose of time 0, at
        time ``t``."""
        r0, c0 = self.pose(0.0)
        rot, c = self.pose(t)
        return ((points - c0) @ r0) @ rot.T + c


@dataclass(frozen=True)
class MovingBody:
    """A rigid body of a scene as an obstacle: its rest ``vertices`` (V, 3) and ``faces``
    (F, 3), moving on ``track``; ``name`` for messages."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    track: RigidTrack


def fit_track(rest: np.ndarray, frames: np.ndarray, times: np.ndarray):
    """(track, residual): the rigid path that best carries ``rest`` (V, 3) to each of
    ``frames`` (T, V, 3) at ``times`` (T,), and the largest distance (m) of a frame's point
    from its fitted place (0 for a part that moved rigidly)."""
    rest = np.asarray(rest, dtype=np.float64)
    frames = np.asarray(frames, dtype=np.float64)
    rot = best_rotations(rest, frames)  # (T, 3, 3)
    trans = frames.mean(1) - np.einsum("tij,j->ti", rot, rest.mean(0))
    fitted = np.einsum("tij,vj->tvi", rot, rest) + trans[:, None]
    residual = float(np.linalg.norm(fitted - frames, axis=2).max()) if frames.size else 0.0
    return RigidTrack(np.asarray(times, dtype=np.float64), rot, trans), residual


class MovingMesh:
    """A triangle mesh moving on a :class:`RigidTrack`, with the interface of a static
    :class:`~neurok_core.dynamics.obstacles.MeshDistance` (``near``, ``query``, ``exact``,
    ``gap``) at the pose of its last :meth:`at`. ``mesh`` is the distance grid of its rest
    shape (the track's X)."""

    def __init__(self, mesh: MeshDistance, track: RigidTrack):
        self.mesh, self.track = mesh, track
        self.name, self.band = mesh.name, mesh.band
        self.vertices = mesh.vertices  # its rest shape (the thickness tests do not turn)
        self._then = self._now = (0.0, *track.pose(0.0))  # (t, R, c) of the last two ``at``

    def at(self, t: float) -> None:
        """Move to the pose of time ``t`` (s); the pose it leaves is :meth:`motion`'s start."""
        self._then = self._now
        self._now = (float(t), *self.track.pose(float(t)))

    def _rest(self, x: np.ndarray) -> np.ndarray:
        _, rot, c = self._now
        return (x - c) @ rot  # R^T (x - c) for each row

    def near(self, x: np.ndarray, pad=0.0) -> np.ndarray:
        return self.mesh.near(self._rest(x), pad)

    def query(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        d, grad = self.mesh.query(self._rest(x))
        return d, grad @ self._now[1].T

    def exact(self, x: np.ndarray) -> np.ndarray:
        return self.mesh.exact(self._rest(x))

    def gap(self, x: np.ndarray) -> np.ndarray:
        """(P,) each point's distance to the box of the mesh's vertices (a lower bound of its
        distance to the mesh)."""
        return self.mesh.gap(self._rest(x))

    def motion(self, x: np.ndarray) -> np.ndarray:
        """(P, 3) how far the body carried the points ``x`` (P, 3), taken at the pose before
        the last :meth:`at`, to that :meth:`at`'s pose."""
        _, r0, c0 = self._then
        _, r1, c1 = self._now
        return ((x - c0) @ r0) @ r1.T + c1 - x

    def velocity(self, x: np.ndarray) -> np.ndarray:
        """(P, 3) m/s: the body's velocity at ``x`` over its last move (0 before one)."""
        dt = self._now[0] - self._then[0]
        return self.motion(x) / dt if dt > 0 else np.zeros_like(x)

    def speed(self, t0: float, t1: float) -> float:
        """m/s: the fastest of the body's points over [t0, t1] on the straight line between its
        poses there (a rigid move is affine in X, so the fastest point is a vertex)."""
        if t1 <= t0:
            return 0.0
        r0, c0 = self.track.pose(t0)
        r1, c1 = self.track.pose(t1)
        shift = self.vertices @ (r1 - r0).T + (c1 - c0)
        return float(np.linalg.norm(shift, axis=1).max()) / (t1 - t0)


__all__ = ["MovingBody", "MovingMesh", "RigidTrack", "fit_track"]
