"""The rig space's contact (neurok_core.rigspace.contact) and what the step does with it: the
lagged friction's smoothness, the broad phase between moving parts, an impact's impulse passed
on through a stack, and a scene that comes to rest stopping its steps."""

from __future__ import annotations

import numpy as np
import pytest
from mesh_pieces import box_mesh

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.dynamics.obstacles import MeshDistance, Obstacles
from neurok_core.rigspace import RigSettings, simulate_rig
from neurok_core.rigspace.contact import (
    Contact,
    ContactPoints,
    PartCull,
    PartObstacle,
    WorldObstacle,
)
from neurok_core.rigspace.objects import SceneObject, simulate_objects

RNG = np.random.default_rng(11)


def _friction_contact(slip: float, h: float):
    """Four points resting 1 mm deep in the ground (z = 0) on two bones, friction 0.5, its
    lag set at the rest state."""
    rows = np.zeros((4, 8))
    rows[:, :3] = RNG.normal(scale=0.1, size=(4, 3))
    rows[:, 3] = 1.0
    rows[2:, 4:] = rows[2:, :4]
    rows[2:, :4] = 0.0
    q0 = np.zeros((2, 4, 3))
    q0[:, :3, :] = np.eye(3)
    q0[:, 3, 2] = -0.001 - (rows[:, :3] @ np.eye(3))[:, 2].max()  # every point under z = 0
    points = ContactPoints(rows, np.full(4, 5e3), np.full(4, 0.0))
    contact = Contact(points, WorldObstacle(Obstacles(0.0)), friction=0.5, slip=slip, omega=50.0)
    contact.set_step(q0, h)
    assert len(contact.lagged[2]) == 4 and (contact.lagged[2] > 0).all()
    return contact, q0


@pytest.mark.parametrize("share", [0.3, 0.9, 1.1, 4.0])  # slips inside and beyond eps
def test_friction_gradient_and_hessian_match_finite_differences(share):
    """The lagged friction's smoothed Coulomb potential (IPC's C2 mollifier) against central
    differences (float64), sliding a share of its slip eps and more."""
    contact, q0 = _friction_contact(slip=1e-3, h=0.02)
    eps = 1e-3 * 0.02
    q = q0.copy()
    q[:, 3, :2] += share * eps * np.array([[0.6, 0.8], [-0.8, 0.6]])
    value, grad, hess = contact._friction(q, True)
    assert value > 0
    step = 1e-4 * eps
    for i in range(q.size):
        d = np.zeros(q.size)
        d[i] = step
        up = contact._friction(q + d.reshape(q.shape), True)
        down = contact._friction(q - d.reshape(q.shape), True)
        assert (up[0] - down[0]) / (2 * step) == pytest.approx(
            grad.reshape(-1)[i], rel=1e-5, abs=1e-9 * np.abs(grad).max()
        )
        column = (up[1] - down[1]).reshape(-1) / (2 * step)
        np.testing.assert_allclose(column, hess[:, i], rtol=1e-4, atol=1e-6 * np.abs(hess).max())


def test_friction_hessian_is_continuous_where_sticking_turns_to_sliding():
    """At the slip eps the Hessian of the friction's potential is the same from both sides
    (a C1 potential's jumps from c / eps to 0 across the slip: Newton's model of it breaks
    exactly where a landing box's faces start to stick)."""
    contact, q0 = _friction_contact(slip=1e-3, h=0.02)
    eps = 1e-3 * 0.02
    hessians = []
    for share in (1.0 - 1e-7, 1.0 + 1e-7):
        q = q0.copy()
        q[:, 3, 0] += share * eps
        hessians.append(contact._friction(q, True)[2])
    np.testing.assert_allclose(hessians[0], hessians[1], atol=1e-4 * np.abs(hessians[0]).max())


