"""Simulation of one object: the kinematic space connected to the Euler-Lagrange dynamics.

The dynamics track the space's dynamics points (equal masses: they are area-uniform surface
samples) followed by one zero-mass row per anchor of the conditions (force, drag and velocity
points, a spread subset of the pinned vertices). Each output frame is decoded onto every vertex
of the mesh by dual-quaternion blending (:meth:`KinematicSpace.decode_vertices`).

The coordinates, from the decoder to the integrator (each name means this one thing here and
in :mod:`~neurok_core.softmodes`, :mod:`~neurok_core.pinclamp` and :mod:`~neurok_core.freebody`):

    z (k,)         the latent shape code the decoder reads;
    a (kq,)        the subspace coordinates, z = z_rest + W a (``KinematicSpace.latent``),
                   W (k, kq) the active subspace of the space the run moves in: the model's
                   own, or with pins or soft modes the one that
                   :func:`~neurok_core.softmodes.motion_subspace` searched among the latent
                   directions that leave the pins still or strain the object least (a view
                   of the space with its own W, not one more map);
    t (3,)         the free translation of the whole object (contact without pins,
                   :mod:`~neurok_core.freebody`), absent otherwise;
    q (kq [+ 3],)  the system's coordinates q = (a, t) (``MechanicalSystem.num_coords``): the
                   state the dynamics integrate and ``SimulationResult.q`` holds, q = 0 at rest;
    r (m,)         the dynamics' coordinates inside them, q = V r, V (kq [+ 3], m) the
                   directions that visibly move the object
                   (``neurok_core.dynamics.simulation.visible_basis``; V = I when all do).

The tracked points are x(q) = clamp(decode(z_rest + W a)) + t (S + A + C, 3) in metres: the pin
clamp (:mod:`~neurok_core.pinclamp`, built once per run by :func:`simulate`) maps positions, not
coordinates, so the pins add no layer.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch

from .dynamics import Anchor, MechanicalSystem, SimulationConditions, Trajectory
from .dynamics.barrier import PriorBarrier, prior_radius
from .dynamics.settings import DEFAULT_SETTINGS, DynamicsSettings
from .dynamics.system import LatentMap
from .errors import ConditionError
from .freebody import TranslatedKinematics, translation_map
from .geometry import farthest_point_subsample, unique_edges
from .model.jets import DecoderKinematics
from .pinclamp import ClampedKinematics, PinClamp, clamp_positions, pin_clamp
from .results import SimulationResult
from .rig import BoneRig
from .softmodes import motion_subspace
from .space import KinematicSpace
from .vertexclamp import VertexClamp

DECODE_BATCH = 8  # frames decoded per batched decoder pass
BARRIER_MARGIN = 0.1  # latent units past the barrier's radius for info's frames_on_barrier
STRAIN_EDGES = 30_000  # edges sampled for info's edge strain (a fixed, seeded sample)


def _noop(*_args) -> None:
    return None


def anchor_positions(space: KinematicSpace, anchors) -> np.ndarray:
    """Rest positions (A, 3) in the caller's frame of the anchors (vertices or points)."""
    out = np.empty((len(anchors), 3))
    for i, a in enumerate(anchors):
        out[i] = space.vertices[a.vertex] if a.vertex is not None else np.asarray(a.point)
    return out


def contact_vertices(vertices: np.ndarray, count: int, pool: int = 20_000) -> np.ndarray:
    """Indices of ``count`` well-spread vertices (all of them when there are no more; from a
    seeded random pool of ``pool`` on big meshes) by farthest-point sampling."""
    n = len(vertices)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    if n <= count:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(0)
    candidates = np.arange(n) if n <= pool else np.sort(rng.choice(n, pool, replace=False))
    chosen = farthest_point_subsample(vertices[candidates], count, rng)
    return np.sort(candidates[chosen]).astype(np.int64)


