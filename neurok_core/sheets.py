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


def welded(vertices: np.ndarray, faces: np.ndarray, tolerance: float = WELD):
    """(first vertex of each node (n,), faces on the nodes (F, 3), node of each vertex (N,)):
    vertices closer than ``tolerance`` x the size welded (a seam stored twice, a soup)."""
    v = np.asarray(vertices, dtype=np.float64)
    size = float(np.ptp(v, 0).max()) if len(v) else 0.0
    key = np.round((v - v.min(0)) / max(tolerance * size, 1e-300)).astype(np.int64)
    _, first, node = np.unique(key, axis=0, return_index=True, return_inverse=True)
    node = node.ravel()
    return first, node[np.asarray(faces, dtype=np.int64).reshape(-1, 3)], node


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
    v = np.asarray(vertices, dtype=np.float64).reshape(-1, 3)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    if not len(f) or not len(v) or not np.isfinite(v).all():
        return False
    used = np.zeros(len(v), dtype=bool)
    used[f.ravel()] = True
    if not used.all():
        return False
    first, f, _ = welded(v, f)
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 2] != f[:, 0])]
    if not len(f):
        return False
    n = len(first)
    pairs = np.sort(np.stack([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]], 1).reshape(-1, 2), 1)
    keys = pairs[:, 0] * n + pairs[:, 1]
    unique, counts = np.unique(keys, return_counts=True)
    label = components(n, np.stack([unique // n, unique % n], 1))
    open_nodes = unique[counts == 1] // n
    parts = np.unique(label[f[:, 0]])
    if not np.isin(parts, label[open_nodes]).all():
        return False
    p = v[first]
    face_part = label[f[:, 0]]
    return all(flatness(p, f[face_part == part]) >= FLAT for part in parts)


def flatness(vertices: np.ndarray, faces: np.ndarray) -> float:
    """The largest eigenvalue of the area-weighted second moment of the faces' unit normals:
    1 for a plane, 0.82 for a quarter of a cylinder, 0.5 for half of one, 1/3 for a sphere (0
    for faces of no area)."""
    v = np.asarray(vertices, dtype=np.float64)
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    a, b = v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]
    normal = np.stack(  # (F, 3), 2 x area (np.cross is several times slower on long arrays)
        [
            a[:, 1] * b[:, 2] - a[:, 2] * b[:, 1],
            a[:, 2] * b[:, 0] - a[:, 0] * b[:, 2],
            a[:, 0] * b[:, 1] - a[:, 1] * b[:, 0],
        ],
        1,
    )
    area = np.linalg.norm(normal, axis=1)
    total = float(area.sum())
    if total <= 0:
        return 0.0
    unit = normal / np.maximum(area, 1e-300)[:, None]
    moment = (unit * area[:, None]).T @ unit / total  # (3, 3)
    return float(np.linalg.eigvalsh(moment)[-1])
