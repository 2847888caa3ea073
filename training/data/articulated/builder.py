"""From a family's description of an object to a moving 4D sequence.

A family function draws its random proportions and returns a ``build(b: ObjectBuilder)``
callback that adds links, joints and placed primitives at the zero configuration. ``articulate``
then picks the mesh resolution (a random vertex budget, so vertex counts vary from a few hundred to
~20k independently of the family), a rest configuration (closed, or random within the limits),
a smooth joint trajectory from it, and poses every frame by forward kinematics. ``build`` must not
draw random numbers: it is called several times while the resolution is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import trimesh

from neurok_core.errors import SequenceError
from neurok_core.sequence import Sequence4D

from .. import primitives as P
from ..kinematics import Joint, KinematicTree, pose_vertices
from ..registry import family
from ..trajectories import joint_trajectory
from ..validation import check_rest_frame
from .overlap import part_overlap

MIN_VERTICES, MAX_VERTICES = 300, 20_000
SUBDIVIDE_PROBABILITY = 0.2


@dataclass
class ObjectBuilder:
    """Collects links, joints and their primitives, all in world coordinates at q = 0."""

    edge: float  # target edge length, metres
    subdivide: bool = False
    tree: KinematicTree = field(default_factory=KinematicTree)
    meshes: list[list[P.TriMesh]] = field(default_factory=lambda: [[]])

    BASE = 0

    def link(self, name: str) -> int:
        self.meshes.append([])
        return self.tree.add_link(name)

    def joint(
        self,
        kind: str,
        parent: int,
        child: int,
        axis,
        point=(0.0, 0.0, 0.0),
        lower: float = 0.0,
        upper: float = 0.0,
        closed: float | None = None,
    ) -> None:
        """Join ``child`` to ``parent``; ``closed`` defaults to the lower limit."""
        axis = np.asarray(axis, dtype=np.float64)
        if kind == "continuous":
            lower, upper = -math.inf, math.inf
        if closed is None:
            closed = 0.0 if kind == "continuous" else lower
        self.tree.add_joint(
            Joint(
                name=f"{self.tree.link_names[child]}_joint",
                kind=kind,
                parent=parent,
                child=child,
                axis=axis / np.linalg.norm(axis),
                point=np.asarray(point, dtype=np.float64),
                lower=float(lower),
                upper=float(upper),
                closed=float(closed),
            )
        )

    def add(self, link: int, mesh: P.TriMesh, rot=None, offset=(0.0, 0.0, 0.0)) -> None:
        if self.subdivide:
            mesh = P.subdivide(mesh)
        self.meshes[link].append(P.transform(mesh, rot, offset))

    # placed primitives ---------------------------------------------------------------------
    def box(self, link: int, size, centre, rot=None, radius: float = 0.0) -> None:
        self.add(link, P.box(size, self.edge, radius), rot, centre)

    def slab(self, link: int, lo, hi, radius: float = 0.0) -> None:
        """Axis-aligned box between corners ``lo`` and ``hi``."""
        lo, hi = np.asarray(lo, dtype=np.float64), np.asarray(hi, dtype=np.float64)
        self.box(link, hi - lo, 0.5 * (lo + hi), radius=radius)

    def cylinder(self, link: int, radius: float, length: float, centre, direction=(0, 0, 1)):
        self.add(link, P.cylinder(radius, length, self.edge), P.align_z(direction), centre)

    def capsule(self, link: int, radius: float, length: float, centre, direction=(0, 0, 1)):
        self.add(link, P.capsule(radius, length, self.edge), P.align_z(direction), centre)

    def rod(self, link: int, a, b, radius: float, rounded: bool = True) -> None:
        """A capsule (or cylinder) from point ``a`` to point ``b``."""
        a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        length = float(np.linalg.norm(b - a))
        make = self.capsule if rounded else self.cylinder
        make(link, radius, length, 0.5 * (a + b), b - a)

    def sphere(self, link: int, radius: float, centre) -> None:
        self.add(link, P.sphere(radius, self.edge), None, centre)

    def torus(self, link: int, major: float, minor: float, centre, direction=(0, 0, 1)):
        self.add(link, P.torus(major, minor, self.edge), P.align_z(direction), centre)

    def frustum(self, link: int, r0: float, r1: float, height: float, base, direction=(0, 0, 1)):
        self.add(link, P.frustum(r0, r1, height, self.edge), P.align_z(direction), base)

    def prism(self, link: int, polygon, thickness: float, rot=None, offset=(0, 0, 0)) -> None:
        """Convex polygon in the local xy plane extruded along local z by ``thickness``."""
        self.add(link, P.prism(polygon, thickness, self.edge), rot, offset)

    # result ----------------------------------------------------------------------------------
    def mesh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(N, 3) vertices, (F, 3) faces, (N,) link per vertex."""
        parts = [P.concatenate(m) for m in self.meshes]
        if any(len(m.vertices) == 0 for m in parts):
            empty = [self.tree.link_names[i] for i, m in enumerate(parts) if not len(m.vertices)]
            raise ValueError(f"links without geometry: {empty}")
        labels = np.concatenate([np.full(len(m.vertices), i) for i, m in enumerate(parts)])
        whole = P.concatenate(parts)
        return whole.vertices, whole.faces, labels


