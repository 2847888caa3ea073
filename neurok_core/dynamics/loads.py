"""Conditions resolved onto the tracked points: masses, force tables, barrier, springs, scales.

Built once per simulation from the user's :class:`SimulationConditions`, the system and the
kinematics at rest. Point-level tensors live on the system's device in its work dtype; the
reduced-coordinate quantities are float64 on the CPU.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .barrier import PriorBarrier
from .conditions import Anchor, SimulationConditions
from .contact import ContactForces, contact_omega, restitution_damping
from .drag import DragHandle
from .obstacles import scene_obstacles
from .settings import DynamicsSettings
from .shapekeep import EdgeSprings, build_edge_springs, neighbour_pairs
from .system import MechanicalSystem, PointKinematics, object_size


@dataclass(frozen=True)
class TimedForces:
    """Constant point forces switched on per frame interval: row (F,), vector (F, 3) newtons,
    active on the steps from frame ``start`` (F,) to ``end`` (F,) (exclusive)."""

    rows: Tensor
    vectors: Tensor
    start: Tensor
    end: Tensor

    def active(self, frame: int) -> Tensor:
        return (self.start <= frame) & (frame < self.end)  # (F,)


@dataclass(frozen=True)
class Loads:
    """Everything the equations of motion need besides the state.

    masses: (S,) kg (sum = the user's mass); rest_points: (S, 3) x(0); size: object size (m);
    gravity: (3,) m/s^2; stiffness_omega: 2 pi * stiffness (rad/s); damping: 1/s;
    forces / winds: TimedForces (wind rows are unused: spread over the masses);
    barrier: PriorBarrier or None; ridge: added to the metric (kg m^2);
    energy_scale: J, the size of the energies this problem can reach (tolerances, barrier);
    springs: the shape-keeping springs (``shapekeep.EdgeSprings``) or None.
    contact: the contact with the ground and colliders (``contact.ContactForces``) or None.
    translation: (3, kq) float64 CPU, the map q -> translation of the whole object when the
        coordinates include a free translation (``MechanicalSystem.translation``), else None:
        the stiffness pulls the shape back to rest, not the object back to where it was.
    """

    masses: Tensor
    rest_points: Tensor
    total_mass: float
    size: float
    gravity: Tensor
    stiffness_omega: float
    damping: float
    forces: TimedForces
    winds: TimedForces
    barrier: PriorBarrier | None
    ridge: float
    energy_scale: float
    springs: EdgeSprings | None = None
    contact: ContactForces | None = None
    translation: Tensor | None = None

    def shift(self, q: Tensor) -> Tensor | None:
        """(3,) the whole object's translation at q (None without a free translation)."""
        if self.translation is None:
            return None
        return (self.translation @ q.to(self.translation)).to(self.rest_points)

    def applied_forces(self, frame: int) -> Tensor:
        """(S, 3) non-conservative applied point forces (forces + wind) on step ``frame``
        (computed once per frame: the right-hand side asks for it at every stage)."""
        cache = self.__dict__.setdefault("_applied", {})
        if frame not in cache:
            if len(cache) > 64:
                cache.clear()
            cache[frame] = self._applied_forces(frame)
        return cache[frame]

    def _applied_forces(self, frame: int) -> Tensor:
        f = torch.zeros_like(self.rest_points)  # (S, 3)
        on = self.forces.active(frame)
        if bool(on.any()):
            f.index_add_(0, self.forces.rows[on], self.forces.vectors[on])
        on = self.winds.active(frame)
        if bool(on.any()):
            push = self.winds.vectors[on].sum(0)  # (3,)
            f += (self.masses / self.total_mass).unsqueeze(1) * push
        return f


def _timed(items, rows: list[int], frames: int, like: Tensor) -> TimedForces:
    last = frames - 1
    vec = torch.tensor([c.vector for c in items], dtype=like.dtype).reshape(-1, 3)
    return TimedForces(
        rows=torch.tensor(rows, dtype=torch.long, device=like.device),
        vectors=vec.to(like.device),
        start=torch.tensor([c.start_frame for c in items], dtype=torch.long, device=like.device),
        end=torch.tensor(
            [last if c.end_frame is None else c.end_frame for c in items],
            dtype=torch.long,
            device=like.device,
        ),
    )


def row_of(anchor: Anchor, anchor_rows: Mapping[Anchor, int], num_points: int) -> int:
    """The tracked row of an anchor (a caller error if missing)."""
    if anchor not in anchor_rows:
        raise ValueError(
            f"{anchor.describe()} has no tracked row; pass a row for every anchor of "
            "SimulationConditions.anchors()"
        )
    row = int(anchor_rows[anchor])
    if not 0 <= row < num_points:
        raise ValueError(f"row {row} of {anchor.describe()} outside [0, {num_points})")
    return row


def energy_scale(cond: SimulationConditions, total_mass: float, size: float) -> float:
    """E = m L (|g| + sum |F| / m + sum |wind| / m) + 1/2 m max|v0|^2 + m (w_s L)^2 + m L^2 / s^2.

    The work the loads can do over one object size, plus the initial kinetic energy and the
    stiffness energy of a displacement of one object size, with a floor of m L^2 (1 rad/s)^2.
    """
    m, big = total_mass, size
    push = sum(f.strength for f in cond.forces) + sum(w.strength for w in cond.winds)
    accel = math.sqrt(sum(g * g for g in cond.gravity)) + push / m
    speed2 = max((sum(v * v for v in iv.velocity) for iv in cond.velocities), default=0.0)
    omega = 2.0 * math.pi * cond.stiffness
    return m * big * accel + 0.5 * m * speed2 + m * (omega * big) ** 2 + m * big * big


def build_loads(
    system: MechanicalSystem,
    cond: SimulationConditions,
    anchor_rows: Mapping[Anchor, int],
    rest: PointKinematics,
    settings: DynamicsSettings,
) -> Loads:
    """Resolve ``cond`` onto the tracked rows; ``rest`` = point_kinematics at q = q' = 0."""
    wt, dev, s = system.work_dtype, system.device, system.num_points
    weights = system.point_weights.detach().to(device=dev, dtype=wt)
    masses = cond.mass * weights / weights.sum()  # (S,)
    heavy = rest.x[weights > 0]
    size = object_size(heavy)
    rows_f = [row_of(f.anchor, anchor_rows, s) for f in cond.forces]
    ref = torch.zeros((), dtype=wt, device=dev)
    forces = _timed(cond.forces, rows_f, cond.frames, ref)
    winds = _timed(cond.winds, [0] * len(cond.winds), cond.frames, ref)
    jac0 = rest.jac.reshape(-1, system.num_coords).to("cpu", torch.float64)  # (3S, kq)
    m3 = masses.repeat_interleave(3).to("cpu", torch.float64)  # (3S,)
    g0 = jac0.T @ (m3.unsqueeze(1) * jac0)  # (kq, kq)
    kq = system.num_coords
    ridge = settings.ridge * float(torch.trace(g0)) / kq + 1e-12 * cond.mass * size * size
    scale = energy_scale(cond, cond.mass, size)
    gravity = torch.tensor(cond.gravity, dtype=wt, device=dev)
    barrier = None
    if system.latent is not None:
        strength = settings.barrier.scale * scale
        stop = settings.barrier.damping if cond.damping > 0 else 0.0
        barrier = PriorBarrier.build(system.latent, settings.barrier.prior_mass, strength, stop)
    translation = None
    if system.translation is not None:
        translation = system.translation.detach().to("cpu", torch.float64)
    return Loads(
        masses=masses,
        rest_points=rest.x.detach().clone(),
        total_mass=cond.mass,
        size=size,
        gravity=gravity,
        stiffness_omega=2.0 * math.pi * cond.stiffness,
        damping=cond.damping,
        forces=forces,
        winds=winds,
        barrier=barrier,
        ridge=ridge,
        energy_scale=scale,
        springs=_springs(system, rest, masses, jac0, g0 + ridge * torch.eye(kq), settings),
        contact=contact_forces(
            cond, _contact_masses(system, cond.mass), size, scale / (cond.mass * size), settings
        ),
        translation=translation,
    )


def _contact_masses(system: MechanicalSystem, mass: float) -> Tensor:
    """(S,) the mass each row stands for in contact (``MechanicalSystem.contact_weights``)."""
    w = system.point_weights if system.contact_weights is None else system.contact_weights
    w = w.detach().to("cpu", torch.float64)
    return mass * w / w.sum()


def contact_forces(
    cond: SimulationConditions,
    masses: Tensor,
    size: float,
    accel: float,
    settings: DynamicsSettings,
) -> ContactForces | None:
    """The contact of ``cond``'s ground and colliders (None without either); ``accel``: the
    problem's acceleration scale (m/s^2), which sets the penalty's stiffness (``contact``);
    the conditions' bounciness sets its damping ratio (``contact.restitution_damping``)."""
    if not cond.contact:
        return None
    st = settings.contact
    return ContactForces(
        scene_obstacles(cond.ground, cond.colliders, size, st),
        masses.detach().to("cpu", torch.float64).numpy(),
        omega=contact_omega(accel, size, st.share, st.depth),
        zeta=restitution_damping(cond.bounciness, st.damping),
        sticking=st.sticking,
        friction=cond.friction,
        margin=st.margin * size,
        hard=st.hard * size,
    )


def _springs(
    system: MechanicalSystem,
    rest: PointKinematics,
    masses: Tensor,
    jac0: Tensor,
    metric: Tensor,
    settings: DynamicsSettings,
) -> EdgeSprings | None:
    """The shape-keeping springs between each mass row and its nearest mass rows of one group."""
    if settings.shape_keeping_hz <= 0:
        return None
    heavy = (system.point_weights > 0).cpu().numpy()
    groups = np.zeros(system.num_points, dtype=np.int64)
    if system.point_groups is not None:
        groups = system.point_groups.cpu().numpy().astype(np.int64)
    rows = np.flatnonzero(heavy & (groups >= 0))
    x = rest.x.detach().cpu().double().numpy()
    pairs = rows[neighbour_pairs(x[rows], groups[rows], settings.shape_keeping_neighbors)]
    return build_edge_springs(
        torch.as_tensor(pairs.reshape(-1, 2)),
        rest.x.detach(),
        masses,
        jac0.reshape(system.num_points, 3, -1),
        metric,
        settings.shape_keeping_hz,
    )


def drag_handles(
    cond: SimulationConditions,
    anchor_rows: Mapping[Anchor, int],
    num_points: int,
    settings: DynamicsSettings,
) -> list[DragHandle]:
    """Each drag resolved to its row with tracking frequency drag_gain / duration."""
    if not settings.drag.bias_cap >= 0:  # (NaN fails too) a negative cap would amplify b
        raise ValueError(f"drag_bias_cap must be >= 0, got {settings.drag.bias_cap!r}")
    out = []
    for d in cond.drags:
        duration = (d.frame - d.start_frame) / cond.fps
        out.append(
            DragHandle(
                row=row_of(d.anchor, anchor_rows, num_points),
                target=torch.tensor(d.target, dtype=torch.float64),
                start_frame=d.start_frame,
                frame=d.frame,
                omega=settings.drag.gain / duration,
                weak=settings.drag.weak,
                bias_cap=settings.drag.bias_cap,
            )
        )
    return out