def build_system(
    space: KinematicSpace,
    conditions: SimulationConditions,
    *,
    autodiff: bool = False,
    free: bool = False,
    contact_points: int = 0,
    clamp: PinClamp | None = None,
):
    """The mechanical system of ``space`` under ``conditions`` and the row of each anchor; its
    coordinates are q = (a, t) of the module docstring.

    With pins, the kinematics are clamped around them (:mod:`~neurok_core.pinclamp`): pinned
    points are exactly still and the dynamics need no pin springs. ``clamp``: that clamp of
    ``conditions.pins`` (:func:`~neurok_core.pinclamp.pin_clamp`) when the caller has built it
    already; None: built here. ``free`` (no pins) adds a free translation t of the whole object
    as the last three coordinates (:mod:`~neurok_core.freebody`). ``contact_points`` > 0 adds
    that many well-spread mesh vertices as the rows that meet obstacles
    (``MechanicalSystem.contact_weights``), after the anchors' rows.

    The points' derivatives come from the decoder's Taylor-mode forward
    (:class:`~neurok_core.model.jets.DecoderKinematics`); ``autodiff`` leaves them to
    ``torch.func`` instead, which is exact too but far slower: the reference the tests check
    the Taylor-mode pass against.
    """
    anchors = conditions.anchors(space.vertices)
    touching = contact_vertices(space.vertices, contact_points)  # (C,) vertex indices
    where = np.concatenate(
        [anchor_positions(space, anchors).reshape(-1, 3), space.vertices[touching].reshape(-1, 3)]
    )
    extra, extra_inverse = space.tracked_points(where)
    points = torch.cat([space.dynamics_points, extra])  # (S + A + C, 3) normalised
    inverse = torch.cat([space.rest_inverse_dyn, extra_inverse])
    num_mass = space.dynamics_points.shape[0]
    num_extra = len(anchors) + len(touching)
    weights = torch.cat(
        [torch.ones(num_mass, dtype=torch.float64), torch.zeros(num_extra, dtype=torch.float64)]
    )
    contact_weights = None
    if len(touching):
        contact_weights = torch.zeros(len(weights), dtype=torch.float64)
        contact_weights[num_mass + len(anchors) :] = 1.0
    norm = space.normalization
    rows = {a: num_mass + i for i, a in enumerate(anchors)}
    if clamp is None:
        clamp = pin_clamp(space, conditions.pins)
    if clamp is not None:
        world = norm.invert(points.double().cpu().numpy())  # (S + A, 3)
        matrix = torch.as_tensor(clamp.weights(world), dtype=space.dtype, device=space.device)
        tracked_rows = [rows[Anchor(vertex=v)] for v in clamp.tracked]
        pin_rows = torch.tensor(tracked_rows, device=space.device)
        pin_rest = torch.as_tensor(clamp.pins, dtype=space.dtype, device=space.device)

    if free and clamp is not None:
        raise ValueError("a free translation needs an object without pins")
    kq = space.reduced_dims
    shift = translation_map(kq, space.dtype, space.device) if free else None

    def decode_points(q: torch.Tensor) -> torch.Tensor:
        """x(q) (S + A + C, 3) metres of q = (a, t) (kq [+ 3],)."""
        z = space.latent(q[:kq])  # (k,) of a = q[:kq]
        moved = space.deform_points(z[None], points, inverse)[0]  # (S + A, 3) normalised
        x = norm.invert(moved)
        if clamp is not None:
            x = clamp_positions(matrix, pin_rows, pin_rest, x)
        if shift is not None:
            x = x + shift @ q
        return x

    kinematics = None
    if not autodiff:
        kinematics = DecoderKinematics(space, points, inverse)
        if clamp is not None:
            kinematics = ClampedKinematics(kinematics, matrix, pin_rows, pin_rest)
        if shift is not None:
            select = torch.eye(kq, kq + 3, dtype=space.dtype, device=space.device)  # [I | 0]
            kinematics = TranslatedKinematics(kinematics, shift, select)
    basis = space.W
    if shift is not None:
        basis = torch.cat([basis, basis.new_zeros(basis.shape[0], 3)], 1)

    system = MechanicalSystem(
        decode_points=decode_points,
        point_weights=weights,
        num_coords=kq + (3 if free else 0),
        latent=LatentMap(rest=space.z_rest, basis=basis, prior_mean=space.mu_cond),
        dtype=space.dtype,
        device=space.device,
        kinematics=kinematics,
        point_groups=torch.cat(
            [
                torch.as_tensor(space.dynamics_islands, dtype=torch.int64),
                torch.full((num_extra,), -1, dtype=torch.int64),
            ]
        ),
        translation=shift,
        contact_weights=contact_weights,
    )
    return system, rows