@dataclass(frozen=True)
class Articulation:
    """One object moving along a joint trajectory.

    vertices: (N, 3) zero configuration; faces (F, 3); links (N,) link index per vertex;
    q: (T, J) joint values with q[0] = rest; rest: (J,); yaw: rotation of the whole object
    about z (radians), applied after posing.
    """

    name: str
    tree: KinematicTree
    vertices: np.ndarray
    faces: np.ndarray
    links: np.ndarray
    q: np.ndarray
    rest: np.ndarray
    yaw: float
    closed: bool

    def pose(self, q: np.ndarray) -> np.ndarray:
        """(T, J) joint values -> (T, N, 3) float64 world positions."""
        x = pose_vertices(self.vertices, self.links, self.tree.link_transforms(q))
        return x @ P.rotation((0.0, 0.0, 1.0), self.yaw).T

    def to_sequence(self, source: str = "procedural articulated") -> Sequence4D:
        seq = Sequence4D(
            vertices=self.pose(self.q).astype(np.float32),
            faces=self.faces.astype(np.int32),
            parts=self.links.astype(np.int32),
            closed=self.closed,
            category="articulated",
            source=source,
            name=self.name,
        )
        check_rest_frame(seq, self.pose(self.rest[None])[0])
        return seq


Build = Callable[[ObjectBuilder], None]


def vertex_budget(rng: np.random.Generator) -> int:
    """Random target vertex count, log-uniform in [300, 20k] skewed towards small meshes."""
    u = rng.random() ** 1.5
    return int(MIN_VERTICES * (MAX_VERTICES / MIN_VERTICES) ** u)


def fit_resolution(build: Build, target: int, subdivide: bool) -> ObjectBuilder:
    """Build with the edge length whose vertex count comes closest to ``target``."""
    per_vertex = 4.0 if subdivide else 1.0  # midpoint subdivision ~quadruples the count
    probe = ObjectBuilder(edge=1.0)
    build(probe)
    area = sum(float(trimesh.triangles.area(m.vertices[m.faces]).sum()) for m in _all(probe))
    edge = math.sqrt(area * per_vertex / target)
    best = None
    for _ in range(3):
        b = ObjectBuilder(edge=edge, subdivide=subdivide)
        build(b)
        n = sum(len(m.vertices) for m in _all(b))
        if best is None or abs(math.log(n / target)) < abs(math.log(best[0] / target)):
            best = (n, b)
        if abs(math.log(n / target)) < 0.2:
            break
        edge *= math.sqrt(n / target)
    return best[1]


def _all(b: ObjectBuilder):
    return [m for link in b.meshes for m in link]


def rest_configuration(rng: np.random.Generator, tree: KinematicTree) -> np.ndarray:
    """Closed (all joints stowed) with probability 0.4, else each joint closed or uniform."""
    all_closed = rng.random() < 0.4
    rest = []
    for j in tree.joints:
        if j.kind == "continuous":
            rest.append(rng.uniform(0.0, 2 * math.pi))
        elif all_closed or rng.random() < 0.3:
            rest.append(j.closed)
        else:
            rest.append(rng.uniform(j.lower, j.upper))
    return np.array(rest)


def articulate(name: str, build: Build, rng: np.random.Generator, frames: int) -> Articulation:
    """Resolution, rest pose and trajectory for the object that ``build`` describes."""
    subdivide = rng.random() < SUBDIVIDE_PROBABILITY
    b = fit_resolution(build, vertex_budget(rng), subdivide)
    vertices, faces, links = b.mesh()
    closed = bool(trimesh.Trimesh(vertices, faces, process=False).is_watertight)
    rest = rest_configuration(rng, b.tree)
    lower, upper = b.tree.limits()
    q = joint_trajectory(rng, rest, lower, upper, frames)
    return Articulation(
        name=name,
        tree=b.tree,
        vertices=vertices,
        faces=faces,
        links=links,
        q=q,
        rest=rest,
        yaw=float(rng.uniform(0.0, 2 * math.pi)),
        closed=closed,
    )


ARTICULATED: dict[str, Callable[[np.random.Generator, int], Articulation]] = {}


MAX_REDRAWS = 20


def articulated_family(name: str, *, split: str = "train"):
    """Register ``fn(rng) -> build`` as the data family ``name`` (category "articulated").

    The function draws the object's proportions from ``rng`` and returns its ``build``
    callback, or ``(build, accept)`` where ``accept(articulation) -> bool`` vets the posed
    result (e.g. a quick check of parts that collide along the trajectory). Every object then
    passes ``overlap.part_overlap`` (no part runs into another, a joined part overlaps its parent
    only within their joint; checked at a few frames on a sample of each part's vertices); a
    refused object is drawn again from the same ``rng``, up to ``MAX_REDRAWS`` times.
    ``ARTICULATED[name](rng, frames)`` gives the ``Articulation`` (for tests and previews); the
    registry gets
    ``generate(rng, frames) -> Sequence4D``.
    """

    def register(fn: Callable[[np.random.Generator], Build]):
        def make(rng: np.random.Generator, frames: int) -> Articulation:
            for _ in range(MAX_REDRAWS):
                design = fn(rng)
                build, accept = design if isinstance(design, tuple) else (design, None)
                art = articulate(name, build, rng, frames)
                if (accept is None or accept(art)) and not part_overlap(art):
                    return art
            raise SequenceError(f"{name}: no acceptable object in {MAX_REDRAWS} draws")

        def generate(rng: np.random.Generator, frames: int) -> Sequence4D:
            return make(rng, frames).to_sequence(source=f"procedural articulated {name}")

        generate.__doc__ = fn.__doc__
        ARTICULATED[name] = make
        family(name, category="articulated", split=split, description=fn.__doc__ or "")(generate)
        return fn

    return register
