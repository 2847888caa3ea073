# SPDX-License-Identifier: GPL-3.0-or-later
"""Example objects for the demo, built procedurally: a laptop (base and lid, one mesh, hinged at
the back edge), a flag on a pole (pinned along the pole) and the props around them.

Conventions as in the training data: Z up, metres, the laptop stands on z = 0 with its front
facing -Y and its lid open backwards; the flag hangs in the XZ plane. Each simulated object
carries a vertex group of the vertices that stay put (the pin group of its physics settings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import bmesh
import bpy
import numpy as np


@dataclass(frozen=True)
class Example:
    """A simulated example object and the vertices the demo attaches its conditions to."""

    obj: bpy.types.Object
    pin_group: str
    handle_vertex: int  # where the force arrow or drag handle goes
    direction: tuple[float, float, float] = (0.0, 0.0, 1.0)  # unit: the natural push there
    category: str = "articulated"  # how it is scored: rigid parts (pinned / free) or "cloth"


def box_surface(nx: int, ny: int, nz: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The surface of the unit cube [0, 1]^3 as a quad lattice of nx x ny x nz cells.

    Returns vertices (V, 3) float64 and quads (index tuples; orientation is fixed afterwards).
    """
    index: dict[tuple[int, int, int], int] = {}
    points: list[tuple[float, float, float]] = []

    def vid(i: int, j: int, k: int) -> int:
        if (i, j, k) not in index:
            index[(i, j, k)] = len(points)
            points.append((i / nx, j / ny, k / nz))
        return index[(i, j, k)]

    counts = (nx, ny, nz)
    quads = []
    for axis in range(3):  # the two faces normal to ``axis``
        a, b = [d for d in range(3) if d != axis]
        for side in (0, counts[axis]):
            for u in range(counts[a]):
                for v in range(counts[b]):
                    corners = []
                    for du, dv in ((0, 0), (1, 0), (1, 1), (0, 1)):
                        ijk = [0, 0, 0]
                        ijk[axis], ijk[a], ijk[b] = side, u + du, v + dv
                        corners.append(vid(*ijk))
                    quads.append(tuple(corners))
    return np.array(points, dtype=np.float64), quads


def _slab(lo, hi, cells: tuple[int, int, int]) -> tuple[np.ndarray, list]:
    """An axis-aligned box from corner ``lo`` to ``hi`` (metres), as box_surface."""
    unit, quads = box_surface(*cells)
    lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
    return lo + unit * (hi - lo), quads  # (V, 3)


def _rotate_x(points: np.ndarray, angle: float, pivot) -> np.ndarray:
    """Rotate (V, 3) points by ``angle`` radians about the X axis through ``pivot``."""
    c, s = math.cos(angle), math.sin(angle)
    rot = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    return (points - pivot) @ rot.T + pivot


def _material(name: str, rgba) -> bpy.types.Material:
    mat = bpy.data.materials.get(name) or bpy.data.materials.new(name)
    mat.diffuse_color = rgba  # what Workbench shows with the Material colour type
    return mat


def _mesh_object(name: str, vertices: np.ndarray, faces) -> bpy.types.Object:
    """A mesh object from (V, 3) vertices and faces, with consistent outward normals."""
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices.tolist(), [], [tuple(f) for f in faces])
    bm = bmesh.new()
    bm.from_mesh(mesh)
    bmesh.ops.recalc_face_normals(bm, faces=bm.faces)
    bm.to_mesh(mesh)
    bm.free()
    mesh.update()
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def _pin_group(obj, name: str, indices) -> None:
    group = obj.vertex_groups.new(name=name)
    group.add([int(i) for i in indices], 1.0, "REPLACE")