def simulate(
    space: KinematicSpace,
    conditions: SimulationConditions,
    *,
    on_frame=None,
    on_progress=_noop,
    settings: DynamicsSettings = DEFAULT_SETTINGS,
    vertices: bool = True,
    rig: bool = False,
    time_limit: float | None = None,
) -> SimulationResult:
    """Simulate ``conditions`` from the rest shape; every frame decoded onto every vertex.

    on_frame(index, positions (N, 3) float32 or None, energy) is called for every frame in
    order, as frames are decoded (``DECODE_BATCH`` at a time, frame 0 at once); return False
    from it to stop (the result then holds the frames up to that one, ``info["cancelled"]``).
    vertices: decode every frame onto the vertices (``result.positions``); off (with ``rig``),
    positions are None and the cost does not grow with the vertex count.
    rig: also return the motion as a rig (``result.rig``, :class:`~neurok_core.rig.BoneRig`:
    the bones' rigid motions per frame and the vertex weights); a skinned space only. With
    pins, the rig has one more bone that never moves, holding the pinned vertices.
    settings: numerical settings of the dynamics (e.g. ``local.enabled=False`` to evaluate the
    decoder at every right-hand side instead of its local quadratic model).
    time_limit: seconds from this call after which the integration stops (checked before every
    RK4 step): the result then holds the frames decoded so far, with ``info["cancelled"]`` and
    ``info["timed_out"]``. None: no limit.
    Raises ConditionError for conditions that do not fit the mesh, SimulationError when the
    motion cannot be integrated.
    """
    from .dynamics import simulate as integrate

    _check_request(space, conditions, vertices=vertices, rig=rig)
    started = time.perf_counter()
    deadline = None if time_limit is None else time.monotonic() + time_limit
    # one clamp of the pins serves the subspace's search, the system and the vertices
    clamp = pin_clamp(space, conditions.pins)
    # with pins, only the latent directions that leave them (nearly) still; with soft modes,
    # only those that strain the object least
    space, pin_report, soft_report = motion_subspace(
        space,
        conditions.pins,
        soft=settings.soft_modes,
        tolerance=settings.strain_tolerance,
        slack=settings.strain_slack,
        clamp=clamp,
    )
    free_body = settings.contact.free_translation and conditions.contact and not conditions.pins
    touching = settings.contact.points if conditions.contact else 0
    system, rows = build_system(
        space, conditions, free=free_body, contact_points=touching, clamp=clamp
    )
    vertex_clamp = VertexClamp(space, conditions, clamp)
    stream = _FrameStream(
        space,
        vertex_clamp,
        count=conditions.frames,
        free_body=free_body,
        vertices=vertices,
        rig=rig,
        on_frame=on_frame,
        on_progress=on_progress,
    )
    # Pins are held by the clamped kinematics (the dynamics refuse conditions with pins).
    unpinned = dataclasses.replace(conditions, pins=()) if conditions.pins else conditions
    # (the run ends at the last frame, which flushes, or when a flush returned False)
    traj = integrate(
        system,
        unpinned,
        rows,
        on_frame=stream.on_state,
        on_work=stream.on_work,
        settings=settings,
        deadline=deadline,
    )
    t = len(stream.frames)
    positions = np.stack(stream.frames) if vertices else None
    bone_rig = _rig(space, conditions, stream.poses[:t], vertex_clamp) if rig else None
    strain = _edge_strain(space.vertices, space.faces, stream.frames if vertices else [])  # (t,)
    info = _run_info(
        space, conditions, settings, system, traj, t, strain, pin_report, soft_report, started
    )
    if bone_rig is not None:
        info["rig_bones"] = bone_rig.num_bones
        # how far the rig's playback is from the engine's vertices (all, or a sample)
        if positions is not None:
            checked = _rig_sample(len(space.vertices))
            info["rig_error"] = _rig_error(bone_rig, space, checked, positions[:, checked])
        else:
            sampled = np.stack(stream.sampled[:t])
            info["rig_error"] = _rig_error(bone_rig, space, stream.checked, sampled)
    return SimulationResult(
        positions=positions,
        rig=bone_rig,
        times=traj.times[:t].numpy(),
        energy=traj.energy[:t].numpy(),
        conditions=conditions.to_dict(),
        q=traj.q[:t].numpy(),
        info=info,
    )


def _check_request(
    space: KinematicSpace, conditions: SimulationConditions, *, vertices: bool, rig: bool
) -> None:
    """Raise ConditionError for conditions that do not fit the mesh or an output the space
    cannot give."""
    if not isinstance(conditions, SimulationConditions):
        raise ConditionError("conditions must be a SimulationConditions")
    conditions.validate(len(space.vertices))
    if rig and not space.skinned:
        raise ConditionError(
            "a rig needs a model with bones (deformation 'skinned'); this model moves every"
            " point on its own: bake shape keys or a point cache instead"
        )
    if not (vertices or rig):
        raise ConditionError("ask for the vertices, the rig or both")


