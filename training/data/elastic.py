"""Elastic volumes simulated with MuJoCo 3D flexes: dropped, poked and bent soft bodies.

Shapes (box, beam, cylinder, sphere, ellipsoid) are structured tetrahedral meshes: a grid of
n_x x n_y x n_z vertices, each cell split into the 6 tetrahedra of its Kuhn (Freudenthal)
subdivision (conforming across cells), then warped: a ball by g ||g||_inf / ||g||_2 on the
cube [-1, 1]^3, a cylinder by the same map on the xy square. They enter MuJoCo as
``<flexcomp type="direct" dim="3">`` (every vertex a 3-dof point mass, mass from a density of
300-1500 kg/m^3); MuJoCo's own box/cylinder/ellipsoid flexcomps fan every tetrahedron from one
centre vertex, which leaves the implicit solve ill-conditioned (warnings every step).

Material: MuJoCo's Saint Venant-Kirchhoff elasticity (``young``, ``poisson`` 0.2-0.45, Rayleigh
``damping``). Young's modulus is set from a target static strain rather than drawn blindly:
dropped bodies sag by eps = rho g H / E (1-12 %), poked ones 2-15 %, the cantilever's tip
deflects by delta / L = rho g A L^3 / (8 E I) (Euler-Bernoulli under its own weight, 10-60 %).

Output: the boundary surface of the tetrahedral mesh (faces appearing in one tetrahedron only,
oriented away from the tetrahedron's fourth vertex, so outward), restricted to the surface
vertices by a fixed index map. ``closed`` is True when every edge is shared by exactly two faces
in opposite directions. parts = -1.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import mujoco
import numpy as np

from neurok_core.errors import SimulationError
from neurok_core.sequence import Sequence4D

from .mujoco_util import (
    FPS,
    GRAVITY,
    FreeVertices,
    StepConfig,
    compile_model,
    contact_xml,
    fmt,
    fmt_int,
    log_uniform,
    option_xml,
    random_rotation,
    record_flex,
    rotation_z,
)
from .registry import family

STEP = StepConfig(substeps=4, iterations=200)

# The 6 tetrahedra of a unit cell: monotone corner paths from (0,0,0) to (1,1,1).
_KUHN = np.array(
    [
        np.cumsum([[0, 0, 0]] + [np.eye(3, dtype=int)[a] for a in perm], axis=0)
        for perm in itertools.permutations(range(3))
    ]
)  # (6, 4, 3)


def grid_tets(counts: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A structured tetrahedral grid of the cube [-1, 1]^3.

    Returns points (n_x n_y n_z, 3), index i_x n_y n_z + i_y n_z + i_z, and tets (6 cells, 4).
    """
    nx, ny, nz = counts
    axes = [np.linspace(-1.0, 1.0, n) for n in counts]
    points = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, 3)
    idx = np.arange(nx * ny * nz).reshape(nx, ny, nz)
    cells = np.stack(
        np.meshgrid(np.arange(nx - 1), np.arange(ny - 1), np.arange(nz - 1), indexing="ij"), -1
    ).reshape(-1, 1, 1, 3)  # (C, 1, 1, 3)
    corners = cells + _KUHN[None]  # (C, 6, 4, 3)
    tets = idx[corners[..., 0], corners[..., 1], corners[..., 2]].reshape(-1, 4)
    return points, tets


def ball_warp(g: np.ndarray) -> np.ndarray:
    """Map the cube [-1, 1]^d onto the unit ball along rays: g ||g||_inf / ||g||_2."""
    inf = np.abs(g).max(axis=1, keepdims=True)
    l2 = np.linalg.norm(g, axis=1, keepdims=True)
    return np.where(l2 > 0, g * inf / np.maximum(l2, 1e-12), g)


