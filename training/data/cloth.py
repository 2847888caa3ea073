"""Cloth simulated with MuJoCo 2D flexes: curtains, flags, sheets hung by corners, tablecloths.

Each sheet is a rectangular grid of W x H metres (0.3-2 m) with n_u x n_v vertices, written as a
``<flexcomp type="direct" dim="2">`` whose triangles we list ourselves (counter-clockwise seen from
the sheet's normal e_u x e_v, so the output faces are consistently oriented). The material is
MuJoCo's shell elasticity (``elastic2d="both"``: Saint Venant-Kirchhoff membrane plus discrete
hinge bending): we sample the membrane stiffness k = E t (N/m) and the thickness t, so that the
bending rigidity D = E t^3 / (12 (1 - nu^2)) = k t^2 / (12 (1 - nu^2)) spans silk to canvas;
Rayleigh damping; areal density 0.08-0.4 kg/m^2.

Wind: MuJoCo's own medium forces act on the vertex bodies' equivalent inertia boxes, which a
sheet does not have, so wind is an aerodynamic force per triangle, applied to its vertices
through ``xfrc_applied`` before every step (quasi-steady drag on the relative air velocity
v_rel = w(t) - v_tri, split into its normal part v_n and tangential part v_t):
    f = 1/2 rho A (C_n |v_n| v_n n + C_t |v_t| v_t),  rho = 1.2 kg/m^3, C_n = 1.2, C_t = 0.02,
with a gusty wind speed w(t) (``gust_profile``). The force is explicit, so the wind speed is
capped where the drag time constant of the lightest cloth would approach the step.

Vertex order: index = i_u * n_v + i_v. Faces: (F, 3) int32; parts = -1; closed = False.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from neurok_core.sequence import Sequence4D

from .mujoco_util import (
    FPS,
    FreeVertices,
    StepConfig,
    compile_model,
    contact_xml,
    fmt,
    fmt_int,
    gust_profile,
    log_uniform,
    option_xml,
    record_flex,
    rotation_z,
)
from .registry import family

AIR_DENSITY = 1.2  # kg/m^3
DRAG_NORMAL = 1.2
DRAG_TANGENT = 0.02
STEP = StepConfig(substeps=4)


@dataclass(frozen=True)
class ClothMaterial:
    """Shell material: membrane stiffness k = E t, thickness t, Poisson nu, Rayleigh damping."""

    membrane: float  # N/m
    thickness: float  # m
    poisson: float
    damping: float  # s
    areal_density: float  # kg/m^2
    friction: float

    @property
    def young(self) -> float:
        return self.membrane / self.thickness

    @classmethod
    def sample(cls, rng: np.random.Generator) -> ClothMaterial:
        return cls(
            membrane=log_uniform(rng, 300.0, 5000.0),
            thickness=log_uniform(rng, 3e-4, 2e-3),
            poisson=float(rng.uniform(0.1, 0.4)),
            damping=log_uniform(rng, 5e-4, 5e-3),
            areal_density=log_uniform(rng, 0.08, 0.4),
            friction=float(rng.uniform(0.3, 1.0)),
        )


@dataclass(frozen=True)
class Sheet:
    """A grid of n_u x n_v vertices at origin + u e_u + v e_v, u in [0, W], v in [0, H]."""

    width: float
    height: float
    n_u: int
    n_v: int
    origin: np.ndarray  # (3,)
    e_u: np.ndarray  # (3,) unit
    e_v: np.ndarray  # (3,) unit, orthogonal to e_u

    @classmethod
    def sample_size(
        cls, rng: np.random.Generator, *, tiny: bool, lo: float = 0.3, hi: float = 2.0
    ) -> tuple[float, float, int, int]:
        """Random W, H (m) and vertex counts; the longer side gets 14-26 vertices (5 if tiny)."""
        width = log_uniform(rng, lo, hi)
        height = width * log_uniform(rng, 0.5, 1.5)
        height = float(np.clip(height, lo, hi))
        n_long = 5 if tiny else int(rng.integers(14, 27))
        spacing = max(width, height) / (n_long - 1)
        n_u = max(3, round(width / spacing) + 1)
        n_v = max(3, round(height / spacing) + 1)
        return width, height, n_u, n_v

    def points(self) -> np.ndarray:
        """(n_u * n_v, 3) world positions, index i_u * n_v + i_v."""
        u = np.linspace(0.0, self.width, self.n_u)
        v = np.linspace(0.0, self.height, self.n_v)
        uu, vv = np.meshgrid(u, v, indexing="ij")  # (n_u, n_v)
        pts = self.origin + uu[..., None] * self.e_u + vv[..., None] * self.e_v
        return pts.reshape(-1, 3)

    def index(self, i_u, i_v):
        return np.asarray(i_u) * self.n_v + np.asarray(i_v)

    def triangles(self) -> np.ndarray:
        """(2 (n_u - 1)(n_v - 1), 3) counter-clockwise about e_u x e_v, alternating diagonals."""
        iu, iv = np.meshgrid(np.arange(self.n_u - 1), np.arange(self.n_v - 1), indexing="ij")
        iu, iv = iu.ravel(), iv.ravel()
        a = self.index(iu, iv)
        b = self.index(iu + 1, iv)
        c = self.index(iu + 1, iv + 1)
        d = self.index(iu, iv + 1)
        flip = ((iu + iv) % 2).astype(bool)
        t1 = np.where(flip[:, None], np.stack([a, b, d], 1), np.stack([a, b, c], 1))
        t2 = np.where(flip[:, None], np.stack([b, c, d], 1), np.stack([a, c, d], 1))
        return np.concatenate([t1, t2]).astype(np.int64)

    @property
    def spacing(self) -> float:
        return max(self.width / (self.n_u - 1), self.height / (self.n_v - 1))


class Wind:
    """Per-triangle quasi-steady drag of a gusty wind (see the module docstring)."""

    def __init__(self, free: FreeVertices, faces: np.ndarray, direction: np.ndarray, speed):
        self.free = free
        self.faces = faces  # (F, 3)
        self.direction = direction / np.linalg.norm(direction)  # (3,)
        self.speed = speed  # t -> m/s
        self.n_vert = len(free.rest)

    def __call__(self, data: mujoco.MjData, t: float) -> None:
        x = self.free.positions(data)  # (N, 3)
        v = self.free.velocities(data)  # (N, 3)
        f0, f1, f2 = self.faces.T
        cross = np.cross(x[f1] - x[f0], x[f2] - x[f0])  # (F, 3), |cross| = 2 area
        area2 = np.linalg.norm(cross, axis=1, keepdims=True)  # (F, 1)
        normal = cross / np.maximum(area2, 1e-12)  # (F, 3)
        rel = self.speed(t) * self.direction - (v[f0] + v[f1] + v[f2]) / 3.0  # (F, 3)
        vn = np.sum(rel * normal, axis=1, keepdims=True)  # (F, 1)
        vt = rel - vn * normal  # (F, 3)
        vt_norm = np.linalg.norm(vt, axis=1, keepdims=True)  # (F, 1)
        force = (0.25 * AIR_DENSITY * area2) * (
            DRAG_NORMAL * np.abs(vn) * vn * normal + DRAG_TANGENT * vt_norm * vt
        )  # (F, 3), 1/2 rho A (...) with A = area2 / 2
        per_vertex = np.zeros((self.n_vert, 3))
        share = force / 3.0
        for corner in (f0, f1, f2):
            for k in range(3):
                per_vertex[:, k] += np.bincount(corner, weights=share[:, k], minlength=self.n_vert)
        self.free.apply_forces(data, per_vertex)


def max_wind_speed(material: ClothMaterial, cfg: StepConfig) -> float:
    """Cap so that the explicit drag time constant sigma / (1/2 rho C_n v) stays >= 3 steps."""
    return material.areal_density / (0.5 * AIR_DENSITY * DRAG_NORMAL * 3.0 * cfg.timestep)


def cloth_xml(
    sheet: Sheet,
    material: ClothMaterial,
    pins: np.ndarray,
    colliders: str = "",
    cfg: StepConfig = STEP,
    self_collide: bool = False,
) -> str:
    pts = sheet.points()
    mass = material.areal_density * sheet.width * sheet.height
    radius = float(np.clip(0.1 * sheet.spacing, 0.002, 0.008))
    pin = f'<pin id="{fmt_int(pins)}"/>' if len(pins) else ""
    return f"""
