"""Cloth at its own resolution (design section 14): a sheet's nodes are its coordinates.

A sheet simulated as a few near-rigid bones cannot hang or fold; here every node of its
simulation mesh moves on its own (the sheet's own vertices, or above ``MAX_NODES`` a coarser
mesh with the sheet's vertices embedded in its triangles). The energies:

- **membrane**: a linear spring on every edge of the simulation mesh's triangles (structural
  and shear, as Blender's cloth), k_e / 2 (|d_e| - l_e)^2, ``compression`` x as stiff when
  shortened;
- **bending**: the quadratic bending energy of Bergou et al. 2006 ("A quadratic bending model
  for inextensible surfaces"), 1/2 B sum_e |sum_i K_ei x_i|^2 / (A_e + A_e') over interior
  edges (1/2 B kappa^2 per area on a cylinder of curvature kappa), with a constant Hessian;
  B (N m) is the rigidity w c^3 of a cloth of weight w (N/m^2) and Peirce's bending length c;
- **contact** with the ground and colliders: one-sided springs on each node's signed
  distance inside a margin, with lagged Coulomb friction, and nodes a step leaves inside an
  obstacle put back on its surface;
- **its own layers** (where asked: ``SimulationConditions.self_collision``, or
  ``RigSettings.cloth_self_contact`` for every run): IPC's barrier between non-adjacent nodes
  and triangles and between edges, with friction between the layers, every iterate kept
  apart by the line search (:mod:`.cloth_self`);
- **loads**: gravity, forces and winds on the nodes (through the embedding), drag springs,
  air damping (the damping rate c: a node's kinetic energy decays as exp(-2 c t)).

A step of length h is **BDF2's** with variable steps (w = h / h_{n-1}) where a damped step
continues the last one and nothing is near an obstacle, else **backward Euler's**: x_{n+1}
minimises the incremental potential

    Phi(x) = (1 + c k) / (2 k^2) |x - z|_M^2 + E(x) - f . x,  z = x_b + k v_b / (1 + c k),

with x_b = a x_n - b x_{n-1}, v_b = a v_n - b v_{n-1}, k = c_w h (a = (1 + w)^2 / (1 + 2 w),
b = w^2 / (1 + 2 w), c_w = (1 + w) / (1 + 2 w)) and v_{n+1} = (x_{n+1} - x_b) / k; backward
Euler's is x_b = x_n, v_b = v_n, k = h. Both are L-stable; BDF2 takes far less from a swinging
cloth at one step a frame (backward Euler's damping of a mode of omega, omega^2 h / 2 a second,
took a heavy flag's swing), and backward Euler keeps the penalty contact from overshooting
(the first step, undamped runs, near an obstacle, after a push out of one). Phi is minimised
by quasi-Newton iterations (L-BFGS, an Armijo line search on Phi; Liu et al. 2017,
"Quasi-Newton methods for real-time simulation of hyperelastic materials") whose initial
Hessian is Phi's own at the step's start (springs PSD-projected but at least ``ACROSS`` as stiff
across as along, the contact's normal springs and the friction's sticking), factorised over
the free nodes' 3 n coordinates and kept for up to ``KEEP_STEPS`` steps away from obstacles. A
step costs at most ``ITERATIONS`` iterations, each a gradient and a back-substitution: its cost
is bounded.

An undamped run (c = 0) has its energy kept by the caller, which scales the velocity after
each step (Dinev et al. 2018 project onto the energy likewise).

Shapes: nodes (n, 3) float64 metres; faces (F, 3) int64; the state x, v (n, 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree

from ..geometry import cross3, face_cross
from ..sheets import row_keys, welded
from .band import BAND_SHARE, NodeSystem

MAX_NODES = 600  # a sheet with more vertices is simulated on a coarser mesh of about this many
ITERATIONS = 20  # quasi-Newton iterations a step, at most
HISTORY = 6  # L-BFGS pairs kept
CONVERGED = 1e-5  # an update this small (object sizes) ends a step's iterations
SETTLED = 1e-3  # or one that moves under 100x that and lowers the potential by less than this
# share of what the step has lowered it
ARMIJO = 1e-4
ROUNDING = 1e-13  # a predicted decrease below this share of the potential is rounding
MAX_HALVINGS = 12  # of the line search
CHUNK = 1 << 16  # vertices embedded at once
KEEP_STEPS = 4  # steps a factorisation serves, at most (away from obstacles, the drags the same)
KEEP_ITERATIONS = 8  # and while each of them needs at most this many iterations
ACROSS = 0.05  # the initial Hessian's springs resist turning at least this share of k
IMPERFECTION = 1e-5  # sizes: how far off its surface a loaded sheet starts (``imperfection``)


@dataclass(frozen=True)
class ClothMaterial:
    """A cloth's material: ``bending_length`` (m, Peirce's: the overhang over which a strip of
    the cloth droops 41.5 deg under its own weight; silk about 0.01, cotton 0.02, denim 0.04,
    leather 0.06), ``stretch_hz`` (the frequency of its uniform stretch: 10 Hz gives a 1.16 x
    0.76 m flag held in its upright plane about the in-plane sag of Blender's default cloth),
    ``air_damping`` (1/s, added to the user's damping: a node's kinetic energy decays as
    exp(-2 c t)), ``compression`` (the springs' stiffness when shortened, a share of their
    stretching stiffness), ``stretch_damping`` (damping ratio of the stretching modes at a
    damping of 0.1/s and above), ``bending_damping`` (s: the bending's viscous time, tau B Q
    x', at a damping of 0.1/s and above)."""

    bending_length: float = 0.02
    stretch_hz: float = 10.0
    air_damping: float = 0.0
    compression: float = 1.0
    stretch_damping: float = 0.5
    bending_damping: float = 0.1


# Blender's cloth defaults (its Cotton preset): vertex mass 0.3 kg, tension 15, bending 0.5
_BLENDER_COTTON = (0.3, 15.0, 0.5)
# How Blender's cloth damps a swinging flag, fit to its five presets on a 600-vertex flag lying
# flat and pinned at its hoist (far edge at 1 s and 2 s, docs/experiments/cloth.md): its
# backward Euler steps (``quality`` a frame) damp a mode of omega rad/s by omega^2 h / 2 a
# second, here the flag's swing as one mode (s^-2 x the step at 24 fps), and its air
# viscosity acts over the vertex mass (kg/s per unit of viscosity)
_BLENDER_STEP_DAMPING = 139.0
_BLENDER_AIR = 0.37


def blender_material(
    mass: float, tension: float, bending: float, air: float, quality: int = 5
) -> ClothMaterial:
    """The material that moves as Blender's cloth with these settings (vertex ``mass`` kg,
    ``tension`` and ``bending`` stiffness, ``air`` viscosity, ``quality`` steps a frame) moves,
    scaled from its default: the stretch frequency as sqrt(tension / mass), the bending length
    as (bending / mass)^(1/3) (a rigidity over a weight), the air damping as its steps' damping
    (their length at 24 fps) plus air / mass (Blender's drag does not grow with the mass)."""
    m0, t0, b0 = _BLENDER_COTTON
    default = ClothMaterial()
    return ClothMaterial(
        bending_length=default.bending_length * ((bending / mass) / (b0 / m0)) ** (1.0 / 3.0),
        stretch_hz=default.stretch_hz * math.sqrt((tension / mass) / (t0 / m0)),
        air_damping=_BLENDER_STEP_DAMPING / (24.0 * quality) + _BLENDER_AIR * air / mass,
    )


# Blender 5.0's cloth presets: (vertex mass, tension, bending, air viscosity, quality)
CLOTH_PRESETS = {
    "cotton": blender_material(0.3, 15.0, 0.5, 1.0, 5),
    "denim": blender_material(1.0, 40.0, 10.0, 1.0, 12),
    "leather": blender_material(0.4, 80.0, 150.0, 1.0, 15),
    "rubber": blender_material(3.0, 15.0, 25.0, 1.0, 7),
    "silk": blender_material(0.15, 5.0, 0.05, 1.0, 5),
}


def cloth_material(name: str) -> ClothMaterial:
    """The preset ``name`` ('' : the default material, no air damping of its own)."""
    return CLOTH_PRESETS[name] if name else ClothMaterial()


@dataclass(frozen=True)
class SimMesh:
    """The simulation mesh of a sheet: ``nodes`` (n, 3), ``faces`` (F, 3). Vertex i of the
    sheet (N,) is node ``node[i]`` where that is >= 0 (coincident vertices share one), else it
    is embedded in triangle ``tri[i]``: at its barycentric point ``bary[i]`` plus ``local[i]``
    in the triangle's frame (its first edge, the normal x that edge, the normal), so that the
    rest nodes give the rest vertices exactly and the offset turns with the triangle."""

    nodes: np.ndarray
    faces: np.ndarray
    node: np.ndarray  # (N,) int64, -1 for an embedded vertex
    tri: np.ndarray  # (N,) int64 (embedded vertices)
    bary: np.ndarray  # (N, 3)
    local: np.ndarray  # (N, 3)

    @property
    def identity(self) -> bool:
        """Whether every vertex is a node of its own (no weld, no embedding)."""
        return bool((self.node == np.arange(len(self.node))).all())

    @cached_property
    def blend(self) -> sparse.csr_matrix:
        """(N, n) each vertex's weights on the nodes: 1 on its own, its barycentric
        coordinates on its triangle's corners."""
        own = self.node >= 0
        cols = np.where(own[:, None], self.node[:, None], self.faces[self.tri])  # (N, 3)
        vals = np.where(own[:, None], np.array([1.0, 0.0, 0.0]), self.bary)
        rows = np.repeat(np.arange(len(self.node)), 3)
        return sparse.csr_matrix(
            (vals.ravel(), (rows, cols.ravel())), shape=(len(self.node), len(self.nodes))
        )

    @cached_property
    def offset(self) -> np.ndarray:
        """(N,) bool: the embedded vertices with an offset off their triangle (a rim outside
        the coarser mesh, a vertex off its plane); an offset under a nanometre per metre of the
        mesh is rounding (dropping it moves the vertex by no more)."""
        tiny = 1e-9 * max(float(np.ptp(self.nodes, 0).max(initial=0.0)), 1e-300)
        return (self.node < 0) & (np.abs(self.local) > tiny).any(1)

    def embed(self, x: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """The sheet's vertices (..., N, 3) when the nodes are at ``x`` (..., n, 3) (one
        frame, or many at once); with ``rows`` (M,) only those vertices (..., M, 3): the
        barycentric blend (one sparse product), and each offset turned with its triangle."""
        blend = self.blend if rows is None else self.blend[rows]
        lead, n = x.shape[:-2], x.shape[-2]
        flat = np.moveaxis(x, -2, 0).reshape(n, -1)  # (n, 3 T)
        out = np.moveaxis((blend @ flat).reshape(blend.shape[0], *lead, 3), 0, -2)
        at = np.flatnonzero(self.offset if rows is None else self.offset[rows])  # in out
        if len(at):
            held = at if rows is None else np.asarray(rows)[at]  # their vertices
            corners = x[..., self.faces[self.tri[held]], :]  # (..., K, 3, 3)
            frame = _frames(corners)  # (..., K, 3, 3): rows e1, e2, n
            out[..., at, :] += np.einsum("mk,...mkd->...md", self.local[held], frame)
        return out

    def weights(self, vertex: int) -> tuple[np.ndarray, np.ndarray]:
        """(nodes (k,), weights (k,)): where a load on sheet vertex ``vertex`` acts."""
        if self.node[vertex] >= 0:
            return np.array([self.node[vertex]]), np.ones(1)
        return self.faces[self.tri[vertex]], self.bary[vertex]


def _frames(corners: np.ndarray) -> np.ndarray:
    """(..., 3, 3) each triangle's orthonormal frame (rows: its first edge, the normal x that
    edge, the unit normal) from its corners (..., 3, 3)."""
    e1 = corners[..., 1, :] - corners[..., 0, :]
    n = cross3(e1, corners[..., 2, :] - corners[..., 0, :])
    n /= np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-300)
    e1 /= np.maximum(np.linalg.norm(e1, axis=-1, keepdims=True), 1e-300)
    return np.stack([e1, cross3(n, e1), n], -2)


def _cluster_mesh(vertices: np.ndarray, faces: np.ndarray, cell: float, anchors=None):
    """A coarser mesh by vertex clustering on a grid of ``cell`` m (Rossignac and Borrel 1993):
    each occupied cell a node at its vertices' mean, each face whose corners fall in three
    different cells a face; (nodes, faces). A cell holding some of the vertices ``anchors``
    (indices: the pins) has its node on the one of them nearest that mean, so that a pinned
    corner or hoist holds the cloth at its own points, not by a strip of the coarser mesh
    inside them; unless that turns a face round or takes most of its area (a pin near a
    cell's far corner, in a scattered pin group: the coarse mesh would fold at rest)."""
    key = np.floor((vertices - vertices.min(0)) / cell).astype(np.int64)
    _, cluster = np.unique(row_keys(key), return_inverse=True)
    cluster = cluster.ravel()
    count = int(cluster.max()) + 1
    size = np.bincount(cluster, minlength=count)
    nodes = np.stack([np.bincount(cluster, vertices[:, a], count) for a in range(3)], 1)
    nodes /= size[:, None]
    f = cluster[faces]
    f = f[(f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 2] != f[:, 0])]
    if anchors is not None and len(anchors):
        a = np.unique(np.asarray(anchors, dtype=np.int64))
        c = cluster[a]
        gap = np.linalg.norm(vertices[a] - nodes[c], axis=1)
        order = np.lexsort((gap, c))  # each cell's nearest anchor first
        first = order[np.r_[True, c[order][1:] != c[order][:-1]]]
        means = nodes.copy()
        snapped = np.zeros(count, dtype=bool)
        snapped[c[first]] = True
        nodes[c[first]] = vertices[a[first]]
        before = face_cross(means, f)  # (F, 3) twice each face's area along its normal
        for _ in range(8):  # a node put back may leave another face of a snapped one bad
            after = face_cross(nodes, f)
            bad = (after * before).sum(1) < 0.5 * (before * before).sum(1)
            bad &= snapped[f].any(1)
            if not bad.any():
                break
            back = np.unique(f[bad][snapped[f[bad]]])
            nodes[back], snapped[back] = means[back], False
        else:  # still not settled: every node at its mean
            nodes = means
    return nodes, _unique_rows(np.sort(f, 1))[0]


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct int rows of ``rows`` (M, 3), sorted, the index of each's first)."""
    _, first = np.unique(row_keys(rows), return_index=True)
    return rows[first], first


def proper_faces(nodes: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """``faces`` without those of repeated corners or of no area (below 1e-12 of the squared
    size: they have no cotangents, no mass and no membrane) and without repeats."""
    f = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    distinct = (f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 2] != f[:, 0])
    f = f[distinct]
    size = float(np.ptp(nodes, 0).max()) if len(nodes) else 0.0
    area = np.linalg.norm(face_cross(nodes, f), axis=1) / 2.0
    f = f[area > 1e-12 * size * size]
    first = _unique_rows(np.sort(f, 1))[1]
    return f[np.sort(first)]


def sim_mesh(
    vertices: np.ndarray,
    faces: np.ndarray,
    max_nodes: int = MAX_NODES,
    welding=None,
    anchors=None,
) -> SimMesh:
    """The simulation mesh of a sheet: its own (welded) vertices up to ``max_nodes``, else a
    coarser mesh by vertex clustering (its nodes on the vertices ``anchors`` where a cell
    holds some: the pins, ``_cluster_mesh``); a vertex that is no node (a coarse mesh's, or
    one whose faces have no area) is embedded in its nearest triangle. Raises MeshError for
    a sheet that has no face of any area. ``welding``: :func:`~neurok_core.sheets.welded`'s
    answer for the mesh, where known."""
    from ..errors import MeshError

    vertices = np.asarray(vertices, dtype=np.float64)
    first, f, node = welded(vertices, faces) if welding is None else welding
    nodes = vertices[first]
    if len(nodes) <= max_nodes:
        f = proper_faces(nodes, f)
    else:  # the coarse mesh's faces are made proper (a face of no area adds no area)
        area = float(np.linalg.norm(face_cross(nodes, f), axis=1).sum()) / 2.0
        size = float(np.ptp(nodes, 0).max())
        if not area > 1e-12 * size * size:
            raise MeshError("the cloth has no face of any area: nothing to simulate it on")
        cell = math.sqrt(area / max_nodes)
        anchored = None if anchors is None else node[np.asarray(anchors, dtype=np.int64)]
        for _ in range(8):  # the clusters' count near max_nodes, and some faces kept
            coarse, coarse_f = _cluster_mesh(nodes, f, cell, anchored)
            coarse_f = proper_faces(coarse, coarse_f)
            if len(coarse) > 1.3 * max_nodes:
                cell *= math.sqrt(len(coarse) / max_nodes)
            elif len(coarse_f) < max(1, len(coarse) // 2):  # a strip narrower than a cell
                cell *= 0.5
            else:
                nodes, f, node = coarse, coarse_f, np.full(len(vertices), -1)
                break
    if not len(f):
        raise MeshError("the cloth has no face of any area: nothing to simulate it on")
    used = np.zeros(len(nodes), dtype=bool)
    used[f.ravel()] = True
    node = np.where(node >= 0, node, -1)
    node[(node >= 0) & ~used[np.maximum(node, 0)]] = -1  # a node of no face: embedded
    tri = np.zeros(len(vertices), dtype=np.int64)
    bary = np.zeros((len(vertices), 3))
    local = np.zeros((len(vertices), 3))
    held = np.flatnonzero(node < 0)
    if len(held) == len(vertices):  # a coarse mesh: every vertex embedded
        tri, bary, local = _embed(vertices, nodes, f)
    elif len(held):
        tri[held], bary[held], local[held] = _embed(vertices[held], nodes, f)
    # the nodes no face uses are left out
    keep = np.flatnonzero(used)
    renumber = np.full(len(nodes), -1)
    renumber[keep] = np.arange(len(keep))
    node = np.where(node >= 0, renumber[np.maximum(node, 0)], -1)
    return SimMesh(nodes[keep], renumber[f], node, tri, bary, local)


def _embed(points: np.ndarray, nodes: np.ndarray, faces: np.ndarray, k: int = 8):
    """Each point's nearest triangle among the ``k`` whose centres are nearest, its barycentric
    coordinates there (clamped into the triangle) and the rest of its offset in the triangle's
    frame (:func:`_frames`), so that the rest nodes give the point exactly.

    A triangle whose prism holds the point is at its plane's distance, and no triangle is
    nearer than its plane: so a holding candidate is the nearest unless another candidate's
    plane is nearer (beyond rounding); only those points (a sheet's rim, a fold) are measured
    exactly, candidate by candidate, and the others cost a plane distance per candidate (none
    where every node lies in one plane) and a prism test or two."""
    tris = nodes[faces]  # (F, 3, 3)
    a, e0, e1 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    frames = _frames(tris)  # (F, 3, 3): rows e0 / |e0|, n x that, the unit normal n
    normal = frames[:, 2]
    height = (normal * a).sum(1)  # (F,) each plane's offset along its normal
    metric = np.stack([(e0 * e0).sum(1), (e0 * e1).sum(1), (e1 * e1).sum(1)], 1)  # (F, 3)
    rounding = 1e-9 * float(np.ptp(nodes, 0).max())
    planar = np.abs((nodes - nodes[0]) @ normal[0]).max() <= rounding  # one plane for all
    tree = cKDTree(tris.mean(1))
    k = min(k, len(faces))
    triangles = (tris, a, e0, e1, frames, height, metric)
    out = [  # in chunks: small temporaries, reused
        _embed_chunk(points[start : start + CHUNK], tree, k, triangles, planar, rounding)
        for start in range(0, len(points), CHUNK)
    ]
    return tuple(np.concatenate(part) for part in zip(*out, strict=True))


def _embed_chunk(points, tree, k: int, triangles, planar: bool, rounding: float):
    """:func:`_embed` for ``points`` (C, 3), given the candidates' k-d ``tree`` and the
    triangles' corners, first corners, edges, frames, planes' heights and metrics."""
    from ..dynamics.obstacles import closest_on_triangles

    tris, a, e0, e1, frames, height, metric = triangles
    normal = frames[:, 2]
    cand = tree.query(points, k=k)[1].reshape(len(points), k)
    held = np.full(len(points), np.inf)  # the plane distance of the candidate holding each
    best = cand[:, 0].copy()
    for j in range(k):
        rows = np.flatnonzero(held == np.inf)
        if not len(rows):
            break
        t = cand[rows, j]
        p = points[rows]
        inside = _inside(p - a[t], e0[t], e1[t], metric[t])
        rows, t, p = rows[inside], t[inside], p[inside]
        best[rows] = t
        held[rows] = np.abs(np.einsum("nd,nd->n", p, normal[t]) - height[t])
    doubt = held == np.inf  # none holds it, or a candidate's plane is nearer than its holder
    for j in range(0 if planar else k):
        rows = np.flatnonzero(~doubt)
        t = cand[rows, j]
        plane = np.abs(np.einsum("nd,nd->n", points[rows], normal[t]) - height[t])
        doubt[rows[plane < held[rows] - rounding]] = True
    doubt = np.flatnonzero(doubt)
    if len(doubt):
        best_d = held[doubt].copy()
        p = points[doubt]
        for j in range(k):
            t = tris[cand[doubt, j]]
            closest = closest_on_triangles(p, t[:, 0], t[:, 1], t[:, 2])[0]
            d = np.linalg.norm(p - closest, axis=1)
            better = d < best_d
            best[doubt[better]], best_d[better] = cand[doubt[better], j], d[better]
    offset = points - a[best]  # (N, 3)
    bary = _barycentric(offset, e0[best], e1[best], metric[best])
    rest = offset - bary[:, 1:2] * e0[best] - bary[:, 2:3] * e1[best]  # what it misses
    local = np.einsum("nkd,nd->nk", frames[best], rest)
    return best, bary, local


def _inside(offset, e0, e1, metric) -> np.ndarray:
    """(N,) whether points at ``offset`` (N, 3) from their triangles' first corners project
    into the triangles (edges ``e0``, ``e1`` (N, 3), their dot products ``metric`` (N, 3):
    e0.e0, e0.e1, e1.e1): barycentric coordinates all >= 0, to rounding."""
    v, w, den = plane_coordinates(offset, e0, e1, metric)
    tol = 1e-9 * den
    return (den > 0) & (v >= -tol) & (w >= -tol) & (den - v - w >= -tol)


def plane_coordinates(offset, e0, e1, metric):
    """(v, w, den) (N,) each: the projection of ``offset`` on its triangle's plane is
    (v e0 + w e1) / den (arguments as :func:`_inside`'s; den = 0 for a triangle of no area)."""
    d00, d01, d11 = metric[:, 0], metric[:, 1], metric[:, 2]
    d20, d21 = (offset * e0).sum(1), (offset * e1).sum(1)
    return d11 * d20 - d01 * d21, d00 * d21 - d01 * d20, d00 * d11 - d01 * d01


def _barycentric(offset, e0, e1, metric) -> np.ndarray:
    """(N, 3) barycentric coordinates of the projections of points (arguments as
    :func:`_inside`'s) on their triangles, clamped into the triangles."""
    v, w, den = plane_coordinates(offset, e0, e1, metric)
    den = np.maximum(den, 1e-300)
    out = np.clip(np.stack([1.0 - (v + w) / den, v / den, w / den], 1), 0.0, None)
    return out / np.maximum(out.sum(1, keepdims=True), 1e-300)


def imperfection(nodes: np.ndarray, faces: np.ndarray, size: float) -> np.ndarray:
    """A smooth out-of-surface offset (n, 3) m of ``IMPERFECTION`` x ``size`` at most: a
    sheet exactly flat under loads in its own plane (a flag on an upright pole) stays flat
    forever in exact arithmetic, where real cloth, and Blender's cloth from its rounding,
    buckles and hangs in folds. The same for every run of a mesh: three waves with a
    fixed seed over the nodes' coordinates, along their normals."""
    normals = np.zeros_like(nodes)
    cross = face_cross(nodes, faces)  # (F, 3) area-weighted
    for c in range(3):
        np.add.at(normals, faces[:, c], cross)
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-300)
    rng = np.random.default_rng(47)
    waves = rng.normal(size=(3, 3)) * (2.0 * math.pi / max(size, 1e-300))  # (3 waves, 3)
    phases = rng.uniform(0.0, 2.0 * math.pi, 3)
    field = np.sin(nodes @ waves.T + phases).sum(1) / 3.0  # (n,) in [-1, 1]
    return (IMPERFECTION * size) * field[:, None] * normals


def node_masses(nodes: np.ndarray, faces: np.ndarray, mass: float) -> np.ndarray:
    """(n,) each node's share (a third of each triangle's area) of ``mass`` kg."""
    area = np.linalg.norm(face_cross(nodes, faces), axis=1) / 2.0
    m = np.bincount(faces.ravel(), np.repeat(area / 3.0, 3), minlength=len(nodes))
    m = np.where(m > 0, m, max(float(m.max()), 1e-300) * 1e-3)
    return mass * m / m.sum()


def _cot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cotangent of the angle between rows of ``a`` and ``b``."""
    return (a * b).sum(1) / np.maximum(np.linalg.norm(cross3(a, b), axis=1), 1e-300)


def bending_matrix(nodes: np.ndarray, faces: np.ndarray) -> sparse.csr_matrix:
    """(n, n) Q with E = 1/2 B sum_k x[:, k]^T Q x[:, k]: Bergou et al.'s quadratic bending,
    the sum over interior edges e = (i, j), with opposite corners k (face one) and l (face
    two), of K K^T / (A_1 + A_2), K over (i, j, k, l) = (c_jk + c_jl, c_ik + c_il, -c_ik - c_jk,
    -c_il - c_jl), c_ak the cotangent of the angle at a in the face with k. Its kernel holds
    every affine map of a flat sheet; bent into a cylinder of curvature kappa a flat sheet has
    E = 1/2 B kappa^2 per area (Bergou's 3 / (A_1 + A_2) gives three times that)."""
    f = np.asarray(faces, dtype=np.int64)
    he = np.concatenate([f[:, [0, 1, 2]], f[:, [1, 2, 0]], f[:, [2, 0, 1]]])  # (3F, 3): i, j, opp
    face_of = np.tile(np.arange(len(f)), 3)
    lo, hi = np.minimum(he[:, 0], he[:, 1]), np.maximum(he[:, 0], he[:, 1])
    key = lo * len(nodes) + hi
    order = np.argsort(key, kind="stable")
    key_s = key[order]
    # consecutive equal keys: an interior edge (an edge of three faces or more, a seam, gives
    # each consecutive pair of its faces)
    pair = np.flatnonzero(key_s[1:] == key_s[:-1])
    h1, h2 = order[pair], order[pair + 1]
    i, j, k = lo[h1], hi[h1], he[h1, 2]
    l_ = he[h2, 2]
    x = nodes
    area = np.linalg.norm(face_cross(x, f), axis=1) / 2.0
    a_sum = area[face_of[h1]] + area[face_of[h2]]
    e0 = x[j] - x[i]
    # cotangents at i and j in the two triangles (i, j, k) and (i, j, l)
    c_ik = _cot(e0, x[k] - x[i])  # angle at i in (i, j, k)
    c_jk = _cot(-e0, x[k] - x[j])  # angle at j in (i, j, k)
    c_il = _cot(e0, x[l_] - x[i])
    c_jl = _cot(-e0, x[l_] - x[j])
    kvec = np.stack([c_jk + c_jl, c_ik + c_il, -c_ik - c_jk, -c_il - c_jl], 1)  # (E, 4)
    idx = np.stack([i, j, k, l_], 1)
    good = a_sum > 0
    kvec, idx, a_sum = kvec[good], idx[good], a_sum[good]
    coef = 1.0 / a_sum
    rows = np.repeat(idx, 4, axis=1).ravel()
    cols = np.tile(idx, (1, 4)).ravel()
    vals = (coef[:, None, None] * kvec[:, :, None] * kvec[:, None, :]).ravel()
    n = len(nodes)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))


