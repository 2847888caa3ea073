"""Simulation of one object in its rig space (design section 12): conditions -> energies ->
implicit steps -> the bones' rigid motions per frame -> the vertices, by linear blend skinning.

The result's rig (``BoneRig`` with ``blend="lbs"``) replays the result's vertices exactly:
both are the same skinning of the same rigid bone motions (each bone's affine state projected
on the nearest rotation; the rigidity energy keeps that projection within a hair of it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree

from ..dynamics.conditions import SimulationConditions
from ..dynamics.limits import check_mesh_start
from ..dynamics.obstacles import MeshDistance, Obstacles
from ..dynamics.settings import DEFAULT_SETTINGS
from ..errors import ConditionError
from ..geometry import face_areas, farthest_point_subsample, locate, sample_surface
from ..results import SimulationResult
from ..rig import BoneRig, quats_from_matrices
from ..sheets import sheet_parts
from .bones import ROPE_SLENDERNESS
from .cloth_simulate import simulate_cloth
from .contact import (
    Contact,
    ContactPoints,
    PartCull,
    PartObstacle,
    RollingResistance,
    WorldObstacle,
)
from .energies import Linear, Quadratic, Rigidity, SliderGlue, Springs, flat_kron
from .integrator import Integrator, OutOfTime
from .material import rest_hessian, soft_scale
from .mixed import sheet_vertices, simulate_mixed
from .newton_step import ProjectedNewton
from .plausibility import plausibility
from .rates import TWO_PI, contact_omega, drag_omega, drag_progress, material_damping
from .shelf import space_key
from .space import RigSettings, RigSpace, _sparse_rows, build_rig_space, homogeneous_rows

SPREAD_POOL = 8  # contact points are spread over at most this many times their count


def _noop(*_args) -> None:
    return None


def _anchor_row(space: RigSpace, anchor) -> np.ndarray:
    """The skinning row (4B,) of a condition's anchor (a vertex, or a point: its nearest
    vertex's weights at the point)."""
    if anchor.vertex is not None:
        return space.vertex_rows([anchor.vertex])[0]
    return space.point_rows(np.asarray(anchor.point)[None])[0]


def _anchor_rest(space: RigSpace, anchor) -> np.ndarray:
    if anchor.vertex is not None:
        return space.vertices[anchor.vertex]
    return np.asarray(anchor.point, dtype=np.float64)


# -- energies of the space -------------------------------------------------------------------
def _rigidity(space: RigSpace, omega: float, exact=None) -> Rigidity:
    """kappa_b = m_b R_b^2 omega^2 / 6 (the bone's uniform-stretch mode at ``omega``); zero
    for the bones ``exact`` (B,) bool moves as exact rigid motions."""
    m = space.moments
    nb = space.num_bones
    kappa = np.zeros(nb)
    moving = ~space.fixed if exact is None else ~space.fixed & ~exact
    for b in np.flatnonzero(moving):
        mb = m[4 * b + 3, 4 * b + 3]
        r2 = np.trace(m[4 * b : 4 * b + 3, 4 * b : 4 * b + 3]) / max(mb, 1e-300)
        kappa[b] = mb * max(r2, (1e-3 * space.object_size) ** 2) * omega**2 / 6.0
    return Rigidity(kappa, omega, projectors=_projectors(space))


def _projectors(space: RigSpace) -> np.ndarray | None:
    """(B, 3, 3) each bone's projector on its seen rest directions (None: all seen)."""
    if space.seen is None or space.seen.all():
        return None
    return np.einsum("bia,ba,bja->bij", space.axes, space.seen.astype(float), space.axes)


def _glue(space: RigSpace, omega: float) -> Quadratic | None:
    """Zero-length springs at the joints' points; each joint's stiffness moves its lighter
    moving part at ``omega`` against it."""
    rows, ks, targets = [], [], []
    for joint in space.joints:
        if joint.kind == "slider":
            continue
        a = space.part_rows(joint.part_a, joint.points)
        mass = space.part_mass[joint.part_a]
        if joint.part_b >= 0:
            a = a - space.part_rows(joint.part_b, joint.points)
            mass = min(mass, space.part_mass[joint.part_b])
            target = np.zeros((len(joint.points), 3))
        else:
            target = joint.points
        rows.append(a)
        ks.append(np.full(len(a), mass * omega**2 / len(a)))
        targets.append(target)
    if not rows:
        return None
    return Quadratic(
        np.concatenate(rows),
        np.concatenate(ks),
        np.concatenate(targets),
        stiff=True,
        omega=omega,
        name="glue",
    )


def _slider_glue(space: RigSpace, omega: float) -> SliderGlue | None:
    """Glue across the axis of every slider joint (:class:`SliderGlue`), its axis carried by
    ``part_b`` (the world's fixed); stiffness as :func:`_glue`'s."""
    rows, targets, normal_rows, normals, ks = [], [], [], [], []
    for joint in space.joints:
        if joint.kind != "slider":
            continue
        pts = joint.points
        across = _normals(joint.axis)  # (2, 3)
        a = space.part_rows(joint.part_a, pts)
        mass = space.part_mass[joint.part_a]
        if joint.part_b >= 0:
            a = a - space.part_rows(joint.part_b, pts)
            mass = min(mass, space.part_mass[joint.part_b])
            targets.append(np.zeros((len(pts), 3)))
            carried = [
                space.part_vector_rows(joint.part_b, pts, np.tile(n, (len(pts), 1))) for n in across
            ]
            normal_rows.append(np.stack(carried, axis=1))  # (G, 2, 4B)
            normals.append(np.zeros((len(pts), 2, 3)))
        else:
            targets.append(pts)
            normal_rows.append(np.zeros((len(pts), 2, a.shape[1])))
            normals.append(np.broadcast_to(across, (len(pts), 2, 3)))
        rows.append(a)
        ks.append(np.full(len(pts), mass * omega**2 / len(pts)))
    if not rows:
        return None
    cat = np.concatenate
    return SliderGlue(cat(rows), cat(targets), cat(normal_rows), cat(normals), cat(ks), omega=omega)