class _FrameStream:
    """The integrated states q handed on as frames, in order (:func:`simulate`'s on_frame):
    frame 0 is the input itself, the others are decoded ``DECODE_BATCH`` at a time (a batched
    decoder pass costs far less per frame than one pass per frame) onto the vertices, the rig's
    poses and, for a rig without the vertices, the sample of vertices it is checked against
    (``checked``), all with the pin clamp (:class:`VertexClamp`) and the free translation t.
    :meth:`on_state` and :meth:`on_work` are the integrator's hooks."""

    def __init__(
        self,
        space: KinematicSpace,
        clamp: VertexClamp,
        *,
        count: int,
        free_body: bool,
        vertices: bool,
        rig: bool,
        on_frame,
        on_progress,
    ) -> None:
        self.space, self.clamp, self.count = space, clamp, count
        self.free_body, self.vertices, self.rig = free_body, vertices, rig
        self.on_frame, self.on_progress = on_frame, on_progress
        self.frames: list[np.ndarray | None] = []  # (N, 3) float32 per frame, or None
        self.poses: list[tuple[np.ndarray, np.ndarray]] = []  # (rotations, translations)
        # without the vertices, a rig is checked against a seeded sample of them (rig_error)
        self.checked = _rig_sample(len(space.vertices)) if rig and not vertices else None
        self.sampled: list[np.ndarray] = []  # (R, 3) per frame
        self.pending: list[tuple[int, torch.Tensor, float]] = []  # integrated, not yet decoded
        self.stopped = False
        self.reported = 0.0

    def progress(self, fraction: float) -> None:
        """on_progress("simulate", fraction), never going back (frames are decoded in batches
        behind the integration's own progress)."""
        if fraction > self.reported:
            self.reported = fraction
            self.on_progress("simulate", fraction)

    def on_work(self, frame: int, covered: float) -> None:
        """Progress within slow frames: the step from ``frame`` has covered ``covered`` frames
        (frame 0, the rest, counts as done from the start)."""
        self.progress(min(frame + 1 + covered, self.count) / self.count)

    def on_state(self, index: int, q: torch.Tensor, energy: float):
        """The integrator's on_frame: frame ``index`` has the state q (kq [+ 3],). False once
        the caller asked to stop."""
        if index == 0:  # the start is exactly the input
            self._rest_frame(energy)
            return False if self.stopped else None
        self.pending.append((index, q, energy))
        if len(self.pending) >= DECODE_BATCH or index == self.count - 1:
            return None if self.flush() else False
        return None

    def _rest_frame(self, energy: float) -> None:
        space = self.space
        verts = space.vertices.astype(np.float32) if self.vertices else None
        self.frames.append(verts)
        if self.rig:
            nb = space.bone_heads.shape[0]
            self.poses.append((np.tile([1.0, 0.0, 0.0, 0.0], (nb, 1)), np.zeros((nb, 3))))
        if self.checked is not None:
            self.sampled.append(space.vertices[self.checked])
        self.progress(1 / self.count)
        self.stopped = self.on_frame is not None and self.on_frame(0, verts, energy) is False

    def flush(self) -> bool:
        """Decode the pending frames in one batch and hand them on in order; False once the
        caller asked to stop (the frames after that one are dropped)."""
        with torch.no_grad():
            batch = self._decode(torch.stack([q for _, q, _ in self.pending]))
        for (index, _, energy), verts in zip(self.pending, batch, strict=True):
            self.frames.append(verts)
            self.progress((index + 1) / self.count)
            if self.on_frame is not None and self.on_frame(index, verts, energy) is False:
                self.stopped = True
                break
        self.pending.clear()
        return not self.stopped

    def _decode(self, states: torch.Tensor):
        """The vertices (B, N, 3) float32 of the states q (B, kq [+ 3]) (None each without
        the vertices); the rig's poses and its checked vertices are kept on the way."""
        space, clamp, kq = self.space, self.clamp, self.space.reduced_dims
        states = states.to(device=space.device, dtype=space.dtype)
        z = space.latent(states[:, :kq])  # (B, k) of a = q[:kq]
        # t, the free translation of the whole object (zero without one), (B, 1, 3)
        shift = states[:, None, kq:] if self.free_body else states.new_zeros(len(states), 1, 3)
        batch = [None] * len(states)
        # a skinned space: one pass of the bone network serves the vertices, the rig's
        # poses and its sampled vertices (the bones corrected for the pins)
        bones = clamp.bones(z) if space.skinned else None  # (B, nb, 8)
        if self.vertices:
            verts = clamp.decode(z) if bones is None else clamp.skin(bones)
            batch = (verts + shift).float().cpu().numpy()  # (B, N, 3)
        if self.rig:
            rotations, translations = space.bone_transforms(bones)
            translations = translations + shift.double().cpu().numpy()
            self.poses.extend(zip(rotations, translations, strict=True))
        if self.checked is not None:
            moved = clamp.skin_rows(bones, self.checked) + shift
            self.sampled.extend(moved.cpu().numpy())
        return batch


