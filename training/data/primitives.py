"""Watertight triangle-mesh primitives with a target edge length, for procedural objects.

Every primitive is a closed 2-manifold with outward-facing triangles (positive signed volume), so
an object built from them is ``closed`` in the sense of the 4D format (winding number > 0.5
inside). The resolution is set by ``edge``: the approximate edge length in metres, so that a
part's vertex count grows with its area, not with how it was modelled.

Shapes: ``TriMesh.vertices`` (N, 3) float64 metres, ``TriMesh.faces`` (F, 3) int64.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

MIN_SEGMENTS = 8  # around a circle


class TriMesh(NamedTuple):
    vertices: np.ndarray  # (N, 3) float64
    faces: np.ndarray  # (F, 3) int64


def _segments(length: float, edge: float, minimum: int = 1) -> int:
    return max(minimum, int(math.ceil(length / edge - 1e-9)))


def _quad_grid_faces(rows: int, cols: int, index: np.ndarray) -> np.ndarray:
    """Two triangles per grid cell of ``index`` (rows+1, cols+1), counter-clockwise in (u, v)."""
    a = index[:-1, :-1].ravel()
    b = index[1:, :-1].ravel()
    c = index[1:, 1:].ravel()
    d = index[:-1, 1:].ravel()
    return np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])


def _axis_coords(half: float, radius: float, edge: float) -> np.ndarray:
    """1D grid from -half to half, with extra rows in the bands that get rounded."""
    if radius <= 0:
        return np.linspace(-half, half, _segments(2 * half, edge) + 1)
    flat = half - radius
    band = _segments(math.pi * radius / 4, edge)  # the band covers 45 degrees of the fillet
    mid = np.linspace(-flat, flat, _segments(2 * flat, edge) + 1)
    lo = np.linspace(-half, -flat, band + 1)[:-1]
    return np.concatenate([lo, mid, -lo[::-1]])


def box(extents, edge: float, radius: float = 0.0) -> TriMesh:
    """Axis-aligned box centred at the origin, optionally with rounded edges and corners.

    extents: (3,) side lengths in metres. radius: fillet radius, clamped below half the smallest
    side. A point q of the gridded cube surface maps to c + r (q - c) / |q - c| with
    c = clip(q, -(e - r), e - r) (e the half extents): faces stay flat, edges become quarter
    cylinders and corners eighth spheres.
    """
    half = 0.5 * np.asarray(extents, dtype=np.float64)
    if (half <= 0).any():
        raise ValueError(f"box extents must be positive, got {2 * half}")
    radius = float(min(radius, 0.95 * half.min()))
    coords = [_axis_coords(h, radius, edge) for h in half]
    shape = tuple(len(c) for c in coords)
    # number the grid points on the surface of the (nx, ny, nz) grid once, so faces share them
    index = np.full(shape, -1, dtype=np.int64)
    surface = np.zeros(shape, dtype=bool)
    for axis in range(3):
        sl = [slice(None)] * 3
        for end in (0, -1):
            sl[axis] = end
            surface[tuple(sl)] = True
    index[surface] = np.arange(int(surface.sum()))
    grid = np.stack(np.meshgrid(*coords, indexing="ij"), -1)  # (nx, ny, nz, 3)
    v = grid[surface]  # (N, 3), same order as the numbering
    faces = []
    for axis in range(3):
        u, w = (axis + 1) % 3, (axis + 2) % 3  # e_u x e_w = e_axis
        for end, flip in ((-1, False), (0, True)):
            sl = [slice(None)] * 3
            sl[axis] = end
            face_index = index[tuple(sl)]
            # face_index has the remaining axes in increasing order; put u first, w second
            rest = [a for a in range(3) if a != axis]
            if rest != [u, w]:
                face_index = face_index.T
            f = _quad_grid_faces(face_index.shape[0] - 1, face_index.shape[1] - 1, face_index)
            faces.append(f[:, ::-1] if flip else f)
    f = np.concatenate(faces)
    if radius > 0:
        inner = half - radius
        c = np.clip(v, -inner, inner)
        d = v - c
        n = np.linalg.norm(d, axis=1, keepdims=True)
        v = c + radius * d / np.maximum(n, 1e-12)
    return TriMesh(v, f)


def prism(polygon, height: float, edge: float) -> TriMesh:
    """Convex polygon (K, 2), counter-clockwise, extruded from z = 0 to z = ``height``.

    Caps are concentric scaled copies of the resampled boundary around the centroid.
    """
    poly = np.asarray(polygon, dtype=np.float64)
    ring = _resample(poly, edge, closed=True)  # (M, 2)
    m = len(ring)
    centre = poly.mean(0)
    ab = np.roll(poly, -1, axis=0) - poly  # (K, 2) edges
    to_c = centre - poly
    inradius = float(
        (np.abs(ab[:, 0] * to_c[:, 1] - ab[:, 1] * to_c[:, 0]) / np.linalg.norm(ab, axis=1)).min()
    )
    n_cap = _segments(inradius, edge)
    n_z = _segments(height, edge)
    zs = np.linspace(0.0, height, n_z + 1)
    side = np.concatenate([np.column_stack([ring, np.full(m, z)]) for z in zs])  # (m (n_z+1), 3)
    idx = np.arange(m)
    faces = []
    for k in range(n_z):
        a, b = k * m + idx, k * m + (idx + 1) % m
        c, d = b + m, a + m
        faces += [np.stack([a, b, c], 1), np.stack([a, c, d], 1)]
    verts = [side]
    offset = len(side)
    for top, z in ((False, 0.0), (True, height)):
        rim = (n_z * m if top else 0) + idx  # indices of the boundary ring at this cap
        scales = np.arange(n_cap - 1, 0, -1) / n_cap  # inner rings, outermost first
        rings = [centre + (ring - centre) * s for s in scales]
        cap = [np.column_stack([r, np.full(m, z)]) for r in rings] + [[[*centre, z]]]
        cap_faces = []
        outer = rim
        for j in range(len(rings)):
            inner = offset + j * m + idx
            a, b = outer, outer[(idx + 1) % m]
            c, d = inner[(idx + 1) % m], inner
            cap_faces += [np.stack([a, b, c], 1), np.stack([a, c, d], 1)]
            outer = inner
        centre_index = offset + len(rings) * m
        cap_faces.append(np.stack([outer, outer[(idx + 1) % m], np.full(m, centre_index)], 1))
        f = np.concatenate(cap_faces)
        faces.append(f if top else f[:, ::-1])
        verts.append(np.concatenate([np.asarray(c, dtype=np.float64) for c in cap]))
        offset += len(rings) * m + 1
    return TriMesh(np.concatenate(verts), np.concatenate(faces))


def circle(radius: float, edge: float) -> np.ndarray:
    """Regular polygon (M, 2) approximating a circle, counter-clockwise."""
    n = _segments(2 * math.pi * radius, edge, MIN_SEGMENTS)
    t = 2 * math.pi * np.arange(n) / n
    return radius * np.column_stack([np.cos(t), np.sin(t)])


def cylinder(radius: float, height: float, edge: float) -> TriMesh:
    """Cylinder along +z from z = -height/2 to height/2."""
    m = prism(circle(radius, edge), height, edge)
    return TriMesh(m.vertices - [0.0, 0.0, height / 2], m.faces)


def _resample(profile: np.ndarray, edge: float, closed: bool) -> np.ndarray:
    """Insert points so that no segment of the polyline is longer than ``edge``."""
    pts = np.concatenate([profile, profile[:1]]) if closed else profile
    seg = np.diff(pts, axis=0)  # (S, 2)
    n = np.maximum(1, np.ceil(np.linalg.norm(seg, axis=1) / edge - 1e-9)).astype(np.int64)
    owner = np.repeat(np.arange(len(seg)), n)  # segment of each output point
    frac = np.arange(len(owner)) - np.repeat(np.cumsum(n) - n, n)
    out = pts[owner] + seg[owner] * (frac / n[owner])[:, None]
    return out if closed else np.concatenate([out, pts[-1:]])


def revolve(profile, edge: float, closed: bool = False) -> TriMesh:
    """Surface of revolution of a profile (K, 2) of (r, z) points about the z axis.

    Open profiles run from a pole on the axis (r = 0) at the bottom to one at the top, with r > 0
    in between; closed profiles (a torus) stay off the axis and run counter-clockwise in (r, z).
    """
    prof = _resample(np.asarray(profile, dtype=np.float64), edge, closed)
    n = _segments(2 * math.pi * prof[:, 0].max(), edge, MIN_SEGMENTS)
    t = 2 * math.pi * np.arange(n) / n
    idx = np.arange(n)
    body = prof if closed else prof[1:-1]
    rings = [np.column_stack([r * np.cos(t), r * np.sin(t), np.full(n, z)]) for r, z in body]
    verts = np.concatenate(rings)
    faces = []
    n_rings = len(body)
    for k in range(n_rings if closed else n_rings - 1):
        a, b = k * n + idx, k * n + (idx + 1) % n
        k2 = (k + 1) % n_rings
        c, d = k2 * n + (idx + 1) % n, k2 * n + idx
        faces += [np.stack([a, b, c], 1), np.stack([a, c, d], 1)]
    if not closed:
        bottom, top = len(verts), len(verts) + 1
        verts = np.concatenate([verts, [[0.0, 0.0, prof[0, 1]], [0.0, 0.0, prof[-1, 1]]]])
        last = (n_rings - 1) * n + idx
        faces.append(np.stack([idx[(idx + 1) % n], idx, np.full(n, bottom)], 1))
        faces.append(np.stack([last, last[(idx + 1) % n], np.full(n, top)], 1))
    return TriMesh(verts, np.concatenate(faces))


def _arc(centre, radius: float, start: float, stop: float, edge: float) -> np.ndarray:
    n = _segments(abs(stop - start) * radius, edge, 2)
    a = np.linspace(start, stop, n + 1)
    return np.asarray(centre) + radius * np.column_stack([np.cos(a), np.sin(a)])


def capsule(radius: float, length: float, edge: float) -> TriMesh:
    """Capsule along z: a cylinder of ``length`` between two hemispheres, centred at 0."""
    h = length / 2
    lower = _arc((0.0, -h), radius, -math.pi / 2, 0.0, edge)
    upper = _arc((0.0, h), radius, 0.0, math.pi / 2, edge)
    prof = np.concatenate([lower, upper])
    prof[0, 0] = prof[-1, 0] = 0.0
    return revolve(prof, edge)


def sphere(radius: float, edge: float) -> TriMesh:
    prof = _arc((0.0, 0.0), radius, -math.pi / 2, math.pi / 2, edge)
    prof[0, 0] = prof[-1, 0] = 0.0
    return revolve(prof, edge)


def torus(major: float, minor: float, edge: float) -> TriMesh:
    """Torus around the z axis: tube of radius ``minor`` around a circle of radius ``major``."""
    n = _segments(2 * math.pi * minor, edge, 6)
    a = 2 * math.pi * np.arange(n) / n
    prof = np.column_stack([major + minor * np.cos(a), minor * np.sin(a)])
    return revolve(prof, edge, closed=True)


def frustum(r_bottom: float, r_top: float, height: float, edge: float) -> TriMesh:
    """Truncated cone along +z from z = 0 (radius r_bottom) to z = height (radius r_top)."""
    prof = np.array([[0.0, 0.0], [r_bottom, 0.0], [r_top, height], [0.0, height]])
    if r_top <= 0:
        prof = prof[[0, 1, 3]]
        prof[2] = [0.0, height]
    return revolve(prof, edge)


def subdivide(mesh: TriMesh) -> TriMesh:
    """Split every triangle into four at its edge midpoints (the shape is unchanged)."""
    f = mesh.faces
    edges = np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]])  # (3F, 2)
    key = np.sort(edges, axis=1)
    key = key[:, 0] * len(mesh.vertices) + key[:, 1]  # one integer per undirected edge
    first, inverse = np.unique(key, return_index=True, return_inverse=True)[1:]
    unique = np.sort(edges, axis=1)[first]
    mids = 0.5 * (mesh.vertices[unique[:, 0]] + mesh.vertices[unique[:, 1]])
    m = len(mesh.vertices) + inverse.reshape(3, -1)  # (3, F): midpoints of (01, 12, 20)
    m01, m12, m20 = m
    a, b, c = f.T
    faces = np.concatenate(
        [
            np.stack([a, m01, m20], 1),
            np.stack([m01, b, m12], 1),
            np.stack([m20, m12, c], 1),
            np.stack([m01, m12, m20], 1),
        ]
    )
    return TriMesh(np.concatenate([mesh.vertices, mids]), faces)


def rotation(axis, angle: float) -> np.ndarray:
    """(3, 3) rotation by ``angle`` radians about ``axis`` (Rodrigues' formula)."""
    k = np.asarray(axis, dtype=np.float64)
    k = k / np.linalg.norm(k)
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx


def align_z(direction) -> np.ndarray:
    """(3, 3) rotation taking +z onto ``direction``."""
    d = np.asarray(direction, dtype=np.float64)
    d = d / np.linalg.norm(d)
    c = float(np.clip(d[2], -1.0, 1.0))
    if c > 1 - 1e-12:
        return np.eye(3)
    if c < -1 + 1e-12:
        return rotation((1.0, 0.0, 0.0), math.pi)
    return rotation(np.cross((0.0, 0.0, 1.0), d), math.acos(c))


def transform(mesh: TriMesh, rot=None, offset=(0.0, 0.0, 0.0)) -> TriMesh:
    """x -> rot x + offset; a reflection (det < 0) flips the faces to keep them outward."""
    r = np.eye(3) if rot is None else np.asarray(rot, dtype=np.float64)
    v = mesh.vertices @ r.T + np.asarray(offset, dtype=np.float64)
    f = mesh.faces if np.linalg.det(r) > 0 else mesh.faces[:, ::-1]
    return TriMesh(v, f)


def concatenate(meshes) -> TriMesh:
    meshes = list(meshes)
    offsets = np.cumsum([0] + [len(m.vertices) for m in meshes])[:-1]
    return TriMesh(
        np.concatenate([m.vertices for m in meshes]),
        np.concatenate([m.faces + o for m, o in zip(meshes, offsets, strict=True)]),
    )
