"""Simulation of a cloth (``neurok_core.sheets.is_cloth``: every loose part an open, nearly flat
sheet) at its own resolution (design section 14): conditions -> the sheet's nodes and energies
(:mod:`.cloth`) -> backward-Euler steps -> the vertices of every frame, and a rig of a bone per
node for a rig bake.

The conditions act as they do on the rig space's bones: pins hold their vertices exactly at
rest (their simulation nodes are fixed), forces and winds act on the nodes under their anchor,
drag handles pull their anchor along a minimum-jerk path by a spring, initial velocities start
the nodes near their anchor (or every node), and the ground and colliders stop the nodes.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.spatial import cKDTree

from ..dynamics.conditions import SimulationConditions
from ..dynamics.moving import MovingMesh
from ..dynamics.obstacles import MeshDistance, Obstacles
from ..geometry import cross3, face_cross, unique_edges
from ..metrics import edge_strain
from ..results import SimulationResult
from ..rig import BoneRig, quat_to_matrix, quats_from_matrices
from .cloth import (
    CHUNK,
    ClothEnergy,
    ClothMaterial,
    ClothStep,
    SimMesh,
    bending_matrix,
    cloth_material,
    imperfection,
    node_masses,
    sim_mesh,
)
from .cloth_contact import ClothContact, face_samples, rim_samples
from .cloth_projective import ProjectiveClothStep
from .plausibility import _Collider, sample_faces
from .rates import TWO_PI, contact_omega, drag_omega, drag_progress, material_damping
from .space import RigSettings

REFERENCE_G = 9.81  # m/s^2: the weight a cloth's bending length is measured under
KICK_RADIUS = 0.25  # object sizes: an initial velocity at a point starts the nodes this near it
TRAVEL = 0.02  # object sizes a node may travel in a step near obstacles
THICKNESS = 0.25  # the collision thickness, in edges of the simulation mesh (at least)
SAMPLE_SPACING = 0.75  # edges apart, about: the contact's points on the triangles
MAX_SUBSTEPS = 8  # steps a frame, at most
FIGURE_FACES = 2000  # faces whose vertices the figures (strain, depth) follow in every frame
CLOTH_STEPS = {"projective": ProjectiveClothStep, "quasi-newton": ClothStep}
MAX_RESTORE = 2.0  # an undamped step's velocity is scaled by at most this to keep its energy
LAYERS = 0.4  # the thickness between a cloth's layers, in edges of the simulation mesh
LAYERS_APART = 0.5  # edges: nodes and elements this near at rest never meet as layers
LAYERS_SKIN = 0.4  # edges a node may move before the layers' pairs are found again
LAYERS_HOLD = 6.4  # b'' / kappa at half the thickness: there as stiff as the contact on a node
PIN_WEIGHT = 1e-9  # a pin's barycentric weight on a corner below this does not hold it
ATTACH = 0.01  # object sizes: a pin this near a moving body at rest moves with it


class _Run:
    """What a cloth run builds once: nodes, masses, energies, contact, the step, the loads."""

    def __init__(
        self,
        vertices,
        faces,
        conditions,
        settings: RigSettings,
        material,
        welding,
        kept=None,
        movers=(),
    ):
        self.vertices, self.faces, self.cond = vertices, faces, conditions
        self.movers = list(movers)
        self.pins = pins = np.unique(np.asarray(conditions.pins, dtype=np.int64))

        def build() -> SimMesh:
            return sim_mesh(vertices, faces, welding=welding, anchors=pins)

        if kept is None:
            self.mesh = build()
        else:  # a serving worker's next run of the mesh (a preview after a change)
            self.mesh = kept.get(f"cloth mesh {hash(pins.tobytes())}", build)
        nodes, f = self.mesh.nodes, self.mesh.faces
        self.size = float(np.ptp(vertices, 0).max()) or 1.0
        area = float(np.linalg.norm(face_cross(nodes, f), axis=1).sum()) / 2.0
        self.m = node_masses(nodes, f, conditions.mass)
        edges = unique_edges(f)
        lengths = np.linalg.norm(nodes[edges[:, 1]] - nodes[edges[:, 0]], axis=1)
        keep = lengths > 0
        edges, lengths = edges[keep], lengths[keep]
        # a small object's loads act faster: every stiffness scaled as the rig space's is
        contact = contact_omega(self.size, conditions, settings)
        stiffen = contact / (TWO_PI * settings.contact_hz)
        omega = TWO_PI * material.stretch_hz * stiffen
        k = conditions.mass * omega**2 * self.size**2 / max(float((lengths**2).sum()), 1e-300)
        rigidity = conditions.mass / max(area, 1e-300) * REFERENCE_G * material.bending_length**3
        energy = ClothEnergy(
            edges,
            lengths,
            np.full(len(edges), k),
            material.compression,
            bending_matrix(nodes, f) * rigidity,
        )
        self.free = np.ones(len(nodes), dtype=bool)
        self.free[self._pin_nodes(pins)] = False
        # a collision thickness as cloth solvers keep one (Blender's cloth: 15 mm): at a
        # quarter of an edge off an obstacle, no edge between two nodes cuts a pole whose
        # radius is 0.4 edges or more (a flag wraps round its pole)
        median = float(np.median(lengths)) if len(lengths) else 0.0
        margin = max(settings.contact_margin * self.size, THICKNESS * median)
        obstacles = _obstacles(
            conditions, self.size, 2.0 * margin + TRAVEL * self.size, self.movers
        )
        self.contact = None
        if obstacles:
            # a thin collider (a pole narrower than an edge) slips between a triangle's
            # corners and past the rim the coarser mesh cuts off: the triangles' points (3/4
            # of an edge apart) and the rim meet the thin colliders (a broad face meets the
            # corners: the nodes alone meet the others, as fast as before)
            longest = float(lengths.max())
            thin = [m for m in obstacles.meshes if _half_thickness(m.vertices) < longest]
            tri, bary = np.zeros(0, np.int64), np.zeros((0, 3))
            if thin:
                tri, bary = face_samples(nodes, f, SAMPLE_SPACING * median)
                if not self.mesh.identity:
                    rim_tri, rim_bary = rim_samples(self.mesh, vertices)
                    tri = np.concatenate([tri, rim_tri])
                    bary = np.concatenate([bary, rim_bary])
            # each point a third as stiff as a node (whose share is about two triangles'
            # mass; half that let the flag let go at frame 19 pass 5.5 mm into its pole)
            areas = np.linalg.norm(face_cross(nodes, f), axis=1) / 2.0
            tri_mass = conditions.mass * areas / max(float(areas.sum()), 1e-300)
            self.contact = ClothContact(
                obstacles,
                self.m * contact**2,
                margin,
                conditions.friction,
                settings.friction_slip * self.size / (conditions.fps * 2),
                f,
                (tri, bary, tri_mass[tri] / 1.5 * contact**2),
                thin=Obstacles(None, thin) if thin else None,
            )
            self.contact.set_ahead(TRAVEL * self.size)
        # pins on a moving body move with it (a flag's hoist on a pole that is carried):
        # [(the body, its pins (k,), their nodes (m,))]
        self.attached = []
        if self.contact is not None and self.contact.obstacles.moving and len(pins):
            self.attached = self._attach(pins, max(2.0 * margin, ATTACH * self.size))
        layers = None
        self.self_contact = bool(settings.cloth_self_contact or conditions.self_collision)
        if self.self_contact and len(f) > 1:
            from .cloth_self import SelfContact  # here: its compiled loops load numba (~1 s)

            # the barrier at half its thickness as stiff as the contact on a node
            layers = SelfContact(
                nodes,
                f,
                dhat=LAYERS * median,
                kappa=float(self.m.mean()) * contact**2 / LAYERS_HOLD,
                exclude=LAYERS_APART * median,
                skin=LAYERS_SKIN * median,
                friction=conditions.friction,
                slip=settings.friction_slip * self.size / (conditions.fps * 2),
            )
        self.damping = conditions.damping + material.air_damping  # 1/s
        zeta = material_damping(material.stretch_damping, self.damping)
        kind = CLOTH_STEPS.get(settings.cloth_step)
        if kind is None:
            raise ValueError(
                f"cloth_step must be one of {sorted(CLOTH_STEPS)}, not {settings.cloth_step!r}"
            )
        self.step = kind(
            self.m,
            self.free,
            energy,
            self.contact,
            damping=self.damping,
            stretch_zeta=zeta,
            omega=omega,
            size=self.size,
            bending_damping=material_damping(material.bending_damping, self.damping),
            self_contact=layers,
        )
        self.gravity = np.asarray(conditions.gravity, dtype=np.float64)
        self.drag_k = conditions.mass * drag_omega(self.size, conditions) ** 2
        self.drag_from: dict[int, np.ndarray] = {}
        # where each force, drag and point velocity acts: its vertex (a point: the nearest)
        anchored = [
            c
            for c in (*conditions.forces, *conditions.drags, *conditions.velocities)
            if c.vertex is not None or c.point is not None
        ]
        # the vertices' k-d tree only where a point needs it (a million vertices: 0.4 s)
        tree = cKDTree(vertices) if any(c.vertex is None for c in anchored) else None
        self.anchor = {
            id(c): int(c.vertex) if c.vertex is not None else int(tree.query(c.point)[1])
            for c in anchored
        }

    def _pin_nodes(self, pins: np.ndarray) -> np.ndarray:
        """The nodes (sorted) that hold the vertices ``pins``: a pinned vertex's node, or the
        corners of the triangle it is embedded in that carry it: every corner where it has an
        offset (the offset turns with the triangle: one free corner would move it), else
        those of a barycentric weight (a pin on a node or an edge of the coarser mesh leaves
        the other corners free)."""
        mesh = self.mesh
        own = mesh.node[pins]
        held = pins[own < 0]
        carry = (np.abs(mesh.bary[held]) > PIN_WEIGHT) | mesh.offset[held][:, None]  # (k, 3)
        corners = mesh.faces[mesh.tri[held]][carry]
        return np.unique(np.concatenate([own[own >= 0], corners]))

    def _attach(self, pins: np.ndarray, reach: float) -> list:
        """The pins within ``reach`` (m) of a moving body at rest, each with the nearest such
        body, and the nodes that hold them (a node held by two bodies goes with the first)."""
        bodies = self.contact.obstacles.moving
        at = self.vertices[pins]  # (P, 3)
        gaps = np.full((len(bodies), len(pins)), np.inf)
        for i, body in enumerate(bodies):
            near = np.flatnonzero(body.near(at, reach))
            if len(near):
                gaps[i, near] = np.abs(body.exact(at[near]))
        owner = np.where(gaps.min(0) <= reach, gaps.argmin(0), -1)  # (P,)
        taken = np.zeros(len(self.mesh.nodes), dtype=bool)
        out = []
        for i, body in enumerate(bodies):
            mine = pins[owner == i]
            if not len(mine):
                continue
            nodes = self._pin_nodes(mine)
            nodes = nodes[~taken[nodes]]
            taken[nodes] = True
            out.append((body, mine, nodes))
        return out

    def carry(self, x: np.ndarray, t: float) -> None:
        """Put the nodes of the pins on moving bodies (in place, ``x`` (n, 3)) where their bodies
        take them at time ``t`` (s)."""
        for body, _, nodes in self.attached:
            x[nodes] = body.track.carry(self.mesh.nodes[nodes], t)

    def carried_pins(self, positions: np.ndarray, watch: np.ndarray) -> np.ndarray:
        """(M,) bool, True at the pins on a moving body among the vertices ``watch`` (M,);
        their ``positions`` (T, M, 3) put where the body takes them in each frame (in
        place)."""
        index = np.full(len(self.vertices), -1)
        index[watch] = np.arange(len(watch))
        out = np.zeros(len(watch), dtype=bool)
        for body, pins, _ in self.attached:
            pins = pins[index[pins] >= 0]
            rows = index[pins]
            out[rows] = True
            for t in range(len(positions)):
                positions[t, rows] = body.track.carry(self.vertices[pins], t / self.cond.fps)
        return out

    def travel(self, x: np.ndarray, v: np.ndarray, speed: float = 0.0) -> float:
        """How many steps a frame from (x, v) (n, 3) needs near obstacles: each node may travel
        in a step TRAVEL sizes near one or its distance from them (a lower bound) farther off,
        and one heading into an obstacle at most half its gap to the collision thickness;
        ``speed`` (m/s): how fast the moving obstacles' points may come at a node."""
        margin, fps = self.contact.margin, self.cond.fps
        room = np.maximum(self.contact.obstacles.farther_than(x) - margin, TRAVEL * self.size)
        need = float(((np.linalg.norm(v, axis=1) + speed) / room).max())
        # the points on the triangles too (a triangle's middle may close on a thin pole
        # faster than its corners), each against the obstacles it meets
        every, x = self.contact.every(x)
        v = self.contact.every(v)[1]
        rows, dist, normal = self.contact.meet(every, x, margin + TRAVEL * self.size)
        if len(rows):
            unit = normal / np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
            closing = np.maximum(-(v[rows] * unit).sum(1), 0.0) + speed  # (R,) m/s, at most
            gap = np.maximum(dist - margin, 0.25 * margin)
            need = max(need, float((closing / (0.5 * gap)).max()))
        return need / fps

    def forces(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """(forces (n, 3) N, the uniform acceleration (3,) m/s^2 in them) at time ``t``: the
        forces on the nodes under their anchors, gravity and the winds (a wind's force spread
        by mass)."""
        fps, last = self.cond.fps, (self.cond.frames - 1) / self.cond.fps
        out = np.zeros_like(self.mesh.nodes)
        accel = self.gravity.copy()
        for c in self.cond.forces:
            end = last if c.end_frame is None else c.end_frame / fps
            if c.start_frame / fps <= t <= end:
                nodes, w = self.mesh.weights(self.anchor[id(c)])
                out[nodes] += w[:, None] * np.asarray(c.vector)[None]
        for wind in self.cond.winds:
            end = last if wind.end_frame is None else wind.end_frame / fps
            if wind.start_frame / fps <= t <= end:
                accel += np.asarray(wind.vector) / self.cond.mass
        return out + self.m[:, None] * accel[None], accel

    def drags(self, t: float, x: np.ndarray) -> list:
        """[(nodes, weights, k, target)] of the drag handles holding at time ``t``."""
        out = []
        fps = self.cond.fps
        for i, d in enumerate(self.cond.drags):
            start, end = d.start_frame / fps, d.frame / fps
            if not start <= t <= end:
                continue
            nodes, w = self.mesh.weights(self.anchor[id(d)])
            if i not in self.drag_from:
                self.drag_from[i] = w @ x[nodes]
            origin = self.drag_from[i]
            target = origin + drag_progress(t, start, end) * (np.asarray(d.target) - origin)
            out.append((nodes, w, self.drag_k, target))
        return out

    def initial_velocity(self) -> np.ndarray:
        v = np.zeros_like(self.mesh.nodes)
        tree = None
        for c in self.cond.velocities:
            if c.anchor is None:
                v += np.asarray(c.velocity)[None]
                continue
            tree = tree or cKDTree(self.mesh.nodes)
            centre = self.vertices[self.anchor[id(c)]]
            radius = KICK_RADIUS * self.size
            near = tree.query_ball_point(centre, radius)
            d = np.linalg.norm(self.mesh.nodes[near] - centre, axis=1)
            v[near] += (1.0 - d / radius)[:, None] ** 2 * np.asarray(c.velocity)[None]
        v[~self.free] = 0.0
        return v

    def keep_energy(self, x, v, x0, mean0, h, forces, accel, drags, target: float) -> tuple:
        """(v, energy, target) after an undamped step from ``x0`` (its mean velocity ``mean0``)
        to (x, v): the velocity scaled (at most MAX_RESTORE) so that the energy is ``target``,
        the start's plus the loads' work (gravity's is in the energy); a drag's spring holds
        energy of its own, so it resets the target. A free cloth's velocity relative to its
        mean is scaled, and what backward Euler takes from its free fall's uniform
        acceleration a (its position leads by h^2 a / 2 a step: 1/2 M |h a|^2 of energy) is
        left to it, not turned into relative motion; a pinned cloth's mean motion is no
        momentum: all of its velocity is scaled."""
        step, m = self.step, self.m[:, None]
        energy = step.mechanical_energy(x, v, self.gravity)
        work = float(((forces - m * self.gravity[None]) * (x - x0)).sum())
        target = energy if drags else target + work
        free = self.free.all() and self.contact is None
        mean = (m * v).sum(0) / self.m.sum()
        size = float(np.linalg.norm(accel))
        if size > 0 and free:
            gain = float((mean - mean0) @ accel) / size
            target -= 0.5 * float(self.m.sum()) * min(max(gain, 0.0), h * size) ** 2
        rel = v - mean[None] if self.free.all() else v.copy()
        rel[~self.free] = 0.0
        spare = 0.5 * float((m * rel * rel).sum())
        want = target - energy + spare
        if spare > 0 and want > 0:
            v = v - rel + rel * min(math.sqrt(want / spare), MAX_RESTORE)
            v[~self.free] = 0.0
            energy = step.mechanical_energy(x, v, self.gravity)
        return v, energy, target


def _half_thickness(points: np.ndarray) -> float:
    """Half the middle extent (m) of ``points`` (V, 3) along their principal axes: a pole's or
    a wire's radius (thin across two axes), a box's, a slab's or a floor's half-width (thin
    across one at most: its broad faces meet a triangle's corners)."""
    centred = points - points.mean(0)
    _, axes = np.linalg.eigh(centred.T @ centred)
    extents = np.sort(np.ptp(centred @ axes, axis=0))
    return 0.5 * float(extents[1])


def _obstacles(conditions: SimulationConditions, size: float, reach: float, movers=()):
    """The ground, colliders and moving bodies (``movers``:
    :class:`~neurok_core.dynamics.moving.MovingBody`), their distance grids exact within
    ``reach`` (m) at least."""
    cell = size / 100
    band = max(4 * cell, 0.01 * size, reach + cell)
    meshes = [MeshDistance(c.vertices, c.faces, cell, band, c.name) for c in conditions.colliders]
    meshes += [
        MovingMesh(MeshDistance(b.vertices, b.faces, cell, band, b.name), b.track) for b in movers
    ]
    return Obstacles(conditions.ground, meshes)


def node_rig(mesh, nodes: np.ndarray, pinned=()) -> BoneRig:
    """A rig that replays a cloth's motion: a bone at every node of its simulation mesh
    (``mesh``: :class:`~neurok_core.rigspace.cloth.SimMesh`; ``nodes`` (T, n, 3) their
    positions), each vertex weighted by its node (exact) or by its embedding, each bone's head
    on its node and its turn that of the node's frame (the normal of a triangle it is a corner
    of, and its first neighbour's direction across it: a vertex embedded off a node turns with
    the cloth's surface there; no per-node rigid fit), blended linearly as the rig space's rigs
    are. The vertices ``pinned`` (indices), where there are any, ride one more bone that never
    moves, so that they stay exactly at rest while the bones round them turn as the cloth
    does (a pin on an edge of a coarser mesh, held by its two nodes' bones unturned, made the
    vertices beside it 3 cm off where the cloth turns at the pins)."""
    rest = mesh.nodes
    n = len(rest)
    faces = mesh.faces
    # a triangle each node is a corner of, and that triangle's next corner after the node (an
    # edge in the triangle's plane; one triangle: the simulation mesh's triangles need not be
    # oriented alike, so their normals' sum may vanish)
    face = np.full(n, -1, dtype=np.int64)
    face[faces[::-1].ravel()] = np.repeat(np.arange(len(faces))[::-1], 3)
    lone = face < 0
    corners = faces[np.maximum(face, 0)]  # (n, 3)
    at = np.argmax(corners == np.arange(n)[:, None], axis=1)  # the node's place in it
    ring = corners[np.arange(n)[:, None], (at[:, None] + np.arange(3)) % 3]  # node first

    def frames(x):  # (T, n, 3) -> (T, n, 3, 3) rows tangent, normal x tangent, normal; (T, n)
        arm = x[:, ring[:, 1]] - x[:, ring[:, 0]]
        normal = cross3(arm, x[:, ring[:, 2]] - x[:, ring[:, 0]])  # (T, n, 3)
        size = np.linalg.norm(normal, axis=-1)
        length = np.linalg.norm(arm, axis=-1)
        normal /= np.maximum(size, 1e-300)[..., None]
        arm /= np.maximum(length, 1e-300)[..., None]
        whole = size > 1e-12 * np.maximum(length, 1e-300) ** 2  # a triangle of some area
        return np.stack([arm, cross3(normal, arm), normal], -2), whole

    moved, whole = frames(nodes)
    still, whole_rest = frames(rest[None])
    turn = np.einsum("tnki,nkj->tnij", moved, still[0])  # (T, n, 3, 3)
    # unturned: a node in no triangle, one whose triangle has collapsed
    flat = (lone | ~whole_rest[0])[None] | ~whole
    turn[flat] = np.eye(3)
    quats = quats_from_matrices(turn)
    # the translations from the bones' own rotations (the quaternions), so a vertex on its
    # node is replayed exactly whatever the turn's rounding
    translations = nodes - np.einsum("tnij,nj->tni", quat_to_matrix(quats), rest)
    own = mesh.node >= 0
    bones = np.where(own[:, None], mesh.node[:, None], mesh.faces[mesh.tri])  # (N, 3)
    weights = np.where(own[:, None], np.array([1.0, 0.0, 0.0]), mesh.bary)
    heads = rest.copy()
    pinned = np.asarray(pinned, dtype=np.int64)
    if len(pinned):  # the pins' bone: its head at their centre, still in every frame
        heads = np.concatenate([heads, mesh.embed(rest, pinned).mean(0, keepdims=True)])
        quats = np.concatenate([quats, np.tile([1.0, 0.0, 0.0, 0.0], (len(quats), 1, 1))], 1)
        translations = np.concatenate([translations, np.zeros((len(quats), 1, 3))], 1)
        bones[pinned], weights[pinned] = n, np.array([1.0, 0.0, 0.0])
    return BoneRig(
        heads,
        quats,
        translations,
        bones.astype(np.int32),
        weights.astype(np.float32),
        blend="lbs",
    )


def _plausibility(run: _Run, watch, positions, nodes, cancelled: bool, unconverged: int) -> dict:
    """The run's figures on the vertices ``watch`` (M,) at ``positions`` (T, M, 3): edge strain
    on a seeded sample of ``FIGURE_FACES`` faces (a cloth's vertices follow its 600 or so
    nodes, so a sample tells its strain), the depth into colliders on their vertices, and into
    the ground on them and on the ``nodes`` (T, n, 3)."""
    index = np.full(len(run.vertices), -1)
    index[watch] = np.arange(len(watch))
    faces = index[run.faces[sample_faces(run.faces, count=FIGURE_FACES)]]
    strain = edge_strain(run.vertices[watch], positions, faces) if len(faces) else np.zeros(1)
    depth = np.zeros(len(positions))
    if run.cond.ground is not None:
        low = np.minimum(positions[..., 2].min(1), nodes[..., 2].min(1))
        depth = np.maximum(depth, run.cond.ground - low)
    used = np.unique(faces)
    for c in run.cond.colliders:
        col = _Collider(c.vertices, c.faces, 1e-6 * run.size)
        for t in range(len(positions)):
            depth[t] = max(depth[t], float(col.depth(positions[t, used]).max(initial=0.0)))
    for b in run.movers:  # each frame's points in the body's rest frame
        col = _Collider(b.vertices, b.faces, 1e-6 * run.size)
        for t in range(len(positions)):
            rot, c = b.track.pose(t / run.cond.fps)
            local = (positions[t, used] - c) @ rot
            depth[t] = max(depth[t], float(col.depth(local).max(initial=0.0)))
    return {
        "edge_strain_max": float(strain.max()),
        "edge_strain_frame": int(strain.argmax()),
        "penetration_max": float(depth.max() / run.size),
        "penetration_frame": int(depth.argmax()),
        # steps that ran out of iterations or of line search (the rig space's halvings)
        "integration": "cut short"
        if cancelled
        else ("steps unconverged" if unconverged else "complete"),
    }


def simulate_cloth(
    vertices: np.ndarray,
    faces: np.ndarray,
    conditions: SimulationConditions,
    *,
    settings: RigSettings,
    material: ClothMaterial | None = None,
    on_frame=None,
    on_progress=None,
    want_vertices: bool = True,
    time_limit: float | None = None,
    want_rig: bool = True,
    want_figures: bool = True,
    welding=None,
    kept=None,
    movers=(),
) -> SimulationResult:
    """Simulate ``conditions`` on a cloth mesh (``neurok_core.sheets.is_cloth``); the arguments
    as :func:`~neurok_core.rigspace.simulate.simulate_rig`'s, and ``material`` (None: the
    conditions' preset). The result carries a rig of a bone per node (:func:`node_rig`) when
    ``want_rig``; ``welding``: :func:`~neurok_core.sheets.cloth_welding`'s answer where it is
    known already; ``kept``: a :class:`~neurok_core.rigspace.shelf.MeshShelf` of this mesh that
    keeps the simulation mesh for its next run; ``movers``: the scene's solid bodies on their
    paths (:class:`~neurok_core.dynamics.moving.MovingBody`), which the cloth meets as it meets
    a collider (they do not feel it)."""
    started = time.perf_counter()
    deadline = None if time_limit is None else time.monotonic() + max(float(time_limit), 0.0)
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    material = material or cloth_material(conditions.material)
    run = _Run(vertices, faces, conditions, settings, material, welding, kept, movers)
    moving = run.contact is not None and bool(run.contact.obstacles.moving)
    built = time.perf_counter() - started
    # two steps a frame at least where a cloth may rest on something (at one, a cloth on a
    # box crept 0.56% of its size over its last ten frames)
    least = max(settings.cloth_substeps, conditions.substeps or 1, 2 if run.contact else 1)
    x = run.mesh.nodes.copy()
    v = run.initial_velocity()
    c = conditions
    if np.any(run.gravity) or c.forces or c.winds or c.drags or c.velocities:
        # loaded: a sheet exactly flat buckles as cloth does (an unloaded one stays at rest)
        bend = imperfection(run.mesh.nodes, run.mesh.faces, run.size)
        x[run.free] += bend[run.free]
    step = run.step
    energy = step.mechanical_energy(x, v, run.gravity)
    target = energy  # what an undamped run keeps
    energies = [energy]
    # every vertex of every frame only where they are wanted; the figures' sample always
    watch = np.arange(len(vertices))
    if not want_vertices:
        watch = np.unique(faces[sample_faces(faces, count=FIGURE_FACES)].ravel())
    frames = [vertices[watch]]  # the rest shape exactly (an embedding holds it to a cell)
    node_frames = [x.copy()]
    cancelled = timed_out = False
    if on_frame is not None and on_frame(0, vertices.astype(np.float32), energy) is False:
        cancelled = True
    if on_progress is not None:
        on_progress("simulate", 1 / conditions.frames)
    for frame in range(1, conditions.frames if not cancelled else 1):
        if deadline is not None and time.monotonic() > deadline:
            cancelled = timed_out = True
            break
        # near obstacles, steps short enough that no node travels more than TRAVEL sizes in
        # one (a node that crosses a thin wall in one step is not stopped), the count taken
        # again before each step (a flap whipped round a pole speeds up within a frame)
        done, start = 0.0, (frame - 1) / conditions.fps
        # how fast the moving bodies' points go over the frame (m/s)
        speed = run.contact.obstacles.speed(start, start + 1 / conditions.fps) if moving else 0.0
        while done < 1.0 - 1e-9:  # the share of the frame stepped
            substeps = least
            if run.contact is not None:
                substeps = max(least, min(MAX_SUBSTEPS, math.ceil(run.travel(x, v, speed))))
            share = min(1.0 / substeps, 1.0 - done)
            if 1.0 - done - share < 0.25 / substeps:  # no sliver of a step left over
                share = 1.0 - done
            h = share / conditions.fps
            t = start + done / conditions.fps
            forces, accel = run.forces(t)
            drags = run.drags(t, x)
            x0, mean0 = x, (run.m[:, None] * v).sum(0) / run.m.sum()
            if moving:  # the bodies where the step ends (an implicit step's contact)
                run.contact.obstacles.at(t + h)
                run.carry(x, t + h)
            x, v = step.advance(x, v, h, forces, drags)
            if run.damping == 0.0 and not moving:  # (moving bodies do work on the cloth)
                v, energy, target = run.keep_energy(
                    x, v, x0, mean0, h, forces, accel, drags, target
                )
            else:
                energy = step.mechanical_energy(x, v, run.gravity)
            done += share
        if not np.isfinite(x).all():
            from ..errors import SimulationError

            raise SimulationError(
                f"the cloth's motion could not be integrated at frame {frame}: lower the forces"
            )
        node_frames.append(x.copy())
        energies.append(energy)
        out = None
        if want_vertices:
            frames.append(run.mesh.embed(x))
            out = frames[-1].astype(np.float32) if on_frame is not None else None
        if on_progress is not None:
            on_progress("simulate", (frame + 1) / conditions.frames)
        if on_frame is not None and on_frame(frame, out, energy) is False:
            cancelled = True
            break
    node_frames = np.stack(node_frames)  # (T, n, 3)
    if want_vertices:
        positions = np.stack(frames)  # (T, N, 3) float64
    else:  # the figures' vertices, embedded a few frames at a time (small temporaries)
        chunk = max(1, CHUNK // max(len(watch), 1))
        frames[1:] = [
            run.mesh.embed(node_frames[t : t + chunk], watch)
            for t in range(1, len(node_frames), chunk)
        ]
        positions = np.concatenate([frames[0][None], *frames[1:]])
    if conditions.pins:
        pinned = np.zeros(len(vertices), dtype=bool)
        pinned[np.asarray(conditions.pins)] = True
        pinned[watch] &= ~run.carried_pins(positions, watch)
        positions[:, pinned[watch]] = vertices[watch[pinned[watch]]]
    # the pins held at rest (a carried pin turns with its cloth) ride a bone of their own
    held = run.pins
    for _, carried, _ in run.attached:
        held = np.setdiff1d(held, carried)
    rig = node_rig(run.mesh, node_frames, held) if want_rig else None
    report = step.report
    info = {
        "dynamics": "rig",
        "space": {
            "kind": "cloth",
            "nodes": len(run.mesh.nodes),
            "embedded": not run.mesh.identity,
            "bones": None if rig is None else rig.num_bones,
            # how far off an obstacle the cloth rests (m; 0 without one)
            "thickness": 0.0 if run.contact is None else run.contact.margin,
        },
        "moving_obstacles": [b.name for b in run.movers],
        "self_collision": run.self_contact,
        "space_seconds": round(built, 3),
        "substeps": int(report.steps),
        "iterations": int(report.iterations),
        "factorisations": int(report.factorisations),
        "unconverged_steps": int(report.unconverged),
        "line_search_halvings": int(report.line_search_halvings),
        "failed_searches": int(report.failed_searches),
        "capped_steps": int(report.capped),
        "pushed_out": int(report.pushed),
        "handed_steps": int(report.handed),
        "backward_euler_steps": int(report.backward_euler),
        "halvings": 0,
        "pins": "exact" if conditions.pins else "none",
        "cancelled": bool(cancelled),
        "timed_out": bool(timed_out),
        **(
            _plausibility(run, watch, positions, node_frames, cancelled, report.unconverged)
            if want_figures
            else {}
        ),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return SimulationResult(
        positions=positions.astype(np.float32) if want_vertices else None,
        rig=rig,
        times=np.arange(len(positions)) / conditions.fps,
        energy=np.asarray(energies),
        conditions=conditions.to_dict(),
        q=None,
        info=info,
    )
