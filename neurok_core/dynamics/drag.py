"""Drag handles: a hand takes a point of the object to a target by a chosen frame, then lets go.

Scheme (ours; the paper leaves action encoding to its supplement):

1. Path. When the simulation reaches the handle's ``start_frame`` (time t0) the grabbed point is
   at p0 with velocity v0. The hand's goal g(t) follows the quintic that leaves p0 with velocity v0
   and zero acceleration and arrives at the target p1 at t1 = t0 + drag_arrival * (t_f - t0) with
   zero velocity and acceleration (the minimum-jerk path when v0 = 0); it then holds at p1 until
   the release time t_f = frame / fps, leaving the tracking error time to settle.
2. Hand. The desired point acceleration is the critically damped PD law
   a* = g'' + w^2 (g - p) + 2 w (g' - p'),  w = drag_gain / (t_f - t0),
   and the hand supplies the least-effort extra acceleration of the coordinates that realises it:
   dq'' = argmin |J_d dq'' - r|^2 + (damped) with minimum dq''^T G dq'', where
   r = a* - (J_d q''_0 + D^2 x_d[q', q']) and q''_0 = G^-1 Q the motion without the hand
   (Gauss's principle of least constraint; the operational-space force f = Lambda r of Khatib,
   "A unified approach for motion and force control of robot manipulators", 1987). A drag
   never fights a pin: pinned points are still along every direction of the kinematics, which
   are clamped around them (``neurok_core.pinclamp``).
   The solve is damped (``DynamicsSettings.drag.weak`` of the largest singular value): in a
   direction the point can barely move the hand's gain is bounded (1 / (2 drag_weak) times the
   best direction's), instead of accelerating the state without limit toward a target it
   can hardly reach.
   The hand's generalised force is tau = G dq''; its power q'^T tau enters the energy balance.
   The grabbed point's own velocity term b = D^2x_d[q', q'] is compensated only up to a size:
   r = a* - J_d q''_0 - b min(1, c / |b|), c = drag_bias_cap (``DynamicsSettings``) times the
   task's acceleration scale (the path's peak acceleration + w^2 |target - start|). b grows
   with the square of the speed, and where the decoder is strongly curved cancelling all of it
   closes a loop: the hand speeds the state up, b grows, the hand pushes harder, and the
   motion blows up within a frame (pybullet quadrupeds: hand accelerations 20 -> 1e5 -> 4e7 in
   three steps). Capped, the hand's push stays bounded and the rest of b is a disturbance its
   PD law corrects. Where b is large for good reason (a chain whipping round) the cap costs
   some accuracy: on a five-link pendulum the point ends 0.041 object sizes from its target
   with the default cap (1), 0.034 with 4, 0.010 with 16, 0.001 uncapped; but 4 lets the
   saturating map of ``tests/dynamics_systems.py`` blow up, and 16 a quadruped. (A drag that
   holds a point where it already is has a scale of 0: it compensates none of b.)
3. Release. From ``frame`` on the hand is gone; the state (the point is at the target, nearly at
   rest, as far as the damped solve reaches it: a direction the point can barely move is
   followed only partly) carries on under the other forces.

When the target is outside the kinematic space the hand moves the reachable component and the
point ends at the nearest state it can reach; ``Trajectory.drag_errors`` reports the miss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch
from torch import Tensor

from .hermite import quintic_hermite
from .linalg import metric_lstsq


@dataclass(frozen=True)
class DragPath:
    """Quintic goal: from ``start`` (3,) with ``velocity`` (3,) at t0 to ``target`` (3,) at t1."""

    start: Tensor
    velocity: Tensor
    target: Tensor
    t0: float
    t1: float

    @cached_property
    def _extent(self) -> tuple[float, float]:
        """(the path's peak acceleration, sampled; its length |target - start|), once."""
        span = self.t1 - self.t0
        peak = max(float(self.at(self.t0 + span * i / 64)[2].norm()) for i in range(65))
        return peak, float((self.target - self.start).norm())

    def acceleration_bound(self, omega: float) -> float:
        """The task's acceleration scale (m/s^2): the path's peak acceleration plus the PD
        law's at an error of the whole path length."""
        peak, length = self._extent
        return peak + omega * omega * length

    def at(self, t: float) -> tuple[Tensor, Tensor, Tensor]:
        """Goal position, velocity and acceleration at time t, each (3,)."""
        span = self.t1 - self.t0
        s = min(max((t - self.t0) / span, 0.0), 1.0)
        zero = torch.zeros_like(self.target)
        if s >= 1.0:
            return self.target.clone(), zero, zero
        return quintic_hermite(self.start, self.velocity, zero, self.target, zero, zero, span, s)


@dataclass(frozen=True)
class DragHandle:
    """A drag resolved to a tracked row: target (3,) metres, frames, and its tracking frequency."""

    row: int
    target: Tensor
    start_frame: int
    frame: int
    omega: float
    weak: float  # DynamicsSettings.drag.weak (the solve takes the largest of its hands')
    bias_cap: float = math.inf  # DynamicsSettings.drag.bias_cap (inf: always compensated)

    def active(self, frame: int) -> bool:
        """Whether the hand holds the point during the step from ``frame`` to ``frame + 1``."""
        return self.start_frame <= frame < self.frame

    def plan(self, position: Tensor, velocity: Tensor, fps: float, arrival: float) -> DragPath:
        """The goal path from the point's position/velocity (3,) at ``start_frame``."""
        t0 = self.start_frame / fps
        t1 = t0 + arrival * (self.frame - self.start_frame) / fps
        return DragPath(start=position, velocity=velocity, target=self.target, t0=t0, t1=t1)


def hand_acceleration(
    handles: list[tuple[DragHandle, DragPath]],
    t: float,
    positions: Tensor,
    velocities: Tensor,
    jac: Tensor,
    bias: Tensor,
    metric: Tensor,
    qddot_free: Tensor,
) -> Tensor:
    """The extra coordinate acceleration dq'' (kq,) the hands impose at time t.

    positions, velocities, bias: (n, 3) of the grabbed points; jac: (n, 3, kq); metric (kq, kq);
    qddot_free: (kq,) the acceleration without hands. All float64 CPU.
    """
    goals = [path.at(t) for _, path in handles]
    g = torch.stack([p for p, _, _ in goals])  # (n, 3)
    gd = torch.stack([v for _, v, _ in goals])  # (n, 3)
    gdd = torch.stack([a for _, _, a in goals])  # (n, 3)
    w = torch.tensor([h.omega for h, _ in handles], dtype=metric.dtype).unsqueeze(1)  # (n, 1)
    desired = gdd + w * w * (g - positions) + 2.0 * w * (gd - velocities)  # (n, 3)
    rows = jac.reshape(-1, jac.shape[-1])  # (3n, kq)
    # the velocity term, compensated up to bias_cap times the task's own accelerations
    cap = [h.bias_cap * path.acceleration_bound(h.omega) if h.bias_cap < math.inf else math.inf
           for h, path in handles]  # fmt: skip
    size = bias.norm(dim=1).clamp_min(1e-300)  # (n,)
    share = (torch.tensor(cap, dtype=bias.dtype) / size).clamp(max=1.0)  # (n,)
    compensated = bias * share.unsqueeze(1)  # (n, 3)
    residual = (desired - compensated).reshape(-1) - rows @ qddot_free  # (3n,)
    weak = max(h.weak for h, _ in handles)
    return metric_lstsq(rows, residual, metric, rcond=1e-9, damping=weak)
