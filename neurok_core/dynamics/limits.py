"""What a simulation may ask for: loads the learned space can follow, in bounded work.

The kinematic space holds shapes near the rest shape; a load that would carry the object many
times its own size within one frame drives the state straight into the limits of the learned
shapes, where the motion turns stiff and the step control would shrink its steps without end.
Such conditions are refused before any work, with the value that would be accepted:

- forces, winds, gravity: an acceleration a moves a body ``1/2 a dt^2`` in one frame
  (dt = 1/fps); in object sizes L that must stay at most ``max_load_sizes_per_frame``;
- an initial velocity v moves it ``|v| dt`` in one frame: the same bound;
- stiffness (omega = 2 pi Hz) and damping (1/s) ask for ``omega dt / oscillation_step`` and
  ``damping dt / damped_step`` integration steps per frame: at most ``max_substeps``.

An object that starts deeper than ``contact.max_start_depth`` sizes inside the ground or a
collider is refused too (the contact's penalty would fling it out).

The bound is in object sizes per frame, so it holds whatever the object's scale (a 1 cm object
under 10 N is refused where a 1 m one is not, as the motion would differ by 100x). What passes
still meets a budget per frame in the integrator (``max_frame_evaluations``,
``max_frame_expansions``), so every run ends in bounded time.

Everything here needs only the conditions and the object's size, so a caller with the mesh alone
(the command line, before it loads a model) runs the same checks with ``check_mesh_loads``.
The rig space's dynamics take only the start depth (``check_mesh_start``): the load bounds are
those of the learned shapes.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConditionError
from .conditions import SimulationConditions
from .obstacles import scene_obstacles
from .settings import DynamicsSettings


def _norm(v) -> float:
    return math.sqrt(sum(float(c) * float(c) for c in v))


def check_bounded(
    cond: SimulationConditions, total_mass: float, size: float, settings: DynamicsSettings
) -> None:
    """Raise ConditionError when ``cond`` on an object of ``total_mass`` kg and ``size`` m would
    move it more than ``settings.limits.max_load_sizes_per_frame`` object sizes in one frame, or
    when its stiffness or damping would need more than ``settings.steps.max_substeps`` steps per
    frame."""
    dt = 1.0 / cond.fps
    reach = settings.limits.max_load_sizes_per_frame
    accel_limit = 2.0 * reach * size / (dt * dt)  # m/s^2 that moves the object ``reach`` L
    span = f"{reach:g} times its size ({_metres(size)}) in one frame at {cond.fps:g} fps"
    push = sum(f.strength for f in cond.forces) + sum(w.strength for w in cond.winds)
    if push / total_mass > accel_limit:
        moved = 0.5 * push / total_mass * dt * dt / size
        raise ConditionError(
            f"the forces ({push:.4g} N in all on {total_mass:.4g} kg) would move the object "
            f"{moved:.3g} times its size in one frame, far beyond the shapes it can take (the "
            f"limit is {span}): lower their total strength below "
            f"{accel_limit * total_mass:.4g} N or raise the mass above "
            f"{push / accel_limit:.4g} kg"
        )
    gravity = _norm(cond.gravity)
    if gravity > accel_limit:
        moved = 0.5 * gravity * dt * dt / size
        raise ConditionError(
            f"gravity ({gravity:.4g} m/s^2) would move this {_metres(size)} object {moved:.3g} "
            f"times its size in one frame (the limit is {span}): lower gravity below "
            f"{accel_limit:.4g} m/s^2 (or turn it off), raise the frame rate, or scale the "
            "object up to at least "
            f"{_metres(0.5 * gravity * dt * dt / reach)}"
        )
    speed_limit = reach * size / dt
    for v in cond.velocities:
        speed = _norm(v.velocity)
        if speed > speed_limit:
            raise ConditionError(
                f"an initial velocity of {speed:.4g} m/s would move the object "
                f"{speed * dt / size:.3g} times its size in one frame (the limit is {span}): "
                f"lower it below {speed_limit:.4g} m/s"
            )
    steps = settings.steps.max_substeps
    omega = 2.0 * math.pi * cond.stiffness
    if omega * dt / settings.steps.oscillation_step > steps:
        hz = steps * settings.steps.oscillation_step / dt / (2.0 * math.pi)
        raise ConditionError(
            f"a stiffness of {cond.stiffness:.4g} Hz would need more than {steps} integration "
            f"steps per frame at {cond.fps:g} fps: lower it below {hz:.4g} Hz"
        )
    if cond.damping * dt / settings.steps.damped_step > steps:
        limit = steps * settings.steps.damped_step / dt
        raise ConditionError(
            f"a damping of {cond.damping:.4g} 1/s would need more than {steps} integration "
            f"steps per frame at {cond.fps:g} fps: lower it below {limit:.4g} 1/s"
        )


def check_start_depth(deepest: float, size: float, settings: DynamicsSettings) -> None:
    """Raise ConditionError when an object of ``size`` m starts ``deepest`` m inside the ground
    or a collider, more than ``settings.contact.max_start_depth`` object sizes."""
    if deepest > settings.contact.max_start_depth * size:
        raise ConditionError(
            f"the object starts {deepest:.3g} m inside the ground or a collider (more than "
            f"{settings.contact.max_start_depth:.0%} of its size): move it out, or lower the "
            "ground, before simulating"
        )


def _mesh_size(vertices: np.ndarray) -> float:
    """The longest side of the bounding box of ``vertices`` (N, 3); 1 when it has none (as
    ``object_size``)."""
    extent = float(np.ptp(vertices, axis=0).max()) if len(vertices) else 0.0
    return extent if math.isfinite(extent) and extent > 0 else 1.0


def check_mesh_start(
    vertices: np.ndarray, cond: SimulationConditions, settings: DynamicsSettings
) -> None:
    """``check_start_depth`` from the mesh alone, before any work: the depth of the deepest of
    ``vertices`` (N, 3) inside the ground or a collider, against the longest side of their
    bounding box; the one check both dynamics (latent and rig space) make before any work.
    Raises ConditionError."""
    if not cond.contact:
        return
    vertices = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    size = _mesh_size(vertices)
    obstacles = scene_obstacles(cond.ground, cond.colliders, size, settings.contact)
    check_start_depth(float(obstacles.exact_depth(vertices).max()), size, settings)


def check_mesh_loads(
    vertices: np.ndarray, cond: SimulationConditions, settings: DynamicsSettings
) -> None:
    """``check_bounded`` and ``check_mesh_start`` from the mesh alone, before any model: the
    object's size is the longest side of the bounding box of ``vertices`` (N, 3), those of its
    surface (the dynamics measure it on surface samples, which lie inside that box, so nothing
    passes here that they refuse for its size). Raises ConditionError."""
    vertices = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    check_bounded(cond, cond.mass, _mesh_size(vertices), settings)
    check_mesh_start(vertices, cond, settings)


def _metres(value: float) -> str:
    """A length for a message: 12 mm, 3.5 m, 2 km."""
    if value < 1.0:
        return f"{value * 1000:.3g} mm"
    if value < 1000.0:
        return f"{value:.3g} m"
    return f"{value / 1000:.3g} km"