<mujoco>
  {option_xml(cfg)}
  <worldbody>
    <geom type="plane" size="10 10 0.1" friction="{material.friction:.3g}"/>
    {colliders}
    <flexcomp name="cloth" type="direct" dim="2" point="{fmt(pts)}"
              element="{fmt_int(sheet.triangles())}" radius="{radius:.4g}" mass="{mass:.6g}">
      <elasticity young="{material.young:.6g}" poisson="{material.poisson:.4g}"
                  thickness="{material.thickness:.6g}" damping="{material.damping:.4g}"
                  elastic2d="both"/>
      {contact_xml(cfg, material.friction, self_collide)}
      {pin}
    </flexcomp>
  </worldbody>
</mujoco>"""


def simulate_cloth(
    name: str,
    sheet: Sheet,
    material: ClothMaterial,
    pins: np.ndarray,
    frames: int,
    *,
    colliders: str = "",
    wind: tuple[np.ndarray, object] | None = None,
) -> Sequence4D:
    """Simulate a sheet and return it as a cloth Sequence4D (vertices (T, N, 3) float32)."""
    model = compile_model(cloth_xml(sheet, material, pins, colliders, cfg=STEP), name)
    data = mujoco.MjData(model)
    faces = sheet.triangles()
    before_step = None
    if wind is not None:
        free = FreeVertices(model, sheet.points())
        before_step = Wind(free, faces, wind[0], wind[1])
    verts = record_flex(model, data, frames=frames, cfg=STEP, what=name, before_step=before_step)
    return Sequence4D(
        vertices=verts.astype(np.float32),
        faces=faces.astype(np.int32),
        parts=np.full(verts.shape[1], -1, dtype=np.int32),
        closed=False,
        category="cloth",
        source=f"mujoco-{mujoco.__version__}:{name}",
        name=name,
    )


def _gusty_wind(rng, material: ClothMaterial, lo: float, hi: float):
    cap = max_wind_speed(material, STEP)
    mean = min(log_uniform(rng, lo, hi), cap)
    return gust_profile(rng, mean=mean, gustiness=float(rng.uniform(0.2, 0.8)))


@family("cloth_curtain", category="cloth")
def cloth_curtain(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A vertical curtain hung from its top edge (every vertex or every k-th ring) in gusty wind."""
    width, height, n_u, n_v = Sheet.sample_size(rng, tiny=tiny)
    rot = rotation_z(rng.uniform(0.0, 2.0 * np.pi))
    sheet = Sheet(
        width,
        height,
        n_u,
        n_v,
        origin=np.array([-0.5 * width, 0.0, 0.0]) @ rot.T + [0.0, 0.0, 0.05 + rng.uniform(0, 0.5)],
        e_u=rot[:, 0],
        e_v=np.array([0.0, 0.0, 1.0]),
    )
    ring_step = int(rng.choice([1, 1, 2, 3]))
    top = np.arange(0, n_u, ring_step)
    if top[-1] != n_u - 1:
        top = np.append(top, n_u - 1)
    pins = sheet.index(top, n_v - 1)
    material = ClothMaterial.sample(rng)
    normal = np.cross(sheet.e_u, sheet.e_v)
    direction = normal * rng.choice([-1.0, 1.0]) + rng.normal(scale=0.3, size=3) * [1, 1, 0.2]
    speed = _gusty_wind(rng, material, 0.3, 2.5)
    return simulate_cloth("cloth_curtain", sheet, material, pins, frames, wind=(direction, speed))


