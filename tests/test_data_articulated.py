"""Procedural articulated objects: primitives, kinematics, trajectories and every family."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import trimesh
from bounds import assert_within
from torch.testing import assert_close

from neurok_core.blas import cpu_flags, suited_kernel
from neurok_core.errors import SequenceError
from training.data import primitives as P
from training.data.articulated import ARTICULATED, Articulation, ObjectBuilder, builder
from training.data.articulated.assemblies import collides, segment_distance
from training.data.articulated.furniture import laptop
from training.data.articulated.overlap import OverlapCheck, part_overlap
from training.data.kinematics import Joint, KinematicTree, pose_vertices
from training.data.registry import all_families
from training.data.trajectories import joint_trajectory, min_jerk
from training.data.validation import check_sequence


def close(a, b, **kw):
    assert_close(torch.as_tensor(np.asarray(a, dtype=np.float64)), torch.as_tensor(b), **kw)


PRIMITIVES = {
    "box": (lambda: P.box((0.3, 0.2, 0.02), 0.02), 0.3 * 0.2 * 0.02),
    "rounded_box": (lambda: P.box((0.3, 0.2, 0.05), 0.01, radius=0.01), None),
    "cylinder": (lambda: P.cylinder(0.05, 0.2, 0.01), math.pi * 0.05**2 * 0.2),
    "prism": (lambda: P.prism([[0, 0], [0.1, 0], [0.05, 0.05]], 0.01, 0.005), 2.5e-5),
    "capsule": (
        lambda: P.capsule(0.03, 0.2, 0.005),
        math.pi * 0.03**2 * 0.2 + 4 / 3 * math.pi * 0.03**3,
    ),
    "sphere": (lambda: P.sphere(0.1, 0.01), 4 / 3 * math.pi * 0.1**3),
    "torus": (lambda: P.torus(0.1, 0.02, 0.005), 2 * math.pi**2 * 0.1 * 0.02**2),
    "cone": (lambda: P.frustum(0.1, 0.0, 0.1, 0.01), math.pi * 0.1**2 * 0.1 / 3),
    "frustum": (lambda: P.frustum(0.1, 0.05, 0.1, 0.01), math.pi * 0.1 * 0.0175 / 3 * 1.0),
}


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
@pytest.mark.parametrize("subdivided", [False, True])
def test_primitives_are_closed_and_outward(name, subdivided):
    make, volume = PRIMITIVES[name]
    mesh = make()
    if subdivided:
        before = mesh
        mesh = P.subdivide(mesh)
        assert len(mesh.faces) == 4 * len(before.faces)
    t = trimesh.Trimesh(mesh.vertices, mesh.faces, process=False)
    assert t.is_watertight and t.is_winding_consistent
    assert t.volume > 0  # outward normals
    assert t.area_faces.min() > 0
    if name == "frustum":  # V = pi h / 3 (R^2 + R r + r^2)
        volume = math.pi * 0.1 / 3 * (0.1**2 + 0.1 * 0.05 + 0.05**2)
    if volume is not None:  # polygonal approximations are a little smaller
        assert 0.93 * volume < t.volume <= volume * (1 + 1e-9)


def test_edge_length_sets_resolution():
    coarse, fine = P.box((1, 1, 1), 0.2), P.box((1, 1, 1), 0.05)
    assert 10 < len(fine.vertices) / len(coarse.vertices) < 20  # ~ (0.2 / 0.05)^2
    edges = fine.vertices[fine.faces[:, 1]] - fine.vertices[fine.faces[:, 0]]
    assert np.linalg.norm(edges, axis=1).max() < 0.05 * math.sqrt(2) + 1e-9


def test_revolute_and_prismatic_forward_kinematics():
    tree = KinematicTree()
    arm, slider = tree.add_link("arm"), tree.add_link("slider")
    tree.add_joint(
        Joint("hinge", "revolute", 0, arm, np.array([0, 0, 1.0]), np.array([1.0, 0, 0]), -2.0, 2.0)
    )
    tree.add_joint(
        Joint("slide", "prismatic", arm, slider, np.array([1.0, 0, 0]), np.zeros(3), 0.0, 1.0)
    )
    q = np.array([[math.pi / 2, 0.5]])
    tf = tree.link_transforms(q)  # (1, 3, 4, 4)
    close(tf[0, 0], np.eye(4))
    # a point at (2, 0, 0) turns a quarter about the vertical axis through (1, 0, 0)
    p = np.array([[2.0, 0.0, 0.0]])
    moved = pose_vertices(np.concatenate([p, p]), np.array([arm, slider]), tf)[0]
    close(moved[0], np.array([1.0, 1.0, 0.0]), atol=1e-12, rtol=0)
    # the slide axis turns with its parent: +x becomes +y
    close(moved[1], np.array([1.0, 1.5, 0.0]), atol=1e-12, rtol=0)


def test_joint_rejects_bad_definitions():
    with pytest.raises(ValueError, match="closed"):
        Joint("j", "revolute", 0, 1, np.array([0, 0, 1.0]), np.zeros(3), 0.0, 1.0, closed=2.0)
    with pytest.raises(ValueError, match="precede"):
        Joint("j", "revolute", 1, 1, np.array([0, 0, 1.0]), np.zeros(3), 0.0, 1.0)
    with pytest.raises(ValueError, match="kind"):
        Joint("j", "ball", 0, 1, np.array([0, 0, 1.0]), np.zeros(3), 0.0, 1.0)


def test_min_jerk_profile():
    tau = np.linspace(0, 1, 101)
    s = min_jerk(tau)
    close(s[[0, -1]], np.array([0.0, 1.0]))
    assert_within(np.diff(s), above=0, what="min-jerk profile's steps")
    h = tau[1] - tau[0]
    close(np.gradient(s, h)[[0, -1]], np.zeros(2), atol=2e-3, rtol=0)  # starts and ends at rest


@pytest.mark.parametrize("seed", range(20))
def test_trajectory_starts_at_rest_and_respects_limits(seed):
    rng = np.random.default_rng(seed)
    lower = np.array([0.0, -1.0, -np.inf, 0.0])
    upper = np.array([2.0, 1.0, np.inf, 0.3])
    rest = np.array([0.0, 0.5, 1.0, 0.3])
    frames = int(rng.integers(24, 49))
    q = joint_trajectory(rng, rest, lower, upper, frames)
    assert q.shape == (frames, 4)
    close(q[0], rest, atol=0, rtol=0)
    assert_within(q, above=lower, below=upper, what="joint values vs their limits")
    assert np.abs(q - rest).max() > 0.05
    # smooth: bounded steps (a min-jerk move peaks at 1.875x its mean speed)
    step = np.abs(np.diff(q, axis=0))
    assert step[:, 2].max() <= 1.875 * 0.3 + 1e-9  # the continuous joint
    span = (upper - lower)[[0, 1, 3]]
    assert_within(step[:, [0, 1, 3]], below=0.7 * span, what="joint steps vs 0.7 of the span")


def test_registry_has_train_and_held_out_articulated_families():
    fams = {n: f for n, f in all_families().items() if f.category == "articulated"}
    assert set(ARTICULATED) == set(fams)
    train = [n for n, f in fams.items() if f.split == "train"]
    unseen = [n for n, f in fams.items() if f.split == "unseen"]
    assert len(train) >= 10
    assert {"scissors", "sliding_window"} <= set(unseen)


def kabsch_residual(a: np.ndarray, b: np.ndarray) -> float:
    """RMS residual of the best rigid fit of point set a (n, 3) onto b (n, 3) (Kabsch, 1976)."""
    ca, cb = a.mean(0), b.mean(0)
    u, _, vt = np.linalg.svd((a - ca).T @ (b - cb))
    d = np.sign(np.linalg.det(u @ vt))
    r = u @ np.diag([1, 1, d]) @ vt
    return float(np.sqrt((((a - ca) @ r - (b - cb)) ** 2).sum(1).mean()))


@pytest.mark.parametrize("name", sorted(ARTICULATED))
def test_family_generates_valid_rigid_motion(name):
    art = ARTICULATED[name](np.random.default_rng(7), 24)
    seq = art.to_sequence()
    check_sequence(seq, rest=art.pose(art.rest[None])[0])
    t, n = seq.vertices.shape[:2]
    assert t == 24 and seq.vertices.dtype == np.float32 and seq.faces.dtype == np.int32
    assert seq.category == "articulated" and seq.closed
    assert 100 <= n <= 25_000
    # part labels cover every vertex, one label per link, every link has geometry
    assert seq.parts.min() == 0
    assert set(np.unique(seq.parts)) == set(range(art.tree.num_links))
    # joint values stay inside their limits
    lower, upper = art.tree.limits()
    assert_within(art.q, above=lower - 1e-12, below=upper + 1e-12, what="joint values vs limits")
    assert np.abs(art.q - art.rest).max() > 0
    v = seq.vertices.astype(np.float64)
    size = float(np.linalg.norm(v[0].max(0) - v[0].min(0)))
    # the base does not move; every part moves rigidly
    base = v[:, seq.parts == 0]
    assert np.abs(base - base[:1]).max() <= 1e-6 * size
    for link in range(1, art.tree.num_links):
        sel = seq.parts == link
        for k in (t // 2, t - 1):
            assert kabsch_residual(v[0, sel], v[k, sel]) < 1e-5 * size


def test_hinged_part_turns_about_its_hinge():
    art = ARTICULATED["laptop"](np.random.default_rng(3), 24)
    joint = art.tree.joints[0]
    x = art.pose(art.q)  # (T, N, 3)
    lid = art.links == joint.child
    # the vertices nearest the hinge line barely move; the far edge sweeps an arc
    yaw = P.rotation((0, 0, 1), art.yaw)
    point, axis = yaw @ joint.point, yaw @ joint.axis
    rel = x[0, lid] - point
    dist = np.linalg.norm(rel - np.outer(rel @ axis, axis), axis=1)
    radius_moves = np.linalg.norm(x[:, lid] - x[:1, lid], axis=-1).max(0)
    turn = np.abs(art.q[:, 0] - art.q[0, 0]).max()
    close(radius_moves, 2 * dist * np.sin(turn / 2), atol=1e-5, rtol=1e-4)


def test_generation_is_deterministic_per_seed():
    fam = all_families()["desk_lamp"]
    a = fam.generate(np.random.default_rng(11), 30)
    b = fam.generate(np.random.default_rng(11), 30)
    c = fam.generate(np.random.default_rng(12), 30)
    assert np.array_equal(a.vertices, b.vertices) and np.array_equal(a.faces, b.faces)
    assert np.array_equal(a.parts, b.parts)
    assert a.vertices.shape != c.vertices.shape or not np.array_equal(a.vertices, c.vertices)


def test_vertex_budget_spans_a_few_hundred_to_20k():
    rng = np.random.default_rng(0)
    budgets = np.array([builder.vertex_budget(rng) for _ in range(2000)])
    assert budgets.min() >= builder.MIN_VERTICES and budgets.max() <= builder.MAX_VERTICES
    assert np.median(budgets) < 3000 and budgets.max() > 15_000
    for target in (500, 5000, 18_000):
        b = builder.fit_resolution(laptop(np.random.default_rng(1)), target, False)
        n = sum(len(m.vertices) for link in b.meshes for m in link)
        assert target / 1.6 < n < target * 1.6


def test_rest_frame_check_catches_a_shifted_first_frame():
    art = ARTICULATED["cabinet"](np.random.default_rng(5), 24)
    seq = art.to_sequence()
    rest = art.pose(art.rest[None])[0] + [0.0, 0.0, 0.01]
    with pytest.raises(SequenceError, match="rest shape"):
        check_sequence(seq, rest=rest)


def test_segment_distance_matches_brute_force():
    rng = np.random.default_rng(0)
    p = rng.normal(size=(60, 4, 3))
    p[:5, 1] = p[:5, 0]  # a few degenerate segments (points)
    d = segment_distance(p[:, 0], p[:, 1], p[:, 2], p[:, 3])
    s = np.linspace(0, 1, 201)[None, :, None]
    a = p[:, :1] + (p[:, 1:2] - p[:, :1]) * s  # (60, 201, 3)
    b = p[:, 2:3] + (p[:, 3:4] - p[:, 2:3]) * s
    brute = np.linalg.norm(a[:, :, None] - b[:, None], axis=-1).min(axis=(1, 2))
    assert_within(d, below=brute + 1e-12, what="segment distance vs brute force")
    close(d, brute, atol=2e-2, rtol=0)


def test_assembly_collision_check():
    """Two rods on the base that swing into each other collide; far apart they do not."""
    from types import SimpleNamespace

    from training.data.articulated.assemblies import Link, Rod

    up, x = np.array([0.0, 0.0, 1.0]), np.array([1.0, 0.0, 0.0])
    base = np.array([1.0, 1.0, 0.1])

    def rod_link(px: float) -> Link:
        start = np.array([px, 0.0, 0.12])
        rod = Rod("capsule", start, up, 0.4, 0.02, "none", x)
        return Link(rod, 0, "revolute", np.array([0.0, 1.0, 0.0]), start, -1.5, 1.5)

    for gap, tilt, expected in ((0.3, 0.0, False), (0.3, 1.2, True), (0.041, 0.0, True)):
        links = [rod_link(-gap / 2), rod_link(gap / 2)]
        tree = KinematicTree()
        for k, spec in enumerate(links):
            tree.add_link(f"part_{k + 1}")
            tree.add_joint(Joint(f"j{k}", "revolute", 0, k + 1, spec.axis, spec.point, -1.5, 1.5))
        q = np.array([[0.0, 0.0], [tilt, 0.0]])  # the left rod leans towards the right one
        art = SimpleNamespace(tree=tree, q=q)
        assert collides(art, base, links) is expected, (gap, tilt)


def _object(build, q: np.ndarray) -> Articulation:
    """An Articulation of a hand-made ``build`` along the joint values ``q`` (T, J)."""
    b = ObjectBuilder(edge=0.01)
    build(b)
    vertices, faces, links = b.mesh()
    q = np.asarray(q, dtype=np.float64)
    return Articulation("probe", b.tree, vertices, faces, links, q, q[0], 0.3, True)


def _box_with(child):
    """A 0.4 m box (the base) with one child link made by ``child(b, link)``."""

    def build(b: ObjectBuilder):
        b.slab(b.BASE, (-0.2, 0.0, 0.0), (0.2, 0.3, 0.3))
        child(b, b.link("part"))

    return build


TURNS = np.linspace(0.0, 2.5, 12)[:, None]


def test_overlap_check_tells_contact_from_sinking():
    """Flush contact and a joint's own overlap pass; a part swung into its body does not."""

    def flush_knob(b, k):  # its back face on the box's front face, turning about its own axis
        b.cylinder(k, 0.03, 0.02, (0.0, -0.01, 0.15), (0, 1, 0))
        b.joint("revolute", b.BASE, k, (0, -1, 0), (0.0, 0.0, 0.15), 0.0, 4.0)

    def pin(b, k):  # a pin through the box, turning in its hole (an axle)
        b.cylinder(k, 0.02, 0.5, (0.0, 0.15, 0.15), (1, 0, 0))
        b.joint("revolute", b.BASE, k, (1, 0, 0), (0.0, 0.15, 0.15), 0.0, 4.0)

    def lever(b, k):  # a bar in front of the box hinged at one end: it swings into the box
        b.slab(k, (-0.05, -0.03, 0.14), (0.15, -0.01, 0.16))
        b.joint("revolute", b.BASE, k, (0, 0, 1), (-0.05, -0.02, 0.15), 0.0, 4.0)

    assert part_overlap(_object(_box_with(flush_knob), TURNS)) == []
    assert part_overlap(_object(_box_with(pin), TURNS)) == []
    defects = part_overlap(_object(_box_with(lever), TURNS))
    assert len(defects) >= 1 and "outside their joint" in defects[0], defects


