"""Numerical settings of the dynamics (not user conditions): defaults that hold for any object.

``DynamicsSettings`` groups them by what uses them (the barrier, drag handles, step-size
control, limits, the local model; the rest at the top). ``with_overrides`` sets fields by their
option names (``--setting NAME=VALUE`` of the commands): the names of ``OPTION_NAMES`` (e.g.
``local_model``, ``max_substeps``) or ``group.field``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BarrierSettings:
    """The prior barrier (``barrier``). Lengths are in object sizes.

    prior_mass: the prior barrier is flat inside the ball holding this much prior mass.
    scale: barrier energy one latent unit outside that ball, in units of the problem's energy
        scale (see ``loads.energy_scale``).
    damping: in damped scenes (damping > 0), the prior barrier is an inelastic stop damped at
        this share of critical damping (``barrier.PriorBarrier``): the motion meets the limits
        of the learned shapes and stays near them instead of bouncing back off them into the
        opposite extreme. Undamped scenes keep it elastic (their energy is conserved).
    """

    prior_mass: float = 0.99
    scale: float = 1.0
    damping: float = 0.5


@dataclass(frozen=True)
class DragSettings:
    """Drag handles (``drag``). Lengths are in object sizes.

    gain: tracking frequency of a drag handle times its duration (omega_d * T_drag).
    arrival: fraction of the drag window after which the hand holds still at the target.
    weak: damping of a hand's least-squares solve, as a share of its strongest direction (see
        ``drag``): along directions in which the grabbed point barely moves, the hand's gain is
        at most about 1 / (2 drag_weak) times the strongest direction's, so it never flings the
        state toward a target the point can hardly reach.
    bias_cap: a hand compensates the grabbed point's velocity-dependent acceleration only up to
        this many times its task's acceleration scale (see ``drag``): beyond it, where the
        decoder is strongly curved, the compensation feeds itself and blows up.
    """

    gain: float = 12.0
    arrival: float = 0.8
    weak: float = 0.03
    bias_cap: float = 1.0


@dataclass(frozen=True)
class StepSettings:
    """Step-size control of the integrator (``steps``, ``integrator``). Lengths are in object sizes.

    oscillation_step: largest omega * h for undamped oscillations (stiffness): RK4 accuracy.
    damped_step: largest omega * h for critically damped modes (drag hands, damping).
    max_substeps: integration steps per frame never exceed this.
    max_frames_per_step: longest RK4 step, in frames, where the motion is smooth and slow.
    max_refinements: how many times a frame is retried with more steps (as many as its energy-
        balance error asks for, at least one and at most twice as many as before).
    energy_floor: the energy-balance error of a step is measured relative to the largest energy
        seen so far, but never less than this fraction of the problem's energy scale (a start
        from rest has no energy to compare with).
    """

    oscillation_step: float = 0.5
    damped_step: float = 1.5
    max_substeps: int = 512
    max_frames_per_step: int = 4
    max_refinements: int = 6
    energy_floor: float = 1e-3


@dataclass(frozen=True)
class LimitSettings:
    """What a run may cost and how far a state may go (``limits``, ``integrator``). Lengths are
    in object sizes.

    max_load_sizes_per_frame: loads (forces, winds, gravity, initial velocities) that would move
        the object farther than this many object sizes in one frame are refused before any work,
        with the value that would pass (``limits``).
    max_frame_evaluations: right-hand-side evaluations one frame may take (all its attempts);
        beyond it the run stops with a message instead of shrinking its steps without end.
    max_frame_expansions: re-expansions of the local model one frame may take (each a decoder
        pass with its Hessian); the same.
    max_displacement: a point moving farther than this from its rest position is a blow-up.
    max_latent_excess: the latent farther than this (latent units) outside the prior ball is a
        blow-up.
    max_coordinate: any |q_i| above this is a blow-up.
    """

    max_load_sizes_per_frame: float = 4.0
    max_frame_evaluations: int = 16384
    max_frame_expansions: int = 48
    max_displacement: float = 1000.0
    max_latent_excess: float = 10.0
    max_coordinate: float = 1e6


@dataclass(frozen=True)
class LocalModelSettings:
    """The local quadratic model of the decoder (``local``, ``localdrive``). Lengths are in
    object sizes.

    enabled: integrate with the local quadratic model of the decoder (see ``local``),
        re-expanded as the state moves, when the kinematics hook can give Hessians.
    tolerance: allowed position error of that model, in object sizes.
    jacobian_tolerance: allowed error of its Jacobian, relative to the largest |dx/dq|.
    max_frames: re-expand it at least this often.
    reuse: a state that needs a new expansion takes a kept one lying within this many trusted
        radii instead (0: always a new decoder pass; see ``local``).
    energy_match: at a re-expansion of that model, scale the velocities so that the state keeps
        its energy (see ``integrator``); off, the model's energy jump is booked with the work
        and shows as drift in undamped runs.
    """

    enabled: bool = True
    tolerance: float = 1e-3
    jacobian_tolerance: float = 1e-2
    max_frames: int = 8
    reuse: float = 0.5
    energy_match: bool = True


@dataclass(frozen=True)
class ContactSettings:
    """Contact with the ground and colliders (``contact``, ``obstacles``). Lengths are in object
    sizes.

    margin: contact starts this close to an obstacle (the points' skin): the surface between the
        tracked points, which the penalty does not see, stays out of the obstacle.
    depth, share: the penalty's stiffness is chosen so that the load (the problem's
        acceleration scale times the mass) resting on ``share`` of the mass points sinks them by
        ``depth``.
    hard: the penalty stiffens with depth, twice as stiff at this depth (a corner or the bottom
        of a ball, a few points carrying the whole object, then stays near it).
    damping: the largest damping ratio of the object's normal motion in contact, what bounciness
        0 gets (the conditions' bounciness sets the ratio, ``contact.restitution_damping``; a
        restitution of 0 would need an infinite one, 5 gives 0.009).
    sticking: the friction's viscous rate (sticking) in units of the contact frequency.
    cells: grid cells per object size of a collider's signed-distance grid (``obstacles``).
    band: how far from a collider's surface its grid holds distances.
    step: largest w h for the contact's frequency w in the reduced coordinates (RK4 is stable
        to about 2.8; the contact is damped, so it needs stability more than accuracy, and the
        energy balance still checks every step).
    points: the mesh vertices (a well-spread subset) that meet obstacles.
    free_translation: with contact and no pins, add a free translation of the whole object to
        its coordinates (so that it can fall onto the ground or a collider).
    max_start_depth: an object starting deeper than this inside an obstacle is refused.
    """

    margin: float = 0.004
    depth: float = 0.001
    share: float = 0.05
    hard: float = 0.003
    damping: float = 5.0
    sticking: float = 0.5
    cells: float = 100.0
    band: float = 0.06
    step: float = 2.0
    points: int = 512
    free_translation: bool = True
    max_start_depth: float = 0.05


@dataclass(frozen=True)
class DynamicsSettings:
    """Knobs of the simulator; lengths are in object sizes (longest side of the rest box).

    ridge: added to the metric, G + ridge * trace(G_rest) / kq * I, so G is never singular.
    metric_floor: directions of q whose mass-metric eigenvalue at rest is below this share of
        the largest are removed: they barely move the object, so an initial velocity or a load
        throws the state along them at several latent units a frame into the prior barrier,
        where the steps shrink and energy is lost (``docs/experiments/part_aware_space.md``,
        "Undamped energy drift").
    check_derivatives: before simulating, compare the decoder's J and D^2x at rest with finite
        differences and refuse to run if they disagree (see ``simulation.check_derivatives``).
    shape_keeping_hz: frequency of the shape-keeping springs between neighbouring mass points of
        one loose part (``shapekeep``): stretching and crumpling the surface cost energy,
        isometric motions do not (0: off).
    shape_keeping_neighbors: springs per point (its nearest neighbours).
    soft_modes: search the active subspace only among the latent directions that strain the
        object least per unit of motion (``neurok_core.softmodes``).
    strain_tolerance, strain_slack: a direction is soft when its strain per relative motion is
        at most max(strain_tolerance, strain_slack x that of the softest direction).
    barrier, drag, steps, limits, local, contact: the groups above.
    """

    ridge: float = 1e-3
    metric_floor: float = 3e-2
    check_derivatives: bool = True
    shape_keeping_hz: float = 0.0
    shape_keeping_neighbors: int = 6
    soft_modes: bool = False
    strain_tolerance: float = 0.05
    strain_slack: float = 2.0
    barrier: BarrierSettings = field(default_factory=BarrierSettings)
    drag: DragSettings = field(default_factory=DragSettings)
    steps: StepSettings = field(default_factory=StepSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    local: LocalModelSettings = field(default_factory=LocalModelSettings)
    contact: ContactSettings = field(default_factory=ContactSettings)

    def with_overrides(self, **values: Any) -> DynamicsSettings:
        """A copy with fields set by their option names (``OPTION_NAMES``) or ``group.field``;
        an unknown name is a ValueError."""
        by_group: dict[str | None, dict[str, Any]] = {}
        for name, value in values.items():
            where = OPTION_NAMES.get(name) or _dotted(name)
            if where is None:
                raise ValueError(
                    f"unknown dynamics setting {name!r}; one of {', '.join(OPTION_NAMES)}"
                )
            group, key = where
            by_group.setdefault(group, {})[key] = value
        top = by_group.pop(None, {})
        for group, changes in by_group.items():
            top[group] = dataclasses.replace(getattr(self, group), **changes)
        return dataclasses.replace(self, **top)

    def option_values(self) -> dict[str, Any]:
        """Each option name's value here (``--setting`` reads a value as that value's type)."""
        return {
            name: getattr(self, key) if group is None else getattr(getattr(self, group), key)
            for name, (group, key) in OPTION_NAMES.items()
        }


def _dotted(name: str) -> tuple[str | None, str] | None:
    """(group, field) of a ``group.field`` name, or None."""
    group, sep, key = name.partition(".")
    groups = {f.name: f.default_factory for f in dataclasses.fields(DynamicsSettings)}
    if not sep or group not in groups or groups[group] is dataclasses.MISSING:
        return None
    if key not in {f.name for f in dataclasses.fields(groups[group])}:
        return None
    return group, key


OPTION_NAMES: dict[str, tuple[str | None, str]] = {
    "ridge": (None, "ridge"),
    "metric_floor": (None, "metric_floor"),
    "check_derivatives": (None, "check_derivatives"),
    "shape_keeping_hz": (None, "shape_keeping_hz"),
    "shape_keeping_neighbors": (None, "shape_keeping_neighbors"),
    "soft_modes": (None, "soft_modes"),
    "strain_tolerance": (None, "strain_tolerance"),
    "strain_slack": (None, "strain_slack"),
    "prior_mass": ("barrier", "prior_mass"),
    "barrier_scale": ("barrier", "scale"),
    "barrier_damping": ("barrier", "damping"),
    "drag_gain": ("drag", "gain"),
    "drag_arrival": ("drag", "arrival"),
    "drag_weak": ("drag", "weak"),
    "drag_bias_cap": ("drag", "bias_cap"),
    "oscillation_step": ("steps", "oscillation_step"),
    "damped_step": ("steps", "damped_step"),
    "max_substeps": ("steps", "max_substeps"),
    "max_frames_per_step": ("steps", "max_frames_per_step"),
    "max_refinements": ("steps", "max_refinements"),
    "energy_floor": ("steps", "energy_floor"),
    "max_load_sizes_per_frame": ("limits", "max_load_sizes_per_frame"),
    "max_frame_evaluations": ("limits", "max_frame_evaluations"),
    "max_frame_expansions": ("limits", "max_frame_expansions"),
    "max_displacement": ("limits", "max_displacement"),
    "max_latent_excess": ("limits", "max_latent_excess"),
    "max_coordinate": ("limits", "max_coordinate"),
    "local_model": ("local", "enabled"),
    "local_tolerance": ("local", "tolerance"),
    "local_jacobian_tolerance": ("local", "jacobian_tolerance"),
    "local_max_frames": ("local", "max_frames"),
    "local_reuse": ("local", "reuse"),
    "local_energy_match": ("local", "energy_match"),
    "contact_margin": ("contact", "margin"),
    "contact_depth": ("contact", "depth"),
    "contact_share": ("contact", "share"),
    "contact_hard": ("contact", "hard"),
    "contact_damping": ("contact", "damping"),
    "contact_sticking": ("contact", "sticking"),
    "contact_cells": ("contact", "cells"),
    "contact_band": ("contact", "band"),
    "contact_step": ("contact", "step"),
    "contact_points": ("contact", "points"),
    "free_translation": ("contact", "free_translation"),
}
"""Option name -> (group, or None for the top level; field): the names ``--setting`` takes."""

DEFAULT_SETTINGS = DynamicsSettings()
