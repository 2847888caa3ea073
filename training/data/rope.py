"""Ropes and cables simulated with MuJoCo 1D flexes, written as closed tube surfaces.

A rope of length L (0.4-2 m) and radius r is a ``<flexcomp type="direct" dim="1">`` chain of
P points (24-40) with MuJoCo's discrete elastic rod elasticity (bending and torsion, per-edge twist
joints) and edge equality constraints for inextensibility (1D elasticity has no stretching term).
Bending stiffness comes from the elastogravity length l_g = (E I / (lambda g))^(1/3), the length
over which the rod holds itself against gravity: we draw l_g / L (floppy rope ~0.03, stiff cable
~1.5) and set E = l_g^3 lambda g / I with I = pi r^4 / 4 and lambda = rho pi r^2.

The output is a tube around the simulated centreline C_i(t): K vertices per ring at
C_i + r (cos phi_k u_i + sin phi_k w_i), w_i = t_i x u_i, with rotation-minimising frames
(u_i, w_i) propagated along the curve by the double reflection method (Wang, Juttler, Zheng and
Liu, "Computation of rotation minimizing frames", ACM TOG 2008) and carried from frame to frame
by the minimal rotation of the first tangent, so rings do not spin in time. Both ends are capped
by a fan around a centre vertex, so the surface is closed; faces are outward.
Vertex order: ring i, vertex k -> i K + k; then the start and end cap centres. parts = -1.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from neurok_core.sequence import Sequence4D

from .elastic import is_closed_oriented
from .mujoco_util import (
    GRAVITY,
    FreeVertices,
    StepConfig,
    compile_model,
    contact_xml,
    fmt,
    fmt_int,
    log_uniform,
    option_xml,
    record_flex,
)
from .registry import family

STEP = StepConfig(substeps=8, solver="Newton")
RING = 8  # vertices per tube ring


def _normalize(v: np.ndarray) -> np.ndarray:
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def curve_tangents(points: np.ndarray) -> np.ndarray:
    """Unit tangents of polylines (..., P, 3): central differences, one-sided at the ends."""
    t = np.empty_like(points)
    t[..., 1:-1, :] = points[..., 2:, :] - points[..., :-2, :]
    t[..., 0, :] = points[..., 1, :] - points[..., 0, :]
    t[..., -1, :] = points[..., -1, :] - points[..., -2, :]
    return _normalize(t)


def _minimal_rotation(u: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rotate vectors u (..., 3) by the smallest rotation taking unit a onto unit b (Rodrigues)."""
    k = np.cross(a, b)  # sin(theta) * axis
    c = np.sum(a * b, axis=-1, keepdims=True)  # cos(theta)
    kxu = np.cross(k, u)
    return u * c + kxu + k * np.sum(k * u, axis=-1, keepdims=True) / np.maximum(1.0 + c, 1e-9)


