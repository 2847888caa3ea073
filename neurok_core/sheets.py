"""Which meshes are cloth (numpy only: the add-on's Automatic bake asks this same rule).

A mesh is a cloth when every loose part of it, its coincident vertices welded, is an open sheet
(an edge of one face) that is nearly flat at rest: the area-weighted second moment of its face
normals has an eigenvalue of at least ``FLAT`` (1 for a plane; 0.82 for a quarter of a cylinder,
0.5 for half of one, about 1/3 for a sphere with a hole), so that a bowl, an open box or a
scanned solid missing a few faces keeps the rig space's bones. Every vertex must belong to a
face (a loose vertex or edge is no cloth's).

Shapes: vertices (N, 3) metres; faces (F, 3) int.
"""

from __future__ import annotations

import numpy as np

FLAT = 0.85
WELD = 1e-9  # vertices closer than this x the mesh's size are one
CHUNK = 1 << 16  # faces a pass of the flatness measures at once


def welded(vertices: np.ndarray, faces: np.ndarray, tolerance: float = WELD):
    """(first vertex of each node (n,), faces on the nodes (F, 3), node of each vertex (N,)):
    vertices closer than ``tolerance`` x the size welded (a seam stored twice, a soup)."""
    v = np.asarray(vertices, dtype=np.float64)
    size = float(np.ptp(v, 0).max()) if len(v) else 0.0
    key = np.round((v - v.min(0)) / max(tolerance * size, 1e-300)).astype(np.int64)
    if _fits(key):  # one integer a vertex (a flat sheet's grid), else the rows themselves
        _, first, node = np.unique(row_keys(key), return_index=True, return_inverse=True)
    else:
        _, first, node = np.unique(key, axis=0, return_index=True, return_inverse=True)
    node = node.ravel()
    return first, node[np.asarray(faces, dtype=np.int64).reshape(-1, 3)], node


def _fits(rows: np.ndarray) -> bool:
    """Whether the non-negative int rows (M, 3) fit one int64 key each."""
    span = rows.max(0, initial=0) + 1
    return float(np.prod(span.astype(np.float64))) < 2.0**62


def row_keys(rows: np.ndarray) -> np.ndarray:
    """(M,) int64 keys equal exactly where the non-negative int rows (M, 3) are equal, ordered
    as the rows are lexicographically (one number per row where their range allows, else the
    rows' rank by ``np.unique``)."""
    if _fits(rows):
        span = rows.max(0, initial=0) + 1
        return (rows[:, 0] * span[1] + rows[:, 1]) * span[2] + rows[:, 2]
    return np.unique(rows, axis=0, return_inverse=True)[1].ravel()


def components(count: int, edges: np.ndarray) -> np.ndarray:
    """(count,) a label per node, equal within each connected component of ``edges`` (E, 2):
    the smallest node of the component (min-label propagation with pointer jumping)."""
    label = np.arange(count)
    a, b = edges[:, 0], edges[:, 1]
    for _ in range(count + 1):
        low = np.minimum(label[a], label[b])
        new = label.copy()
        np.minimum.at(new, a, low)
        np.minimum.at(new, b, low)
        while True:  # every node to its label's label, until they agree
            jumped = new[new]
            if np.array_equal(jumped, new):
                break
            new = jumped
        if np.array_equal(new, label):
            return label
        label = new
    return label


def is_cloth(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """Whether the mesh is a cloth (module docstring)."""
    return cloth_welding(vertices, faces) is not None


def has_cloth(vertices: np.ndarray, faces: np.ndarray) -> bool:
    """Whether a loose part of the mesh is a cloth on its own (a cloth, or a flag modelled on
    its pole: ``rigspace.mixed``)."""
    found = sheet_parts(vertices, faces)
    return found is not None and bool(found[1].any())


def cloth_welding(vertices: np.ndarray, faces: np.ndarray):
    """:func:`welded`'s answer for a cloth (module docstring), which a cloth's simulation mesh
    starts from; None for a mesh that is no cloth."""
    found = sheet_parts(vertices, faces)
    return None if found is None or not found[1].all() else found[0]


def sheet_parts(vertices: np.ndarray, faces: np.ndarray):
    """(:func:`welded`'s answer, sheet (N,) bool): which vertices are on a loose part that is
    a cloth on its own (open, nearly flat: module docstring); None for a mesh with a vertex in
    no face, or no face."""
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if not len(f) or not len(v) or not np.isfinite(v).all():
        return None
    used = np.zeros(len(v), dtype=bool)
    used[f.ravel()] = True
    if not used.all():
        return None
    welding = welded(v, f)
    first, f, node = welding
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 2] != f[:, 0])]
    if not len(f):
        return None
    n = len(first)
    keys = np.concatenate(  # each edge of each face, as lo * n + hi
        [
            np.minimum(f[:, a], f[:, b]) * n + np.maximum(f[:, a], f[:, b])
            for a, b in ((0, 1), (1, 2), (2, 0))
        ]
    )
    keys.sort()
    new = np.empty(len(keys), dtype=bool)  # each distinct key's first
    new[0], new[1:] = True, keys[1:] != keys[:-1]
    once = new.copy()  # the keys that occur once: an edge of one face
    once[:-1] &= new[1:]
    unique = keys[new]
    label = components(n, np.stack([unique // n, unique % n], 1))
    face_part = label[f[:, 0]]
    parts = np.unique(face_part)
    is_open = np.isin(parts, label[keys[once] // n])  # only an open part may be a sheet
    p = v[first]
    sheets = [
        part
        for part, opened in zip(parts, is_open, strict=True)
        if opened and flatness(p, f if len(parts) == 1 else f[face_part == part]) >= FLAT
    ]
    return welding, np.isin(label[node], sheets)


def flatness(vertices: np.ndarray, faces: np.ndarray) -> float:
    """The largest eigenvalue of the area-weighted second moment of the faces' unit normals:
    1 for a plane, 0.82 for a quarter of a cylinder, 0.5 for half of one, 1/3 for a sphere (0
    for faces of no area)."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    moment, total = np.zeros((3, 3)), 0.0
    for start in range(0, len(f), CHUNK):  # in chunks: small temporaries, reused
        corner = [v[c] for c in f[start : start + CHUNK].T]  # 3 x (C, 3)
        a, b = (corner[1] - corner[0]).T, (corner[2] - corner[0]).T  # (3, C) each
        normal = np.stack(  # (3, C): 2 x area along the unit normal (np.cross is slower)
            [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
        )
        area = np.sqrt((normal * normal).sum(0))  # (C,)
        total += float(area.sum())
        # the sum over faces of area x unit unit^T is that of N N^T / |N|
        moment += (normal / np.maximum(area, 1e-300)) @ normal.T
    if total <= 0:
        return 0.0
    return float(np.linalg.eigvalsh(moment / total)[-1])
