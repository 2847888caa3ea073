"""Shared MuJoCo plumbing of the deformable families: compile, step, record flex vertices.

Every deformable family builds an MJCF string with one flex (a ``<flexcomp>``), compiles it with
``compile_model`` and records the flex vertex positions ``data.flexvert_xpos`` at ``FPS`` frames per
second of simulated time with ``record_flex``: frame 0 is the compiled rest state before any step,
each later frame follows ``substeps`` calls of ``mj_step``. The schema and the constants follow
MuJoCo 4.0.0 (pinned in pyproject.toml): flex elasticity is integrated implicitly only by the
``discrete`` integrator, and a 2D flex cannot combine edge equality constraints with ``young``.

A simulation that goes unstable (non-finite state, MuJoCo's bad-state warnings, which silently reset
the state, a vertex faster than ``max_speed`` or a bounding box growing ``max_growth`` times) raises
``SimulationError``; the dataset command counts it as a reject.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mujoco
import numpy as np

from neurok_core.errors import SimulationError

FPS = 24.0  # frames per second of simulated time, every deformable family
GRAVITY = 9.81  # m/s^2 along -Z

# Warnings after which MuJoCo resets the state to qpos0: the record would jump, so they reject.
_FATAL_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)


@dataclass(frozen=True)
class StepConfig:
    """Integration settings: ``substeps`` steps of ``1 / (FPS * substeps)`` s per frame."""

    substeps: int = 4
    solver: str = "CG"  # "CG" or "Newton" (PGS cannot integrate flex elasticity)
    iterations: int = 100  # constraint and effective-metric solver iterations
    tolerance: float = 1e-7
    max_speed: float = 40.0  # m/s; faster vertices mean a blow-up
    max_growth: float = 4.0  # bounding-box diagonal / rest diagonal

    @property
    def timestep(self) -> float:
        return 1.0 / (FPS * self.substeps)


def option_xml(cfg: StepConfig, *, gravity: bool = True) -> str:
    """The ``<option>`` element: discrete integrator (implicit in position), ``cfg.solver``."""
    g = f"0 0 {-GRAVITY}" if gravity else "0 0 0"
    return (
        f'<option timestep="{cfg.timestep:.9g}" integrator="discrete" solver="{cfg.solver}" '
        f'iterations="{cfg.iterations}" tolerance="{cfg.tolerance:g}" gravity="{g}"/>'
    )


def contact_solref(cfg: StepConfig) -> str:
    """Contact stiffness: a time constant of 2 steps (the stiffest the discrete step resolves)."""
    return f"{2.0 * cfg.timestep:.5g} 1"


def contact_xml(cfg: StepConfig, friction: float, self_collide: bool = False) -> str:
    """The flexcomp ``<contact>``: stiff contacts, given friction; no self-collision (cost)
    unless ``self_collide`` (MuJoCo's own choice of its broad phase)."""
    return (
        f'<contact condim="3" selfcollide="{"auto" if self_collide else "none"}" '
        f'solref="{contact_solref(cfg)}" friction="{friction:.3g}"/>'
    )


def fmt(values) -> str:
    """Numbers as an MJCF attribute string ("0.1 0.2 0.3")."""
    return " ".join(f"{float(v):.7g}" for v in np.ravel(values))


def fmt_int(values) -> str:
    return " ".join(str(int(v)) for v in np.ravel(values))


@contextlib.contextmanager
def quiet_mujoco() -> Iterator[list[str]]:
    """Collect MuJoCo's printed warnings (into the yielded list) instead of printing them."""
    messages: list[str] = []
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(messages.append)
    try:
        yield messages
    finally:
        mujoco.set_mju_user_warning(previous)


def compile_model(xml: str, what: str) -> mujoco.MjModel:
    """Compile an MJCF string; a compile error becomes a ``SimulationError`` naming ``what``."""
    try:
        with quiet_mujoco():
            return mujoco.MjModel.from_xml_string(xml)
    except ValueError as exc:
        raise SimulationError(f"{what}: MuJoCo rejected the generated model ({exc})") from exc


def flex_vertex_slice(model: mujoco.MjModel, flex_id: int = 0) -> slice:
    start = int(model.flex_vertadr[flex_id])
    return slice(start, start + int(model.flex_vertnum[flex_id]))


def flex_elements(model: mujoco.MjModel, flex_id: int = 0) -> np.ndarray:
    """Elements of one flex as local vertex indices: (E, dim + 1) int64."""
    dim = int(model.flex_dim[flex_id])
    start = int(model.flex_elemdataadr[flex_id])
    count = int(model.flex_elemnum[flex_id])
    elem = np.asarray(model.flex_elem[start : start + (dim + 1) * count], dtype=np.int64)
    return elem.reshape(count, dim + 1)


def flex_vertex_bodies(model: mujoco.MjModel, flex_id: int = 0) -> np.ndarray:
    """Body of each flex vertex: (N,) int64; a pinned vertex belongs to the flexcomp's parent."""
    return np.asarray(model.flex_vertbodyid[flex_vertex_slice(model, flex_id)], dtype=np.int64)


class FreeVertices:
    """Positions and velocities of a flex's vertices straight from ``qpos`` / ``qvel``.

    Valid for flexcomps placed in the world body without rotation, whose free vertices are bodies
    with 3 world-aligned slide joints (``x = body_pos + qpos[slides]``); pinned vertices keep their
    rest position. Unlike ``data.flexvert_xpos`` this is current between ``mj_step`` calls.
    """

    def __init__(self, model: mujoco.MjModel, rest: np.ndarray, flex_id: int = 0):
        bodies = flex_vertex_bodies(model, flex_id)
        self.free = np.flatnonzero(model.body_dofnum[bodies] == 3)  # (K,) local vertex ids
        self.bodies = bodies[self.free]  # (K,)
        jnt = model.body_jntadr[self.bodies]
        self.qpos_idx = model.jnt_qposadr[jnt][:, None] + np.arange(3)  # (K, 3)
        self.dof_idx = model.body_dofadr[self.bodies][:, None] + np.arange(3)  # (K, 3)
        self.rest = np.asarray(rest, dtype=np.float64)  # (N, 3)
        self.body_pos = model.body_pos[self.bodies].copy()  # (K, 3)

    def positions(self, data: mujoco.MjData) -> np.ndarray:
        x = self.rest.copy()  # (N, 3)
        x[self.free] = self.body_pos + data.qpos[self.qpos_idx]
        return x

    def velocities(self, data: mujoco.MjData) -> np.ndarray:
        v = np.zeros_like(self.rest)  # (N, 3)
        v[self.free] = data.qvel[self.dof_idx]
        return v

    def apply_forces(self, data: mujoco.MjData, forces: np.ndarray) -> None:
        """Set the external force (N, 3) newtons on every free vertex (pinned ones ignored)."""
        data.xfrc_applied[self.bodies, :3] = forces[self.free]


def _positions(model: mujoco.MjModel, data: mujoco.MjData, verts: slice) -> np.ndarray:
    # mj_step leaves flexvert_xpos at the state before its integration; refresh it.
    mujoco.mj_kinematics(model, data)
    mujoco.mj_flex(model, data)
    return data.flexvert_xpos[verts].copy()


def record_flex(
    model: mujoco.MjModel,
    data: mujoco.MjData,
    *,
    frames: int,
    cfg: StepConfig,
    what: str,
    flex_id: int = 0,
    before_step: Callable[[mujoco.MjData, float], None] | None = None,
) -> np.ndarray:
    """Step the simulation and return the flex vertex positions per frame: (T, N, 3) float64.

    ``before_step(data, t)`` runs before every ``mj_step`` (t in seconds) to apply external forces
    through ``data.xfrc_applied``. Frame 0 is the state in ``data`` before any step.
    """
    if frames < 1:
        raise SimulationError(f"{what}: frames must be >= 1, got {frames}")
    verts = flex_vertex_slice(model, flex_id)
    with quiet_mujoco():
        mujoco.mj_forward(model, data)
        out = np.empty((frames, verts.stop - verts.start, 3))  # (T, N, 3)
        out[0] = _positions(model, data, verts)
        lo, hi = out[0].min(0), out[0].max(0)
        diag0 = float(np.linalg.norm(hi - lo))
        frame_dt = 1.0 / FPS
        for f in range(1, frames):
            for _ in range(cfg.substeps):
                if before_step is not None:
                    before_step(data, float(data.time))
                mujoco.mj_step(model, data)
            out[f] = _positions(model, data, verts)
            _check_frame(data, out, f, diag0, frame_dt, cfg, what)
    return out


def _check_frame(data, out, f, diag0, frame_dt, cfg: StepConfig, what: str) -> None:
    cur = out[f]
    if not np.isfinite(cur).all() or not np.isfinite(data.qvel).all():
        raise SimulationError(f"{what}: non-finite state at frame {f}")
    for w in _FATAL_WARNINGS:
        if data.warning[w].number > 0:
            raise SimulationError(
                f"{what}: MuJoCo reported {mujoco.mjtWarning(w).name} at frame {f} (unstable)"
            )
    speed = float(np.linalg.norm(cur - out[f - 1], axis=1).max()) / frame_dt
    if speed > cfg.max_speed:
        raise SimulationError(f"{what}: a vertex moved at {speed:.1f} m/s at frame {f} (blow-up)")
    diag = float(np.linalg.norm(cur.max(0) - cur.min(0)))
    if diag > cfg.max_growth * diag0:
        raise SimulationError(f"{what}: the body grew {diag / diag0:.1f}x by frame {f} (blow-up)")


def log_uniform(rng: np.random.Generator, lo: float, hi: float) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    """A uniformly random rotation matrix (3, 3) (QR of a Gaussian matrix with sign fix)."""
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def rotation_z(angle: float) -> np.ndarray:
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def gust_profile(rng: np.random.Generator, *, mean: float, gustiness: float):
    """A smooth random wind speed signal s(t) >= 0 (m/s).

    s(t) = mean * max(0, 1 + gustiness * sum_k a_k sin(w_k t + phi_k)), a few incommensurate
    frequencies between 0.3 and 3 Hz with random phases (a forcing signal, not a motion).
    """
    k = 4
    freq = 2.0 * np.pi * rng.uniform(0.3, 3.0, size=k)  # rad/s
    phase = rng.uniform(0.0, 2.0 * np.pi, size=k)
    amp = rng.dirichlet(np.ones(k))

    def speed(t: float) -> float:
        g = float(np.dot(amp, np.sin(freq * t + phase)))
        return mean * max(0.0, 1.0 + gustiness * g)

    return speed
