"""The meshes of the plausibility scenes (design section 10): objects an artist would try first.

Every scene mesh is built here from numpy grids (and trimesh's icosphere), not taken from the
training data generator, except the gripper: pybullet's PR2 gripper, its links' own meshes
(open shells) at rest (``training.data.robots``), as robots come to an artist. Units are
metres, Z is up, sizes are those of the real objects. Solid parts are closed, outward-oriented
triangle meshes (positive signed volume); a cloth is one open sheet. Each mesh carries

- ``parts`` (N,) int32: the rigid part of each vertex (articulated objects), -1 where a part
  label means nothing (cloth, elastic, rope);
- ``pins`` (P,) int64: the vertex indices the scene holds at rest;
- ``landmarks``: named vertices the conditions grab (a lid's top edge, a handle, a corner);
- ``hinge`` (articulated objects with a revolute joint): the hinge line and, for lids, the unit
  directions from the hinge along the lid and along the base, whose angle is the opening;
- the contact scenes' obstacles: ``ground`` (the height of a ground plane) and ``colliders``
  (static boxes: (name, vertices, faces)).

Shapes: vertices (N, 3) float64 metres, faces (F, 3) int64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import trimesh

EDGE = 0.03  # default target edge length of the solid parts, metres


@dataclass(frozen=True)
class Hinge:
    """A revolute joint: the line ``point + s axis`` (metres; unit axis). For lids, ``lid`` and
    ``base`` are the unit directions (perpendicular to the axis) from the hinge along the moving
    part and along the fixed one at rest; the opening is the angle between them."""

    point: tuple[float, float, float]
    axis: tuple[float, float, float]
    moving_part: int
    fixed_part: int
    lid: tuple[float, float, float] | None = None
    base: tuple[float, float, float] | None = None


@dataclass(frozen=True)
class SceneMesh:
    """A scene's object: vertices (N, 3) float64 m, faces (F, 3) int64, parts (N,) int32
    (-1: unlabelled), pins (P,) int64 vertex indices, ``closed`` (every island watertight),
    ``category`` (articulated, cloth, elastic, continuum), named ``landmarks`` (vertex indices)
    and the ``hinge`` of a revolute part (or None)."""

    vertices: np.ndarray
    faces: np.ndarray
    parts: np.ndarray
    pins: np.ndarray
    closed: bool
    category: str
    landmarks: dict[str, int] = field(default_factory=dict)
    hinge: Hinge | None = None
    ground: float | None = None
    colliders: tuple = ()

    @property
    def size(self) -> float:
        """L, the longest side of the rest bounding box (metres)."""
        return float((self.vertices.max(0) - self.vertices.min(0)).max())


# --------------------------------------------------------------------------------------------
# Primitives


def _grid_faces(rows: int, cols: int, offset: int = 0, flip: bool = False) -> np.ndarray:
    """Two triangles per cell of a (rows+1) x (cols+1) vertex grid stored row-major; the
    triangles turn counter-clockwise in (row, col) (flip: clockwise). Returns (2 rows cols, 3)."""
    idx = offset + np.arange((rows + 1) * (cols + 1)).reshape(rows + 1, cols + 1)
    a, b = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel()
    c, d = idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    tri = np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])  # (2 R C, 3)
    return tri[:, ::-1].copy() if flip else tri


def _weld(vertices: np.ndarray, faces: np.ndarray, tol: float = 1e-9, kept: bool = False):
    """Merge vertices closer than ``tol`` (shared grid borders) -> (vertices, faces), and with
    ``kept`` the index (N',) of each kept vertex among the given ones (its first occurrence)."""
    key = np.round(vertices / tol).astype(np.int64)  # (N, 3)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # keep the first occurrence's order
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    out = vertices[first[order]], rank[inverse.reshape(-1)][faces]
    return (*out, first[order]) if kept else out


def _segments(length: float, edge: float) -> int:
    return max(1, int(math.ceil(length / edge - 1e-9)))


def grid_box(extents, centre=(0.0, 0.0, 0.0), edge: float = EDGE) -> tuple:
    """A closed axis-aligned box with every face gridded at about ``edge`` metres.

    extents: (3,) side lengths; centre: (3,). Faces point outward: on the face x_a = +h_a the
    grid runs along the next two axes (b, c) = (a+1, a+2) mod 3 so that e_b x e_c = +e_a.
    Returns (vertices (N, 3), faces (F, 3)).
    """
    half = 0.5 * np.asarray(extents, dtype=np.float64)
    counts = [_segments(2 * h, edge) for h in half]
    verts, faces, n = [], [], 0
    for a in range(3):
        b, c = (a + 1) % 3, (a + 2) % 3
        u = np.linspace(-half[b], half[b], counts[b] + 1)
        v = np.linspace(-half[c], half[c], counts[c] + 1)
        uu, vv = np.meshgrid(u, v, indexing="ij")  # (nb+1, nc+1)
        for sign in (1.0, -1.0):
            p = np.zeros((uu.size, 3))
            p[:, a], p[:, b], p[:, c] = sign * half[a], uu.ravel(), vv.ravel()
            verts.append(p)
            faces.append(_grid_faces(counts[b], counts[c], n, flip=sign < 0))
            n += len(p)
    v, f = _weld(np.concatenate(verts), np.concatenate(faces))
    return v + np.asarray(centre, dtype=np.float64), f


def sheet(width: float, height: float, edge: float) -> tuple:
    """An open rectangular sheet in the XZ plane, x in [0, width], z in [0, height], y = 0.
    Returns (vertices (R*C, 3) row-major with rows along z, faces (F, 3), (rows, cols))."""
    rows, cols = _segments(height, edge) + 1, _segments(width, edge) + 1
    x, z = np.meshgrid(np.linspace(0, width, cols), np.linspace(0, height, rows), indexing="xy")
    v = np.stack([x.ravel(), np.zeros(x.size), z.ravel()], 1)  # (R C, 3)
    return v, _grid_faces(rows - 1, cols - 1), (rows, cols)


def tube(radius: float, length: float, edge: float, sides: int = 10) -> tuple:
    """A closed cylinder along +Z from z = 0 to ``length`` with rings every ~``edge`` metres and
    a centre vertex on each cap. Returns (vertices (N, 3), faces (F, 3))."""
    rings = _segments(length, edge) + 1
    t = 2 * math.pi * np.arange(sides) / sides
    z = np.linspace(0.0, length, rings)
    ring = np.stack([radius * np.cos(t), radius * np.sin(t)], 1)  # (S, 2)
    side = np.concatenate([np.column_stack([ring, np.full(sides, zi)]) for zi in z])  # (R S, 3)
    idx = np.arange(rings * sides).reshape(rings, sides)
    a, b = idx[:-1], np.roll(idx[:-1], -1, axis=1)
    c, d = np.roll(idx[1:], -1, axis=1), idx[1:]
    walls = np.concatenate([np.stack([a, b, c], -1), np.stack([a, c, d], -1)], 0).reshape(-1, 3)
    bottom, top = len(side), len(side) + 1
    lo, hi = idx[0], idx[-1]
    caps = np.concatenate(
        [
            np.stack([np.full(sides, bottom), np.roll(lo, -1), lo], 1),
            np.stack([np.full(sides, top), hi, np.roll(hi, -1)], 1),
        ]
    )
    v = np.concatenate([side, [[0.0, 0.0, 0.0], [0.0, 0.0, length]]])
    return v, np.concatenate([walls, caps]).astype(np.int64)


def lathe(profile, edge: float, sides: int = 24) -> tuple:
    """A closed surface of revolution about +Z. ``profile`` (P, 2): (radius, height) points from
    a point on the axis round the solid's section to another point on the axis (only the ends on
    the axis), each stretch split every ~``edge`` metres; a ring of ``sides`` vertices per point
    off the axis, one vertex per point on it. Returns (vertices (N, 3), faces (F, 3)), outward."""
    points = [np.asarray(profile[0], dtype=np.float64)]
    for p, q in zip(profile[:-1], profile[1:], strict=True):
        p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
        n = _segments(float(np.linalg.norm(q - p)), edge)
        points += [p + (q - p) * k / n for k in range(1, n + 1)]
    t = 2 * math.pi * np.arange(sides) / sides
    verts, rings = [], []
    for r, z in points:
        start = sum(len(v) for v in verts)
        if r <= 0:
            verts.append(np.array([[0.0, 0.0, z]]))
            rings.append(np.full(sides, start))
        else:
            verts.append(np.column_stack([r * np.cos(t), r * np.sin(t), np.full(sides, z)]))
            rings.append(start + np.arange(sides))
    faces = []
    for a, b in zip(rings[:-1], rings[1:], strict=True):
        a1, b1 = np.roll(a, -1), np.roll(b, -1)
        quads = np.concatenate([np.stack([a, a1, b1], 1), np.stack([a, b1, b], 1)])
        keep = (quads[:, 0] != quads[:, 1]) & (quads[:, 1] != quads[:, 2])
        keep &= quads[:, 0] != quads[:, 2]
        faces.append(quads[keep])
    v, f = np.concatenate(verts), np.concatenate(faces).astype(np.int64)
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    if np.einsum("ij,ij->i", a, np.cross(b, c)).sum() < 0:  # inward: turn every face
        f = f[:, ::-1].copy()
    return v, f


def rotation(axis, angle: float) -> np.ndarray:
    """(3, 3) rotation by ``angle`` radians about the unit ``axis`` (right hand)."""
    return trimesh.transformations.rotation_matrix(angle, axis)[:3, :3]


def _assemble(pieces) -> tuple:
    """Concatenate (vertices, faces, part) pieces -> (vertices, faces, parts)."""
    verts, faces, parts, n = [], [], [], 0
    for v, f, part in pieces:
        verts.append(v)
        faces.append(f + n)
        parts.append(np.full(len(v), part, dtype=np.int32))
        n += len(v)
    return np.concatenate(verts), np.concatenate(faces).astype(np.int64), np.concatenate(parts)


def nearest_vertex(vertices: np.ndarray, point, mask: np.ndarray | None = None) -> int:
    """Index of the vertex nearest ``point`` (3,), among ``mask`` (N,) bool when given."""
    d = np.linalg.norm(vertices - np.asarray(point, dtype=np.float64), axis=1)
    if mask is not None:
        d = np.where(mask, d, np.inf)
    return int(np.argmin(d))


# --------------------------------------------------------------------------------------------
# Articulated objects


def _hinged_lid(base_extents, lid_extents, opening_deg: float, edge: float) -> tuple:
    """A base box on the floor (part 0) and a lid slab (part 1) hinged at the base's back top
    edge (y = +depth/2, z = height), opened by ``opening_deg`` from lying on the base.

    The closed lid covers the base; opening turns it by -opening about +X through the hinge, so
    its direction from the hinge goes from -Y to (-cos a, sin a) in (y, z).
    """
    bx, by, bz = base_extents
    lx, ly, lz = lid_extents
    base_v, base_f = grid_box(base_extents, (0.0, 0.0, bz / 2), edge)
    lid_v, lid_f = grid_box(lid_extents, (0.0, by / 2 - ly / 2, bz + lz / 2), edge)
    hinge = np.array([0.0, by / 2, bz])
    a = math.radians(opening_deg)
    lid_v = (lid_v - hinge) @ rotation([1, 0, 0], -a).T + hinge
    v, f, parts = _assemble([(base_v, base_f, 0), (lid_v, lid_f, 1)])
    lid_dir = (0.0, -math.cos(a), math.sin(a))
    h = Hinge(tuple(hinge), (1.0, 0.0, 0.0), 1, 0, lid=lid_dir, base=(0.0, -1.0, 0.0))
    far = hinge + ly * np.asarray(lid_dir)  # the middle of the lid's free edge
    landmarks = {"lid_edge": nearest_vertex(v, far, parts == 1)}
    return v, f, parts, h, landmarks


def laptop(edge: float = 0.02, opening_deg: float = 105.0) -> SceneMesh:
    """A 32 x 22 cm laptop: a 1.5 cm base and a 0.7 cm lid open by ``opening_deg``; the base's
    vertices are pinned; landmark ``lid_edge`` = the middle of the lid's top edge."""
    v, f, parts, hinge, marks = _hinged_lid(
        (0.32, 0.22, 0.015), (0.32, 0.22, 0.007), opening_deg, edge
    )
    return SceneMesh(v, f, parts, np.flatnonzero(parts == 0), True, "articulated", marks, hinge)


def laptop_welded(edge: float = 0.02, opening_deg: float = 105.0) -> SceneMesh:
    """The laptop as one connected mesh: the lid's hinge edge and the base's back top edge
    share their vertices (a welded hinge, as a modeller merging the two boxes by distance
    leaves it: the seam's edges have four faces each). The shared vertices are labelled with
    the base (pinned); every lid face starts with a lid vertex, so that a face's first vertex
    names its part (the scores' convention)."""
    m = laptop(edge, opening_deg)
    v, f, kept = _weld(m.vertices, m.faces, 1e-7, kept=True)
    parts = m.parts[kept]
    owner = m.parts[m.faces[:, 0]]  # (F,) the part each face was built with
    for _ in range(2):  # roll the lid's faces until their first vertex is the lid's
        roll = (parts[f[:, 0]] != owner) & (owner == 1)
        f[roll] = f[roll][:, [1, 2, 0]]
    remap = np.full(len(m.vertices), -1)
    remap[kept] = np.arange(len(kept))
    marks = {k: int(remap[i]) for k, i in m.landmarks.items()}
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f, parts, pins, True, "articulated", marks, m.hinge)


