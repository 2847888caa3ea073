"""Simulate an object from rest under user conditions: the entry point of the dynamics."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from .conditions import Anchor, SimulationConditions
from .integrator import Integrator, OnFrame, Trajectory
from .lagrangian import mass_metric
from .linalg import metric_lstsq
from .loads import Loads, build_loads, drag_handles, row_of
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .system import MechanicalSystem, PointKinematics, point_kinematics


def initial_velocity(
    cond: SimulationConditions,
    anchor_rows: Mapping[Anchor, int],
    rest: PointKinematics,
    loads: Loads,
) -> Tensor:
    """q'0 (kq,) float64: least squares on J q' = v over the points that have a velocity.

    Rows: each point velocity (weight 1) and, for a uniform velocity, every massive point with
    weight sqrt(m_i / m) (the mass-weighted fit). Among the least-squares solutions the one of
    least kinetic energy is taken, and only directions that leave pinned points still are used.
    """
    kq = rest.jac.shape[-1]
    if not cond.velocities:
        return torch.zeros(kq, dtype=torch.float64)
    jac = rest.jac.to("cpu", torch.float64)  # (S, 3, kq)
    masses = loads.masses.to("cpu", torch.float64)
    blocks, targets = [], []
    for iv in cond.velocities:
        v = torch.tensor(iv.velocity, dtype=torch.float64)
        if iv.anchor is None:
            w = (masses / loads.total_mass).sqrt()  # (S,)
            blocks.append((w[:, None, None] * jac).reshape(-1, kq))
            targets.append((w[:, None] * v).reshape(-1))
        else:
            row = row_of(iv.anchor, anchor_rows, jac.shape[0])
            blocks.append(jac[row])
            targets.append(v)
    metric = mass_metric(rest, loads.masses, loads.ridge)
    basis = None if loads.pins is None else loads.pins.free_basis
    return metric_lstsq(torch.cat(blocks), torch.cat(targets), metric, basis, rcond=1e-9)


def simulate(
    system: MechanicalSystem,
    conditions: SimulationConditions,
    anchor_rows: Mapping[Anchor, int],
    *,
    q0: Tensor | None = None,
    qdot0: Tensor | None = None,
    on_frame: OnFrame | None = None,
    settings: DynamicsSettings = DEFAULT_SETTINGS,
) -> Trajectory:
    """Simulate ``conditions.frames`` frames, by default from the rest state q = 0.

    system: the decoder of tracked points and their mass weights.
    anchor_rows: the row of ``system.decode_points`` output tracking each anchor of
        ``conditions.anchors()`` (all force, drag and point-velocity anchors are required; pinned
        vertices are held through those of their anchors that have a row).
    on_frame: called as on_frame(frame, q (kq,), energy J) for every frame; return False to stop
        (the trajectory so far comes back with ``cancelled=True``).
    q0, qdot0: (kq,) to start elsewhere (default: rest, and q'0 from the initial velocities);
        rest positions, pins and the barrier always refer to q = 0.
    Raises SimulationError when the motion blows up even with the smallest steps.
    """
    kq = system.num_coords
    zero = torch.zeros(kq, dtype=torch.float64)
    rest = point_kinematics(system, zero, zero)
    loads = build_loads(system, conditions, anchor_rows, rest, settings)
    if qdot0 is None:
        qdot0 = initial_velocity(conditions, anchor_rows, rest, loads)
    integrator = Integrator(
        system,
        loads,
        conditions.fps,
        drags=drag_handles(conditions, anchor_rows, system.num_points, settings),
        tolerance=conditions.tolerance,
        min_substeps=conditions.substeps,
        settings=settings,
    )
    start = zero if q0 is None else q0.to("cpu", torch.float64)
    return integrator.run(start, qdot0, conditions.frames, on_frame)
