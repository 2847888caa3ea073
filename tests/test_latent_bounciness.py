"""The bounciness in the learned space. The contact's damping law alone: rows landing together
or one after another (a flat or a curved bottom), shallow or deep in the stiffening penalty,
leave at the bounciness times their speed. With the bundled model: a box and a ball dropped half
their size onto the ground rebound higher the higher their bounciness, to about bounciness^2 of
the drop, and not at all with bounciness 0; the box goes no deeper than 1% of its size.

Measured (1 m, dropped 0.5 m; the same at 1 cm and 10 m, and from 10 sizes up to 10 m): the box
rebounds to 0.008, 0.234, 1.000 of its drop for bounciness 0, 0.5, 1 (e^2: 0, 0.25, 1), the
ball to 0.001, 0.230, 0.998. A few vertices of the ball's curved bottom take its impact, and
they sink to about 1.5% of its size at the impact's peak (as before the contact read the
bounciness), so only the box's penetration is held to 1%.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import trimesh

from neurok_core.dynamics import SimulationConditions
from neurok_core.dynamics.contact import ContactForces, restitution, restitution_damping
from neurok_core.dynamics.obstacles import Obstacles


def _bounce(bounciness: float, speed: float, heights: np.ndarray) -> float:
    """The exit / entry speed of a rigid 1 kg body landing at ``speed`` (m/s) on the ground on
    rows at ``heights`` (R,) m above its lowest, without gravity (w_c = 100 rad/s, h = 1 mm),
    by RK4 at 0.02 / (its fastest contact frequency)."""
    omega, hard = 100.0, 1e-3
    contact = ContactForces(
        Obstacles(0.0),
        np.full(len(heights), 1.0 / len(heights)),
        omega=omega,
        zeta=restitution_damping(bounciness, 5.0),
        sticking=0.5,
        friction=0.0,
        margin=0.0,
        hard=hard,
    )
    x, v = np.zeros((len(heights), 3)), np.zeros((len(heights), 3))

    def accel(z: float, vz: float) -> float:
        x[:, 2], v[:, 2] = z + heights, vz
        force = contact.evaluate(x, v)[1]
        return 0.0 if force is None else float(force[:, 2].sum())

    # the deepest a flat landing goes undamped: speed^2 / 2 = w^2 (P^2 / 2 + P^4 / (4 h^2))
    deep = hard * math.sqrt(math.sqrt(1.0 + 2.0 * (speed / (omega * hard)) ** 2) - 1.0)
    dt = 0.02 / (omega * math.sqrt(1.0 + 3.0 * (deep / hard) ** 2))
    z, vz = 0.0, -speed
    while z <= 0.0 or accel(z, vz) > 0.0:
        a1 = accel(z, vz)
        a2 = accel(z + 0.5 * dt * vz, vz + 0.5 * dt * a1)
        a3 = accel(z + 0.5 * dt * (vz + 0.5 * dt * a1), vz + 0.5 * dt * a2)
        a4 = accel(z + dt * (vz + 0.5 * dt * a2), vz + dt * a3)
        z += dt * (vz + dt / 6.0 * (a1 + a2 + a3))
        vz += dt / 6.0 * (a1 + 2.0 * a2 + 2.0 * a3 + a4)
    return vz / speed


def test_the_damping_ratio_inverts_the_restitution():
    assert restitution(0.0) == 1.0 and restitution(1.0) == pytest.approx(math.exp(-2.0))
    assert restitution(1.0 - 1e-4) == pytest.approx(restitution(1.0 + 1e-4), rel=1e-3)
    assert restitution(5.0) < 0.01  # what bounciness 0 gets
    assert restitution_damping(1.0, 5.0) == 0.0 and restitution_damping(0.0, 5.0) == 5.0
    for e in (0.05, 0.3, 0.5, 0.9):
        assert restitution(restitution_damping(e, 5.0)) == pytest.approx(e, rel=1e-9)


@pytest.mark.parametrize("speed", [1e-4, 10.0])  # 0.1% of h deep: linear; 10 h: cubic
@pytest.mark.parametrize("bottom", ["flat", "curved"])
def test_a_landing_body_leaves_at_its_bounciness_times_its_speed(speed, bottom):
    heights = np.zeros(10) if bottom == "flat" else np.linspace(0.0, 4e-3, 10)
    for bounciness in (0.3, 0.7):
        assert _bounce(bounciness, speed, heights) == pytest.approx(bounciness, abs=0.01)


@pytest.fixture(scope="module")
def engine():
    from neurok_core.api import NeuROK, default_checkpoint

    if not (default_checkpoint() / "config.json").is_file():
        pytest.skip("no bundled model")
    torch.set_num_threads(1)
    return NeuROK.load(default_checkpoint(), device="cpu")


def _rebounds(engine, mesh, drop: float = 0.5) -> tuple[list[float], float]:
    """(the rebound / drop for bounciness 0, 0.5, 1; the deepest any vertex went, in sizes) of
    ``mesh`` (its bottom at z = 0) dropped ``drop`` sizes onto the ground, undamped, until just
    after its second impact, at a frame rate that sees its rebound in ten frames or more."""
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    size = float(np.ptp(vertices, axis=0).max())
    space = engine.space(vertices, np.asarray(mesh.faces), cache_dir=False)
    fall = np.sqrt(2 * drop * size / 9.81)
    rebounds, depth = [], 0.0
    for bounciness in (0.0, 0.5, 1.0):
        fps = max(24.0, 10.0 / (fall * max(bounciness, 0.5)))
        cond = SimulationConditions(
            ground=-drop * size,
            bounciness=bounciness,
            frames=int(np.ceil((3 * fall + 0.25) * fps)) + 1,
            fps=fps,
            mass=1.0,
            damping=0.0,
        )
        result = engine.simulate(space, cond, dynamics="latent")
        lowest = result.positions[:, :, 2].astype(np.float64).min(1) + drop * size  # (T,)
        rebounds.append(_rebound(lowest) / (drop * size))
        depth = max(depth, -lowest.min() / size)
    return rebounds, depth


def _rebound(lowest: np.ndarray) -> float:
    """The highest the bottom gets between the first and the second impact (the first two
    local minima of its height over the frames)."""
    lows = [
        k
        for k in range(1, len(lowest) - 1)
        if lowest[k] <= lowest[k - 1] and lowest[k] < lowest[k + 1]
    ]
    if not lows:
        return float(lowest[-1])
    end = lows[1] if len(lows) > 1 else len(lowest)
    return float(lowest[lows[0] : end].max())


def test_a_dropped_box_rebounds_to_its_bounciness_squared(engine):
    mesh = trimesh.creation.box([1.0, 1.0, 1.0]).subdivide().subdivide().subdivide()
    mesh.apply_translation([0.0, 0.0, 0.5])
    rebounds, depth = _rebounds(engine, mesh)
    assert rebounds[0] < rebounds[1] < rebounds[2]
    assert rebounds == pytest.approx([0.0, 0.25, 1.0], rel=0.1, abs=0.01)
    assert depth <= 0.01


def test_a_dropped_ball_rebounds_higher_the_bouncier_it_is(engine):
    mesh = trimesh.creation.icosphere(2, radius=0.5)  # 162 vertices: all of them meet the ground
    mesh.apply_translation([0.0, 0.0, 0.5])
    rebounds, _ = _rebounds(engine, mesh)
    assert rebounds[0] < rebounds[1] < rebounds[2]
    assert rebounds[0] <= 0.01
    assert rebounds[1:] == pytest.approx([0.25, 1.0], rel=0.15)