def test_overlap_check_refuses_parts_that_are_not_joined():
    def build(b: ObjectBuilder):
        b.slab(b.BASE, (-0.2, 0.0, 0.0), (0.2, 0.3, 0.3))
        a, c = b.link("a"), b.link("c")
        b.slab(a, (0.25, 0.0, 0.0), (0.35, 0.1, 0.1))  # clear of the base
        b.slab(c, (0.30, 0.05, 0.05), (0.40, 0.15, 0.15))  # inside a, but joined to the base
        b.joint("prismatic", b.BASE, a, (0, 0, 1), (0, 0, 0), 0.0, 0.2)
        b.joint("prismatic", b.BASE, c, (0, 0, 1), (0, 0, 0), 0.0, 0.2)

    defects = part_overlap(_object(build, np.zeros((4, 2))))
    assert any("runs into" in d for d in defects), defects


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ARTICULATED))
def test_no_draw_runs_parts_into_each_other(name):
    """100 seeds of every family draw an object (no family runs out of redraws), and a denser
    check (every frame, 300 samples a link) than the generator's own finds nothing either."""
    dense = OverlapCheck(samples=300, frames=24)
    for seed in range(100):
        art = ARTICULATED[name](np.random.default_rng(seed), 24)
        if seed % 10 == 0:
            defects = part_overlap(art, dense)
            assert defects == [], (name, seed, defects)