def chest(edge: float = 0.05, opening_deg: float = 70.0) -> SceneMesh:
    """An 80 x 45 x 45 cm chest body with a 5 cm lid hinged at its back top edge, open by
    ``opening_deg``; the body is pinned; ``lid_edge`` = the middle of the lid's front edge."""
    v, f, parts, hinge, marks = _hinged_lid((0.8, 0.45, 0.45), (0.8, 0.45, 0.05), opening_deg, edge)
    return SceneMesh(v, f, parts, np.flatnonzero(parts == 0), True, "articulated", marks, hinge)


def door(edge: float = 0.06) -> SceneMesh:
    """A 90 x 4 x 200 cm door panel (part 1) beside a 5 x 6 cm jamb post (part 0, pinned) on its
    hinge side (x = 0), 5 mm apart; the hinge is the vertical line at the door's hinge edge.
    ``handle`` = the vertex on the door's -Y face nearest a handle 80 cm from the hinge, 1 m up."""
    jamb_v, jamb_f = grid_box((0.05, 0.06, 2.0), (-0.025, 0.0, 1.0), edge)  # x <= 0
    door_v, door_f = grid_box((0.9, 0.04, 2.0), (0.455, 0.0, 1.0), edge)  # x >= 0.005
    v, f, parts = _assemble([(jamb_v, jamb_f, 0), (door_v, door_f, 1)])
    handle = nearest_vertex(v, (0.805, -0.02, 1.0), parts == 1)
    hinge = Hinge((0.005, 0.0, 0.0), (0.0, 0.0, 1.0), 1, 0)
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f, parts, pins, True, "articulated", {"handle": handle}, hinge)


