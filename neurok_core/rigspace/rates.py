"""The rig space's loads as rates, shared by the bones' simulation and the cloth's: how fast
the loads act on an object of a given size, the frequencies of contact and drag handles that
hold against them, the user's damping's share of the stiff modes, a drag's path in time."""

from __future__ import annotations

import numpy as np

from ..dynamics.conditions import SimulationConditions
from .space import RigSettings

TWO_PI = 2.0 * np.pi
DRAG_HZ = 4.0  # the drag handle's spring (critically damped) on the grabbed point
DRAG_SAG = 0.02  # object sizes the load may hold the grabbed point off its path, at most
DRAG_ARRIVAL = 0.75  # share of the drag's window by which its path reaches the target
FULL_DAMPING = 0.1  # 1/s: from this damping up the stiff modes get their full damping ratio


def material_damping(ratio: float, damping: float) -> float:
    """The damping ratio of the stiff modes (rigidity, stretching, glue) at the user's damping
    rate: ``ratio`` from FULL_DAMPING up, in proportion below it, none at 0 (an
    undamped run dissipates nothing: the midpoint step with discrete gradients keeps its
    energy)."""
    return ratio * min(1.0, damping / FULL_DAMPING)


def load_acceleration(conditions: SimulationConditions) -> float:
    """The load per kg (m/s^2): gravity and every force on the object's mass."""
    return (
        float(np.linalg.norm(conditions.gravity))
        + sum(float(np.linalg.norm(f.vector)) for f in conditions.forces) / conditions.mass
    )


def contact_omega(size: float, conditions: SimulationConditions, settings: RigSettings):
    """The contact's frequency (rad/s) on an object of ``size`` m: ``contact_hz``, or more where
    the load (gravity and the forces per kg) resting on ``contact_share`` points would sink
    them further than ``contact_depth`` object sizes (small objects)."""
    need = np.sqrt(load_acceleration(conditions) / (settings.contact_depth * size))
    return max(TWO_PI * settings.contact_hz, float(need))


def drag_omega(size: float, conditions: SimulationConditions) -> float:
    """The drag handle's frequency (rad/s) on an object of ``size`` m: ``DRAG_HZ``, or more
    where the load (gravity and the forces per kg, against which friction holds the object
    too) would keep the grabbed point further than ``DRAG_SAG`` object sizes off its path
    (small objects: a 1 cm drawer pulled out by its handle stayed in)."""
    need = np.sqrt(load_acceleration(conditions) / (DRAG_SAG * size))
    return max(TWO_PI * DRAG_HZ, float(need))


def drag_progress(t: float, start: float, end: float) -> float:
    """How far (0 to 1) a drag's path from its grabbed point to its target has come at time
    ``t`` of its window [start, end]: a minimum-jerk curve that arrives at DRAG_ARRIVAL of it."""
    window = (end - start) * DRAG_ARRIVAL
    tau = min(max((t - start) / max(window, 1e-9), 0.0), 1.0)
    return tau**3 * (10 - 15 * tau + 6 * tau**2)