def test_a_defective_draw_is_drawn_again():
    """Some first draws of the desk lamps swing the shade into the arm; the family then
    returns another object, which passes."""
    from training.data.articulated.mechanisms import desk_lamp

    refused = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        first = builder.articulate("desk_lamp", desk_lamp(rng), rng, 24)
        if part_overlap(first):
            refused.append((seed, first))
    assert refused, "no first draw of 100 was refused: the check finds nothing to refuse"
    for seed, first in refused:
        art = ARTICULATED["desk_lamp"](np.random.default_rng(seed), 24)
        assert part_overlap(art) == []
        assert art.vertices.shape != first.vertices.shape or not np.array_equal(
            art.vertices, first.vertices
        )


def _generator_hashes(env: dict) -> str:
    code = (
        "import hashlib, numpy as np\n"
        "from training.data.registry import all_families\n"
        "fams = sorted(n for n, f in all_families().items() if f.category == 'articulated')\n"
        "for n in fams:\n"
        "    for seed in (0, 21):\n"
        "        s = all_families()[n].generate(np.random.default_rng(seed), 24)\n"
        "        h = hashlib.sha256(s.vertices.tobytes() + s.faces.tobytes() + s.parts.tobytes())\n"
        "        print(n, seed, h.hexdigest()[:16])\n"
    )
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.slow
def test_one_seed_gives_the_same_object_under_every_blas_kernel():
    """numpy's OpenBLAS kernel (another CPU's) changes the last bits of products; a seed must
    still give the same object, byte for byte."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    # the oldest kernel, and the newest this CPU can run (a kernel it cannot is an illegal
    # instruction: OpenBLAS does not check a forced one)
    newest = suited_kernel(cpu_flags()) or "Core2"
    runs = {k: _generator_hashes({**env, "OPENBLAS_CORETYPE": k}) for k in ("Prescott", newest)}
    assert runs["Prescott"].count("\n") == 2 * len(ARTICULATED)
    assert runs["Prescott"] == runs[newest], (runs["Prescott"], runs[newest])