def drawer(edge: float = 0.04) -> SceneMesh:
    """A 50 x 45 x 25 cm cabinet (part 0, pinned; five 2 cm panels, open at the front, -Y) and
    a drawer (part 1, 41.5 cm deep: a 44 x 40 x 18 cm box sunk 5 mm into a 48 x 2 x 21 cm front
    plate that rests against the cabinet's front edges). ``handle`` = the middle of the drawer
    front's outer face."""
    w, d, h, t = 0.5, 0.45, 0.25, 0.02
    panels = [
        ((w, d, t), (0.0, 0.0, t / 2)),  # bottom
        ((w, d, t), (0.0, 0.0, h - t / 2)),  # top
        ((t, d, h - 2 * t), (-w / 2 + t / 2, 0.0, h / 2)),  # left
        ((t, d, h - 2 * t), (w / 2 - t / 2, 0.0, h / 2)),  # right
        ((w - 2 * t, t, h - 2 * t), (0.0, d / 2 - t / 2, h / 2)),  # back
    ]
    pieces = [(*grid_box(e, c, edge), 0) for e, c in panels]
    front_y = -d / 2 - t / 2
    pieces.append((*grid_box((0.44, 0.40, 0.18), (0.0, -d / 2 - 0.005 + 0.20, h / 2), edge), 1))
    pieces.append((*grid_box((0.48, t, 0.21), (0.0, front_y, h / 2), edge), 1))
    v, f, parts = _assemble(pieces)
    handle = nearest_vertex(v, (0.0, front_y - t / 2, h / 2), parts == 1)
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f, parts, pins, True, "articulated", {"handle": handle})