@family("cloth_flag", category="cloth")
def cloth_flag(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A flag fixed along its pole edge, spread out at first, in gusty wind along the flag."""
    width, height, n_u, n_v = Sheet.sample_size(rng, tiny=tiny, hi=1.6)
    rot = rotation_z(rng.uniform(0.0, 2.0 * np.pi))
    sheet = Sheet(
        width,
        height,
        n_u,
        n_v,
        origin=np.array([0.0, 0.0, 1.0 + rng.uniform(0.0, 1.0)]),
        e_u=rot[:, 0],
        e_v=np.array([0.0, 0.0, 1.0]),
    )
    pins = sheet.index(0, np.arange(n_v))
    material = ClothMaterial.sample(rng)
    direction = sheet.e_u + rng.normal(scale=0.25, size=3) * [1, 1, 0.3]
    speed = _gusty_wind(rng, material, 3.0, 12.0)
    return simulate_cloth("cloth_flag", sheet, material, pins, frames, wind=(direction, speed))


@family("cloth_corners", category="cloth")
def cloth_corners(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A horizontal sheet hung by one or two corners (or a whole edge) falling and swinging."""
    width, height, n_u, n_v = Sheet.sample_size(rng, tiny=tiny)
    rot = rotation_z(rng.uniform(0.0, 2.0 * np.pi))
    lift = max(width, height) * 1.5 + 0.1
    sheet = Sheet(
        width,
        height,
        n_u,
        n_v,
        origin=np.array([-0.5 * width, -0.5 * height, 0.0]) @ rot.T + [0.0, 0.0, lift],
        e_u=rot[:, 0],
        e_v=rot[:, 1],
    )
    corners = sheet.index([0, n_u - 1, n_u - 1, 0], [0, 0, n_v - 1, n_v - 1])
    mode = rng.choice(["one", "adjacent", "opposite", "edge"], p=[0.3, 0.3, 0.25, 0.15])
    if mode == "one":
        pins = corners[[rng.integers(4)]]
    elif mode == "adjacent":
        k = int(rng.integers(4))
        pins = corners[[k, (k + 1) % 4]]
    elif mode == "opposite":
        k = int(rng.integers(2))
        pins = corners[[k, k + 2]]
    else:
        pins = sheet.index(np.arange(n_u), 0)
    material = ClothMaterial.sample(rng)
    wind = None
    if rng.random() < 0.4:
        direction = np.append(rng.normal(size=2), 0.0)
        wind = (direction, _gusty_wind(rng, material, 0.5, 4.0))
    return simulate_cloth("cloth_corners", sheet, material, np.sort(pins), frames, wind=wind)


def _collider(rng: np.random.Generator, size: float) -> tuple[str, float]:
    """A rigid collider on the ground under the cloth centre: (MJCF geoms, top height)."""
    kind = rng.choice(["sphere", "box", "cylinder"])
    if kind == "sphere":
        r = size * rng.uniform(0.15, 0.35)
        return f'<geom type="sphere" size="{r:.4g}" pos="0 0 {r:.4g}"/>', 2.0 * r
    half_h = rng.uniform(0.15, 0.45)
    if kind == "box":
        hx, hy = size * rng.uniform(0.15, 0.35, size=2)
        yaw = rng.uniform(0.0, 180.0)
        geom = (
            f'<geom type="box" size="{hx:.4g} {hy:.4g} {half_h:.4g}" pos="0 0 {half_h:.4g}" '
            f'euler="0 0 {yaw:.4g}"/>'
        )
        return geom, 2.0 * half_h
    r = size * rng.uniform(0.15, 0.35)
    return f'<geom type="cylinder" size="{r:.4g} {half_h:.4g}" pos="0 0 {half_h:.4g}"/>', 2 * half_h


@family(
    "cloth_over_collider",
    category="cloth",
    split="unseen",
    description="A tablecloth dropped onto a sphere, box or round table (held out from training).",
)
def cloth_over_collider(rng: np.random.Generator, frames: int, *, tiny: bool = False) -> Sequence4D:
    """A free sheet dropped onto a sphere, box or cylinder standing on the ground."""
    width, height, n_u, n_v = Sheet.sample_size(rng, tiny=tiny, lo=0.5)
    colliders, top = _collider(rng, min(width, height))
    rot = rotation_z(rng.uniform(0.0, 2.0 * np.pi))
    offset = np.append(rng.uniform(-0.12, 0.12, size=2) * [width, height], 0.0)
    z = top + rng.uniform(0.05, 0.4)
    sheet = Sheet(
        width,
        height,
        n_u,
        n_v,
        origin=(np.array([-0.5 * width, -0.5 * height, 0.0]) + offset) @ rot.T + [0.0, 0.0, z],
        e_u=rot[:, 0],
        e_v=rot[:, 1],
    )
    material = ClothMaterial.sample(rng)
    return simulate_cloth(
        "cloth_over_collider",
        sheet,
        material,
        np.zeros(0, dtype=np.int64),
        frames,
        colliders=colliders,
    )


__all__ = [
    "FPS",
    "ClothMaterial",
    "Sheet",
    "Wind",
    "cloth_corners",
    "cloth_curtain",
    "cloth_flag",
    "cloth_over_collider",
    "simulate_cloth",
]