def tet_volumes(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Signed volumes (E,) = det[b - a, c - a, d - a] / 6."""
    a, b, c, d = (points[tets[:, k]] for k in range(4))
    return np.einsum("ij,ij->i", np.cross(b - a, c - a), d - a) / 6.0


def boundary_faces(points: np.ndarray, tets: np.ndarray) -> np.ndarray:
    """Faces of the tetrahedral mesh's boundary, oriented outward: (F, 3) int64.

    A boundary face belongs to one tetrahedron only; it is flipped when its normal points towards
    the tetrahedron's remaining vertex.
    """
    local = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    faces = tets[:, local].reshape(-1, 3)  # (4E, 3)
    opposite = tets.reshape(-1)  # (4E,) the vertex missing from each face
    _, inverse, counts = np.unique(
        np.sort(faces, axis=1), axis=0, return_inverse=True, return_counts=True
    )
    keep = counts[inverse.reshape(-1)] == 1
    faces, opposite = faces[keep], opposite[keep]
    p0, p1, p2 = (points[faces[:, k]] for k in range(3))
    inward = np.einsum("ij,ij->i", np.cross(p1 - p0, p2 - p0), points[opposite] - p0) > 0
    faces[inward] = faces[inward][:, [0, 2, 1]]
    return faces


def compact(faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keep only referenced vertices: (vertex_ids (M,) sorted, faces renumbered (F, 3))."""
    ids, inverse = np.unique(faces, return_inverse=True)
    return ids, inverse.reshape(faces.shape)


def is_closed_oriented(faces: np.ndarray) -> bool:
    """True if each directed edge occurs once and so does its reverse (watertight, coherent)."""
    e = np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]])  # (3F, 2)
    directed = np.unique(e, axis=0)
    if len(directed) != len(e):
        return False
    forward = {tuple(x) for x in directed.tolist()}
    return all((b, a) in forward for a, b in forward)