def _normals(axis: np.ndarray) -> np.ndarray:
    """(2, 3) two unit vectors across the unit ``axis`` (3,) and across each other."""
    helper = np.eye(3)[int(np.argmin(np.abs(axis)))]
    first = np.cross(axis, helper)
    first /= np.linalg.norm(first)
    return np.stack([first, np.cross(axis, first)])


def _bending(space: RigSpace, omega) -> list:
    """The user's stiffness: 1/2 omega^2 sum_i m_i sum_{a<b} w_ia w_ib |x_a(X_i) - x_b(X_i)|^2
    over each vertex's pairs of bones (zero when they move together; the still bone too, so
    a pinned region pulls back to rest), and over the joints, the lighter part's vertices
    moved by each side's bones alone (a torsion spring: zero for a free hinge). ``omega``
    (rad/s): one for the object, or (N,) one per vertex (objects of their own stiffness)."""
    omega = np.broadcast_to(np.asarray(omega, dtype=np.float64), (len(space.vertices),))
    if not (omega > 0).any():
        return []
    blocks = []
    bones, w, x = space.vertex_bones, space.vertex_weights, space.vertices
    m = space.masses * omega**2  # (N,) each vertex's spring per metre^2 of its mass
    heads = space.heads
    for i in range(bones.shape[1]):
        for j in range(i + 1, bones.shape[1]):
            ww = w[:, i] * w[:, j]
            live = np.flatnonzero((ww > 1e-6) & (bones[:, i] != bones[:, j]))
            if len(live):
                blocks.append((live, bones[live, i], bones[live, j], m[live] * ww[live]))
    sparse_rows, ks = [], []
    for live, ba, bb, k in blocks:
        ones = np.ones((len(live), 1))
        ra = homogeneous_rows(x[live], ba[:, None], ones, heads)
        rb = homogeneous_rows(x[live], bb[:, None], ones, heads)
        sparse_rows.append(sparse.csr_matrix(ra - rb))
        ks.append(k)
    world_rows, world_k, world_x = [], [], []
    for joint in space.joints:
        parts = [joint.part_a] + ([joint.part_b] if joint.part_b >= 0 else [])
        light = min(parts, key=lambda p: space.part_mass[p])
        own = np.flatnonzero(space.layout.parts == light)
        ra = space.part_rows(joint.part_a, x[own])
        if joint.part_b >= 0:
            rb = space.part_rows(joint.part_b, x[own])
            sparse_rows.append(sparse.csr_matrix(ra - rb))
            ks.append(m[own])
        else:  # a joint to the world pulls the part's own vertices back to rest
            world_rows.append(ra)
            world_k.append(m[own])
            world_x.append(x[own])
    out = []
    top = float(omega.max())
    if sparse_rows:
        e = sparse.vstack(sparse_rows).tocsr()
        k = np.concatenate(ks)
        out.append(_Coupling(np.asarray((e.T @ sparse.diags(k) @ e).todense()), top))
    if world_rows:
        k = np.concatenate(world_k)
        rows, targets = np.concatenate(world_rows), np.concatenate(world_x)
        out.append(Quadratic(rows, k, targets, stiff=False, omega=top, name="bending"))
    return out


def _material_scale(space, stiff, bending, elastic, omega: float) -> float:
    """The soft energies' scale that makes ``omega`` the object's lowest mode
    (``material.soft_scale``), kept in ``space.memo`` by the stiff energies' frequencies."""
    soft = [e for e in (*bending, elastic) if e is not None]
    if not soft:
        return 1.0
    key = (round(omega, 9), tuple(round(float(e.omega), 9) for e in stiff))
    kept = space.memo.setdefault("material", {})
    if key not in kept:
        kept[key] = soft_scale(space, stiff, soft, omega)[0]
    return kept[key]


class _Coupling:
    """E = 1/2 sum_k Q[:, k]^T K Q[:, k] for a constant K (4B, 4B) with K Q_rest = 0."""

    def __init__(self, matrix: np.ndarray, omega: float):
        self.matrix = matrix
        self.hessian = np.kron(matrix, np.eye(3))
        self.stiff, self.omega, self.name = False, omega, "bending"

    def scaled(self, factor: float) -> _Coupling:
        """The same coupling ``factor`` times as stiff."""
        return _Coupling(self.matrix * factor, self.omega * float(np.sqrt(factor)))

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        flat = q.reshape(4 * nb, 3)
        kq = self.matrix @ flat
        return (
            0.5 * float((flat * kq).sum()),
            kq.reshape(nb, 4, 3),
            (self.hessian if hessian else None),
        )


def elastic_solids(space: RigSpace) -> set[int]:
    """The parts whose stretching is their bending: the elastic solids (a jelly; a thick
    beam, whose bones follow its length), not the ropes (slender: they bend without
    stretching) nor the sheets."""
    out = set()
    for p, info in enumerate(space.layout.part_info):
        slender = info.extents[0] >= ROPE_SLENDERNESS * max(float(info.extents[1]), 1e-12)
        if info.kind == "elastic" or (info.kind == "chain" and not slender):
            out.add(p)
    return out