def transport_frames(centre: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rotation-minimising frames along each frame's curve, coherent in time.

    centre: (T, P, 3). Returns tangents t, normals u, binormals w, each (T, P, 3).
    """
    tan = curve_tangents(centre)  # (T, P, 3)
    T, P, _ = centre.shape
    u = np.empty_like(centre)
    t0 = tan[0, 0]
    helper = np.array([0.0, 0.0, 1.0]) if abs(t0[2]) < 0.9 else np.array([1.0, 0.0, 0.0])
    u[0, 0] = _normalize(np.cross(t0, helper))
    for f in range(1, T):  # time transport of the first normal
        u[f, 0] = _minimal_rotation(u[f - 1, 0], tan[f - 1, 0], tan[f, 0])
    for i in range(P - 1):  # double reflection along the curve, all frames at once
        v1 = centre[:, i + 1] - centre[:, i]  # (T, 3)
        c1 = np.maximum(np.sum(v1 * v1, axis=-1, keepdims=True), 1e-18)
        r_l = u[:, i] - (2.0 / c1) * np.sum(v1 * u[:, i], axis=-1, keepdims=True) * v1
        t_l = tan[:, i] - (2.0 / c1) * np.sum(v1 * tan[:, i], axis=-1, keepdims=True) * v1
        v2 = tan[:, i + 1] - t_l
        c2 = np.maximum(np.sum(v2 * v2, axis=-1, keepdims=True), 1e-18)
        u[:, i + 1] = r_l - (2.0 / c2) * np.sum(v2 * r_l, axis=-1, keepdims=True) * v2
    # Re-orthonormalise against round-off.
    u = _normalize(u - np.sum(u * tan, axis=-1, keepdims=True) * tan)
    w = np.cross(tan, u)
    return tan, u, w


def tube_faces(points: int, ring: int = RING) -> np.ndarray:
    """Outward triangles of a capped tube with ``points`` rings of ``ring`` vertices: (F, 3)."""
    i, k = np.meshgrid(np.arange(points - 1), np.arange(ring), indexing="ij")
    i, k = i.ravel(), k.ravel()
    kn = (k + 1) % ring
    a, b = i * ring + k, (i + 1) * ring + k
    c, d = (i + 1) * ring + kn, i * ring + kn
    side = np.concatenate([np.stack([a, d, c], 1), np.stack([a, c, b], 1)])
    start, end = points * ring, points * ring + 1
    k = np.arange(ring)
    kn = (k + 1) % ring
    cap0 = np.stack([np.full(ring, start), kn, k], 1)  # normal along -t
    last = (points - 1) * ring
    cap1 = np.stack([np.full(ring, end), last + k, last + kn], 1)  # normal along +t
    return np.concatenate([side, cap0, cap1]).astype(np.int64)


def tube_vertices(centre: np.ndarray, radius: float, ring: int = RING) -> np.ndarray:
    """Tube vertices around the centrelines (T, P, 3): (T, P * ring + 2, 3)."""
    _, u, w = transport_frames(centre)
    phi = 2.0 * np.pi * np.arange(ring) / ring
    offsets = np.cos(phi)[:, None] * u[:, :, None] + np.sin(phi)[:, None] * w[:, :, None]
    rings = centre[:, :, None] + radius * offsets  # (T, P, ring, 3)
    T, P = centre.shape[:2]
    return np.concatenate([rings.reshape(T, P * ring, 3), centre[:, [0]], centre[:, [-1]]], 1)


@dataclass(frozen=True)
class RopeMaterial:
    radius: float  # m
    density: float  # kg/m^3
    young: float  # Pa
    poisson: float
    damping: float  # s
    friction: float

    @property
    def linear_density(self) -> float:
        return self.density * np.pi * self.radius**2

    @classmethod
    def sample(cls, rng, length: float, stiffness: tuple[float, float]) -> RopeMaterial:
        """Sample with l_g / L drawn log-uniformly in ``stiffness``."""
        radius = length * log_uniform(rng, 0.004, 0.015)
        density = log_uniform(rng, 300.0, 1500.0)
        lam = density * np.pi * radius**2
        inertia = np.pi * radius**4 / 4.0
        l_g = length * log_uniform(rng, *stiffness)
        return cls(
            radius=radius,
            density=density,
            young=l_g**3 * lam * GRAVITY / inertia,
            poisson=float(rng.uniform(0.2, 0.45)),
            damping=log_uniform(rng, 1e-3, 2e-2),
            friction=float(rng.uniform(0.3, 1.0)),
        )


def rope_points(start: np.ndarray, direction: np.ndarray, length: float, count: int):
    """(count, 3) points on a straight segment from ``start`` along ``direction``."""
    s = np.linspace(0.0, length, count)[:, None]
    return start + s * (direction / np.linalg.norm(direction))


def rope_xml(points, material: RopeMaterial, pins, extra: str = "", cfg=STEP) -> str:
    n = len(points)
    elements = np.stack([np.arange(n - 1), np.arange(1, n)], 1)
    length = float(np.linalg.norm(np.diff(points, axis=0), axis=1).sum())
    mass = material.linear_density * length
    pin = f'<pin id="{fmt_int(pins)}"/>' if len(pins) else ""
    return f"""
<mujoco>
  {option_xml(cfg)}
  <worldbody>
    <geom type="plane" size="10 10 0.1" friction="{material.friction:.3g}"/>
    {extra}
    <flexcomp name="rope" type="direct" dim="1" point="{fmt(points)}"
              element="{fmt_int(elements)}" radius="{material.radius:.5g}" mass="{mass:.6g}">
      <edge equality="true"/>
      <elasticity young="{material.young:.6g}" poisson="{material.poisson:.4g}"
                  damping="{material.damping:.4g}"/>
      {contact_xml(cfg, material.friction)}
      {pin}
    </flexcomp>
  </worldbody>
</mujoco>"""


def simulate_rope(
    name: str,
    points: np.ndarray,
    material: RopeMaterial,
    pins: np.ndarray,
    frames: int,
    *,
    extra: str = "",
    initial_velocity: np.ndarray | None = None,
    ring: int = RING,
) -> Sequence4D:
    """Simulate a rope through ``points`` (P, 3) and return its tube as a Sequence4D."""
    model = compile_model(rope_xml(points, material, pins, extra, cfg=STEP), name)
    data = mujoco.MjData(model)
    if initial_velocity is not None:
        free = FreeVertices(model, points)
        data.qvel[free.dof_idx] = initial_velocity[free.free]
    centre = record_flex(model, data, frames=frames, cfg=STEP, what=name)  # (T, P, 3)
    faces = tube_faces(len(points), ring)
    return Sequence4D(
        vertices=tube_vertices(centre, material.radius, ring).astype(np.float32),
        faces=faces.astype(np.int32),
        parts=np.full(len(points) * ring + 2, -1, dtype=np.int32),
        closed=is_closed_oriented(faces),
        category="continuum",
        source=f"mujoco-{mujoco.__version__}:{name}",
        name=name,
    )


def _count(rng, tiny: bool) -> int:
    return 6 if tiny else int(rng.integers(24, 41))


def _direction(yaw: float, elevation: float) -> np.ndarray:
    return np.array(
        [np.cos(elevation) * np.cos(yaw), np.cos(elevation) * np.sin(yaw), np.sin(elevation)]
    )


@family("rope_swinging", category="continuum")
def rope_swinging(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A rope hung from one end, released straight at an angle, swinging down (sometimes pushed)."""
    length = log_uniform(rng, 0.4, 2.0)
    material = RopeMaterial.sample(rng, length, (0.03, 0.4))
    direction = _direction(rng.uniform(0, 2 * np.pi), np.deg2rad(rng.uniform(-30.0, 60.0)))
    start = np.array([0.0, 0.0, 1.2 * length + 0.3])
    points = rope_points(start, direction, length, _count(rng, tiny))
    velocity = None
    if rng.random() < 0.4:  # a sideways push: a rigid rotation about the pin
        axis = np.cross(direction, rng.normal(size=3))
        omega = _normalize(axis) * rng.uniform(1.0, 4.0)  # rad/s
        velocity = np.cross(omega, points - start)
    return simulate_rope(
        "rope_swinging", points, material, np.array([0]), frames, initial_velocity=velocity
    )


@family("rope_clamped", category="continuum")
def rope_clamped(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A cable clamped at one end (position and direction), sagging and whipping under gravity."""
    length = log_uniform(rng, 0.4, 1.5)
    material = RopeMaterial.sample(rng, length, (0.3, 1.5))
    direction = _direction(rng.uniform(0, 2 * np.pi), np.deg2rad(rng.uniform(-20.0, 70.0)))
    start = np.array([0.0, 0.0, 1.2 * length + 0.3])
    points = rope_points(start, direction, length, _count(rng, tiny))
    velocity = None
    if rng.random() < 0.5:  # a flick: rigid rotation about the clamp
        axis = np.cross(direction, rng.normal(size=3))
        omega = _normalize(axis) * rng.uniform(1.0, 5.0)
        velocity = np.cross(omega, points - start)
    return simulate_rope(
        "rope_clamped", points, material, np.array([0, 1]), frames, initial_velocity=velocity
    )


def _support(rng: np.random.Generator, length: float) -> tuple[str, float]:
    """A rigid support standing on the ground: (MJCF geoms, top height)."""
    kind = rng.choice(["bar", "box", "sphere"])
    if kind == "bar":  # a horizontal cylinder (a rail) across the rope
        r = length * rng.uniform(0.02, 0.08)
        h = rng.uniform(0.3, 0.8)
        yaw = rng.uniform(np.pi / 3.0, 2.0 * np.pi / 3.0)  # across the rope (along x)
        geom = (
            f'<geom type="cylinder" size="{r:.4g} {length:.4g}" pos="0 0 {h:.4g}" '
            f'zaxis="{np.cos(yaw):.5g} {np.sin(yaw):.5g} 0"/>'
        )
        return geom, h + r
    if kind == "box":
        hx, hy = length * rng.uniform(0.05, 0.2, size=2)
        hz = rng.uniform(0.1, 0.4)
        return f'<geom type="box" size="{hx:.4g} {hy:.4g} {hz:.4g}" pos="0 0 {hz:.4g}"/>', 2 * hz
    r = length * rng.uniform(0.08, 0.25)
    return f'<geom type="sphere" size="{r:.4g}" pos="0 0 {r:.4g}"/>', 2 * r


@family(
    "rope_draped",
    category="continuum",
    split="unseen",
    description="A free rope dropped across a bar, box or ball (held out from training).",
)
def rope_draped(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A free rope dropped horizontally across a bar, box or ball, draping and sliding."""
    length = log_uniform(rng, 0.4, 2.0)
    material = RopeMaterial.sample(rng, length, (0.03, 0.5))
    extra, top = _support(rng, length)
    yaw = rng.uniform(-0.4, 0.4)  # roughly across the x axis; the bar runs along y
    direction = _direction(yaw, np.deg2rad(rng.uniform(-10.0, 10.0)))
    offset = rng.uniform(0.2, 0.5) * length  # the part hanging before the support
    start = np.array([0.0, rng.uniform(-0.05, 0.05) * length, 0.0]) - offset * direction
    start[2] = 0.0
    points = rope_points(start, direction, length, _count(rng, tiny))
    points[:, 2] += top + material.radius + rng.uniform(0.02, 0.3) - points[:, 2].min()
    return simulate_rope(
        "rope_draped", points, material, np.zeros(0, dtype=np.int64), frames, extra=extra
    )