def _run_info(
    space: KinematicSpace,
    conditions: SimulationConditions,
    settings: DynamicsSettings,
    system: MechanicalSystem,
    traj: Trajectory,
    t: int,
    strain: np.ndarray,
    pin_report: dict,
    soft_report: dict,
    started: float,
) -> dict:
    """The result's info of a run whose first ``t`` frames were kept (``strain`` (t,) their
    edge strain); ``started``: its ``time.perf_counter()`` at the start."""
    # the dynamics' own barrier (float64, the system's latent map) measures each frame's state
    barrier = PriorBarrier.build(system.latent, settings.barrier.prior_mass, 1.0)
    distances = _latent_distances(barrier, traj.q[:t])  # (t,)
    return {
        "reduced_dims": space.reduced_dims,
        "pinned_subspace": pin_report,
        "soft_modes": soft_report,
        "pins": "clamped" if conditions.pins else "none",
        "latent_dims": int(space.z_rest.shape[0]),
        "spectrum": [float(x) for x in space.spectrum[: max(8, space.reduced_dims)]],
        "rest_residual": float(space.rest_residual),
        # |z_rest - mu| against the radius of the prior's ``prior_mass`` ball: at or above it,
        # the prior barrier acts from the rest shape on (``dynamics.barrier``)
        "rest_latent_distance": float((space.z_rest - space.mu_cond).norm()),
        # the farthest the state went from the prior's mean (beyond prior_radius: outside)
        "max_latent_distance": float(distances.max()),
        "prior_radius": prior_radius(int(space.z_rest.shape[0]), settings.barrier.prior_mass),
        # frames whose state the barrier pushes back: more than BARRIER_MARGIN beyond its radius
        # (the larger of prior_radius and the rest's distance), the motion pressing against
        # the limits of the learned shapes
        "frames_on_barrier": int((distances > barrier.radius + BARRIER_MARGIN).sum()),
        "tracked_points": int(system.num_points),
        "substeps": int(traj.substeps.sum()),
        "decoder_evaluations": int(traj.evaluations),
        # With the local quadratic model (dynamics.local) the right-hand sides come from it;
        # the decoder runs once per expansion (x, J and Hessian in one pass).
        "expansions": int(traj.expansions),
        # how often a kept expansion near the state served instead of a new one
        "expansion_reuses": int(traj.reuses),
        "model_error": max(traj.model_errors, default=0.0),
        # The model's energy changes a little at each re-expansion (its own error): the sum of
        # those jumps (J), booked apart from the integration's energy balance below.
        "model_energy_jumps": float(traj.model_energy_jumps),
        "drag_errors": [float(e) for e in traj.drag_errors],
        # the mesh's largest mean edge strain |l / l0 - 1| over the frames (on a sample of
        # STRAIN_EDGES edges) and its frame: stretching or crumpling, which together with
        # frames_on_barrier tells a doubtful result (Simulate's warning)
        "edge_strain_max": float(strain.max()) if len(strain) else 0.0,
        "edge_strain_frame": int(strain.argmax()) if len(strain) else 0,
        # Energy minus the work of the non-conservative forces is constant for the exact motion:
        # its largest change (J) is the integration error, beside the energy's own range.
        "energy_balance_error": float(
            (traj.energy[:t] - traj.work[:t] - traj.energy[0]).abs().max()
        ),
        "energy_range": float(traj.energy[:t].abs().max()),
        # what the contact's damping and friction removed (J, <= 0; part of the work above)
        "contact_work": float(traj.contact_work),
        "cancelled": bool(traj.cancelled),
        "timed_out": bool(traj.timed_out),
        "seconds": round(time.perf_counter() - started, 3),
    }