def _stretch(
    space: RigSpace, settings: RigSettings, omega: float, zeta: float, soft=frozenset()
) -> tuple[Springs | None, Springs | None]:
    """(stiff, soft) springs on a seeded sample of the edges of the parts that bend
    (``stretch_edges`` in all), each part's stiffness making its uniform stretch a mode at
    ``omega``: the parts ``soft`` (elastic solids whose stiffness is the user's, scaled by
    ``material.soft_scale``) apart from the others (damped at the ratio ``zeta``)."""
    parts = space.layout.parts
    edges, lengths = space.bending_edges(settings.stretch_edges, np.random.default_rng(0))
    if not len(edges):
        return None, None
    owner = parts[edges[:, 0]]
    rows = space.vertex_rows(edges[:, 1]) - space.vertex_rows(edges[:, 0])
    k = np.zeros(len(edges))
    for p in np.unique(owner):
        mine = owner == p
        info = space.layout.part_info[p]
        size = float(info.extents[0])
        k[mine] = space.part_mass[p] * omega**2 * size**2 / float((lengths[mine] ** 2).sum())
    out = []
    for want in (False, True):
        pick = np.isin(owner, sorted(soft)) == want
        if not pick.any():
            out.append(None)
        elif want:  # the user's material: no damping of its own (the run's damping acts)
            springs = Springs(rows[pick], lengths[pick], k[pick], omega, 0.0)
            springs.stiff, springs.name = False, "elastic"
            out.append(springs)
        else:
            out.append(Springs(rows[pick], lengths[pick], k[pick], omega, zeta))
    return out[0], out[1]


CONTACT_MEMO = 2  # contact geometries a space keeps (by the obstacles they meet)


@dataclass(frozen=True, eq=False)
class _ContactGeometry:
    """What a space's contact needs that no load changes: the obstacles, each with the part
    it is (-1 for the world), the indices of the points that meet it and their thresholds;
    the points' skinning rows (S, 4B), rest places (S, 3) and owning parts (S,); the parts
    carried by one bone (``PartCull``'s groups) and the free parts' bones and sizes (their
    rolling resistance)."""

    obstacles: list  # (obstacle, part, point indices (K,), thresholds (K,))
    rows: np.ndarray
    at: np.ndarray
    owner: np.ndarray
    single: dict
    bones: dict
    lengths: dict


def _contact_geometry(
    space: RigSpace, conditions: SimulationConditions, settings: RigSettings
) -> _ContactGeometry | None:
    """The contact's geometry in ``space`` against the ground, colliders and parts of
    ``conditions`` (None: nothing to meet), built once and kept in ``space.memo`` (a second
    run in the space, as a preview after its loads changed, starts from it): the moving
    parts' spread vertices against the ground and colliders, the fixed parts, and every other
    moving rigid part; each point's threshold is the margin, or its distance at rest where
    that is smaller (a joint's points)."""
    kept = space.memo.setdefault("contact", {})  # by the obstacles met, oldest use first
    key = (conditions.ground, conditions.colliders, settings)
    if key in kept:
        kept[key] = kept.pop(key)
        return kept[key]
    size = space.object_size
    margin = settings.contact_margin * size
    # the grid needs distances only a few cells beyond the contact margin
    cell = size / 100
    band = max(4 * cell, 4 * margin)
    parts = space.layout.parts
    moving = np.flatnonzero(~space.fixed_parts)
    obstacles = []  # (obstacle, the part it is, -1 for the world)
    meshes = [MeshDistance(c.vertices, c.faces, cell, band, c.name) for c in conditions.colliders]
    world = Obstacles(conditions.ground, meshes)
    if world:
        obstacles.append((WorldObstacle(world), -1))
    face_part = space.layout.part_of_faces(space.faces)
    if space.fixed_parts.any():
        v, f = _submesh(space, space.fixed_parts[face_part])
        fixed = MeshDistance(v, f, cell, band, "fixed")
        obstacles.append((WorldObstacle(Obstacles(None, [fixed])), -1))
    # a moving part meets the points of the other moving parts (none: no grid of it to build)
    for p in moving if len(moving) > 1 else ():
        info = space.layout.part_info[p]
        bones = np.flatnonzero(space.layout.bone_parts == p)
        if info.kind == "rigid" and info.closed and len(bones) == 1:
            v, f = _submesh(space, face_part == p)
            mesh = MeshDistance(v, f, cell, band, f"part {p}")
            obstacles.append((PartObstacle(mesh, int(bones[0]), space.heads), p))
    geometry = None
    picks, owners, extra, extra_owners = [], [], [], []
    rng = np.random.default_rng(0)
    for p in moving if obstacles else ():
        own = np.flatnonzero(parts == p)
        count = min(settings.contact_samples, len(own))
        if len(own) > SPREAD_POOL * count:  # spread over a random pool: O(count^2) not O(N)
            own = np.sort(rng.choice(own, SPREAD_POOL * count, replace=False))
        picks.append(own[farthest_point_subsample(space.vertices[own], count, rng)])
        owners.append(np.full(count, p))
        more = settings.contact_surface - count
        if more > 0:
            extra.append(_surface_points(space, space.faces[face_part == p], more, rng))
            extra_owners.append(np.full(len(extra[-1][0]), p))
    if picks:
        # every part's picked vertices, then every part's surface points: rows, places and
        # owners in that one order
        pick, owner = np.concatenate(picks), np.concatenate(owners + extra_owners)
        rows = space.vertex_rows(pick)
        at = space.vertices[pick]
        if extra:
            rows = np.concatenate([rows, *(r for _, r in extra)])
            at = np.concatenate([at, *(x for x, _ in extra)])
        met = []
        for obstacle, part in obstacles:
            keep = np.flatnonzero(owner != part)
            if len(keep):
                threshold = np.minimum(margin, obstacle.rest_distance(at[keep]))
                met.append((obstacle, part, keep, threshold))
        single = {}  # the parts carried by one bone: each its bone (the broad phase's groups)
        # each free part's bones and size, for its rolling resistance (a part in a joint turns
        # about it freely: a door's panel touching its jamb at its hinge does not roll on it)
        bones, lengths = {}, {}
        jointed = {p for j in space.joints for p in (j.part_a, j.part_b)}
        for p in moving:
            own = np.flatnonzero((space.bone_parts == p) & ~space.fixed)
            if int(p) not in jointed:
                bones[int(p)] = own
                lengths[int(p)] = float(space.layout.part_info[p].extents.max())
            if len(own) == 1:
                single[int(p)] = int(own[0])
        geometry = _ContactGeometry(met, rows, at, owner, single, bones, lengths)
    while len(kept) >= CONTACT_MEMO:
        del kept[next(iter(kept))]
    kept[key] = geometry
    return geometry