def bottle_cap(edge: float = 0.012) -> SceneMesh:
    """A 24 cm bottle (part 0, pinned): a 7 cm wide body, a shoulder narrowing from 16 to 20 cm
    up to a 2.6 cm neck, its mouth closed at 24 cm; and a screw cap (part 1) over the neck: a
    3.2 cm cup, 1.9 cm tall, whose ceiling rests on the mouth and whose skirt hangs 1.5 cm down
    round the neck, 0.5 mm from it. ``rim`` = a vertex on the cap's outer skirt (+X side), the
    cap's axis is the hinge (a revolute joint: the cap turns on the neck)."""
    body, neck, top = 0.035, 0.013, 0.24
    bottle_v, bottle_f = lathe(
        [(0.0, 0.0), (body, 0.0), (body, 0.16), (neck, 0.20), (neck, top), (0.0, top)], edge
    )
    inner, outer, skirt, lid = neck + 0.0005, 0.016, 0.015, 0.004
    cap_v, cap_f = lathe(
        [(0.0, top), (inner, top), (inner, top - skirt), (outer, top - skirt)]
        + [(outer, top + lid), (0.0, top + lid)],
        edge / 3,
    )
    v, f, parts = _assemble([(bottle_v, bottle_f, 0), (cap_v, cap_f, 1)])
    rim = nearest_vertex(v, (outer, 0.0, top - skirt / 2), parts == 1)
    hinge = Hinge((0.0, 0.0, top), (0.0, 0.0, 1.0), 1, 0)
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f, parts, pins, True, "articulated", {"rim": rim}, hinge)


