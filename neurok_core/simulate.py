"""Simulation of one object: the kinematic space connected to the Euler-Lagrange dynamics.

The dynamics track the space's dynamics points (equal masses: they are area-uniform surface
samples) followed by one zero-mass row per anchor of the conditions (force, drag and velocity
points, a spread subset of the pinned vertices). Each output frame is decoded onto every vertex
of the mesh by dual-quaternion blending (:meth:`KinematicSpace.decode_vertices`).
"""

from __future__ import annotations

import os
import time

import numpy as np
import torch

from .dynamics import MechanicalSystem, SimulationConditions
from .dynamics.system import LatentMap
from .errors import ConditionError
from .model.jets import DecoderKinematics
from .pinning import pinned_subspace
from .results import SimulationResult
from .space import KinematicSpace


def _noop(*_args) -> None:
    return None


def anchor_positions(space: KinematicSpace, anchors) -> np.ndarray:
    """Rest positions (A, 3) in the caller's frame of the anchors (vertices or points)."""
    out = np.empty((len(anchors), 3))
    for i, a in enumerate(anchors):
        out[i] = space.vertices[a.vertex] if a.vertex is not None else np.asarray(a.point)
    return out


def build_system(
    space: KinematicSpace, conditions: SimulationConditions, *, autodiff: bool | None = None
):
    """The mechanical system of ``space`` under ``conditions`` and the row of each anchor.

    The points' derivatives come from the decoder's Taylor-mode forward
    (:class:`~neurok_core.model.jets.DecoderKinematics`); ``autodiff`` (default: the
    environment variable ``NEUROK_AUTODIFF_KINEMATICS=1``) leaves them to ``torch.func``
    instead, which is exact too but far slower (kept as the reference).
    """
    if autodiff is None:
        autodiff = os.environ.get("NEUROK_AUTODIFF_KINEMATICS", "") == "1"
    anchors = conditions.anchors(space.vertices)
    extra, extra_inverse = space.tracked_points(anchor_positions(space, anchors).reshape(-1, 3))
    points = torch.cat([space.dynamics_points, extra])  # (S + A, 3) normalised
    inverse = torch.cat([space.rest_inverse_dyn, extra_inverse])
    num_mass = space.dynamics_points.shape[0]
    weights = torch.cat(
        [torch.ones(num_mass, dtype=torch.float64), torch.zeros(len(anchors), dtype=torch.float64)]
    )
    norm = space.normalization

    def decode_points(q: torch.Tensor) -> torch.Tensor:
        z = space.latent(q)  # (k,)
        moved = space.deform_points(z[None], points, inverse)[0]  # (S + A, 3) normalised
        return norm.invert(moved)

    system = MechanicalSystem(
        decode_points=decode_points,
        point_weights=weights,
        num_coords=space.reduced_dims,
        latent=LatentMap(rest=space.z_rest, basis=space.W, prior_mean=space.mu_cond),
        dtype=space.dtype,
        device=space.device,
        kinematics=None if autodiff else DecoderKinematics(space, points, inverse),
    )
    rows = {a: num_mass + i for i, a in enumerate(anchors)}
    return system, rows


def simulate(
    space: KinematicSpace,
    conditions: SimulationConditions,
    *,
    on_frame=None,
    on_progress=_noop,
    pinned_directions: bool = True,
) -> SimulationResult:
    """Simulate ``conditions`` from the rest shape; every frame decoded onto every vertex.

    on_frame(index, positions (N, 3) float32, energy) is called as each frame is ready; return
    False from it to stop (the result then holds the frames so far, ``info["cancelled"]``).
    pinned_directions: with pins, move only along the latent directions that leave the pinned
    vertices (nearly) still (:func:`~neurok_core.pinning.pinned_subspace`) instead of the
    space's own active subspace.
    Raises ConditionError for conditions that do not fit the mesh, SimulationError when the
    motion cannot be integrated.
    """
    from .dynamics import simulate as integrate

    if not isinstance(conditions, SimulationConditions):
        raise ConditionError("conditions must be a SimulationConditions")
    conditions.validate(len(space.vertices))
    started = time.perf_counter()
    pin_report: dict = {}
    if conditions.pins and pinned_directions:
        space, pin_report = pinned_subspace(space, conditions.pins)
    system, rows = build_system(space, conditions)
    frames: list[np.ndarray] = []
    count = conditions.frames

    def frame_done(index: int, q: torch.Tensor, energy: float):
        if index == 0:
            verts = space.vertices.astype(np.float32)  # the start is exactly the input
        else:
            with torch.no_grad():
                z = space.latent(q.to(device=space.device, dtype=space.dtype))
                verts = space.decode_vertices(z[None])[0].float().cpu().numpy()  # (N, 3)
        frames.append(verts)
        on_progress("simulate", (index + 1) / count)
        if on_frame is not None:
            return on_frame(index, verts, energy)
        return None

    traj = integrate(system, conditions, rows, on_frame=frame_done)
    t = len(frames)
    info = {
        "reduced_dims": space.reduced_dims,
        "pinned_subspace": pin_report,
        "latent_dims": int(space.z_rest.shape[0]),
        "spectrum": [float(x) for x in space.spectrum[: max(8, space.reduced_dims)]],
        "rest_residual": float(space.rest_residual),
        "tracked_points": int(system.num_points),
        "substeps": int(traj.substeps.sum()),
        "decoder_evaluations": int(traj.evaluations),
        "drag_errors": [float(e) for e in traj.drag_errors],
        # Energy minus the work of the non-conservative forces is constant for the exact motion:
        # its largest change (J) is the integration error, beside the energy's own range.
        "energy_balance_error": float((traj.energy - traj.work - traj.energy[0]).abs().max()),
        "energy_range": float(traj.energy.abs().max()),
        "cancelled": bool(traj.cancelled),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return SimulationResult(
        positions=np.stack(frames),
        times=traj.times[:t].numpy(),
        energy=traj.energy[:t].numpy(),
        conditions=conditions.to_dict(),
        q=traj.q[:t].numpy(),
        info=info,
    )