def _contact(
    space: RigSpace, conditions: SimulationConditions, settings: RigSettings, omega: float
):
    """The contact energies (``contact`` module) at the frequency ``omega`` (rad/s,
    ``contact_omega``) on the space's contact geometry (``_contact_geometry``)."""
    geometry = _contact_geometry(space, conditions, settings)
    if geometry is None:
        return []
    size = space.object_size
    share = space.part_mass[geometry.owner] / settings.contact_share  # kg each point stands for
    out = []
    mu, slip = conditions.friction, settings.friction_slip * size
    # resting contact settles (its compression damped) unless it is perfectly elastic
    zeta = settings.stiff_damping if conditions.bounciness < 1.0 else 0.0
    rows, at, owner = geometry.rows, geometry.at, geometry.owner
    for obstacle, _part, keep, threshold in geometry.obstacles:
        points = ContactPoints(rows[keep], share[keep] * omega**2, threshold, owner[keep])
        contact = Contact(points, obstacle, mu, slip, omega, zeta)
        if isinstance(obstacle, PartObstacle):
            contact.cull = PartCull(obstacle, at[keep], rows[keep], owner[keep], geometry.single)
        elif settings.rolling_resistance > 0 and mu > 0:
            contact.rolling = RollingResistance(
                settings.rolling_resistance, geometry.bones, geometry.lengths
            )
        out.append(contact)
    return out


def _surface_points(space: RigSpace, faces: np.ndarray, count: int, rng):
    """(points (S, 3), rows (S, 4B)): ``count`` seeded area-uniform samples of ``faces``
    (a part's, :func:`~neurok_core.geometry.sample_surface`), each row the blend of its
    triangle's vertex rows by its barycentric coordinates (a rigid part's rows are affine in
    the point: the sample's own row)."""
    x = space.vertices
    if not len(faces) or count <= 0 or face_areas(x, faces).sum() <= 0:
        return np.zeros((0, 3)), np.zeros((0, 4 * space.num_bones))
    samples = sample_surface(x, faces, count, rng)
    corners = faces[samples.face_ids]  # (S, 3)
    bary = samples.barycentrics  # (S, 3)
    rows = sum(bary[:, k, None] * space.vertex_rows(corners[:, k]) for k in range(3))
    return locate(x, faces, samples), rows


def _rest_speed(space: RigSpace, conditions: SimulationConditions, settings: RigSettings):
    """The approach speed (m/s) below which a point does not bounce: what gravity gives in
    falling through the contact margin, and at least 1% of the object's size per second (so
    that an object settles instead of hopping forever on its contact points)."""
    size = space.object_size
    fall = settings.contact_margin * size
    return max(float(np.sqrt(2.0 * np.linalg.norm(conditions.gravity) * fall)), 0.01 * size)


def _submesh(space: RigSpace, faces: np.ndarray):
    """(vertices, faces) of the rest mesh's faces selected by the mask ``faces`` (F,)."""
    f = space.faces[faces]
    used, inverse = np.unique(f, return_inverse=True)
    return space.vertices[used], inverse.reshape(f.shape)


def rigid_coordinates(space: RigSpace) -> np.ndarray:
    """(B,) bool: the moving bones that are a rigid part's one bone (the projected Newton
    step moves them as exact rigid motions)."""
    out = np.zeros(space.num_bones, dtype=bool)
    for b, p in enumerate(space.bone_parts):
        if p >= 0 and not space.fixed[b]:
            alone = int((space.bone_parts == p).sum()) == 1
            out[b] = alone and space.layout.part_info[p].kind == "rigid"
    return out


def use_newton(space: RigSpace, conditions: SimulationConditions, settings: RigSettings):
    """Whether the run takes projected Newton steps (``newton_step``) instead of the midpoint
    steps (``integrator``): as ``settings.step`` says, and for "auto" where it measured
    faster or sturdier with the same motion (docs/experiments/rig_speed.md): a damped run
    with a rigid part (an undamped one keeps its energy with the midpoint step, where
    Newton's scaled velocities let a knocked arm, a bottle's cap and a gripper drift by 3%,
    7% and without bound; an object of bending parts alone, a rope or a jelly, is faster
    with the midpoint step, whose exact Jacobians converge where the projected Hessians of
    its springs do not)."""
    if settings.step != "auto":
        return settings.step == "newton"
    return conditions.damping > 0 and bool(rigid_coordinates(space).any())