def test_the_compiled_part_query_finds_what_the_unculled_query_finds():
    """``PartCull.nearby`` (a compiled broad and narrow phase) against
    ``PartObstacle.distances`` and ``entries`` over every point (numpy, no cull): at random
    states (turned, shifted, a little stretched, several at once) the same points within
    reach, the same distances and gradients, before and after the grid's nodes are filled;
    far away, none."""
    v, f = box_mesh((0.2, 0.1, 0.3), np.zeros(3), subdivisions=3)
    mesh = MeshDistance(v, f, 0.004, 0.016, "part")
    heads = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.25]])
    obstacle = PartObstacle(mesh, 0, heads)
    # the other part's points: a slab's surface above the box, carried by bone 1, and a few
    # points skinned to both bones (always queried)
    points = box_mesh((0.3, 0.3, 0.05), heads[1], subdivisions=3)[0]
    rows = np.zeros((len(points), 8))
    rows[:, 4:7] = points - heads[1]
    rows[:, 7] = 1.0
    rows[:5, :4] = 0.5 * rows[:5, 4:]
    rows[:5, 4:] *= 0.5
    rows[:5, :3] += 0.5 * (heads[1] - heads[0])
    cull = PartCull(obstacle, points, rows, np.ones(len(points), dtype=int), {1: 1})
    assert len(cull.members) > 10  # small clusters, not one sphere for the part
    assert (cull.cluster_of[:5] == len(cull.members)).all()  # the blended points: always
    reach = 0.01
    found = 0
    for _ in range(30):
        qs = np.zeros((3, 2, 4, 3))
        for s in range(3):
            for b in range(2):
                turn = np.linalg.qr(np.eye(3) + 0.3 * RNG.normal(size=(3, 3)))[0]
                turn *= np.sign(np.linalg.det(turn))
                qs[s, b, :3, :] = (turn * (1.0 + 0.02 * RNG.normal(size=3))).T
            qs[s, :, 3, :] = heads + RNG.normal(scale=0.05, size=(2, 3))
            qs[s, 1, 3, 2] -= RNG.uniform(0.05, 0.12)  # down onto the box
        xs = np.einsum("pk,skd->spd", rows, qs.reshape(3, 8, 3))
        state, idx, d = obstacle.distances(qs, xs, reach)
        got = cull.nearby(qs, reach)
        np.testing.assert_array_equal(got[0], state)
        np.testing.assert_array_equal(got[1], idx)
        np.testing.assert_allclose(got[2], d, rtol=0, atol=1e-12)
        for s in range(3):  # one state: the entries' gradients and rest points too
            ref = obstacle.entries(qs[s], xs[s], rows, reach)
            mine = cull.nearby(qs[s : s + 1], reach)
            np.testing.assert_array_equal(mine[1], ref[0])
            np.testing.assert_allclose(mine[3], ref[2], rtol=1e-9, atol=1e-9)
            e = obstacle.relative_rows(rows, mine[1], mine[4])
            np.testing.assert_allclose(e, ref[3], rtol=0, atol=1e-12)
        found += len(idx)
    assert found > 100  # the states did bring the slab within reach
    # far away: nothing found
    far = np.zeros((1, 2, 4, 3))
    far[:, :, :3, :] = np.eye(3)
    far[0, :, 3, :] = heads + np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    assert len(cull.nearby(far, reach)[1]) == 0


def test_the_compiled_part_query_survives_a_singular_bone():
    """A part's bone squashed flat (F of rank 2, its rows dependent: LAPACK finds it singular,
    its cofactors round near zero) while another part's points sit on grid nodes not filled
    yet: the query answers (with the inverse it used for the points' places) and raises
    nothing; the points' distances and gradients are finite."""
    v, f = box_mesh((0.2, 0.1, 0.3), np.zeros(3), subdivisions=3)
    mesh = MeshDistance(v, f, 0.004, 0.016, "part")
    heads = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.25]])
    points = heads[1] + np.array([[0.0, 0.0, 0.0], [0.05, 0.0, 0.0], [0.0, 0.05, 0.0]])
    rows = np.zeros((3, 8))
    rows[:, 4:7] = points - heads[1]
    rows[:, 7] = 1.0
    cull = PartCull(PartObstacle(mesh, 0, heads), points, rows, np.ones(3, dtype=int), {1: 1})
    # row 2 = row 0 + row 1: LAPACK's LU finds it singular here, its cofactors do not
    flat = np.array([[0.6, 0.3, 0.8], [0.0, 0.2, 0.9], [0.6, 0.5, 0.8 + 0.9]])
    qs = np.zeros((1, 2, 4, 3))
    qs[0, 0, :3, :] = flat.T
    qs[0, 0, 3, :] = heads[1]
    qs[0, 1, :3, :] = np.eye(3)
    qs[0, 1, 3, :] = heads[1]
    state, idx, d, g, rest = cull.nearby(qs, 0.01)
    assert np.isfinite(d).all() and np.isfinite(g).all() and np.isfinite(rest).all()


