"""Simulate an object from rest under user conditions: the entry point of the dynamics."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import torch
from torch import Tensor

from ..errors import SimulationError
from .conditions import Anchor, SimulationConditions
from .integrator import Integrator, OnFrame, Trajectory
from .lagrangian import mass_metric
from .limits import check_bounded
from .linalg import metric_lstsq
from .loads import Loads, build_loads, drag_handles, row_of
from .local import LocalQuadratic, supports_hessian
from .pinmodes import keep_pin_springs, soft_pin_basis, visible_basis
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .system import (
    MechanicalSystem,
    PointKinematics,
    derivative_errors,
    point_kinematics,
    restrict,
)


def check_derivatives(
    system: MechanicalSystem, tolerance: float = 0.02, directions: int = 3
) -> None:
    """Raise SimulationError if the decoder's first or second derivatives at rest disagree with
    central differences by more than ``tolerance`` along a few fixed pseudo-random directions.

    A direction that fails is measured again with Richardson-extrapolated differences, so that
    the differences' own truncation error on a strongly curved decoder is not taken for a wrong
    derivative."""
    gen = torch.Generator().manual_seed(0)
    zero = torch.zeros(system.num_coords, dtype=torch.float64)
    first = second = 0.0
    for _ in range(directions):
        direction = torch.randn(system.num_coords, generator=gen, dtype=torch.float64)
        e1, e2 = derivative_errors(system, zero, direction)
        if not (e1 <= tolerance and e2 <= tolerance):
            e1, e2 = derivative_errors(system, zero, direction, extrapolate=True)
        first, second = max(first, e1), max(second, e2)
        if not (first <= tolerance and second <= tolerance):  # also catches NaN
            raise SimulationError(
                f"the kinematic space's derivatives are wrong (first order off by {e1:.1%}, "
                f"second order by {e2:.1%} against finite differences), so the motion would not "
                "conserve energy. An operation in the decoder has no correct (nested) "
                "forward-mode derivative, e.g. torch's fused layer_norm (pytorch issue 196700): "
                "write it with elementary ops."
            )


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
    Raises ConditionError for loads beyond what the space can follow (``limits``),
    SimulationError when the motion blows up even with the smallest steps or a frame exceeds
    its budget of work.
    """
    kq = system.num_coords
    zero = torch.zeros(kq, dtype=torch.float64)
    if settings.check_derivatives:
        check_derivatives(system)
    rest = point_kinematics(system, zero, zero)
    loads = build_loads(system, conditions, anchor_rows, rest, settings)
    check_bounded(conditions, loads.total_mass, loads.size, settings)
    basis = None  # (kq, r): q = basis @ r once directions are removed

    def reduce(b: Tensor) -> None:
        nonlocal system, rest, loads, basis
        system = restrict(system, b)
        r0 = torch.zeros(system.num_coords, dtype=torch.float64)
        rest = point_kinematics(system, r0, r0)
        loads = build_loads(system, conditions, anchor_rows, rest, settings)
        basis = b if basis is None else basis @ b

    # Latent directions that barely move the object (e.g. those clamped pins cancel) would take
    # huge accelerations from tiny forces: they are removed first.
    visible = visible_basis(loads, rest, settings.metric_floor)
    if visible is not None:
        reduce(visible)
    soft = None
    if settings.eliminate_stiff_pins:
        soft = soft_pin_basis(loads, rest, settings.damped_step * conditions.fps)
    if soft is not None:  # the stiff pin modes go (see ``pinmodes``)
        full = loads
        reduce(soft[0])
        loads = keep_pin_springs(loads, full, soft[1])
    if basis is not None:
        q0 = None if q0 is None else _coordinates(basis, q0)
        qdot0 = None if qdot0 is None else _coordinates(basis, qdot0)
        if on_frame is not None:
            user_on_frame = on_frame

            def on_frame(index: int, r: Tensor, energy: float):
                return user_on_frame(index, basis @ r, energy)

    if qdot0 is None:
        qdot0 = initial_velocity(conditions, anchor_rows, rest, loads)
    local = None
    if settings.local_model and supports_hessian(system.kinematics):
        local = LocalQuadratic(
            system.kinematics,
            dtype=system.dtype,
            device=system.device,
            size=loads.size,
            tolerance=settings.local_tolerance,
            jacobian_tolerance=settings.local_jacobian_tolerance,
            max_frames=settings.local_max_frames,
            reuse=settings.local_reuse,
        )
    integrator = Integrator(
        system,
        loads,
        conditions.fps,
        drags=drag_handles(conditions, anchor_rows, system.num_points, settings),
        tolerance=conditions.tolerance,
        min_substeps=conditions.substeps,
        settings=settings,
        local=local,
    )
    start = (
        torch.zeros(system.num_coords, dtype=torch.float64)
        if q0 is None
        else q0.to("cpu", torch.float64)
    )
    traj = integrator.run(start, qdot0, conditions.frames, on_frame)
    if basis is None:
        return traj
    return replace(traj, q=traj.q @ basis.T, qdot=traj.qdot @ basis.T)


def _coordinates(basis: Tensor, q: Tensor) -> Tensor:
    """r with basis @ r closest to q (least squares)."""
    q = q.to("cpu", torch.float64)
    return torch.linalg.lstsq(basis, q.unsqueeze(-1)).solution.squeeze(-1)