# -- loads ------------------------------------------------------------------------------------
class _Loads:
    """The time-dependent energies: forces in their frame ranges, winds, drag springs."""

    def __init__(self, space: RigSpace, conditions: SimulationConditions, omega_drag: float):
        fps = conditions.fps
        last = self.last = (conditions.frames - 1) / fps
        self.forces = [
            (
                c.start_frame / fps,
                last if c.end_frame is None else c.end_frame / fps,
                Linear(_anchor_row(space, c.anchor), np.asarray(c.vector)),
            )
            for c in conditions.forces
        ]
        self.forces += [
            (
                w.start_frame / fps,
                last if w.end_frame is None else w.end_frame / fps,
                Linear(space.gravity_moment, np.asarray(w.vector) / conditions.mass),
            )
            for w in conditions.winds
        ]
        self.drags = []
        for d in conditions.drags:
            row = _anchor_row(space, d.anchor)
            own = space.layout.parts[
                d.vertex if d.vertex is not None else cKDTree(space.vertices).query(d.point)[1]
            ]
            k = space.part_mass[own] * omega_drag**2
            spring = Quadratic(row[None], [k], stiff=True, omega=omega_drag, name="drag")
            self.drags.append(
                {
                    "spring": spring,
                    "start": d.start_frame / fps,
                    "end": d.frame / fps,
                    "target": np.asarray(d.target),
                    "from": None,
                    "row": row,
                }
            )
        self.state = None

    def steady_from(self) -> float:
        """The time (s) after which no force, wind or drag starts, ends or moves."""
        changes = [a for a, _, _ in self.forces]
        changes += [b for _, b, _ in self.forces if b < self.last]
        changes += [d["end"] for d in self.drags]
        return max(changes, default=0.0)

    def __call__(self, t: float):
        out = [f for a, b, f in self.forces if a <= t <= b]
        for d in self.drags:
            if not d["start"] <= t <= d["end"]:
                continue
            if d["from"] is None:
                d["from"] = d["row"] @ self.state.reshape(-1, 3)
            s = drag_progress(t, d["start"], d["end"])
            d["spring"].targets = (d["from"] + s * (d["target"] - d["from"]))[None]
            out.append(d["spring"])
        return out


class _Sleep:
    """Whether a scene has come to rest (``RigSettings.sleep_distance``): no vertex farther
    than ``sleep_distance`` object sizes from where it was over ``sleep_time`` seconds, all
    after the loads last changed (``_Loads.steady_from``). A scene at rest stays as it is for
    the rest of the run (no step is taken, as rigid body engines deactivate what has come to
    rest), so a stack that settles in a second does not cost its remaining seconds. A
    vertex's move is bounded by its bones': |dF| R_b + |dc| for the bones that carry it (R_b:
    the farthest of their vertices from the head)."""

    def __init__(self, space: RigSpace, settings: RigSettings, steady: float, fps: float):
        self.reach = space.memo.get("bone_reach")  # (B,) R_b, once a space
        if self.reach is None:
            bones, weights = space.vertex_bones, space.vertex_weights  # (N, K)
            far = np.linalg.norm(space.vertices[:, None, :] - space.heads[bones], axis=2)
            self.reach = space.memo["bone_reach"] = np.zeros(space.num_bones)
            np.maximum.at(self.reach, bones.ravel(), np.where(weights > 0, far, 0.0).ravel())
        self.limit = settings.sleep_distance * space.object_size  # m
        self.frames = max(int(np.ceil(settings.sleep_time * fps)), 1)
        self.time = settings.sleep_time
        self.first = int(np.ceil(steady * fps))  # the first frame the loads are steady
        self.since = None  # (frame, state) where the calm began
        self.asleep_at = None  # the frame from which the scene is at rest

    def _bound(self, d: np.ndarray) -> float:
        """The largest a vertex moves (m) when its bones change by ``d`` (B, 4, 3)."""
        moved = np.linalg.norm(d[:, :3], axis=(1, 2)) * self.reach
        return float((moved + np.linalg.norm(d[:, 3], axis=1)).max(initial=0.0))

    def rests(self, frame: int, q: np.ndarray, v: np.ndarray) -> bool:
        """After ``frame`` at bone state ``q`` (B, 4, 3), velocities ``v``: whether the scene
        is now at rest (and stays so). Its vertices must also be slower than ``limit`` over
        ``sleep_time`` (a small, fast vibration is not rest: its energy would be lost)."""
        if self.limit <= 0 or frame < self.first:
            return False
        if self._bound(v) * self.time > self.limit:
            self.since = None
            return False
        if self.since is not None and self._bound(q - self.since[1]) > self.limit:
            self.since = None
        if self.since is None:
            self.since = (frame, q.copy())
        elif frame - self.since[0] >= self.frames:
            self.asleep_at = frame
        return self.asleep_at is not None


# -- initial velocities ------------------------------------------------------------------------
SOFT_HZ = 15.0  # modes below this frequency are the motions a kick may start


def soft_basis(space: RigSpace, q: np.ndarray, stiff) -> np.ndarray:
    """(12B, S) the state's soft modes: the generalised eigenvectors (M-orthonormal) of the
    stiff energies' Hessian K (rigidity, glue, stretching) against the metric kron(M, I_3),
    over the moving bones, with frequencies below ``SOFT_HZ`` (a hinged lid: its turn about
    the hinge; a flag: its bending; a free body: its six rigid motions)."""
    from scipy.linalg import eigh

    coords = space.moving_basis()
    mass = coords.T @ flat_kron(space.moments) @ coords
    k = coords.T @ rest_hessian(stiff, q) @ coords
    mass += 1e-9 * np.trace(mass) / len(mass) * np.eye(len(mass))
    lam, vec = eigh(k, mass)
    keep = lam < (TWO_PI * SOFT_HZ) ** 2
    return coords @ vec[:, keep]