def laptop(
    name: str = "Laptop",
    *,
    location=(0.0, 0.0, 0.0),
    turn_degrees: float = 0.0,
    width: float = 0.34,
    open_degrees: float = 105.0,
    detail: int = 24,
) -> Example:
    """A laptop: a base slab and a lid slab hinged along the base's back edge, one mesh.

    The lid is open ``open_degrees`` from closed (past upright, so that it leans back); its
    inner face is the screen. The laptop faces -Y turned by ``turn_degrees`` about +Z, then
    moves to ``location``; the mesh holds world coordinates (the object's transform is
    identity). Pin group "Base": every base vertex. Handle vertex: the lid's top edge, at the
    middle of its back face (where a finger pushes it shut); ``direction``: the way it closes.
    """
    depth = 0.68 * width
    base_t, lid_t = 0.018, 0.008
    nx = max(2, detail)
    ny = max(2, round(detail * depth / width))
    base_v, base_q = _slab(
        (-width / 2, -depth / 2, 0.0), (width / 2, depth / 2, base_t), (nx, ny, 1)
    )
    z_lid = base_t + 0.001
    lid_v, lid_q = _slab(
        (-width / 2, -depth / 2, z_lid), (width / 2, depth / 2, z_lid + lid_t), (nx, ny, 1)
    )
    # The lid's front edge (y = -depth/2) swings up and back about the hinge (y = depth/2).
    hinge = np.array([0.0, depth / 2, z_lid])
    lid_v = _rotate_x(lid_v, -math.radians(open_degrees), hinge)  # (V, 3)
    vertices = np.concatenate([base_v, lid_v])  # (V, 3), canonical pose
    offset = len(base_v)
    faces = base_q + [tuple(i + offset for i in q) for q in lid_q]
    # The handle: the top of the open lid (its former front edge), middle, on the back face.
    unit_lid, _ = box_surface(nx, ny, 1)  # (V_lid, 3) in [0, 1]
    top_back = np.flatnonzero(
        (unit_lid[:, 1] == 0.0)
        & (unit_lid[:, 2] == 1.0)
        & (np.abs(unit_lid[:, 0] - 0.5) < 0.51 / nx)
    )
    handle = int(offset + top_back[0])
    # Closing turns the lid about +X: a point r from the hinge moves along x_hat x r.
    closing = np.cross([1.0, 0.0, 0.0], vertices[handle] - hinge)  # (3,)
    closing /= np.linalg.norm(closing)
    turn = math.radians(turn_degrees)
    c, s = math.cos(turn), math.sin(turn)
    rot_z = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    vertices = vertices @ rot_z.T + np.asarray(location, dtype=np.float64)  # (V, 3)
    obj = _mesh_object(name, vertices, faces)
    _pin_group(obj, "Base", range(offset))
    # Materials: the body, and the screen on the lid's inner face (the face that was its
    # underside when closed).
    obj.data.materials.append(_material("Laptop body", (0.62, 0.64, 0.68, 1.0)))
    obj.data.materials.append(_material("Laptop screen", (0.05, 0.07, 0.12, 1.0)))
    screen = [
        int(i >= len(base_q) and all(unit_lid[v - offset][2] == 0.0 for v in q))
        for i, q in enumerate(faces)
    ]
    obj.data.polygons.foreach_set("material_index", screen)
    return Example(obj, "Base", handle, tuple(float(v) for v in rot_z @ closing))


