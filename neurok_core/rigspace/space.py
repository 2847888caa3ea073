"""The rig space of one object under one set of pins: bones, skinning rows, mass moments, and
the fixed data of its energies (design section 12).

Everything here is built once per run; the per-step code (:mod:`.energies`,
:mod:`.integrator`) only multiplies these matrices by the state ``Q`` (package docstring).

Pins. A part whose pinned vertices hold it fully (all its vertices, or three not on one line
for a rigid part) is **fixed**: its bones are not coordinates. A rigid part pinned at one point
or along a line is held by glue to the world there (a ball joint or a hinge). A part with
several bones pinned in a region (a flag at its pole) blends a **still bone** (the world) near
the pins, with weight one at the pinned vertices, so those stay exactly at rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree

from ..errors import StructureError
from ..geometry import unique_edges, vertex_areas
from .bones import MAX_INFLUENCES, BoneLayout, PartInfo, geometric_bones
from .joints import Joint, find_joints

PIN_FALLOFF = 0.5  # the still bone fades within this share of the part's bone spacing
PIN_CUTOFF = 1e-3
UNSEEN = 1e-4  # object sizes (rms): a bone's vertices extending less along a direction
COVERED = 0.5  # a pinned part's bone keeping less of its mass moment is no coordinate


@dataclass(frozen=True)
class RigSettings:
    """Stiffnesses of the rig space's energies as frequencies (Hz) of the motion they resist
    (each energy's scale is its part's mass times (2 pi f)^2 times a squared length, so the
    behaviour does not depend on the object's size or mass), damping ratios of the stiff ones,
    and the solver's limits.

    rigidity_hz: how stiffly each bone keeps its shape (a bone's stretch mode);
    stretch_hz: how stiffly a rope or elastic part keeps its edges' lengths (a cloth's: its
    material, :class:`~neurok_core.rigspace.cloth.ClothMaterial`);
    cloth_substeps: a cloth's steps per frame (backward Euler: at 1 or 2 a frame a 600-vertex
    flag's far edge drops within 1.3% of the same; two at least near obstacles, more where its
    nodes move fast);
    glue_hz: how stiffly joints keep their parts attached (and rigid parts at their pins);
    contact_hz: the ground, colliders and fixed parts against the moving parts;
    stiff_damping: damping ratio of the rigidity and glue modes (they are meant never to
    vibrate; in proportion to the user's damping below 0.1/s) and of a contact's compression
    (unless the contact is perfectly elastic); stretch_damping: that of the stretching modes,
    which a cloth's or a rope's bending feeds (linear blending of turned bones shortens edges
    a little), so that damping them would damp the bending too;
    substeps: implicit steps per frame; newton_iterations: per step, before it is halved;
    step: the implicit step, "midpoint" (``integrator``), "newton" (``newton_step``) or
    "auto" (``simulate.use_newton``);
    contact_samples: points per part that meet obstacles (its vertices, farthest-point
    sampled where it has more); contact_surface: points per part at least (a part of fewer
    vertices, a cube of 8, gets points spread over its faces too, so that a box landing on
    another's face or edge meets it); contact_share: how many of them hold the part's weight at
    contact_hz (each point's stiffness is the part's mass (2 pi contact_hz)^2 / contact_share,
    so that a ball resting on one point sinks no more than a box on its face); contact_depth
    (object sizes): how deep the load (gravity and the forces) sinks those points at most (it
    raises the contact's frequency for small objects)."""

    rigidity_hz: float = 60.0
    stretch_hz: float = 40.0
    cloth_substeps: int = 1
    glue_hz: float = 40.0
    contact_hz: float = 60.0
    stiff_damping: float = 1.0
    stretch_damping: float = 1.0
    contact_margin: float = 0.002  # in object sizes: contact acts within this gap
    substeps: int = 2
    newton_iterations: int = 12
    max_halvings: int = 6
    contact_samples: int = 1000
    contact_surface: int = 200
    contact_share: float = 4.0
    contact_depth: float = 0.001
    stretch_edges: int = 1500
    friction_slip: float = 0.002  # object sizes per second below which friction sticks
    rolling_resistance: float = 0.01  # a part's rolling torque at most this x its size x load
    # a scene none of whose points moves farther than sleep_distance (object sizes) from where
    # it was for sleep_time seconds, its loads steady, is at rest: it stops moving (0: never)
    sleep_distance: float = 5e-4
    sleep_time: float = 0.5
    step: str = "auto"  # "midpoint", "newton" (projected, rigid parts exact) or "auto"
    cloth_step: str = "quasi-newton"  # a cloth's: "quasi-newton" or "projective" (previews)
    # a cloth's layers kept apart (``cloth_self``: its folds do not pass through it), at
    # 3-25x a cloth run's time: off by default, as Blender's cloth's Self Collisions
    cloth_self_contact: bool = False


@dataclass
class RigSpace:
    """vertices (N, 3), faces (F, 3): the rest mesh (metres); layout: the bones of the geometry;
    heads (B, 3): every bone's head, the still bone last when there is one; fixed (B,) bool:
    bones that are not coordinates (the still bone, fixed parts); rows: sparse (N, 4B) skinning
    rows u_i (package docstring); masses (N,) kg; moments (4B, 4B) = sum_i m_i u_i u_i^T;
    gravity_moment (4B,) = sum_i m_i u_i; vertex_bones / vertex_weights (N, K): the rig's
    weights; joints; object_size (m); part_mass (P,) kg; axes (B, 3, 3): each bone's rest
    directions (orthonormal columns), seen (B, 3) bool: those its vertices extend along
    (``bone_axes``); a bone's F along the others moves no vertex and is not a coordinate."""

    vertices: np.ndarray
    faces: np.ndarray
    layout: BoneLayout
    heads: np.ndarray
    fixed: np.ndarray
    rows: sparse.csr_matrix
    masses: np.ndarray
    moments: np.ndarray
    gravity_moment: np.ndarray
    vertex_bones: np.ndarray
    vertex_weights: np.ndarray
    bone_parts: np.ndarray
    joints: list[Joint]
    object_size: float
    part_mass: np.ndarray
    fixed_parts: np.ndarray
    axes: np.ndarray | None = None
    seen: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    # what runs in this space build once and keep (the contact's obstacles and points, by
    # the obstacles they meet: ``simulate._contact_geometry``); never part of its identity
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def num_bones(self) -> int:
        return int(len(self.heads))

    def rest(self) -> np.ndarray:
        """The rest state Q (B, 4, 3): F = I, c = head."""
        q = np.zeros((self.num_bones, 4, 3))
        q[:, :3, :] = np.eye(3)
        q[:, 3, :] = self.heads
        return q

    def point_rows(self, points: np.ndarray, vertices: np.ndarray | None = None) -> np.ndarray:
        """Dense skinning rows (P, 4B) of rest points: a vertex index's own row, or a point's
        nearest vertex's weights at the point's own position."""
        points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
        if vertices is None:
            _, vertices = cKDTree(self.vertices).query(points)
        vertices = np.asarray(vertices).reshape(-1)
        return homogeneous_rows(
            points, self.vertex_bones[vertices], self.vertex_weights[vertices], self.heads
        )

    def part_rows(self, part: int, points: np.ndarray) -> np.ndarray:
        """Rows (G, 4B) of points moved with ``part`` (its nearest vertex's weights)."""
        own = np.flatnonzero(self.layout.parts == part)
        _, near = cKDTree(self.vertices[own]).query(points)
        return self.point_rows(points, own[near])

    def part_vector_rows(self, part: int, points: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """Rows (G, 4B) of the ``vectors`` (G, 3) at ``points`` (G, 3) carried by ``part`` (as
        :meth:`part_rows`: its nearest vertex's weights): they turn with its bones, and do not
        shift."""
        own = np.flatnonzero(self.layout.parts == part)
        _, near = cKDTree(self.vertices[own]).query(points)
        return self.point_rows(points + vectors, own[near]) - self.point_rows(points, own[near])

    def bending_edges(self, count: int, rng: np.random.Generator) -> tuple:
        """(edges (E, 2), rest lengths (E,)): a seeded sample of at most ``count`` of the
        edges of the parts that bend (not rigid), zero-length ones left out."""
        parts = self.layout.parts
        bendy = [p for p, info in enumerate(self.layout.part_info) if info.kind != "rigid"]
        if not bendy or not len(self.faces):
            return np.zeros((0, 2), dtype=np.int64), np.zeros(0)
        edges = unique_edges(self.faces)
        edges = edges[np.isin(parts[edges[:, 0]], bendy)]
        if len(edges) > count:
            edges = edges[np.sort(rng.choice(len(edges), count, replace=False))]
        lengths = np.linalg.norm(self.vertices[edges[:, 1]] - self.vertices[edges[:, 0]], axis=1)
        keep = lengths > 1e-9 * self.object_size
        return edges[keep], lengths[keep]

    def coordinates(self) -> np.ndarray | None:
        """(12B, K) an orthonormal basis of the coordinates that move (in Q's flat order): every
        moving bone's centre and its F along its seen directions; None when those are all
        of the moving bones' entries (no bone lacks a direction)."""
        live = np.flatnonzero(~self.fixed)
        if self.seen is None or self.seen[live].all():
            return None
        nb = self.num_bones
        cols = []
        for b in live:
            for a in np.flatnonzero(self.seen[b]):
                d = self.axes[b][:, a]  # F d = sum_j d_j Q[b, j, :]
                for i in range(3):
                    col = np.zeros((nb, 4, 3))
                    col[b, :3, i] = d
                    cols.append(col.reshape(-1))
            for i in range(3):
                col = np.zeros((nb, 4, 3))
                col[b, 3, i] = 1.0
                cols.append(col.reshape(-1))
        return np.stack(cols, 1)

    def moving_basis(self) -> np.ndarray:
        """(12B, K) :meth:`coordinates`, or where that is None every entry of the moving
        bones (identity columns)."""
        full = self.coordinates()
        if full is None:
            full = np.eye(12 * self.num_bones)[:, np.repeat(~self.fixed, 12)]
        return full

    def vertex_rows(self, index: np.ndarray) -> np.ndarray:
        """Dense skinning rows (R, 4B) of vertices ``index``."""
        return np.asarray(self.rows[np.asarray(index)].todense())


def homogeneous_rows(points, bones, weights, heads) -> np.ndarray:
    """Rows (P, 4B): u = (w_b (X - h_b), w_b) for each of the points' bones."""
    p, k = bones.shape
    out = np.zeros((p, 4 * len(heads)))
    for j in range(k):
        b, w = bones[:, j], weights[:, j]
        local = (points - heads[b]) * w[:, None]  # (P, 3)
        for r in range(3):
            np.add.at(out, (np.arange(p), 4 * b + r), local[:, r])
        np.add.at(out, (np.arange(p), 4 * b + 3), w)
    return out


def _sparse_rows(vertices, bones, weights, heads) -> sparse.csr_matrix:
    n, k = bones.shape
    cols = (4 * bones[:, :, None] + np.arange(4)).reshape(-1)  # (N K 4,)
    vals = np.empty((n, k, 4))
    np.subtract(vertices[:, None, :], heads[bones], out=vals[..., :3])  # (N, K, 3)
    vals[..., 3] = 1.0
    vals *= weights[..., None]
    # built row by row (4K entries each) in CSR form: no COO conversion of ~20 N entries
    indptr = np.arange(0, 4 * k * n + 1, 4 * k)
    m = sparse.csr_matrix((vals.reshape(-1), cols, indptr), shape=(n, 4 * len(heads)))
    m.sum_duplicates()
    return m


def bone_axes(moments: np.ndarray, fixed: np.ndarray, size: float) -> tuple:
    """(axes (B, 3, 3), seen (B, 3)): each bone's principal rest directions about its head
    (the eigenvectors of sum_i m_i w_ib^2 (X_i - h_b)(X_i - h_b)^T, a right-handed frame) and
    whether its vertices extend along each by more than ``UNSEEN`` object sizes (rms). A flat
    part's bones see no normal, a line's no direction across it, a bone of one vertex none:
    its F along those moves no vertex and only the rigidity would hold it, massless, which
    the midpoint step cannot settle; those entries are left out of the coordinates."""
    nb = len(fixed)
    axes = np.repeat(np.eye(3)[None], nb, 0)
    seen = np.ones((nb, 3), dtype=bool)
    for b in np.flatnonzero(~fixed):
        block = moments[4 * b : 4 * b + 4, 4 * b : 4 * b + 4]
        mass = max(float(block[3, 3]), 1e-300)
        lam, vec = np.linalg.eigh(block[:3, :3] / mass)
        lam, vec = lam[::-1], vec[:, ::-1]
        if np.linalg.det(vec) < 0:
            vec[:, 2] *= -1.0
        look = lam > (UNSEEN * size) ** 2
        if look.all():
            continue
        axes[b], seen[b] = vec, look
    return axes, seen


def _drop_covered_bones(index, share, masses, bones, weights, heads, fixed, own) -> None:
    """Bones of a pinned part that the still bone mostly covers are no coordinates: a bone
    left with less than ``COVERED`` of its mass moment sum_i m_i w_ib^2 once the still bone
    takes ``share`` (P,) of its vertices ``index`` moves them only by large, fast turns (a
    light bone by the pins turned 1.5 rad in a Newton step). Such a bone is made fixed with
    no vertices, its weights going to the part's other bones (to the nearest kept one where
    a vertex had no other); ``bones``, ``weights`` (N, K) and ``fixed`` (B,) change in place;
    ``own`` (B,) bool: the part's bones."""
    part_bones = np.flatnonzero(own)
    if len(part_bones) < 2:
        return
    b_rows, w_rows, m = bones[index], weights[index], masses[index]
    kept = []
    for b in part_bones:
        wb = (w_rows * (b_rows == b)).sum(1)
        before = float((m * wb**2).sum())
        after = float((m * (wb * (1.0 - share)) ** 2).sum())
        kept.append(after >= COVERED * before)
    kept = np.asarray(kept)
    if kept.all():
        return
    if not kept.any():
        kept[0] = True
    drop = part_bones[~kept]
    live = part_bones[kept]
    gone = np.isin(b_rows, drop)
    w_rows = np.where(gone, 0.0, w_rows)
    total = w_rows.sum(1)
    orphan = total <= 1e-12
    if orphan.any():  # a vertex of dropped bones only: the nearest kept bone takes it
        _, near = cKDTree(heads[live]).query(heads[b_rows[orphan, 0]])
        b_rows[orphan, 0] = live[near]
        w_rows[orphan, 0] = 1.0
        total = w_rows.sum(1)
    w_rows = w_rows / total[:, None]
    b_rows = np.where(w_rows > 0, b_rows, b_rows[:, :1])
    bones[index], weights[index] = b_rows, w_rows
    fixed[drop] = True


def _collinear(points: np.ndarray, size: float) -> bool:
    if len(points) < 3:
        return True
    d = points - points.mean(0)
    s = np.linalg.svd(d, compute_uv=False)
    return bool(s[1] < 1e-3 * max(size, 1e-12) * np.sqrt(len(points)))


def pin_role(info: PartInfo, mine: np.ndarray, vertices: np.ndarray, size: float) -> str | None:
    """What pins do to the part ``info`` whose vertices ``mine`` (its own count,) bool are
    pinned (module docstring): "fixed" (all of them, or a rigid part's three not on a line),
    "glue" (a rigid part's point or line: a ball or hinge to the world, ``Joint.to_world``),
    "still" (a part with several bones: a still bone near the pins), or None (no pin)."""
    if not mine.any():
        return None
    held = info.vertices[mine]
    if mine.all() or (info.kind == "rigid" and not _collinear(vertices[held], size)):
        return "fixed"
    return "glue" if info.kind == "rigid" else "still"


def build_rig_space(
    vertices: np.ndarray,
    faces: np.ndarray,
    *,
    mass: float,
    pins=(),
    elastic: bool = False,
    settings: RigSettings | None = None,
    bone_density: float = 1.0,
    structure=None,
) -> RigSpace:
    """The rig space of the mesh with ``mass`` kg spread by area and ``pins`` held;
    ``bone_density``: ``geometric_bones``' density; ``structure``: a
    :class:`~neurok_core.structure.Structure` whose joints replace the ones the geometry
    gives (:mod:`~neurok_core.rigspace.structure_joints`)."""
    settings = settings or RigSettings()
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    n = len(vertices)
    size = float(np.ptp(vertices, axis=0).max()) if n else 1.0
    size = size if size > 0 else 1.0
    layout = geometric_bones(vertices, faces, elastic=elastic, density=bone_density)
    if structure is not None:  # the kinds the structure gives its parts (an artist's edit)
        from .structure_joints import part_kinds

        if structure.num_vertices != n:
            raise StructureError(
                f"the structure is for {structure.num_vertices} vertices, the mesh has {n}"
            )
        kinds = part_kinds(structure, layout)
        if kinds:
            layout = geometric_bones(
                vertices, faces, elastic=elastic, density=bone_density, kinds=kinds
            )
    heads = layout.heads.copy()
    bone_parts = layout.bone_parts.copy()
    nb = len(heads)
    fixed = np.zeros(nb, dtype=bool)
    bones = layout.vertex_bones.copy()
    weights = layout.vertex_weights.copy()
    areas = vertex_areas(vertices, faces) if len(faces) else np.zeros(n)
    if areas.sum() <= 0:
        areas = np.ones(n)
    areas = np.maximum(areas, 1e-9 * areas.max())
    masses = mass * areas / areas.sum()
    pins = np.asarray(sorted(set(int(p) for p in pins)), dtype=np.int64)
    pinned = np.zeros(n, dtype=bool)
    pinned[pins] = True
    num_parts = len(layout.part_info)
    fixed_parts = np.zeros(num_parts, dtype=bool)
    pin_glue: list[tuple[int, np.ndarray]] = []  # (part, pinned points) held by glue
    pin_still: list[int] = []  # the parts whose pins hold them by a still bone
    still_share = np.zeros(n)
    for p, info in enumerate(layout.part_info):
        mine = pinned[info.vertices]
        role = pin_role(info, mine, vertices, size)
        if role is None:
            continue
        held = info.vertices[mine]
        if role == "fixed":
            fixed_parts[p] = True
            fixed[bone_parts == p] = True
        elif role == "glue":
            pin_glue.append((p, vertices[held]))
        else:
            pin_still.append(p)
            own = bone_parts == p
            h = heads[own]
            spacing = size
            if len(h) > 1:
                spacing = float(np.median(cKDTree(h).query(h, 2)[0][:, 1]))
            dist, _ = cKDTree(vertices[held]).query(vertices[info.vertices])
            share = np.exp(-((dist / max(PIN_FALLOFF * spacing, 1e-12)) ** 2))
            share[share < PIN_CUTOFF] = 0.0
            share[mine] = 1.0
            still_share[info.vertices] = share
            _drop_covered_bones(info.vertices, share, masses, bones, weights, heads, fixed, own)
    has_still = bool(still_share.any())
    if has_still:
        still = nb
        heads = np.concatenate([heads, vertices[pins].mean(0, keepdims=True)])
        bone_parts = np.concatenate([bone_parts, [-1]])
        fixed = np.concatenate([fixed, [True]])
        bones = np.concatenate([bones, np.full((n, 1), still)], 1)
        weights = np.concatenate([weights * (1.0 - still_share[:, None]), still_share[:, None]], 1)
    rows = _sparse_rows(vertices, bones, weights, heads)
    moments = np.asarray((rows.T @ sparse.diags(masses) @ rows).todense())
    gravity_moment = np.asarray(rows.T @ masses).reshape(-1)
    part_mass = np.bincount(layout.parts, weights=masses, minlength=num_parts)
    axes, seen = bone_axes(moments, fixed, size)
    if structure is None:
        joints = find_joints(vertices, faces, layout, fixed_parts, size)
    else:
        from .structure_joints import structure_joints

        held = [p for p, _ in pin_glue] + pin_still  # the pins hold them to the world
        joints = structure_joints(structure, vertices, faces, layout, fixed_parts, size, held)
    for p, points in pin_glue:
        joints.append(Joint.to_world(p, points, size))
    space = RigSpace(
        vertices=vertices,
        faces=faces,
        layout=layout,
        heads=heads,
        fixed=fixed,
        rows=rows,
        masses=masses,
        moments=moments,
        gravity_moment=gravity_moment,
        vertex_bones=bones,
        vertex_weights=weights,
        bone_parts=bone_parts,
        joints=joints,
        object_size=size,
        part_mass=part_mass,
        fixed_parts=fixed_parts,
        axes=axes,
        seen=seen,
    )
    space.info = {
        "bones": int(nb),
        "still_bone": has_still,
        "parts": [info.kind for info in layout.part_info],
        "fixed_parts": int(fixed_parts.sum()),
        "joints": [j.describe() for j in joints],
    }
    return space


__all__ = [
    "MAX_INFLUENCES",
    "RigSettings",
    "RigSpace",
    "bone_axes",
    "build_rig_space",
    "homogeneous_rows",
    "pin_role",
]