def _initial_velocity(
    space: RigSpace, conditions: SimulationConditions, q: np.ndarray, stiff, uniform=None
):
    """V0 (B, 4, 3) in the soft modes (:func:`soft_basis`): a uniform velocity moves every
    moving bone (and ``uniform`` (B, 3), where given, each bone by its own); point velocities
    are then met by the soft motion of least kinetic energy (the response to impulses there,
    kept out of the stiff modes: a kick on a hinged lid turns it about its hinge instead of
    tearing it off and leaving the glue to damp that)."""
    nb = space.num_bones
    v = np.zeros((nb, 4, 3))
    moving = ~space.fixed
    if uniform is not None:
        v[moving, 3, :] += uniform[moving]
    point = []
    for c in conditions.velocities:
        if c.anchor is None:
            v[moving, 3, :] += np.asarray(c.velocity)
        else:
            point.append(c)
    if not point or not moving.any():
        return v
    basis = soft_basis(space, q, stiff)  # (12B, S), M-orthonormal
    if not basis.shape[1]:
        return v
    rows, wanted = [], []
    for c in point:
        u = _anchor_row(space, c.anchor)
        rows.append(np.kron(u[None], np.eye(3)) @ basis)  # (3, S)
        wanted.append(np.asarray(c.velocity) - u @ v.reshape(-1, 3))
    r = np.concatenate(rows)
    coef = r.T @ np.linalg.lstsq(r @ r.T, np.concatenate(wanted), rcond=1e-10)[0]
    return v + (basis @ coef).reshape(nb, 4, 3)


# -- output ------------------------------------------------------------------------------------
def completed(f: np.ndarray, space: RigSpace) -> np.ndarray:
    """F (B, 3, 3) with each bone's unseen rest directions (``RigSpace.seen``) carried along
    with its seen ones: a flat bone's normal to the cross product of its two seen images,
    a line's directions across it by the least rotation that turns its axis, a bone that sees
    none unturned (its F there is not a coordinate and stays as it was at rest)."""
    if space.seen is None or space.seen.all():
        return f
    f = f.copy()
    for b in np.flatnonzero(~space.seen.all(1)):
        axes, seen = space.axes[b], space.seen[b]
        images = f[b] @ axes  # (3, 3): column a the image of rest direction a
        count = int(seen.sum())
        if count == 2:
            n = np.cross(images[:, 0], images[:, 1])
            images[:, 2] = n / max(float(np.linalg.norm(n)), 1e-300)
        elif count == 1:
            a = images[:, 0] / max(float(np.linalg.norm(images[:, 0])), 1e-300)
            turn = _least_rotation(axes[:, 0], a)
            images[:, 1:] = turn @ axes[:, 1:]
        else:
            images = axes.copy()
        f[b] = images @ axes.T
    return f


