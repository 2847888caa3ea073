"""Mesh files read as the tool that wrote them numbers their vertices.

Every vertex of the file comes back, in the file's order, whether a face uses it or not, so that
a result (a ``.pc2`` point cache, a ``.npz``) fits the mesh in the tool it came from and a vertex
index on the command line (``--pin 12``) names the vertex the user sees there:

- OBJ is read here, ``v`` and ``f`` lines only: texture coordinates and normals are ignored, so a
  file with UVs (as Blender writes it) is not split at its seams; indices may be negative
  (relative) and faces any polygon, triangulated as the Blender side triangulates
  (:func:`~neurok_core.geometry.triangulate_polygons`).
- STL stores no shared vertices, only three corners per facet: corners at exactly the same
  position are one vertex, numbered in the order they first appear, as Blender's STL import
  numbers them.
- PLY, OFF, GLB and the other formats trimesh reads come through trimesh without merging,
  reordering or dropping vertices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import MeshError
from .geometry import triangulate_polygons


def read_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (N, 3) float64 and triangles (F, 3) int64 of a mesh file, every vertex in the
    file's order (those in no face included). Raises MeshError for a missing or unreadable file
    and for a point cloud (vertices but no faces)."""
    p = Path(path)
    if not p.is_file():
        raise MeshError(f"{path}: no such mesh file")
    suffix = p.suffix.lower()
    try:
        if suffix == ".obj":
            vertices, faces = _read_obj(p)
        else:
            vertices, faces = _read_trimesh(p)
            if suffix == ".stl":
                vertices, faces = weld_identical(vertices, faces)
    except MeshError:
        raise
    except Exception as exc:  # noqa: BLE001  (trimesh raises many kinds on bad files)
        raise MeshError(f"{path}: cannot read the mesh ({exc})") from None
    if len(vertices) and not len(faces):
        raise MeshError(
            f"{path}: {len(vertices)} vertices but no faces; a point cloud cannot be simulated, "
            "export the mesh with its faces"
        )
    return vertices, faces


def weld_identical(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One vertex per distinct position (bit for bit), numbered in order of first appearance;
    ``faces`` renumbered onto them. vertices: (N, 3); faces: (F, 3) -> (M, 3), (F, 3)."""
    _, first, inverse = np.unique(vertices, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)  # distinct positions by first appearance
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return vertices[first[order]], rank[inverse.reshape(-1)][faces]


def _read_trimesh(p: Path) -> tuple[np.ndarray, np.ndarray]:
    import trimesh

    mesh = trimesh.load(p, process=False, force="mesh")
    if len(mesh.vertices) == 0:  # a point cloud comes back empty as a mesh
        raw = trimesh.load(p, process=False)
        return np.asarray(getattr(raw, "vertices", np.zeros((0, 3))), dtype=np.float64), np.zeros(
            (0, 3), dtype=np.int64
        )
    return np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces, dtype=np.int64)


def _read_obj(p: Path) -> tuple[np.ndarray, np.ndarray]:
    """The ``v`` and ``f`` records of an OBJ file (all objects and groups, one vertex list)."""
    coords: list[list[str]] = []
    polygons: list[list[int]] = []
    text = p.read_bytes().decode("utf-8", errors="replace").replace("\\\r\n", " ")
    for number, line in enumerate(text.replace("\\\n", " ").splitlines(), 1):
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            if len(parts) < 4:
                raise MeshError(f"{p}, line {number}: a vertex needs x y z, got {line.strip()!r}")
            coords.append(parts[1:4])  # a fourth value (w) or a colour (r g b) follows
        elif parts[0] == "f":
            if len(parts) < 4:
                raise MeshError(f"{p}, line {number}: a face needs 3 corners, got {line.strip()!r}")
            polygons.append([_corner(c, len(coords), p, number) for c in parts[1:]])
    try:
        vertices = np.array(coords, dtype=np.float64).reshape(-1, 3)
    except ValueError:
        raise MeshError(f"{p}: a vertex coordinate is not a number") from None
    if polygons:
        highest = max(max(poly) for poly in polygons)
        if highest >= len(vertices):
            raise MeshError(
                f"{p}: a face uses vertex {highest + 1}, but the file has {len(vertices)}"
            )
    faces = triangulate_polygons(polygons, vertices) if polygons else np.zeros((0, 3), np.int64)
    return vertices, faces


def _corner(token: str, count: int, p: Path, number: int) -> int:
    """The 0-based vertex index of a face corner ``v``, ``v/vt``, ``v//vn`` or ``v/vt/vn``;
    negative indices count back from the last vertex read (``count`` so far)."""
    try:
        index = int(token.split("/", 1)[0])
    except ValueError:
        raise MeshError(f"{p}, line {number}: {token!r} is not a vertex index") from None
    if index > 0:
        return index - 1
    if index < 0 and count + index >= 0:
        return count + index
    raise MeshError(f"{p}, line {number}: vertex index {index} names no vertex before it")
