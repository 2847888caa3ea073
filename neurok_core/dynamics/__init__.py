"""Euler-Lagrange dynamics in the reduced coordinates of a kinematic space (design section 7).

``conditions`` is plain Python (importable without torch, e.g. by the Blender side); the rest of
the package needs torch and is loaded on first use of its names.

Use: build a :class:`MechanicalSystem` (a differentiable map q -> tracked points and their mass
weights), then ``simulate(system, conditions, anchor_rows)`` -> :class:`Trajectory`.
"""

from importlib import import_module

from .conditions import (
    Anchor,
    Collider,
    Drag,
    Force,
    InitialVelocity,
    SimulationConditions,
    Wind,
    pin_subset,
)

_LAZY = {
    "DynamicsSettings": ".settings",
    "LatentMap": ".system",
    "MechanicalSystem": ".system",
    "PointKinematics": ".system",
    "point_kinematics": ".system",
    "Trajectory": ".trajectory",
    "Integrator": ".integrator",
    "simulate": ".simulation",
    "initial_velocity": ".simulation",
    "check_derivatives": ".simulation",
    "derivative_errors": ".system",
    "equations_of_motion": ".lagrangian",
    "mass_metric": ".lagrangian",
    "coriolis": ".lagrangian",
    "PriorBarrier": ".barrier",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Anchor",
    "Collider",
    "Drag",
    "Force",
    "InitialVelocity",
    "SimulationConditions",
    "Wind",
    "pin_subset",
    *_LAZY,
]