def _least_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation (3, 3) by the least angle that turns unit ``a`` onto unit ``b``
    (Rodrigues; a half turn about an axis across ``a`` when they are opposite)."""
    axis = np.cross(a, b)
    sin, cos = float(np.linalg.norm(axis)), float(a @ b)
    if sin < 1e-12:
        if cos > 0:
            return np.eye(3)
        across = np.cross(a, np.eye(3)[int(np.argmin(np.abs(a)))])
        across /= np.linalg.norm(across)
        return 2.0 * np.outer(across, across) - np.eye(3)
    k = axis / sin
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + sin * kx + (1.0 - cos) * (kx @ kx)


def rigid_bones(q: np.ndarray, space: RigSpace) -> tuple[np.ndarray, np.ndarray]:
    """(R (B, 3, 3), t (B, 3)): each bone's nearest rigid motion x -> R x + t (the polar
    rotation of its F, completed along its unseen directions, about its head)."""
    f = completed(np.swapaxes(q[:, :3, :], 1, 2), space)  # (B, 3, 3)
    u, _, vt = np.linalg.svd(f)
    d = np.sign(np.linalg.det(u @ vt))
    u[:, :, 2] *= d[:, None]
    r = u @ vt
    t = q[:, 3, :] - np.einsum("bij,bj->bi", r, space.heads)
    return r, t


def _world_rows(space: RigSpace) -> sparse.csr_matrix:
    """(N, 4B) rows (w_b X_i, w_b): vertex i at frame t is sum_b w_b (R_b X_i + t_b) (the
    skinning rows about the origin instead of the heads)."""
    rows = space.memo.get("world_rows")
    if rows is None:  # built once per space: every frame of every run skins with it
        origin = np.zeros_like(space.heads)
        rows = _sparse_rows(space.vertices, space.vertex_bones, space.vertex_weights, origin)
        space.memo["world_rows"] = rows
    return rows


def skin_frames(space: RigSpace, rotations: np.ndarray, translations: np.ndarray) -> np.ndarray:
    """Vertices (T, N, 3) float32 of rigid bone motions R (T, B, 3, 3), t (T, B, 3)."""
    t_count, nb = rotations.shape[:2]
    stack = np.concatenate([np.swapaxes(rotations, 2, 3), translations[:, :, None, :]], 2)
    stack = stack.reshape(t_count, 4 * nb, 3).transpose(1, 0, 2).reshape(4 * nb, -1)
    out = (_world_rows(space) @ stack).reshape(len(space.vertices), t_count, 3)
    return np.ascontiguousarray(out.transpose(1, 0, 2)).astype(np.float32)


def simulate_rig(
    vertices: np.ndarray,
    faces: np.ndarray,
    conditions: SimulationConditions,
    *,
    settings: RigSettings | None = None,
    on_frame=None,
    on_progress=_noop,
    want_vertices: bool = True,
    time_limit: float | None = None,
    structure=None,
    shelf=None,
    want_rig: bool = True,
    want_figures: bool = True,
) -> SimulationResult:
    """Simulate ``conditions`` on the mesh in its rig space; the result carries the rig.
    ``structure``: a :class:`~neurok_core.structure.Structure` whose joints the step holds
    instead of the ones the geometry gives (``neurok simulate --structure``). An
    object whose every part is an open sheet (a cloth) is simulated at its own resolution
    instead (:func:`~neurok_core.rigspace.cloth_simulate.simulate_cloth`), its rig a bone per
    simulated node. ``shelf``: a :class:`~neurok_core.rigspace.shelf.SpaceShelf` that keeps
    the space (and its contact's geometry), or the cloth's simulation mesh, for the next run
    of the same object. ``want_rig``: False spares a cloth its rig (a bone per node; the rig
    space's costs nothing). ``want_figures``: False spares a preview the strain and depth
    figures over its frames (Simulate's warning; its info then lacks them).

    on_frame(index, positions (N, 3) float32 or None, energy) for every frame in order;
    return False to stop. ``time_limit`` (seconds from the call): checked before every
    implicit step, the run stops there with the frames so far, ``info["cancelled"]`` and
    ``info["timed_out"]``. Raises ConditionError for conditions that do not fit the mesh,
    SimulationError when the motion cannot be integrated."""
    settings = settings or RigSettings()
    if not isinstance(conditions, SimulationConditions):
        raise ConditionError("conditions must be a SimulationConditions")
    vertices = np.asarray(vertices, dtype=np.float64)
    conditions.validate(len(vertices))
    # an object that starts inside the ground is refused before any work, as the latent
    # dynamics refuse it
    check_mesh_start(vertices, conditions, DEFAULT_SETTINGS)
    kept = None if shelf is None else shelf.of_mesh(vertices, faces)
    if kept is None:  # which loose parts are sheets (a cloth: every one)
        found = sheet_parts(vertices, faces)
    else:
        found = kept.get("sheets", lambda: sheet_parts(vertices, faces))
    welding = None if found is None or not found[1].all() else found[0]
    if welding is not None and structure is not None:
        raise ConditionError("a cloth has no joints: simulate it without a structure")
    if welding is not None:  # every part a sheet: simulated at its own resolution
        return simulate_cloth(
            vertices,
            faces,
            conditions,
            settings=settings,
            welding=welding,
            on_frame=on_frame,
            on_progress=on_progress,
            want_vertices=want_vertices,
            time_limit=time_limit,
            want_rig=want_rig,
            want_figures=want_figures,
            kept=kept,
        )
    sheet = None if found is None else sheet_vertices(vertices, faces, found)
    if structure is None:  # solid parts and sheets in one mesh: each simulated as its kind
        if sheet is not None:
            return simulate_mixed(
                vertices,
                faces,
                conditions,
                sheet,
                settings=settings,
                on_frame=on_frame,
                on_progress=on_progress,
                want_vertices=want_vertices,
                time_limit=time_limit,
                want_rig=want_rig,
                want_figures=want_figures,
            )
    started = time.perf_counter()
    deadline = None if time_limit is None else time.monotonic() + max(float(time_limit), 0.0)

    def build() -> RigSpace:
        return build_rig_space(
            vertices,
            faces,
            mass=conditions.mass,
            pins=conditions.pins,
            elastic=conditions.stiffness > 0,
            settings=settings,
            structure=structure,
        )

    if kept is None or structure is not None:
        space = build()
    else:
        space = kept.get(space_key(conditions, settings), build)
    return simulate_space(
        space,
        conditions,
        settings=settings,
        on_frame=on_frame,
        on_progress=on_progress,
        want_vertices=want_vertices,
        deadline=deadline,
        started=started,
        want_figures=want_figures,
    )


def simulate_space(
    space: RigSpace,
    conditions: SimulationConditions,
    *,
    settings: RigSettings,
    on_frame=None,
    on_progress=_noop,
    want_vertices: bool = True,
    deadline: float | None = None,
    started: float | None = None,
    stiffness: np.ndarray | None = None,
    uniform_velocity: np.ndarray | None = None,
    want_figures: bool = True,
) -> SimulationResult:
    """:func:`simulate_rig`'s run in a built ``space`` (its conditions checked): ``deadline``
    a ``time.monotonic()`` time or None, ``started`` the ``time.perf_counter()`` of the call
    (the space's build counted from there). For a space of several objects
    (:mod:`~neurok_core.rigspace.objects`): ``stiffness`` (N,) Hz per vertex instead of the
    conditions' one, ``uniform_velocity`` (B, 3) m/s every bone's initial velocity (an
    object's "all" velocity on its own bones)."""
    vertices = space.vertices
    started = time.perf_counter() if started is None else started
    built = time.perf_counter() - started
    # a small object's loads act faster (sqrt(g / L)): every stiff energy is made stiffer by
    # what its contact needs over contact_hz, so the motion is the same at every size; and
    # each bone stiffer than what it meets, so that a contact cannot squash it
    contact = contact_omega(space.object_size, conditions, settings)
    stiffen = contact / (TWO_PI * settings.contact_hz)
    rigid = max(TWO_PI * settings.rigidity_hz * stiffen, 2.0 * contact)
    newton = use_newton(space, conditions, settings)
    exact = rigid_coordinates(space) if newton else np.zeros(space.num_bones, dtype=bool)
    energies = [_rigidity(space, rigid, exact)]
    energies.append(Linear(space.gravity_moment, np.asarray(conditions.gravity)))
    glue = _glue(space, TWO_PI * settings.glue_hz * stiffen)
    slider = _slider_glue(space, TWO_PI * settings.glue_hz * stiffen)
    hz = conditions.stiffness if stiffness is None else stiffness
    # one stiffness for the object: its lowest mode (``material``); several objects' own
    # stiffnesses per vertex keep the bending at theirs
    calibrate = stiffness is None and conditions.stiffness > 0
    stretch, elastic = _stretch(
        space,
        settings,
        TWO_PI * settings.stretch_hz * stiffen,
        material_damping(settings.stretch_damping, conditions.damping),
        soft=elastic_solids(space) if calibrate else frozenset(),
    )
    every = _rigidity(space, rigid) if exact.any() else energies[0]
    stiff = [e for e in (every, glue, slider, stretch) if e is not None]
    bending = _bending(space, TWO_PI * np.asarray(hz, dtype=np.float64))
    if calibrate:
        scale = _material_scale(space, stiff, bending, elastic, TWO_PI * conditions.stiffness)
        bending = [e.scaled(scale) for e in bending]
        if elastic is not None:
            elastic = elastic.scaled(scale)
    energies += [e for e in (glue, slider, stretch, elastic, *bending) if e is not None]
    contacts = _contact(space, conditions, settings, contact)
    energies.extend(contacts)
    loads = _Loads(space, conditions, drag_omega(space.object_size, conditions))
    step_kwargs = {"rigid": exact} if newton else {}
    integ = (ProjectedNewton if newton else Integrator)(
        space,
        energies,
        loads,
        **step_kwargs,
        damping=conditions.damping,
        zeta=material_damping(settings.stiff_damping, conditions.damping),
        contacts=contacts,
        bounciness=conditions.bounciness,
        rest_speed=_rest_speed(space, conditions, settings),
        iterations=settings.newton_iterations,
        halvings=settings.max_halvings,
        deadline=deadline,
    )
    q = space.rest()
    # the kick's soft modes with every bone's rigidity (a rigid part's bone moved as an
    # exact rotation has none in the step, but its F may not shear either)
    v = _initial_velocity(space, conditions, q, stiff, uniform_velocity)
    count = conditions.frames
    substeps = max(settings.substeps, conditions.substeps or 1)
    h = 1.0 / (conditions.fps * substeps)
    qs, energies_out = [q.copy()], [integ.energy(q, v, 0.0)]
    cancelled = timed_out = False
    if on_frame is not None and on_frame(0, vertices.astype(np.float32), energies_out[0]) is False:
        cancelled = True
    on_progress("simulate", 1 / count)
    sleep = _Sleep(space, settings, loads.steady_from(), conditions.fps)
    for frame in range(1, count if not cancelled else 1):
        if sleep.asleep_at is None:
            try:
                for s in range(substeps):
                    loads.state = q
                    t = (frame - 1) / conditions.fps + s * h
                    q, v = integ.advance(q, v, t, h)
            except OutOfTime:
                cancelled = timed_out = True
                break
            if sleep.rests(frame, q, v):
                v = np.zeros_like(v)
        qs.append(q.copy())
        energies_out.append(integ.energy(q, v, frame / conditions.fps))
        on_progress("simulate", (frame + 1) / count)
        if on_frame is not None:
            verts = None
            if want_vertices:
                r, tr = rigid_bones(q, space)
                verts = skin_frames(space, r[None], tr[None])[0]
            if on_frame(frame, verts, energies_out[-1]) is False:
                cancelled = True
                break
        if deadline is not None and time.monotonic() > deadline:
            cancelled = timed_out = True
            break
    states = np.stack(qs)  # (T, B, 4, 3)
    rot, trans = zip(*(rigid_bones(s, space) for s in states), strict=True)
    rot, trans = np.stack(rot), np.stack(trans)
    positions = skin_frames(space, rot, trans) if want_vertices else None
    if positions is not None and conditions.pins:  # exactly at rest (not to float rounding)
        pins = np.asarray(conditions.pins)
        positions[:, pins] = vertices[pins].astype(np.float32)
    quats = quats_from_matrices(rot)
    rig = BoneRig(
        space.heads.copy(),
        quats,
        trans,
        space.vertex_bones.astype(np.int32),
        space.vertex_weights.astype(np.float32),
        blend="lbs",
    )
    t_out = np.arange(len(states)) / conditions.fps
    awake = len(states) if sleep.asleep_at is None else sleep.asleep_at + 1
    affine = float(
        max(
            np.abs(completed(np.swapaxes(s[:, :3], 1, 2), space) - r).max()
            for s, r in zip(states, rot, strict=True)
        )
    )
    info = {
        "dynamics": "rig",
        "space": space.info,
        "space_seconds": round(built, 3),
        "substeps": int(integ.report.steps),
        "newton_iterations": int(integ.report.iterations),
        "jacobians": int(integ.report.jacobians),
        "backward_euler_steps": int(integ.report.backward_euler),
        "halvings": int(integ.report.halvings),
        "asleep_frame": sleep.asleep_at,
        "rigidity_residual": affine,
        "pins": "exact" if conditions.pins else "none",
        "cancelled": bool(cancelled),
        "timed_out": bool(timed_out),
        # the strain, the depth into obstacles, whether the steps held: Simulate's warning
        # frames after the scene came to rest are its last moving frame again
        **(
            plausibility(
                space,
                conditions,
                rot[:awake],
                trans[:awake],
                halvings=integ.report.halvings,
                cancelled=cancelled,
            )
            if want_figures
            else {}
        ),
        "seconds": round(time.perf_counter() - started, 3),
    }
    return SimulationResult(
        positions=positions,
        rig=rig,
        times=t_out,
        energy=np.asarray(energies_out),
        conditions=conditions.to_dict(),
        q=states.reshape(len(states), -1),
        info=info,
    )
