"""Numerical settings of the dynamics (not user conditions): defaults that hold for any object."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DynamicsSettings:
    """Knobs of the simulator; lengths are in object sizes (longest side of the rest box).

    ridge: added to the metric, G + ridge * trace(G_rest) / kq * I, so G is never singular.
    prior_mass: the prior barrier is flat inside the ball holding this much prior mass.
    barrier_scale: barrier energy one latent unit outside that ball, in units of the problem's
        energy scale (see ``loads.energy_scale``).
    barrier_damping: in damped scenes (damping > 0), the prior barrier is an inelastic stop
        damped at this share of critical damping (``barrier.PriorBarrier``): the motion meets
        the limits of the learned shapes and stays near them instead of bouncing back off them
        into the opposite extreme. Undamped scenes keep it elastic (their energy is conserved).
    drag_gain: tracking frequency of a drag handle times its duration (omega_d * T_drag).
    drag_arrival: fraction of the drag window after which the hand holds still at the target.
    drag_weak: damping of a hand's least-squares solve, as a share of its strongest direction
        (see ``drag``): along directions in which the grabbed point barely moves, the hand's
        gain is at most about 1 / (2 drag_weak) times the strongest direction's, so it never flings
        the state toward a target the point can hardly reach.
    drag_bias_cap: a hand compensates the grabbed point's velocity-dependent acceleration only
        up to this many times its task's acceleration scale (see ``drag``): beyond it, where
        the decoder is strongly curved, the compensation feeds itself and blows up.
    oscillation_step: largest omega * h for undamped oscillations (stiffness): RK4 accuracy.
    damped_step: largest omega * h for critically damped modes (drag hands, damping).
    max_substeps: integration steps per frame never exceed this.
    max_load_sizes_per_frame: loads (forces, winds, gravity, initial velocities) that would move
        the object farther than this many object sizes in one frame are refused before any
        work, with the value that would pass (``limits``).
    max_frame_evaluations: right-hand-side evaluations one frame may take (all its attempts);
        beyond it the run stops with a message instead of shrinking its steps without end.
    max_frame_expansions: re-expansions of the local model one frame may take (each a decoder
        pass with its Hessian); the same.
    max_frames_per_step: longest RK4 step, in frames, where the motion is smooth and slow.
    max_refinements: how many times a frame is retried with more steps (as many as its
        energy-balance error asks for, at least one and at most twice as many as before).
    max_displacement: a point moving farther than this from its rest position is a blow-up.
    max_latent_excess: the latent farther than this (latent units) outside the prior ball, or
    max_coordinate: any |q_i| above this, is a blow-up.
    metric_floor: directions of q whose mass-metric eigenvalue at rest is below this share of
        the largest are removed: they barely move the object, so an initial velocity or a load
        throws the state along them at several latent units a frame into the prior barrier,
        where the steps shrink and energy is lost (``docs/experiments/part_aware_space.md``,
        "Undamped energy drift").
    local_model: integrate with the local quadratic model of the decoder (see ``local``),
        re-expanded as the state moves, when the kinematics hook can give Hessians.
    local_tolerance: allowed position error of that model, in object sizes.
    local_jacobian_tolerance: allowed error of its Jacobian, relative to the largest |dx/dq|.
    local_max_frames: re-expand it at least this often.
    local_reuse: a state that needs a new expansion takes a kept one lying within this many
        trusted radii instead (0: always a new decoder pass; see ``local``).
    local_energy_match: at a re-expansion of that model, scale the velocities so that the
        state keeps its energy (see ``integrator``); off, the model's energy jump is booked with
        the work and shows as drift in undamped runs.
    check_derivatives: before simulating, compare the decoder's J and D^2x at rest with finite
        differences and refuse to run if they disagree (see ``simulation.check_derivatives``).
    shape_keeping_hz: frequency of the shape-keeping springs between neighbouring mass points of
        one loose part (``shapekeep``): stretching and crumpling the surface cost energy, isometric
        motions do not (0: off).
    shape_keeping_neighbors: springs per point (its nearest neighbours).
    energy_floor: the energy-balance error of a step is measured relative to the largest energy
        seen so far, but never less than this fraction of the problem's energy scale (a start
        from rest has no energy to compare with).
    """

    ridge: float = 1e-3
    prior_mass: float = 0.99
    barrier_scale: float = 1.0
    barrier_damping: float = 0.5
    drag_gain: float = 12.0
    drag_arrival: float = 0.8
    drag_weak: float = 0.03
    drag_bias_cap: float = 1.0
    oscillation_step: float = 0.5
    damped_step: float = 1.5
    max_substeps: int = 512
    max_load_sizes_per_frame: float = 4.0
    max_frame_evaluations: int = 16384
    max_frame_expansions: int = 48
    max_frames_per_step: int = 4
    max_refinements: int = 6
    max_displacement: float = 1000.0
    max_latent_excess: float = 10.0
    max_coordinate: float = 1e6
    energy_floor: float = 1e-3
    metric_floor: float = 3e-2
    check_derivatives: bool = True
    local_model: bool = True
    local_tolerance: float = 1e-3
    local_jacobian_tolerance: float = 1e-2
    local_max_frames: int = 8
    local_reuse: float = 0.5
    local_energy_match: bool = True
    shape_keeping_hz: float = 0.0
    shape_keeping_neighbors: int = 6


DEFAULT_SETTINGS = DynamicsSettings()