def test_the_compiled_grid_sample_is_numpys_to_the_bit():
    """``MeshDistance.query`` (compiled, filling what it lacks through ``_interpolate``)
    against ``_interpolate`` (numpy) at the same points: the same bits, whether the nodes were
    filled before or by this query."""
    v, f = box_mesh((0.2, 0.1, 0.3), np.zeros(3), subdivisions=3)
    points = RNG.uniform(-0.12, 0.16, size=(2000, 3))
    fresh = MeshDistance(v, f, 0.004, 0.016, "part")
    inside = points[fresh.near(points)]
    d, g = fresh.query(inside)  # fills as it goes
    d_ref, g_ref = fresh._interpolate(inside)  # every node filled now
    np.testing.assert_array_equal(d, d_ref)
    np.testing.assert_array_equal(g, g_ref)
    again = fresh.query(inside)  # all known: the compiled loop alone
    np.testing.assert_array_equal(again[0], d_ref)
    np.testing.assert_array_equal(again[1], g_ref)


def _stack(count: int, **scene) -> tuple[list[SceneObject], SimulationConditions]:
    objects = []
    for k in range(count):
        v, f = box_mesh((0.2, 0.2, 0.2), np.array([0.01 * k, 0.0, 0.2 + 0.3 * k]), subdivisions=2)
        objects.append(SceneObject(f"box{k}", v, f, SimulationConditions(mass=1.0, friction=0.5)))
    conditions = {"frames": 36, "fps": 24.0, "ground": 0.0, "damping": 0.5, "friction": 0.5}
    return objects, SimulationConditions(**{**conditions, **scene})


def test_a_box_landing_on_a_stack_does_not_drive_the_stack_into_the_ground(monkeypatch):
    """Three boxes dropped one above the other: each landing's impulse is passed on through
    the boxes below it (shock propagation). After every impact no point near its contact
    (the boxes below on each other, the lowest on the ground) is left approaching it faster
    than the rest speed: a box landing on the stack does not drive the stack into the
    ground, which the next steps would have to push back out."""
    from neurok_core.rigspace.integrator import IMPACT_DEPTH, Integrator

    worst = []
    restitution = Integrator._restitution

    def watched(self, q1, v1):
        out = restitution(self, q1, v1)
        if out is not v1:
            for c in self.contacts:
                idx, d, g, e = c.within(q1, c.reach * (1.0 + IMPACT_DEPTH))
                near = d < c.points.threshold[idx] + IMPACT_DEPTH * c.reach
                n = g[near] / np.linalg.norm(g[near], axis=1)[:, None]
                speed = ((e[near] @ out.reshape(-1, 3)) * n).sum(1)
                worst.append(float(speed.min(initial=0.0)) / self.rest_speed)
        return out

    monkeypatch.setattr(Integrator, "_restitution", watched)
    objects, scene = _stack(3)
    out = simulate_objects(objects, scene, want_vertices=True)
    assert len(worst) >= 3  # the lowest box's landing, then the two on the stack
    assert min(worst) > -1.05  # nothing left approaching faster than the rest speed
    ground = min(out[o.name].positions[:, :, 2].min() for o in objects)
    assert ground > -0.002 * 0.2  # no deeper into the ground than its contact's margin
    for lower, upper in zip(objects, objects[1:], strict=False):
        gap = out[upper.name].positions[:, :, 2].min(1) - out[lower.name].positions[:, :, 2].max(1)
        assert gap.min() > -0.01 * 0.2


