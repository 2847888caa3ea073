"""Simulate an object from rest under user conditions: the entry point of the dynamics."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import torch
from torch import Tensor

from ..errors import ConditionError, SimulationError
from .conditions import Anchor, SimulationConditions
from .integrator import Integrator, OnFrame
from .lagrangian import mass_metric
from .limits import check_bounded, check_start_depth
from .linalg import metric_lstsq
from .loads import Loads, build_loads, drag_handles, row_of
from .local import LocalQuadratic, supports_hessian
from .settings import DEFAULT_SETTINGS, DynamicsSettings
from .system import (
    MechanicalSystem,
    PointKinematics,
    derivative_errors,
    point_kinematics,
    restrict,
)
from .trajectory import Trajectory


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
    least kinetic energy is taken.
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
    return metric_lstsq(torch.cat(blocks), torch.cat(targets), metric, rcond=1e-9)


def check_start_outside(loads: Loads, rest: PointKinematics, settings: DynamicsSettings) -> None:
    """Refuse (ConditionError) an object that starts deeper than ``contact.max_start_depth``
    object sizes inside the ground or a collider: the penalty would fling it out."""
    if loads.contact is None:
        return
    start = loads.contact.state(rest.x.detach().to("cpu", torch.float64).numpy())
    deepest = float(start.depth.max(initial=0.0)) - loads.contact.margin
    check_start_depth(deepest, loads.size, settings)


def visible_basis(loads: Loads, rest: PointKinematics, floor: float) -> Tensor | None:
    """(kq, r) G-orthonormal basis of the directions whose mass-metric eigenvalue is at least
    ``floor`` times the largest (the others barely move the object: a tiny force would give
    them a huge acceleration); None when every direction passes."""
    metric = mass_metric(rest, loads.masses, 0.0)  # (kq, kq)
    lam, v = torch.linalg.eigh(metric)  # ascending
    keep = lam >= floor * float(lam[-1])
    if bool(keep.all()) or float(lam[-1]) <= 0.0:
        return None
    return v[:, keep] / lam[keep].sqrt()  # (kq, r)


def simulate(
    system: MechanicalSystem,
    conditions: SimulationConditions,
    anchor_rows: Mapping[Anchor, int],
    *,
    q0: Tensor | None = None,
    qdot0: Tensor | None = None,
    on_frame: OnFrame | None = None,
    on_work: Callable[[int, float], None] | None = None,
    settings: DynamicsSettings = DEFAULT_SETTINGS,
    deadline: float | None = None,
) -> Trajectory:
    """Simulate ``conditions.frames`` frames, by default from the rest state q = 0.

    system: the decoder of tracked points and their mass weights.
    conditions: without pins: the dynamics do not hold pinned points. Pins are held by
        clamping the kinematics around them, which ``neurok_core.simulate.simulate`` does
        (``neurok_core.pinclamp``) before it calls this with the pins taken out.
    anchor_rows: the row of ``system.decode_points`` output tracking each anchor of
        ``conditions.anchors()`` (all force, drag and point-velocity anchors are required).
    on_frame: called as on_frame(frame, q (kq,), energy J) for every frame; return False to stop
        (the trajectory so far comes back with ``cancelled=True``).
    on_work: called as on_work(frame, covered) while frame ``frame`` is integrated, a few times a
        second, with how many frames from it the current attempt has covered (progress within
        slow frames).
    deadline: a ``time.monotonic()`` instant; once it passes, the run stops within one RK4 step
        and the trajectory so far comes back with ``cancelled`` and ``timed_out`` set.
    q0, qdot0: (kq,) to start elsewhere (default: rest, and q'0 from the initial velocities);
        rest positions and the barrier always refer to q = 0.
    Raises ConditionError for pins or loads beyond what the space can follow (``limits``),
    SimulationError when the motion blows up even with the smallest steps or a frame exceeds
    its budget of work.
    """
    if conditions.pins:
        raise ConditionError(
            "the low-level dynamics (neurok_core.dynamics.simulate) do not hold pins: pins are "
            "held by clamping the kinematics around them. Simulate with "
            "neurok_core.simulate.simulate (or the API), which does that, or pass conditions "
            "without pins."
        )
    kq = system.num_coords
    zero = torch.zeros(kq, dtype=torch.float64)
    if settings.check_derivatives:
        check_derivatives(system)
    rest = point_kinematics(system, zero, zero)
    loads = build_loads(system, conditions, anchor_rows, rest, settings)
    check_bounded(conditions, loads.total_mass, loads.size, settings)
    check_start_outside(loads, rest, settings)
    # Latent directions that barely move the object (e.g. those clamped pins cancel) would take
    # huge accelerations from tiny forces: they are removed first.
    basis = visible_basis(loads, rest, settings.metric_floor)  # (kq, r): q = basis @ r, or None
    if basis is not None:
        system = restrict(system, basis)
        r0 = torch.zeros(system.num_coords, dtype=torch.float64)
        rest = point_kinematics(system, r0, r0)
        loads = build_loads(system, conditions, anchor_rows, rest, settings)
        q0 = None if q0 is None else _coordinates(basis, q0)
        qdot0 = None if qdot0 is None else _coordinates(basis, qdot0)
        if on_frame is not None:
            user_on_frame = on_frame

            def on_frame(index: int, r: Tensor, energy: float):
                return user_on_frame(index, basis @ r, energy)

    if qdot0 is None:
        qdot0 = initial_velocity(conditions, anchor_rows, rest, loads)
    local = None
    if settings.local.enabled and supports_hessian(system.kinematics):
        local = LocalQuadratic(
            system.kinematics,
            dtype=system.dtype,
            device=system.device,
            size=loads.size,
            tolerance=settings.local.tolerance,
            jacobian_tolerance=settings.local.jacobian_tolerance,
            max_frames=settings.local.max_frames,
            reuse=settings.local.reuse,
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
        on_work=on_work,
        deadline=deadline,
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