def flag(
    name: str = "Flag",
    *,
    pole_top=(0.0, 0.0, 0.75),
    width: float = 0.5,
    height: float = 0.32,
    detail: int = 40,
) -> Example:
    """A flag: a width x height sheet in the XZ plane, hanging from a pole along its left edge.

    The pole edge (x = pole_top.x) is the pin group "Pole"; three horizontal bands of two colours
    make the folds readable. Handle vertex: the free bottom corner.
    """
    nu = max(2, detail)
    nv = max(2, round(detail * height / width))
    u = np.linspace(0.0, width, nu + 1)
    v = np.linspace(0.0, height, nv + 1)
    uu, vv = np.meshgrid(u, v, indexing="ij")  # (nu+1, nv+1)
    x0, y0, top = pole_top
    z0 = top - 0.02 - height
    vertices = np.stack(
        [x0 + uu.ravel(), np.full(uu.size, y0), z0 + vv.ravel()], axis=1
    )  # (V, 3), index = i_u * (nv+1) + i_v
    faces = []
    band = []
    for i in range(nu):
        for j in range(nv):
            a = i * (nv + 1) + j
            faces.append((a, a + nv + 1, a + nv + 2, a + 1))
            band.append(int(3 * (j + 0.5) / nv) % 2)
    obj = _mesh_object(name, vertices, faces)
    obj.data.materials.append(_material("Flag red", (0.78, 0.08, 0.06, 1.0)))
    obj.data.materials.append(_material("Flag white", (0.92, 0.92, 0.88, 1.0)))
    obj.data.polygons.foreach_set("material_index", band)
    obj.data.polygons.foreach_set("use_smooth", [True] * len(faces))
    _pin_group(obj, "Pole", range(nv + 1))  # i_u = 0
    corner = nu * (nv + 1)  # i_u = nu, i_v = 0: the free bottom corner
    return Example(obj, "Pole", corner, category="cloth")


def _prop(name: str, bm: bmesh.types.BMesh, rgba, *, smooth: bool = False) -> bpy.types.Object:
    """A one-colour object (not simulated) from a bmesh, which is freed."""
    mesh = bpy.data.meshes.new(name)
    bm.to_mesh(mesh)
    bm.free()
    if smooth:
        mesh.polygons.foreach_set("use_smooth", [True] * len(mesh.polygons))
    mesh.materials.append(_material(name, rgba))
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def pole(name: str, top, radius: float = 0.008) -> bpy.types.Object:
    """A thin vertical cylinder from the ground to ``top``, with Blender's Collision physics
    (a flag hung on it wraps round it instead of swinging through it)."""
    bm = bmesh.new()
    bmesh.ops.create_cone(
        bm, cap_ends=True, segments=16, radius1=radius, radius2=radius, depth=top[2]
    )
    obj = _prop(name, bm, (0.25, 0.22, 0.2, 1.0), smooth=True)
    obj.location = (top[0] - radius, top[1], top[2] / 2)
    obj.modifiers.new("Collision", "COLLISION")
    return obj


def arrow(name: str, length: float, rgba=(1.0, 0.62, 0.05, 1.0)) -> bpy.types.Object:
    """An arrow along +Z whose tip is at the origin (tail at z = -length): a push marker."""
    bm = bmesh.new()
    head, radius = 0.3 * length, 0.06 * length
    shaft = bmesh.ops.create_cone(
        bm, cap_ends=True, segments=12, radius1=radius, radius2=radius, depth=length - head
    )
    bmesh.ops.translate(bm, vec=(0.0, 0.0, -(length + head) / 2), verts=shaft["verts"])
    tip = bmesh.ops.create_cone(
        bm, cap_ends=True, segments=12, radius1=0.16 * length, radius2=0.0, depth=head
    )
    bmesh.ops.translate(bm, vec=(0.0, 0.0, -head / 2), verts=tip["verts"])
    return _prop(name, bm, rgba)


def sphere(name: str, radius: float, rgba=(0.1, 0.75, 0.3, 1.0)) -> bpy.types.Object:
    """A small sphere at the origin: a drag target marker."""
    bm = bmesh.new()
    bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=8, radius=radius)
    return _prop(name, bm, rgba, smooth=True)


def ground(name: str = "Ground", size: float = 60.0) -> bpy.types.Object:
    """A large square at z = 0 (not simulated)."""
    half = size / 2
    verts = np.array([[-half, -half, 0], [half, -half, 0], [half, half, 0], [-half, half, 0]])
    obj = _mesh_object(name, verts.astype(np.float64), [(0, 1, 2, 3)])
    obj.data.materials.append(_material("Ground", (0.42, 0.45, 0.42, 1.0)))
    return obj