# --------------------------------------------------------------------------------------------
# Cloth, elastic volumes, rope


def _unlabelled(v, f, pins, closed: bool, category: str, landmarks: dict) -> SceneMesh:
    """A scene mesh whose vertices carry no part label (-1): cloth, elastic, rope."""
    pins = np.asarray(pins, dtype=np.int64)
    return SceneMesh(v, f, np.full(len(v), -1, dtype=np.int32), pins, closed, category, landmarks)


def flag(edge: float = 0.04) -> SceneMesh:
    """A 1.0 x 0.6 m flag in the XZ plane between 1.4 m and 2.0 m up, pinned along its pole edge
    (x = 0). ``corner`` = the free bottom corner (x = 1, z = 1.4)."""
    v, f, _ = sheet(1.0, 0.6, edge)
    v[:, 2] += 1.4
    pins = np.flatnonzero(np.isclose(v[:, 0], 0.0))
    corner = nearest_vertex(v, (1.0, 0.0, 1.4))
    return _unlabelled(v, f, pins, False, "cloth", {"corner": corner})


def curtain(edge: float = 0.05) -> SceneMesh:
    """A 1.2 m wide, 1.6 m long curtain in the XZ plane hanging from a rail 2.2 m up (its top
    edge pinned). ``middle`` = the vertex at its centre."""
    v, f, _ = sheet(1.2, 1.6, edge)
    v[:, 0] -= 0.6
    v[:, 2] += 0.6
    pins = np.flatnonzero(np.isclose(v[:, 2], 2.2))
    middle = nearest_vertex(v, (0.0, 0.0, 1.4))
    return _unlabelled(v, f, pins, False, "cloth", {"middle": middle})