def signed_volume(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Volume enclosed by a closed surface, positive for outward faces (divergence theorem)."""
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    return float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum() / 6.0)


@dataclass(frozen=True)
class SoftBody:
    """A tetrahedral body: points (N, 3) in its own frame (centred), tets (E, 4), shape name."""

    shape: str
    points: np.ndarray
    tets: np.ndarray

    @property
    def extent(self) -> np.ndarray:
        return self.points.max(0) - self.points.min(0)

    @property
    def volume(self) -> float:
        return float(np.abs(tet_volumes(self.points, self.tets)).sum())


def make_body(shape: str, size: np.ndarray, n_max: int) -> SoftBody:
    """A soft body of the given shape and full extents ``size`` (3,) metres.

    The longest side gets ``n_max`` vertices, the others proportionally (at least 3).
    """
    size = np.asarray(size, dtype=np.float64)
    spacing = size.max() / (n_max - 1)
    counts = tuple(int(max(3, round(s / spacing) + 1)) for s in size)
    if shape in ("sphere", "ellipsoid"):
        counts = (n_max,) * 3  # the ball warp needs a cube grid
    g, tets = grid_tets(counts)
    if shape in ("sphere", "ellipsoid"):
        g = ball_warp(g)
    elif shape == "cylinder":
        g = np.concatenate([ball_warp(g[:, :2]), g[:, 2:]], axis=1)
    elif shape not in ("box", "beam"):
        raise ValueError(f"unknown soft body shape {shape!r}")
    points = g * (0.5 * size)
    vol = tet_volumes(points, tets)
    if (np.abs(vol) < 1e-12).any():
        raise SimulationError(f"{shape}: degenerate tetrahedra in the generated mesh")
    return SoftBody(shape, points, tets)


def sample_shape(rng: np.random.Generator, *, tiny: bool, shapes=None) -> SoftBody:
    shape = str(rng.choice(shapes or ["box", "cylinder", "sphere", "ellipsoid", "beam"]))
    base = log_uniform(rng, 0.12, 0.5)
    if shape == "sphere":
        size = np.full(3, base)
    elif shape == "ellipsoid":
        size = base * rng.uniform(0.5, 1.0, size=3)
    elif shape == "cylinder":
        size = base * np.array([1.0, 1.0, rng.uniform(0.5, 2.5)])
    elif shape == "beam":
        size = base * np.array([rng.uniform(2.5, 5.0), *rng.uniform(0.4, 1.0, size=2)])
    else:
        size = base * rng.uniform(0.5, 1.0, size=3)
    if tiny:
        n_max = 3
    elif shape in ("sphere", "ellipsoid"):  # n^3 grid vertices
        n_max = int(rng.integers(5, 7))
    else:
        n_max = int(rng.integers(7, 12))
    return make_body(shape, size, n_max)


@dataclass(frozen=True)
class ElasticMaterial:
    young: float  # Pa
    poisson: float
    damping: float  # s (Rayleigh, multiplies the stiffness)
    density: float  # kg/m^3
    friction: float

    @classmethod
    def sample(cls, rng: np.random.Generator, young: float, density: float) -> ElasticMaterial:
        return cls(
            young=young,
            poisson=float(rng.uniform(0.2, 0.45)),
            damping=log_uniform(rng, 2e-3, 2e-2),
            density=density,
            friction=float(rng.uniform(0.3, 1.0)),
        )


def elastic_xml(
    points: np.ndarray,
    body: SoftBody,
    material: ElasticMaterial,
    pins: np.ndarray,
    extra: str = "",
    cfg: StepConfig = STEP,
) -> str:
    mass = material.density * body.volume
    pin = f'<pin id="{fmt_int(pins)}"/>' if len(pins) else ""
    return f"""
<mujoco>
  {option_xml(cfg)}
  <worldbody>
    <geom type="plane" size="10 10 0.1" friction="{material.friction:.3g}"/>
    {extra}
    <flexcomp name="soft" type="direct" dim="3" point="{fmt(points)}"
              element="{fmt_int(body.tets)}" radius="0" mass="{mass:.6g}">
      <elasticity young="{material.young:.6g}" poisson="{material.poisson:.4g}"
                  damping="{material.damping:.4g}"/>
      {contact_xml(cfg, material.friction)}
      {pin}
    </flexcomp>
  </worldbody>
</mujoco>"""


def simulate_elastic(
    name: str,
    body: SoftBody,
    points: np.ndarray,
    material: ElasticMaterial,
    pins: np.ndarray,
    frames: int,
    *,
    extra: str = "",
    setup=None,
    forcing=None,
) -> Sequence4D:
    """Simulate ``body`` placed at world ``points`` (N, 3); return its surface as a Sequence4D.

    setup(model, data, free) may set initial velocities; forcing(free) -> before_step callback.
    """
    model = compile_model(elastic_xml(points, body, material, pins, extra, cfg=STEP), name)
    data = mujoco.MjData(model)
    free = FreeVertices(model, points)
    if setup is not None:
        setup(model, data, free)
    before_step = forcing(free) if forcing is not None else None
    verts = record_flex(model, data, frames=frames, cfg=STEP, what=name, before_step=before_step)
    faces = boundary_faces(points, body.tets)
    ids, faces = compact(faces)
    return Sequence4D(
        vertices=verts[:, ids].astype(np.float32),
        faces=faces.astype(np.int32),
        parts=np.full(len(ids), -1, dtype=np.int32),
        closed=is_closed_oriented(faces),
        category="elastic",
        source=f"mujoco-{mujoco.__version__}:{name}:{body.shape}",
        name=name,
    )


@family("elastic_dropped", category="elastic")
def elastic_dropped(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A soft body in a random orientation dropped (sometimes thrown, spinning) onto the ground."""
    body = sample_shape(rng, tiny=tiny)
    points = body.points @ random_rotation(rng).T
    points[:, 2] += rng.uniform(0.02, 0.4) - points[:, 2].min()
    density = log_uniform(rng, 300.0, 1500.0)
    height = float(np.ptp(points[:, 2]))
    young = density * GRAVITY * height / log_uniform(rng, 0.01, 0.12)
    material = ElasticMaterial.sample(rng, young, density)
    linear = np.append(rng.normal(scale=0.5, size=2), 0.0) * (rng.random() < 0.5)
    angular = rng.normal(scale=2.0, size=3) * (rng.random() < 0.5)

    def setup(model, data, free: FreeVertices):
        centre = points.mean(0)
        vel = linear + np.cross(angular, points - centre)  # (N, 3) rigid initial velocity
        data.qvel[free.dof_idx] = vel[free.free]

    return simulate_elastic(
        "elastic_dropped", body, points, material, np.zeros(0, int), frames, setup=setup
    )


class ForcePulse:
    """A force (N) spread over a patch of vertices during [t0, t0 + duration], smooth in time.

    f(t) = F sin^2(pi (t - t0) / duration) inside the window, 0 outside.
    """

    def __init__(self, free: FreeVertices, patch: np.ndarray, force: np.ndarray, t0, duration):
        self.free = free
        self.weights = np.zeros(len(free.rest))
        self.weights[patch] = 1.0 / len(patch)
        self.force = force
        self.t0, self.duration = t0, duration

    def __call__(self, data: mujoco.MjData, t: float) -> None:
        s = (t - self.t0) / self.duration
        envelope = np.sin(np.pi * s) ** 2 if 0.0 <= s <= 1.0 else 0.0
        self.free.apply_forces(data, envelope * self.weights[:, None] * self.force)


def _upright(rng, body: SoftBody) -> np.ndarray:
    """Body points with a random yaw, standing on the ground (z = 0)."""
    points = body.points @ rotation_z(rng.uniform(0.0, 2.0 * np.pi)).T
    points[:, 2] -= points[:, 2].min()
    return points


@family("elastic_poked", category="elastic")
def elastic_poked(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A soft body glued to the ground, poked by a force pulse or hit by a falling ball."""
    body = sample_shape(rng, tiny=tiny, shapes=["box", "cylinder", "sphere", "ellipsoid"])
    points = _upright(rng, body)
    height = float(np.ptp(points[:, 2]))
    pins = np.flatnonzero(points[:, 2] <= 0.12 * height + 1e-9)
    density = log_uniform(rng, 300.0, 1500.0)
    young = density * GRAVITY * height / log_uniform(rng, 0.02, 0.15)
    material = ElasticMaterial.sample(rng, young, density)
    mass = density * body.volume
    duration_s = frames / FPS
    if rng.random() < 0.5:  # a rigid ball falls onto it
        r = float(np.max(body.extent[:2])) * rng.uniform(0.2, 0.45)
        top = points[:, 2].max()
        x, y = points[:, :2].mean(0) + rng.normal(scale=0.15, size=2) * body.extent[:2]
        ball_mass = mass * log_uniform(rng, 0.2, 1.0)
        z0 = top + r + rng.uniform(0.01, 0.1)
        vz = -rng.uniform(1.0, 4.0)
        extra = (
            f'<body name="ball" pos="{x:.5g} {y:.5g} {z0:.5g}"><freejoint/>'
            f'<geom type="sphere" size="{r:.4g}" mass="{ball_mass:.5g}"/></body>'
        )

        def setup(model, data, free):
            adr = model.body_dofadr[model.body("ball").id]
            data.qvel[adr + 2] = vz

        return simulate_elastic(
            "elastic_poked", body, points, material, pins, frames, extra=extra, setup=setup
        )
    # A force pulse on a patch around a random vertex of the upper half, pushing inwards.
    upper = np.flatnonzero(points[:, 2] > 0.5 * height)
    target = points[rng.choice(upper)]
    centre = points.mean(0)
    dist = np.linalg.norm(points - target, axis=1)
    patch = np.flatnonzero(dist <= max(0.25 * body.extent.max(), np.partition(dist, 3)[3]))
    inward = centre - target
    direction = inward / np.linalg.norm(inward) + rng.normal(scale=0.4, size=3)
    direction /= np.linalg.norm(direction)
    duration = rng.uniform(0.06, 0.2)
    delta_v = rng.uniform(1.0, 3.0)  # m/s given to the whole body by the pulse (impulse / mass)
    force = direction * mass * delta_v / (0.5 * duration)  # sin^2 window averages 1/2
    t0 = rng.uniform(0.0, 0.3 * duration_s)

    def forcing(free):
        return ForcePulse(free, patch, force, t0, duration)

    return simulate_elastic("elastic_poked", body, points, material, pins, frames, forcing=forcing)


@family("elastic_cantilever", category="elastic")
def elastic_cantilever(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A horizontal beam or rod clamped at one end, bending under gravity (and a tip pulse)."""
    shape = str(rng.choice(["beam", "cylinder"]))
    length = log_uniform(rng, 0.3, 1.2)
    thick = length * rng.uniform(0.08, 0.25)
    size = (
        np.array([length, thick * rng.uniform(0.6, 1.5), thick])
        if shape == "beam"
        else np.array([thick, thick, length])
    )
    n_max = 4 if tiny else int(rng.integers(10, 16))
    body = make_body(shape, size, n_max)
    local = body.points
    if shape == "cylinder":  # lay the rod along x (a proper rotation: z -> x, x -> -z)
        local = local[:, [2, 1, 0]] * [1.0, 1.0, -1.0]
        body = SoftBody(shape, local, body.tets)
    eps = 1e-6 * length
    pins = np.flatnonzero(local[:, 0] <= local[:, 0].min() + eps)  # the clamped end face
    tip = np.flatnonzero(local[:, 0] >= local[:, 0].max() - eps)
    points = local @ rotation_z(rng.uniform(0.0, 2.0 * np.pi)).T
    points[:, 2] += length + 0.2
    density = log_uniform(rng, 300.0, 1500.0)
    sag = log_uniform(rng, 0.1, 0.6)
    area_over_inertia = (12.0 if shape == "beam" else 16.0) / thick**2  # A / I of the section
    young = density * GRAVITY * length**3 * area_over_inertia / (8.0 * sag)
    material = ElasticMaterial.sample(rng, young, density)
    forcing = None
    if rng.random() < 0.5:
        mass = density * body.volume
        direction = rng.normal(size=3)
        direction /= np.linalg.norm(direction)
        force = direction * mass * GRAVITY * rng.uniform(0.5, 3.0)
        t0, duration = rng.uniform(0.0, 0.3), rng.uniform(0.05, 0.2)

        def forcing(free):
            return ForcePulse(free, tip, force, t0, duration)

    return simulate_elastic(
        "elastic_cantilever", body, points, material, pins, frames, forcing=forcing
    )