class ClothEnergy:
    """The cloth's internal energies: membrane springs on ``edges``
    (E, 2) with rest ``lengths`` (E,) and stiffness ``k`` (E,) N/m (``compression`` x k when
    shortened) and bending B Q (``bending`` the (n, n) matrix B Q)."""

    def __init__(self, edges, lengths, k, compression: float, bending: sparse.csr_matrix):
        self.edges = np.asarray(edges, dtype=np.int64)
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.k = np.asarray(k, dtype=np.float64)
        self.compression = float(compression)
        self.bending = bending.tocsr()
        n = bending.shape[0]
        e = len(self.edges)
        ar = np.arange(e)
        self.g = sparse.csr_matrix(
            (
                np.r_[np.ones(e), -np.ones(e)],
                (np.r_[ar, ar], np.r_[self.edges[:, 1], self.edges[:, 0]]),
            ),
            shape=(e, n),
        )  # (E, n): d_e = x_j - x_i
        self.gt = self.g.T.tocsr()  # (n, E)

    def value(self, x: np.ndarray) -> float:
        """The energy (J) at ``x`` (n, 3), without its gradient."""
        d = self.g @ x  # (E, 3)
        stretch = np.sqrt(np.einsum("ij,ij->i", d, d)) - self.lengths
        k = np.where(stretch > 0, self.k, self.k * self.compression)
        return 0.5 * float(k @ (stretch * stretch)) + 0.5 * float(
            np.einsum("ij,ij->", x, self.bending @ x)
        )

    def __call__(self, x: np.ndarray, d: np.ndarray | None = None) -> tuple[float, np.ndarray]:
        """(value J, gradient (n, 3)); ``d`` (E, 3): the edges' vectors at ``x``, when known."""
        d = self.g @ x if d is None else d  # (E, 3)
        length = np.sqrt((d * d).sum(1))
        stretch = length - self.lengths
        k = np.where(stretch > 0, self.k, self.k * self.compression)
        value = 0.5 * float((k * stretch * stretch).sum())
        coeff = k * stretch / np.maximum(length, 1e-300)  # (E,) force along d per length
        grad = self.gt @ (coeff[:, None] * d)
        bx = self.bending @ x
        value += 0.5 * float((x * bx).sum())
        return value, grad + bx