def test_a_scene_at_rest_stops_stepping_and_a_later_force_keeps_it_awake():
    """A box dropped on the ground settles and falls asleep: its steps stop, its later frames
    are its resting one. With a push that starts later the scene stays awake until the push
    is over, and the box moves when pushed."""
    objects, scene = _stack(1, frames=48)
    out = simulate_objects(objects, scene, want_vertices=True)["box0"]
    asleep = out.info["asleep_frame"]
    assert asleep is not None and asleep < 30
    np.testing.assert_array_equal(
        out.positions[asleep:], out.positions[asleep][None].repeat(len(out.positions) - asleep, 0)
    )
    v, f = objects[0].vertices, objects[0].faces
    pushed = SceneObject(
        "box0",
        v,
        f,
        SimulationConditions(
            mass=1.0,
            friction=0.5,
            forces=(Force((1.0, 0.0, 0.0), 20.0, vertex=0, start_frame=40, end_frame=44),),
        ),
    )
    late = simulate_objects([pushed], scene, want_vertices=True)["box0"]
    assert late.info["asleep_frame"] is None or late.info["asleep_frame"] > 44
    moved = np.abs(late.positions[-1, :, 0] - late.positions[39, :, 0]).max()
    assert moved > 1e-3  # the push moved it


def test_an_undamped_swing_never_falls_asleep():
    """An undamped plate hanging from a hinge line and kicked swings on: it is never at rest
    at its turning points, so the run keeps stepping; a sleep distance of 0 turns sleep off."""
    v, f = box_mesh((0.3, 0.02, 0.3), np.array([0.0, 0.0, -0.15]), subdivisions=2)
    hinge = np.flatnonzero((v[:, 2] > -1e-6) & (v[:, 1] < -0.01 + 1e-6))
    tip = int(np.argmin(v[:, 2]))
    cond = SimulationConditions(
        frames=48,
        fps=24.0,
        pins=tuple(hinge.tolist()),
        damping=0.0,
        forces=(Force((0.0, 1.0, 0.0), 2.0, vertex=tip, end_frame=2),),
    )
    result = simulate_rig(v, f, cond)
    swing = result.positions[:, tip, 1]
    assert np.ptp(swing) > 0.02  # it swings
    assert result.info["asleep_frame"] is None
    off = simulate_rig(v, f, cond, settings=RigSettings(sleep_distance=0.0))
    assert off.info["asleep_frame"] is None
    np.testing.assert_array_equal(off.positions, result.positions)  # sleep changed nothing


def test_an_impulse_passed_on_stops_the_stack_and_never_adds_energy():
    """``impulse`` on two bodies in a column (rows: the top one's normal speed against the
    lower, the lower's against the ground; unit masses): a landing is passed on to the
    ground, so nothing is left approaching; and a bouncy hit on a lower body already moving
    away does not gain kinetic energy by the passing on (its single solve holds)."""
    from neurok_core.rigspace.integrator import impulse

    jac = np.array([[1.0, -1.0], [0.0, 1.0]])  # (A - B) . n, B . n: A above B above the ground
    lower = np.eye(2)
    # A lands at 1 m/s on B resting on the ground: inelastic, both stop
    xi = np.array([-1.0, 0.0])
    out = xi + impulse(jac, lower, xi, 0.0, 0.01)
    assert (jac @ out >= -0.01 - 1e-12).all()
    np.testing.assert_allclose(out, [0.0, 0.0], atol=1e-12)
    # a single solve leaves B driven into the ground at half the speed
    once = xi + impulse(jac, lower, xi, 0.0, 0.01, passes=1)
    assert (jac @ once)[1] < -0.4
    for e in (0.5, 0.9, 0.99):
        for u in (0.0, 0.5, 1.0):  # B rising from the ground at u
            xi = np.array([-1.0, u])
            out = xi + impulse(jac, lower, xi, e, 0.01)
            assert out @ out <= xi @ xi * (1.0 + 1e-12)
    assert impulse(jac, lower, np.array([0.0, 0.0]), 0.5, 0.01) is None  # nothing approaches
