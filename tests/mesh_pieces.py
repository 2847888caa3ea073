"""Meshes built from boxes for the rig-space tests: a box, and several pieces as one mesh."""

import numpy as np
import trimesh


def box_mesh(extents, centre, subdivisions: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (V, 3), faces (F, 3)) of a box of ``extents`` m centred at ``centre``, its
    faces split in four ``subdivisions`` times."""
    m = trimesh.creation.box(extents)
    for _ in range(subdivisions):
        m = m.subdivide()
    return np.asarray(m.vertices, dtype=np.float64) + centre, np.asarray(m.faces, dtype=np.int64)


def join_meshes(*pieces) -> tuple[np.ndarray, np.ndarray]:
    """One mesh (vertices, faces) of ``pieces`` (vertices, faces), in their order."""
    verts, faces, n = [], [], 0
    for v, f in pieces:
        verts.append(v)
        faces.append(f + n)
        n += len(v)
    return np.concatenate(verts), np.concatenate(faces)