@dataclass
class ClothReport:
    steps: int = 0
    iterations: int = 0
    factorisations: int = 0
    line_search_halvings: int = 0
    unconverged: int = 0
    failed_searches: int = 0  # steps whose line search found nothing lower
    capped: int = 0  # steps that ran out of iterations
    pushed: int = 0  # nodes moved out of an obstacle after their step
    handed: int = 0  # projective steps the quasi-Newton step finished (cloth_projective)
    backward_euler: int = 0  # steps taken by backward Euler (the rest: BDF2)


class _Plan(NamedTuple):
    """A step's set-up (:meth:`ClothStep._plan`): its base x_b and length k in the
    incremental potential (x_n and h for backward Euler), the inertia's centre z and weight,
    the prediction, the contact's ``touch``, the viscous stretching's reference lengths (E,),
    whether it is BDF2's, and its length h."""

    base: np.ndarray
    k: float
    z: np.ndarray
    inertia: float
    hat: np.ndarray
    touch: object
    lengths: np.ndarray
    bdf2: bool
    h: float


class ClothStep:
    """Backward-Euler steps of a cloth (module docstring). masses: (n,) kg; free: (n,) bool
    (pinned nodes stay where they are); energy: :class:`ClothEnergy`; contact: a
    :class:`~neurok_core.rigspace.cloth_contact.ClothContact` or None; damping: the user's
    rate c (1/s); stretch_zeta: the damping ratio of the springs' stretching (a viscous term
    on each edge's length rate, at the springs' frequency ``omega``)."""

    def __init__(
        self,
        masses,
        free,
        energy: ClothEnergy,
        contact,
        *,
        damping: float,
        stretch_zeta: float,
        omega: float,
        size: float,
        bending_damping: float = 0.0,
        iterations: int = ITERATIONS,
        self_contact=None,
    ):
        self.m = np.asarray(masses, dtype=np.float64)
        self.free = np.asarray(free, dtype=bool)
        self.idx = np.flatnonzero(self.free)
        self.energy, self.contact = energy, contact
        self.layers = self_contact  # a :class:`~.cloth_self.SelfContact`, or None
        self._layer_blocks = None  # the layers' barrier's blocks in the step's matrix, or None
        self.c = float(damping)
        self.beta = 2.0 * stretch_zeta / omega if omega > 0 else 0.0
        self.tau = float(bending_damping)  # s: viscous bending, tau B Q x' (Rayleigh)
        self.x0 = None  # the step's start (the viscous bending's reference)
        self.size = float(size)
        self.iterations = int(iterations)
        self.report = ClothReport()
        self._last = None  # (x_n, v_n, h_n, x_{n+1}) of the last step clear of obstacles
        self._key, self._age, self._hard = None, 0, False  # the factorisation's, its steps
        bending = energy.bending.tocoo()
        self._bending3 = (  # B Q over the 3 coordinates: (rows, cols, values)
            (3 * bending.row[:, None] + np.arange(3)).ravel(),
            (3 * bending.col[:, None] + np.arange(3)).ravel(),
            np.repeat(bending.data, 3),
        )
        rows = energy.bending  # B Q in compressed rows, as the compiled potential reads it
        self._bending_rows = (
            rows.indptr.astype(np.int64),
            rows.indices.astype(np.int64),
            np.ascontiguousarray(rows.data, dtype=np.float64),
        )
        pairs = np.concatenate([energy.edges, np.stack([bending.row, bending.col], 1)])
        self._system = NodeSystem(self.free, pairs)
        # each spring's four 3x3 blocks (i i, j j, i j, j i): their entries' rows and columns
        i, j = energy.edges[:, 0], energy.edges[:, 1]
        r3, c3 = np.meshgrid(np.arange(3), np.arange(3), indexing="ij")
        self._spring_rows = np.stack([3 * a[:, None, None] + r3 for a in (i, j, i, j)], 1)
        self._spring_cols = np.stack([3 * b[:, None, None] + c3 for b in (i, j, j, i)], 1)
        self._band = self._band_layout()

    @property
    def x0(self):
        """The step's start (n, 3) (the viscous bending's reference), or None."""
        return self._x0

    @x0.setter
    def x0(self, value) -> None:
        self._x0 = value
        keep = value is not None and self.tau > 0
        self.bx0 = self.energy.bending @ value if keep else None  # B Q x0

    # -- the step's matrix ----------------------------------------------------------------
    def _band_layout(self):
        """What stays the same of the step's matrix in band storage (``NodeSystem.positions``):
        (width, the springs' blocks' positions (E, 36), the bending's band B Q, the masses'
        band), or None where the mesh's band is too wide for one (the sparse LU serves)."""
        system = self._system
        n = len(self.m)
        rows, cols = self._spring_rows, self._spring_cols  # (E, 4, 3, 3)
        b_rows, b_cols, b_vals = self._bending3
        lower = system.row[np.concatenate([rows.ravel(), b_rows])]
        upper = system.row[np.concatenate([cols.ravel(), b_cols])]
        kept = (lower >= 0) & (upper >= 0)
        width = int((lower[kept] - upper[kept]).max(initial=0))
        if width > BAND_SHARE * system.size or not system.size:
            return None
        springs = system.positions(rows.reshape(-1, 36), cols.reshape(-1, 36), width)
        shape = (width + 1) * system.size
        bend = system.positions(b_rows, b_cols, width)
        diag = system.positions(np.arange(3 * n), np.arange(3 * n), width)
        mass = np.bincount(diag[diag >= 0], np.repeat(self.m, 3)[diag >= 0], minlength=shape)
        curve = np.bincount(bend[bend >= 0], b_vals[bend >= 0], minlength=shape)
        return width, springs, curve, mass

    def _matrix(self, x: np.ndarray, inertia: float, h: float, touch, drags) -> None:
        """Factorise the potential's Hessian at ``x`` (springs PSD-projected, the contact's
        normal springs and the friction's sticking at the step's start) over the free nodes'
        coordinates (3 per node, node-major), the quasi-Newton iterations' initial Hessian:
        in band storage directly where the mesh's band holds every entry (the springs' blocks
        a compiled pass, ``contact_kernels.spring_band``; the bending and the masses kept from
        :meth:`_band_layout`), else from its entries."""
        self.report.factorisations += 1
        if self._band is not None and self._layer_blocks is None:
            if self._band_matrix(x, inertia, h, touch, drags):
                return
        e = self.energy
        n = len(self.m)
        d = e.g @ x  # (E, 3)
        length = np.sqrt((d * d).sum(1))
        u = d / np.maximum(length, 1e-300)[:, None]
        stretched = length > e.lengths
        k = np.where(stretched, e.k, e.k * e.compression)
        axial = k + e.k * self.beta / h  # along the edge: the spring and its viscous term
        across = np.maximum(
            np.where(stretched, e.k * (1.0 - e.lengths / np.maximum(length, 1e-300)), 0.0),
            ACROSS * e.k,
        )
        eye = np.eye(3)
        uu = u[:, :, None] * u[:, None, :]
        block = axial[:, None, None] * uu + across[:, None, None] * (eye - uu)  # (E, 3, 3)
        signs = np.array([1.0, 1.0, -1.0, -1.0])[None, :, None, None]
        rows, cols = [self._spring_rows.ravel()], [self._spring_cols.ravel()]
        vals = [(signs * block[:, None]).ravel()]  # (E, 4, 3, 3) as the rows
        diag = np.repeat(2.0 * inertia * self.m, 3)
        for more in self._varying(touch, drags):
            for part, entries in zip((rows, cols, vals), more, strict=True):
                part.append(entries)
        b_rows, b_cols, b_vals = self._bending3
        rows += [np.arange(3 * n), b_rows]
        cols += [np.arange(3 * n), b_cols]
        vals += [diag, b_vals * (1.0 + self.tau / h)]
        self._system.factor(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals))

    def _band_matrix(self, x, inertia: float, h: float, touch, drags) -> bool:
        """:meth:`_matrix` in band storage; False where an entry of :meth:`_varying` lies
        outside the band or the matrix is not positive definite to rounding."""
        from ..contact_kernels import spring_band  # here: numba loads in about 1 s

        width, springs, curve, mass = self._band
        system, e = self._system, self.energy
        ab = (1.0 + self.tau / h) * curve + (2.0 * inertia) * mass  # (width + 1) size
        for rows, cols, vals in self._varying(touch, drags):
            at = system.positions(rows, cols, width)
            if (at == -2).any():
                return False
            ab += np.bincount(at[at >= 0], vals[at >= 0], minlength=len(ab))
        spring_band(x, e.edges, e.lengths, e.k, e.compression, self.beta / h, ACROSS, springs, ab)
        return system.factor_band(ab.reshape(width + 1, system.size))

    def _varying(self, touch, drags) -> list:
        """[(rows, cols, values)] of the step matrix's entries that change from step to step
        besides the springs': the contact's (``touch``), the layers' and the drags'."""
        out = []
        if touch is not None:
            out.append(self.contact.blocks(touch))
        if self._layer_blocks is not None:
            out.append(self._layer_blocks)
        for nodes, w, kd, _ in drags:
            ww = kd * np.outer(w, w).ravel()
            pairs = (3 * np.repeat(nodes, len(nodes)), 3 * np.tile(nodes, len(nodes)))
            out += [(pairs[0] + a, pairs[1] + a, ww) for a in range(3)]
        return out

    def _prepare(self, x, inertia: float, h: float, touch, drags) -> None:
        """Factorise the step's initial Hessian where the kept one does not serve: another
        step length or drags, after KEEP_STEPS steps or a hard step, and near an obstacle a
        fresh one every step (a kept factorisation ended a resting contact's iterations
        looser: its cloth crept)."""
        key = (h, tuple((n.tobytes(), w.tobytes(), k) for n, w, k, _ in drags))
        fresh = touch is not None or self._layer_blocks is not None
        if key != self._key or self._age >= KEEP_STEPS or self._hard or fresh:
            self._matrix(x, inertia, h, touch, drags)
            self._key, self._age = key, 0
        else:
            self._age += 1

    # -- the incremental potential ---------------------------------------------------------
    def _potential(self, x, z, inertia, h, start_d, forces, drags):
        """Phi(x) = inertia |x - z|_M^2 + E(x) + the viscous stretching and bending - f . x +
        the drags' springs, and its gradient (zero at the pinned nodes). The inertia, springs,
        viscous stretching, bending and forces are one compiled pass
        (``contact_kernels.cloth_potential``: in numpy a dozen array operations, most of an
        iteration's time); the viscous bending uses the step's start's B Q x_n
        (``self.bx0``)."""
        from ..contact_kernels import cloth_potential  # here: numba loads in about 1 s

        e = self.energy
        value, grad, bx = cloth_potential(
            x,
            z,
            self.m,
            inertia,
            e.edges,
            e.lengths,
            e.k,
            e.compression,
            self.beta / h,
            start_d,
            *self._bending_rows,
            forces,
        )
        if self.tau > 0 and self.x0 is not None:  # tau / (2 h) |x - x_n|_{B Q}^2
            c = self.tau / h
            bq = bx - self.bx0
            value += 0.5 * c * float(np.einsum("ij,ij->", x - self.x0, bq))
            grad += c * bq
        for contact in (self.contact, self.layers):
            if contact is not None:
                vc, gc = contact(x)
                value += vc
                grad += gc
        for nodes, w, kd, target in drags:
            off = w @ x[nodes] - target
            value += 0.5 * kd * float(off @ off)
            grad[nodes] += kd * w[:, None] * off[None]
        grad[~self.free] = 0.0
        return value, grad

    def _solve(self, g: np.ndarray) -> np.ndarray:
        out = np.zeros_like(g)
        out[self.idx] = self._system.solve(g[self.idx])
        return out

    def _target(self, x, v, h):
        """(z, inertia, predictor) of the backward-Euler step from (x, v): the predictor
        x_n + h v_n merged with the air damping's c / (2 h) |x - x_n|_M^2 into one
        inertia |x - z|_M^2."""
        hat = x + h * v
        a, b = 1.0 / (2.0 * h * h), self.c / (2.0 * h)
        return (a * hat + b * x) / (a + b), a + b, hat

    def _history(self, x, h: float):
        """(x_{n-1}, v_{n-1}, h_{n-1}) of the step that ended at ``x``, where this one may
        continue it by BDF2: a damped run, steps at most 2x apart in length, the last one clear
        of the obstacles (not near one, nothing pushed out); else None (backward Euler)."""
        last = self._last
        if self.c <= 0 or last is None:
            return None
        if last[3] is not x or not 0.5 <= h / last[2] <= 2.0:
            return None
        return last[:3]

    def _plan(self, x, v, h: float, touching) -> _Plan:
        """The step from (x, v) over ``h``: BDF2's where :meth:`_history` allows and
        ``touching(hat)`` is None (no point near an obstacle where the prediction takes it),
        else backward Euler's; ``touching`` is called for each plan tried."""
        history = self._history(x, h)
        if history is not None:  # x_{n+1} - a x_n + b x_{n-1} = k v_{n+1}, likewise for v
            xp, vp, hp = history
            w = h / hp
            a, b = (1 + w) ** 2 / (1 + 2 * w), w * w / (1 + 2 * w)
            base, k = a * x - b * xp, (1 + w) / (1 + 2 * w) * h
            z, inertia, hat = self._target(base, a * v - b * vp, k)
            touch = touching(hat)
            if touch is None:
                lengths = a * self._lengths(x) - b * self._lengths(xp)
                return _Plan(base, k, z, inertia, hat, None, lengths, True, h)
        z, inertia, hat = self._target(x, v, h)
        return _Plan(x, h, z, inertia, hat, touching(hat), self._lengths(x), False, h)

    def _lengths(self, x: np.ndarray) -> np.ndarray:
        d = self.energy.g @ x  # (E, 3)
        return np.sqrt(np.einsum("ij,ij->i", d, d))

    def _finish(self, plan: _Plan, x, v, y) -> tuple:
        """(y, v_{n+1}) of a step from (x, v) ending at ``y``: the velocity BDF2's or backward
        Euler's, the points left inside an obstacle pushed out (an impulse: the next step
        starts afresh, as after a step near an obstacle: backward Euler's again, not a BDF2
        plan tried first and dropped), the pinned nodes kept."""
        v_new = (y - plan.base) / plan.k
        pushed = 0
        if self.contact is not None:
            pushed = self.contact.push_out(y, v_new, self.free)
            self.report.pushed += pushed
            y[~self.free] = x[~self.free]
        v_new[~self.free] = 0.0
        self.report.backward_euler += int(not plan.bdf2)
        self._last = None if pushed or plan.touch is not None else (x, v, plan.h, y)
        return y, v_new

    def advance(self, x, v, h: float, forces, drags, start=None) -> tuple:
        """One step of length ``h`` from (x, v) (n, 3) under ``forces`` (n, 3) N (gravity and
        winds included) and ``drags`` [(nodes, weights, k, target (3,))]; returns (x, v).
        ``start`` (n, 3): the iterations' first point (default: the prediction). BDF2 where
        :meth:`_plan` allows (module docstring), else backward Euler."""
        if not len(self.idx):  # every node pinned: nothing moves
            self.report.steps += 1
            self._last = None
            return x.copy(), np.zeros_like(v)
        plan = self._plan(
            x, v, h, lambda hat: None if self.contact is None else self.contact.begin(x, hat)
        )
        base, k, z, inertia, hat, touch = plan[:6]
        y = (hat if start is None else start).copy()
        y[~self.free] = x[~self.free]
        self._layer_blocks = None
        if self.layers is not None:  # the first iterate as far toward y as keeps layers apart
            self.layers.begin(x)  # the layers' friction, lagged at the step's start
            y = x + self.layers.max_step(x, y - x) * (y - x)
            blocks = self.layers.blocks(y)
            self._layer_blocks = blocks if len(blocks[2]) else None
        self._prepare(x, inertia, k, touch, drags)
        iterations = self.report.iterations
        start_d = plan.lengths  # the viscous stretching's reference lengths
        self.x0 = base
        h = k  # in the potential the step's own length: BDF2's k, backward Euler's h
        value, g = self._potential(y, z, inertia, h, start_d, forces, drags)
        start_value = value
        failed = self.report.failed_searches
        s_hist, y_hist = [], []
        tol = CONVERGED * self.size
        converged = False
        rhos = []  # 1 / (y . s) of each pair
        for _ in range(self.iterations):
            # L-BFGS two-loop recursion, its initial Hessian the one factorised above (flat
            # views and BLAS dot products: the recursion is a few dozen calls an iteration)
            q = g.ravel().copy()
            alphas = []
            for s, yv, rho in zip(reversed(s_hist), reversed(y_hist), reversed(rhos), strict=True):
                a = rho * np.dot(s, q)
                alphas.append(a)
                q -= a * yv
            r = self._solve(q.reshape(g.shape)).ravel()
            for s, yv, rho, a in zip(s_hist, y_hist, rhos, reversed(alphas), strict=True):
                r += (a - rho * np.dot(yv, r)) * s
            step = -r.reshape(g.shape)
            slope = float(np.dot(g.ravel(), step.ravel()))
            if slope >= 0:  # not a descent direction: restart from the factorised Hessian
                s_hist.clear()
                y_hist.clear()
                rhos.clear()
                step = -self._solve(g)
                slope = float(np.dot(g.ravel(), step.ravel()))
            if slope >= -ROUNDING * (abs(value) + abs(start_value)):
                converged = True  # no decrease left above the potential's rounding
                break
            # no longer than keeps the cloth's layers apart (each trial of the search too)
            alpha = 1.0 if self.layers is None else self.layers.max_step(y, step)
            best = None  # the lowest trial, should none meet Armijo's condition
            for _ in range(MAX_HALVINGS):
                trial = y + alpha * step
                v_new, g_new = self._potential(trial, z, inertia, h, start_d, forces, drags)
                if v_new <= value + ARMIJO * alpha * slope:
                    break
                if v_new < value and (best is None or v_new < best[1]):
                    best = (trial, v_new, g_new)
                alpha *= 0.5
                self.report.line_search_halvings += 1
            else:
                # the obstacles' distances are interpolated on a grid, so their gradient is
                # not exactly the potential's: take the lowest trial if one is lower
                if best is None:
                    self.report.failed_searches += 1
                    break
                trial, v_new, g_new = best
            s = (trial - y).ravel()
            yv = (g_new - g).ravel()
            sy = float(np.dot(s, yv))
            if sy > 1e-300:
                s_hist.append(s)
                y_hist.append(yv)
                rhos.append(1.0 / sy)
                if len(s_hist) > HISTORY:
                    s_hist.pop(0)
                    y_hist.pop(0)
                    rhos.pop(0)
            gain = value - v_new
            y, value, g = trial, v_new, g_new
            self.report.iterations += 1
            moved = float(np.abs(s).max())
            if moved < tol or (gain <= SETTLED * (start_value - value) and moved < 100 * tol):
                converged = True
                break
        self.report.steps += 1
        # a step that needed many iterations on a kept factorisation gets a fresh one next
        self._hard = self.report.iterations - iterations > KEEP_ITERATIONS
        self.report.unconverged += int(not converged)
        self.report.capped += int(not converged and self.report.failed_searches == failed)
        return self._finish(plan, x, v, y)

    def mechanical_energy(self, x: np.ndarray, v: np.ndarray, gravity: np.ndarray) -> float:
        """Kinetic + internal + gravity's potential energy (J)."""
        kinetic = 0.5 * float(self.m @ np.einsum("ij,ij->i", v, v))
        return kinetic + self.energy.value(x) - float(self.m @ (x @ gravity))
