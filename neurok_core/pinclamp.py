"""Pinned vertices held exactly, by clamping the kinematics around them.

A learned kinematic space need not contain motions that leave the user's pinned vertices still:
its directions typically move the whole object a little (a laptop's base wobbles while the lid
turns), so pin springs alone would hold the object nearly rigid. Instead the motion is taken
relative to the pins, blended out with the distance from them:

    x'(X, q) = x(X, q) - w(X) sum_j a_j(X) (x(P_j, q) - P_j),
    w(X) = exp(-(d(X) / sigma)^2),

where P_j is a well-spread subset of the pinned vertices, a_j(X) inverse-distance weights of the
``neighbors`` nearest P_j (a_j = 1 at P_j itself), d(X) the distance from X to the nearest pinned
vertex and sigma = ``falloff`` object sizes. The pinned points are exactly still for every q
(w = 1, and each tracked pin cancels its own motion); far from the pins the learned motion is
unchanged; in between, the motion of the pinned region is removed smoothly (the laptop's lid
turns about its still base). x' is linear in x, so J' and D^2x' are the same combinations of J
and D^2x: the dynamics stay exactly Lagrangian in the clamped kinematics and need no stiff pin
springs (no small time steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import Tensor

from .dynamics.conditions import TRACKED_PINS, pin_subset
from .geometry import nearest_neighbors

if TYPE_CHECKING:
    from .space import KinematicSpace


@dataclass(frozen=True)
class PinClamp:
    """The clamp of one pin set: pins (P, 3) rest positions of the tracked pins (world);
    all_pins: (Q, 3) every pinned vertex (world), for the distance d(X); size: the object size
    (m); falloff: sigma in object sizes; neighbors: pins blended per point; tracked: (P,) the
    vertex indices of the tracked pins (the rows of ``pins``), empty when not built from a
    mesh's indices."""

    pins: np.ndarray
    all_pins: np.ndarray
    size: float
    falloff: float = 0.25
    neighbors: int = 4
    tracked: tuple[int, ...] = ()

    def sparse(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The clamp of world ``points`` (M, 3) as (idx (M, k), weights (M, k)):
        x' = x - sum_k weights[:, k] (x_pins - pins)[idx[:, k]]."""
        points = np.asarray(points, dtype=np.float64)
        k = min(self.neighbors, len(self.pins))
        dist, idx = nearest_neighbors(self.pins, points, k)  # (M, k) each
        dist, idx = dist.reshape(len(points), k), idx.reshape(len(points), k)
        inv = 1.0 / np.maximum(dist, 1e-12) ** 2  # (M, k)
        exact = dist[:, 0] <= 1e-9 * self.size  # a tracked pin itself
        inv[exact] = 0.0
        inv[exact, 0] = 1.0
        a = inv / inv.sum(axis=1, keepdims=True)  # (M, k)
        d = nearest_neighbors(self.all_pins, points, 1)[0].reshape(-1)  # (M,)
        w = np.exp(-((d / (self.falloff * self.size)) ** 2))  # (M,)
        return idx, w[:, None] * a

    def weights(self, points: np.ndarray) -> np.ndarray:
        """(M, P) clamp matrix C of world ``points`` (M, 3): x' = x - C (x_pins - pins)."""
        idx, vals = self.sparse(points)
        out = np.zeros((len(idx), len(self.pins)))
        np.put_along_axis(out, idx, vals, axis=1)
        return out

    @classmethod
    def build(
        cls, vertices: np.ndarray, pins, tracked, size: float, *, falloff: float = 0.25
    ) -> PinClamp:
        """vertices: (N, 3) world; pins: every pinned vertex index; tracked: the pinned indices
        whose motion is decoded (a spread subset of ``pins``)."""
        vertices = np.asarray(vertices, dtype=np.float64)
        return cls(
            pins=vertices[np.asarray(tracked, dtype=np.int64)],
            all_pins=vertices[np.asarray(pins, dtype=np.int64)],
            size=float(size),
            falloff=falloff,
            tracked=tuple(tracked),
        )


def pin_clamp(space: KinematicSpace, pins) -> PinClamp | None:
    """The clamp of the pinned vertices ``pins`` of ``space``, tracking a spread subset of them
    (``TRACKED_PINS``, the same subset the conditions' anchors hold), or None without pins. It
    depends on the space's vertices and object size only, which every view of a space
    (``KinematicSpace.with_subspace``) shares: one clamp serves a whole run."""
    if not len(pins):
        return None
    tracked = pin_subset(tuple(pins), space.vertices, TRACKED_PINS)
    return PinClamp.build(space.vertices, pins, tracked, space.object_size)


class ClampedKinematics:
    """x', J', D^2x' of the tracked points from those of a kinematics hook (see the module
    docstring). matrix: (S, P) clamp matrix of the tracked rows; pin_rows: (P,) rows of the
    tracked pins; rest: (P, 3) their rest positions. Keeps ``restricted`` of the hook."""

    def __init__(self, inner, matrix: Tensor, pin_rows: Tensor, rest: Tensor) -> None:
        self.inner, self.matrix, self.pin_rows, self.rest = inner, matrix, pin_rows, rest

    def restricted(self, basis: Tensor) -> ClampedKinematics:
        return ClampedKinematics(
            self.inner.restricted(basis), self.matrix, self.pin_rows, self.rest
        )

    def __call__(self, q: Tensor, qdot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, jac, bias = self.inner(q, qdot)
        return clamp_kinematics(self.matrix, self.pin_rows, self.rest, x, jac, bias)

    @property
    def has_hessian(self) -> bool:
        return hasattr(self.inner, "hessian")

    def hessian(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """x', J' and the Hessian H' (S, 3, kq, kq): the clamp is linear in x, so H' is the
        same combination of the inner hook's Hessians."""
        x, jac, hess = self.inner.hessian(q)
        x2, jac2, _ = clamp_kinematics(
            self.matrix, self.pin_rows, self.rest, x, jac, torch.zeros_like(x)
        )
        c = self.matrix.to(x)
        return x2, jac2, hess - torch.einsum("sp,pakl->sakl", c, hess[self.pin_rows])


def clamp_positions(matrix: Tensor, pin_rows: Tensor, rest: Tensor, x: Tensor) -> Tensor:
    """x' = x - C (x[pin_rows] - rest): x (..., S, 3), C (S, P)."""
    return x - matrix.to(x) @ (x[..., pin_rows, :] - rest.to(x))


def clamp_kinematics(matrix, pin_rows, rest, x, jac, bias):
    """The clamp applied to positions (S, 3), Jacobians (S, 3, kq) and D^2x (S, 3)."""
    c = matrix.to(x)  # (S, P)
    x2 = x - c @ (x[pin_rows] - rest.to(x))
    jac2 = jac - torch.einsum("sp,pak->sak", c, jac[pin_rows])
    bias2 = bias - c @ bias[pin_rows]
    return x2, jac2, bias2
