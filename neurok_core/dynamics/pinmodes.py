"""Stiff pin modes taken out of the coordinates, so that pins never force tiny time steps.

Pinned points are held by stiff springs (``loads.PinSet``). Linearised at rest, the springs add
the stiffness k J_p^T J_p to the system, whose modes solve the generalised eigenproblem

    k J_p^T J_p v_i = w_i^2 G v_i,      G = J^T M J (the mass metric at rest).

A mode with w_i far above the frame rate moves the pins a lot per unit of kinetic energy: the
springs hold it near zero (its static deflection under the loads is below the pin tolerance)
and an explicit integrator would need steps of w_i h <= 1.5 to follow it. As in modal reduction
of stiff systems, such modes are removed: the motion is confined to the span of the modes with
w_i <= ``w_max`` (the frequency one integration step per frame resolves), q = B r with B
G-orthonormal, and the springs keep holding the pins against what the remaining modes and the
curvature of the kinematics still move (the springs keep their stiffness and dampers; the
fastest mode left sets the steps). This changes the motion only by the pins' own tiny deflection
in the removed modes, and cuts the steps per frame from w_pin h / 1.5 (tens) to about one.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from .lagrangian import mass_metric
from .loads import Loads
from .system import PointKinematics


def soft_pin_basis(
    loads: Loads, rest: PointKinematics, omega_max: float
) -> tuple[Tensor, float] | None:
    """(kq, r) G-orthonormal basis of the pin modes with w_i <= ``omega_max`` (at least the
    softest one), ordered from soft to stiff, and the highest kept w_i (rad/s); None when there
    are no pins or none is stiffer than ``omega_max`` (nothing to remove)."""
    pins = loads.pins
    if pins is None or pins.stiffness <= 0.0:
        return None
    kq = rest.jac.shape[-1]
    metric = mass_metric(rest, loads.masses, loads.ridge)  # (kq, kq)
    jp = rest.jac.to("cpu", torch.float64)[pins.rows.cpu()].reshape(-1, kq)  # (3P, kq)
    chol = torch.linalg.cholesky(metric)
    a = torch.linalg.solve_triangular(chol, jp.T, upper=False)  # (kq, 3P) = L^-1 J_p^T
    lam, u = torch.linalg.eigh(a @ a.T)  # ascending, L^-1 J_p^T J_p L^-T
    omega = (pins.stiffness * lam.clamp_min(0.0)).sqrt()  # (kq,)
    keep = max(1, int((omega <= omega_max).sum()))
    if keep == kq:
        return None
    basis = torch.linalg.solve_triangular(chol.T, u[:, :keep], upper=True)  # (kq, r)
    return basis, float(omega[keep - 1])


def keep_pin_springs(reduced: Loads, full: Loads, omega: float) -> Loads:
    """The loads of the reduced system with the full system's pin springs and dampers (the
    same physical springs) and ``omega`` (the fastest pin mode left) setting the steps."""
    if reduced.pins is None or full.pins is None:
        return reduced
    pins = replace(
        reduced.pins, stiffness=full.pins.stiffness, damping=full.pins.damping, omega=omega
    )
    return replace(reduced, pins=pins)


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