def jelly_beam(edge: float = 0.025) -> SceneMesh:
    """A 60 x 10 x 10 cm closed beam along +X, 1 m up, gridded every ~``edge`` so it can bend;
    the vertices of its end face x = 0 are pinned (a cantilever). ``tip`` = the middle of the
    free end's top edge."""
    v, f = grid_box((0.6, 0.1, 0.1), (0.3, 0.0, 1.0), edge)
    pins = np.flatnonzero(np.isclose(v[:, 0], 0.0))
    tip = nearest_vertex(v, (0.6, 0.0, 1.05))
    return _unlabelled(v, f, pins, True, "elastic", {"tip": tip})


def ball(radius: float = 0.1, subdivisions: int = 3) -> SceneMesh:
    """An icosphere ball of ``radius`` metres centred 1 m up (642 vertices at 3 subdivisions);
    nothing pinned. ``top`` = its highest vertex."""
    sphere = trimesh.creation.icosphere(subdivisions=subdivisions, radius=radius)
    v = np.asarray(sphere.vertices, dtype=np.float64) + [0.0, 0.0, 1.0]
    f = np.asarray(sphere.faces, dtype=np.int64)
    return _unlabelled(v, f, (), True, "elastic", {"top": int(np.argmax(v[:, 2]))})


def rope(length: float = 1.0, radius: float = 0.01, edge: float = 0.02) -> SceneMesh:
    """A closed 2 cm thick tube rope of ``length`` hanging from 2 m up: its top cap and top ring
    pinned. ``end`` = the centre of its bottom cap."""
    v, f = tube(radius, length, edge)
    v = v + [0.0, 0.0, 2.0 - length]
    pins = np.flatnonzero(np.isclose(v[:, 2], 2.0))
    end = nearest_vertex(v, (0.0, 0.0, 2.0 - length))
    return _unlabelled(v, f, pins, True, "continuum", {"end": end})


# --------------------------------------------------------------------------------------------
# Contact scenes (design section 11)


def ball_drop() -> SceneMesh:
    """The ball (10 cm radius, 1 m up) over a ground 30 cm below its bottom, nothing pinned."""
    return replace(ball(), ground=0.6)


def cloth_on_box(edge: float = 0.04) -> SceneMesh:
    """A free 60 x 60 cm horizontal cloth 5 cm above a 30 cm box standing on the ground
    (z = 0.6), centred over it. ``corner`` = a corner of the cloth."""
    v, f, _ = sheet(0.6, 0.6, edge)
    v = np.stack([v[:, 0] - 0.3, v[:, 2] - 0.3, np.full(len(v), 0.95)], 1)
    box_v, box_f = grid_box((0.3, 0.3, 0.3), (0.0, 0.0, 0.75), 0.15)
    mesh = _unlabelled(v, f, (), False, "cloth", {"corner": nearest_vertex(v, (0.3, 0.3, 0.95))})
    return replace(mesh, ground=0.6, colliders=(("box", box_v, box_f),))