def _rig(
    space: KinematicSpace, conditions: SimulationConditions, poses: list, clamp: VertexClamp
) -> BoneRig:
    """The result's rig: the space's bones with their poses per frame (corrected for the pins,
    :class:`VertexClamp`) and its vertex weights; with pins, one more bone that never moves
    holds the pinned vertices (weight 1) and a share of those near them, so the rig plays back
    exactly what the engine decodes."""
    heads = space.bone_heads
    rotations = np.stack([r for r, _ in poses])  # (T, nb, 4)
    translations = np.stack([t for _, t in poses])  # (T, nb, 3)
    bones = space.vertex_bones.cpu().numpy().astype(np.int32)  # (N, K)
    weights = space.vertex_bone_weights.float().cpu().numpy()
    if conditions.pins:
        pinned = np.asarray(conditions.pins)
        heads = np.concatenate([heads, space.vertices[pinned].mean(0, keepdims=True)])
        t = len(rotations)
        rotations = np.concatenate([rotations, np.tile([1.0, 0.0, 0.0, 0.0], (t, 1, 1))], 1)
        translations = np.concatenate([translations, np.zeros((t, 1, 3))], 1)
        bones = clamp.vertex_bones.cpu().numpy().astype(np.int32)  # (N, K + 1)
        weights = clamp.vertex_weights.float().cpu().numpy()
    return BoneRig(heads, rotations, translations, bones, weights)


RIG_ERROR_VERTICES = 2_000  # vertices (a seeded sample) the rig's playback is checked on


def _rig_sample(count: int, seed: int = 0) -> np.ndarray:
    """Sorted rows of at most RIG_ERROR_VERTICES of ``count`` vertices (seeded)."""
    if count <= RIG_ERROR_VERTICES:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(count, RIG_ERROR_VERTICES, replace=False))


def _rig_error(rig: BoneRig, space: KinematicSpace, rows: np.ndarray, truth: np.ndarray) -> float:
    """Largest distance over the frames between the rig's playback of the vertices ``rows``
    and their decoded positions ``truth`` (T, R, 3), in object sizes."""
    sub = BoneRig(
        rig.heads, rig.rotations, rig.translations, rig.vertex_bones[rows], rig.vertex_weights[rows]
    )
    rest = space.vertices[rows]
    worst = max(
        float(np.linalg.norm(sub.skin(rest, t) - truth[t], axis=1).max()) for t in range(len(truth))
    )
    return worst / space.object_size


def _edge_strain(vertices: np.ndarray, faces: np.ndarray, frames: list) -> np.ndarray:
    """Mean edge strain (T,) of ``frames`` (each (N, 3)) against ``vertices`` (N, 3), over the
    unique edges of at most STRAIN_EDGES / 3 faces (a seeded sample: the cost does not grow
    with the mesh). Edges of (near) zero rest length are skipped."""
    faces = np.asarray(faces)
    if 3 * len(faces) > STRAIN_EDGES:
        pick = np.random.default_rng(0).choice(len(faces), STRAIN_EDGES // 3, replace=False)
        faces = faces[pick]
    edges = unique_edges(faces)  # (E, 2)
    rest = np.asarray(vertices, dtype=np.float64)
    l0 = np.linalg.norm(rest[edges[:, 1]] - rest[edges[:, 0]], axis=1)  # (E,)
    keep = l0 > 1e-9 * max(float(np.ptp(rest, axis=0).max()), 1e-12)
    edges, l0 = edges[keep], l0[keep]
    if not len(edges):
        return np.zeros(len(frames))
    out = np.empty(len(frames))
    for i, x in enumerate(frames):
        x = np.asarray(x, dtype=np.float64)
        lengths = np.linalg.norm(x[edges[:, 1]] - x[edges[:, 0]], axis=1)  # (E,)
        out[i] = float(np.abs(lengths / l0 - 1.0).mean())
    return out


def _latent_distances(barrier: PriorBarrier, q: torch.Tensor) -> np.ndarray:
    """|z(q_t) - mu| (T,) of the states q (T, kq [+ 3]) (the basis's columns of a translation
    t are zero), float64 as the dynamics' barrier has it."""
    z = barrier.rest + q.to(barrier.basis) @ barrier.basis.T  # (T, k)
    return (z - barrier.mean).norm(dim=-1).numpy()