def laptop_on_desk(edge: float = 0.02) -> SceneMesh:
    """The laptop, nothing pinned, with its base on a 100 x 70 x 4 cm desk top (a collider whose
    top is the base's bottom, z = 0)."""
    mesh = laptop(edge)
    desk_v, desk_f = grid_box((1.0, 0.7, 0.04), (0.0, 0.0, -0.02), 0.25)
    return replace(mesh, pins=np.zeros(0, dtype=np.int64), colliders=(("desk", desk_v, desk_f),))


def arm(edge: float = 0.03) -> SceneMesh:
    """A three-link arm, like a robot's stacked links: a 10 x 10 x 20 cm base post (part 0,
    pinned), then three 50 x 10 x 6 cm links (parts 1-3), each lying on the one below over a
    10 x 10 cm square at its end (a small flat patch: a revolute joint about the vertical),
    turned 90 degrees from it. ``tip`` = the far end of the last link."""
    t, w, length = 0.06, 0.1, 0.5
    pieces = [(*grid_box((w, w, 0.2), (0.0, 0.0, 0.1), edge), 0)]
    # link k's near end sits over the previous link's far end (the base for link 1)
    ends = [(0.0, 0.0)]
    along = [(1, 0), (0, 1), (1, 0)]
    for k, (ax, ay) in enumerate(along):
        x0, y0 = ends[-1]
        z = 0.2 + t * (k + 0.5)
        cx, cy = x0 + ax * (length - w) / 2, y0 + ay * (length - w) / 2
        extents = (length if ax else w, length if ay else w, t)
        pieces.append((*grid_box(extents, (cx, cy, z), edge), k + 1))
        ends.append((x0 + ax * (length - w), y0 + ay * (length - w)))
    v, f, parts = _assemble(pieces)
    x, y = ends[-1]
    tip = nearest_vertex(v, (x + w / 2, y, 0.2 + 2.5 * t), parts == 3)
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f, parts, pins, True, "articulated", {"tip": tip}, None)


def gripper() -> SceneMesh:
    """pybullet's PR2 gripper (``training.data.robots``: 1,524 vertices, 32 cm): its palm
    (part 0, pinned), two fingers (parts 1 and 3) hinged on it and their tips (2 and 4); the
    links are open shells (a robot's meshes), so the mesh is not closed. ``knuckle`` = the
    far end of the first finger (part 1)."""
    from training.data import robots

    asset = next(a for a in robots.ROBOTS if a.name == "pr2_gripper")
    robot = robots.load_robot(asset)
    try:
        v = robots.pose_sequence(robot, robot.rest[None])[0].astype(np.float64)
        sizes = [len(g.vertices) for g in robot.links]
        starts = np.cumsum([0] + sizes)
        f = np.concatenate([g.faces + s for g, s in zip(robot.links, starts, strict=False)])
    finally:
        robots.close(robot)
    parts = np.repeat(np.arange(len(sizes)), sizes).astype(np.int32)
    # its meshes' slivers (8 faces of under 1e-8 m^2) out, and the vertices they leave alone
    area = 0.5 * np.linalg.norm(np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]), axis=1)
    f = f[area > 1e-8]
    used, f = np.unique(f, return_inverse=True)
    v, parts, f = v[used], parts[used], f.reshape(-1, 3)
    finger = np.flatnonzero(parts == 1)
    knuckle = int(finger[np.argmax(v[finger, 0])])
    pins = np.flatnonzero(parts == 0)
    return SceneMesh(v, f.astype(np.int64), parts, pins, False, "articulated", {"knuckle": knuckle})


BUILDERS = {
    "laptop": laptop,
    "chest": chest,
    "door": door,
    "drawer": drawer,
    "flag": flag,
    "curtain": curtain,
    "jelly_beam": jelly_beam,
    "ball": ball,
    "rope": rope,
    "ball_drop": ball_drop,
    "cloth_on_box": cloth_on_box,
    "laptop_on_desk": laptop_on_desk,
    "arm": arm,
    "laptop_welded": laptop_welded,
    "bottle_cap": bottle_cap,
    "gripper": gripper,
}
"""Scene name -> builder of its mesh (default resolution)."""
