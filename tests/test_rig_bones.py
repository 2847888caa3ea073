"""Bones where a part bends (neurok_core.rigspace.bones.bend_segments) and the joints the rig
space finds at them: a welded hinge, a manifold fold, a narrow neck; objects without a bend keep
their bones; a cap's sleeve round a bottle's neck is a revolute joint about the bottle's axis."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
import trimesh
from bounds import assert_within

from neurok_core.dynamics import Force, SimulationConditions
from neurok_core.metrics import best_rotations, rigid_fit_residual
from neurok_core.rigspace import bones, build_rig_space, simulate_rig
from neurok_core.rigspace.bones import geometric_bones
from training.eval.scene_meshes import BUILDERS, grid_box, lathe, rotation, sheet


def _weld(vertices, faces, tol=1e-7):
    """Merge coincident vertices: (vertices, faces, kept (N',) indices of the first copies)."""
    key = np.round(vertices / tol).astype(np.int64)
    _, first, inverse = np.unique(key, axis=0, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return vertices[first[order]], rank[inverse.reshape(-1)][faces], first[order]


def welded_slabs(opening_deg=100.0, edge=0.02):
    """A base slab (30 x 20 x 2 cm) and a lid slab (30 x 20 x 0.8 cm) open by ``opening_deg``
    about the base's back top edge (the x axis through y = 0.1, z = 0.02), the lid's hinge edge
    welded to it: (vertices, faces, lid (N,) bool; the seam's vertices count as the base's)."""
    base_v, base_f = grid_box((0.3, 0.2, 0.02), (0.0, 0.0, 0.01), edge)
    lid_v, lid_f = grid_box((0.3, 0.2, 0.008), (0.0, 0.0, 0.024), edge)
    hinge = np.array([0.0, 0.1, 0.02])
    lid_v = (lid_v - hinge) @ rotation([1, 0, 0], -math.radians(opening_deg)).T + hinge
    v = np.concatenate([base_v, lid_v])
    f = np.concatenate([base_f, lid_f + len(base_v)])
    v, f, kept = _weld(v, f)
    return v, f, kept >= len(base_v)


def l_fold(opening_deg=105.0, lid=0.007, base=0.015, depth=0.22, width=0.32, step=0.01):
    """One closed manifold solid: a base slab (``base`` thick) and a lid slab (``lid`` thick)
    rising from its back edge at ``opening_deg``, made of one gridded L-shaped section extruded
    along x. Returns (vertices, faces, the crease's (y, z))."""
    a = math.radians(opening_deg)
    up = np.array([-math.cos(a), math.sin(a)])
    back = np.array([depth / 2, base])
    crease = back - np.array([lid / math.sin(a), 0.0])

    def quad(p00, p10, p11, p01, nu, nv):  # a structured grid of a quadrilateral in (y, z)
        u, w = np.meshgrid(np.linspace(0, 1, nu + 1), np.linspace(0, 1, nv + 1), indexing="ij")
        u, w = u[..., None], w[..., None]
        p = (1 - u) * (1 - w) * p00 + u * (1 - w) * p10 + u * w * p11 + (1 - u) * w * p01
        i = np.arange((nu + 1) * (nv + 1)).reshape(nu + 1, nv + 1)
        a, b, c, d = i[:-1, :-1].ravel(), i[1:, :-1].ravel(), i[1:, 1:].ravel(), i[:-1, 1:].ravel()
        return p.reshape(-1, 2), np.concatenate([np.stack([a, b, c], 1), np.stack([a, c, d], 1)])

    def n(length):
        return max(1, math.ceil(length / step))

    corners = [
        ((-depth / 2, 0.0), (crease[0], 0.0), crease, (-depth / 2, base), n(crease[0] + depth / 2)),
        ((crease[0], 0.0), (depth / 2, 0.0), back, crease, 1),
        (crease, back, back + depth * up, crease + depth * up, 1),
    ]
    pts, tris = [], []
    for p00, p10, p11, p01, nu in corners:
        nv = n(base) if len(pts) < 2 else n(depth)
        p, t = quad(*(np.asarray(c, dtype=float) for c in (p00, p10, p11, p01)), nu, nv)
        tris.append(t + sum(len(q) for q in pts))
        pts.append(p)
    section, tri = np.concatenate(pts), np.concatenate(tris)
    _, first, inverse = np.unique(
        np.round(section / 1e-9).astype(np.int64), axis=0, return_index=True, return_inverse=True
    )
    section, tri = section[first], inverse.reshape(-1)[tri]
    turn = np.cross(
        section[tri[:, 1]] - section[tri[:, 0]], section[tri[:, 2]] - section[tri[:, 0]]
    )
    tri[turn < 0] = tri[turn < 0][:, ::-1]  # counter-clockwise in (y, z)
    edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])
    _, which, uses = np.unique(np.sort(edges, 1), axis=0, return_inverse=True, return_counts=True)
    rim = edges[uses[which.reshape(-1)] == 1]  # the section's outline, counter-clockwise
    rows, m = n(width), len(section)
    xs = np.linspace(-width / 2, width / 2, rows + 1)
    v = np.concatenate([np.column_stack([np.full(m, x), section]) for x in xs])
    faces = [tri[:, ::-1], tri + rows * m]
    for i in range(rows):
        a0, b0 = rim[:, 0] + i * m, rim[:, 1] + i * m
        faces += [np.stack([a0, b0, b0 + m], 1), np.stack([a0, b0 + m, a0 + m], 1)]
    f = np.concatenate(faces)
    if trimesh.Trimesh(v, f, process=False).volume < 0:
        f = f[:, ::-1]
    return v, f, crease


def _revolved(profile, edge=0.01):
    return lathe(profile, edge, sides=24)


def _without_bends(monkeypatch, vertices, faces, elastic):
    """The bones ``geometric_bones`` gives when no part is searched for a bend."""
    with monkeypatch.context() as m:
        m.setattr(bones, "bend_segments", lambda v, f, c=None: np.zeros(len(f), dtype=np.int64))
        return geometric_bones(vertices, faces, elastic=elastic)


# --------------------------------------------------------------------------------------------
# Bones


@pytest.mark.parametrize("roll", [0, 1, 2])
def test_a_welded_two_slab_mesh_gets_two_bones_meeting_at_the_hinge(roll):
    v, f, lid = welded_slabs()
    f = np.roll(f, roll, axis=1)  # the faces' first vertex does not matter
    layout = geometric_bones(v, f, elastic=False)
    assert [p.kind for p in layout.part_info] == ["rigid", "rigid"] and len(layout.heads) == 2
    (seam,) = layout.seams
    on_seam = np.zeros(len(v), dtype=bool)
    on_seam[seam.vertices] = True
    # the boundary is the hinge's edge: its 16 vertices (every 2 cm) on the line y, z = 0.1, 0.02
    assert on_seam.sum() == 16
    np.testing.assert_allclose(v[on_seam][:, 1:], [[0.1, 0.02]] * 16, atol=1e-12)
    # each slab's own vertices on its own bone alone, the seam's on both
    lid_part = layout.parts[np.flatnonzero(lid)[0]]
    w = layout.vertex_weights
    own = np.where(lid, lid_part, 1 - lid_part)
    main = layout.vertex_bones[:, 0]
    assert (main[~on_seam] == own[~on_seam]).all() and np.allclose(w[~on_seam, 0], 1.0)
    seam_bones = layout.vertex_bones[on_seam, :2]
    assert (np.sort(seam_bones, 1) == [0, 1]).all()
    assert_within(w[on_seam, :2], above=0.2, strict=True, what="seam vertices' two weights")
    np.testing.assert_allclose(w.sum(1), 1.0)
    # every face on its own slab
    face_lid = lid[f].any(1)
    assert (layout.face_parts == np.where(face_lid, lid_part, 1 - lid_part)).all()


@pytest.mark.parametrize("opening", [60.0, 90.0, 105.0])
def test_a_thin_manifold_fold_splits_along_its_crease(opening):
    v, f, crease = l_fold(opening)
    layout = geometric_bones(v, f, elastic=False)
    assert [p.kind for p in layout.part_info] == ["rigid", "rigid"]
    (seam,) = layout.seams
    # the boundary closes the crease the short way round: within the lid's thickness of it
    gap = np.linalg.norm(v[seam.vertices][:, 1:] - crease, axis=1)
    assert gap.max() < 0.012
    lid = v[:, 2] > 0.05
    assert len(np.unique(layout.parts[lid])) == 1 and len(np.unique(layout.parts[v[:, 2] < 0.01]))


def test_a_thick_fold_a_shallow_groove_and_a_bottle_stay_whole():
    """No narrow neck: a block L (10 cm arms), a cylinder with a 5 mm groove round it, a
    bottle whose neck is a small share of it."""
    block = l_fold(lid=0.1, base=0.1)[:2]
    groove = _revolved(
        [(0.0, 0.0), (0.05, 0.0), (0.05, 0.095), (0.045, 0.095), (0.045, 0.105)]
        + [(0.05, 0.105), (0.05, 0.2), (0.0, 0.2)]
    )
    bottle = BUILDERS["bottle_cap"]()
    shapes = (block, groove, (bottle.vertices, bottle.faces))
    for v, f in shapes:
        layout = geometric_bones(v, f, elastic=False)
        assert len(layout.part_info) == len(np.unique(bones.loose_parts(v, f))) and not layout.seams


def test_a_narrow_neck_splits():
    """Two 10 cm wide drums joined by a 2 cm rod: two bones, the boundary round the rod."""
    v, f = _revolved(
        [(0.0, 0.0), (0.05, 0.0), (0.05, 0.1), (0.01, 0.14), (0.01, 0.16)]
        + [(0.05, 0.2), (0.05, 0.3), (0.0, 0.3)]
    )
    layout = geometric_bones(v, f, elastic=True)  # split first: its segments are not elastic
    assert [p.kind for p in layout.part_info] == ["rigid", "rigid"]
    (seam,) = layout.seams
    ring = v[seam.vertices]
    assert np.allclose(np.linalg.norm(ring[:, :2], axis=1), 0.01) and np.ptp(ring[:, 2]) < 1e-9


def _cube():
    m = trimesh.creation.box((0.5, 0.5, 0.5)).subdivide().subdivide()
    return np.asarray(m.vertices), np.asarray(m.faces)


def _ball():
    m = trimesh.creation.icosphere(subdivisions=3, radius=0.2)
    return np.asarray(m.vertices), np.asarray(m.faces)


def _sheet():
    v, f, _ = sheet(1.0, 0.6, 0.05)
    return v, f


@pytest.mark.parametrize("elastic", [False, True])
@pytest.mark.parametrize(
    "shape", ["cube", "ball", "sheet", *sorted(set(BUILDERS) - {"laptop_welded"})]
)
def test_objects_without_a_bend_keep_their_bones(monkeypatch, shape, elastic):
    if shape in BUILDERS:
        m = BUILDERS[shape]()
        v, f = m.vertices, m.faces
    else:
        v, f = {"cube": _cube, "ball": _ball, "sheet": _sheet}[shape]()
    found = geometric_bones(v, f, elastic=elastic)
    before = _without_bends(monkeypatch, v, f, elastic)
    assert not found.seams
    assert [p.kind for p in found.part_info] == [p.kind for p in before.part_info]
    for key in ("heads", "bone_parts", "vertex_bones", "vertex_weights", "parts"):
        np.testing.assert_array_equal(getattr(found, key), getattr(before, key))


def test_finding_bends_is_fast_on_20k_vertices():
    """A guard against a search that grows faster than the mesh (a bound of many times what
    it takes: about 0.3 s each on one core)."""
    v, f, _ = welded_slabs(edge=0.004)
    drums = lathe(
        [(0.0, 0.0), (0.05, 0.0), (0.05, 0.1), (0.01, 0.14), (0.01, 0.16)]
        + [(0.05, 0.2), (0.05, 0.3), (0.0, 0.3)],
        0.002,
        sides=160,
    )
    for vertices, faces, parts in ((v, f, 2), (*drums, 2)):
        assert len(vertices) > 15_000
        started = time.perf_counter()
        layout = geometric_bones(vertices, faces, elastic=False)
        assert time.perf_counter() - started < 5.0 and len(layout.part_info) == parts


# --------------------------------------------------------------------------------------------
# Joints and motion


def _own_vertex_first(f, lid):
    """Faces rolled so that each starts with a vertex of its own slab (a lid face with a lid
    vertex, the seam's vertices counting as the base's)."""
    f = f.copy()
    mine = lid[f].any(1)
    for _ in range(2):
        roll = mine & ~lid[f[:, 0]]
        f[roll] = f[roll][:, [1, 2, 0]]
    return f


@pytest.mark.parametrize("order", ["own vertex first", "as built"])
def test_the_welded_hinge_is_a_hinge_and_the_lid_closes_rigidly_onto_the_base(order):
    v, f, lid = welded_slabs()
    if order == "own vertex first":
        f = _own_vertex_first(f, lid)
    base = np.flatnonzero(~lid)
    space = build_rig_space(v, f, mass=1.0, pins=base)
    (joint,) = space.joints
    assert joint.kind == "hinge" and abs(joint.axis[0]) > 1 - 1e-9
    np.testing.assert_allclose(joint.points[:, 1:], [[0.1, 0.02]] * 3, atol=1e-12)
    edge = np.flatnonzero(lid)[np.argmax(v[lid, 2])]
    cond = SimulationConditions(
        forces=(Force((0.0, -1.0, -0.3), 1.0, vertex=int(edge), end_frame=8),),
        pins=tuple(base.tolist()),
        mass=1.0,
        frames=36,
        fps=24.0,
        damping=0.5,
    )
    x = simulate_rig(v, f, cond).positions.astype(np.float64)
    own = np.flatnonzero(lid)
    assert rigid_fit_residual(v[own], x[:, own]).max() < 0.01 * 0.3
    rot = best_rotations(v[own], x[-1:, own])[0]
    angle = np.degrees(np.arccos(np.clip((np.trace(rot) - 1) / 2, -1, 1)))
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    assert angle > 80.0, angle  # closed from 100 deg open
    assert abs(axis[0]) / np.linalg.norm(axis) > math.cos(math.radians(5))  # no twist
    assert x[-1, own, 2].min() > 0.02 - 0.01 * 0.3  # on the base, not through it


def test_a_cap_over_a_bottle_neck_is_a_revolute_joint_about_the_bottle_axis():
    m = BUILDERS["bottle_cap"]()
    space = build_rig_space(m.vertices, m.faces, mass=0.5, pins=m.pins)
    assert space.info["parts"] == ["rigid", "rigid"] and space.info["fixed_parts"] == 1
    (joint,) = space.joints
    assert joint.kind == "revolute" and (joint.part_a, joint.part_b) == (1, -1)
    assert abs(joint.axis[2]) > 1 - 1e-6  # the bottle's axis
    np.testing.assert_allclose(joint.points[:, :2], 0.0, atol=1e-4)  # glue on the axis
    cap = m.vertices[m.parts == 1][:, 2]  # the glue within the cap's height
    glue = joint.points[:, 2]
    assert_within(glue, above=cap.min() - 1e-3, below=cap.max() + 1e-3, what="glue's z vs the cap")


def test_a_flat_disc_under_a_cap_is_no_sleeve():
    """The same cap, its skirt cut off (a flat puck on the bottle's mouth): no sleeve, and the
    puck, as wide as the mouth, only rests on it."""
    body = _revolved(
        [(0.0, 0.0), (0.035, 0.0), (0.035, 0.16), (0.013, 0.2), (0.013, 0.24), (0.0, 0.24)]
    )
    puck = lathe([(0.0, 0.24), (0.016, 0.24), (0.016, 0.244), (0.0, 0.244)], 0.004, sides=24)
    v = np.concatenate([body[0], puck[0]])
    f = np.concatenate([body[1], puck[1] + len(body[0])])
    space = build_rig_space(v, f, mass=0.5, pins=np.arange(len(body[0])))
    assert [j.kind for j in space.joints] == []


def test_a_closed_part_with_loose_vertices_after_it_gets_its_bones():
    """Vertices no face uses, listed after the faces' own (as files carry them), do not upset
    the bend search (fuzz seed 9: an IndexError)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_meshes import fuzz_case

    case = fuzz_case(9)
    layout = geometric_bones(case.vertices, case.faces, elastic=False)
    assert len(layout.heads) >= 1


def test_an_open_shell_with_bulk_is_a_solid_and_a_flat_sheet_a_sheet():
    """A box missing one face (a robot link's shell, a scan with a hole) is one rigid part with
    one bone; a flat open sheet gets its grid of bones, a half-cylinder shell is a solid too."""
    box = trimesh.creation.box((0.3, 0.2, 0.1)).subdivide()
    top = box.triangles_center[:, 2] > 0.049
    open_box = box.faces[~top]
    layout = geometric_bones(box.vertices, open_box, elastic=False)
    assert [p.kind for p in layout.part_info] == ["rigid"] and len(layout.heads) == 1
    x, y = np.meshgrid(np.linspace(0, 1, 12), np.linspace(0, 0.6, 8), indexing="ij")
    sheet = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], 1)
    i, j = np.meshgrid(np.arange(11), np.arange(7), indexing="ij")
    a = (i * 8 + j).ravel()
    faces = np.concatenate([np.stack([a, a + 8, a + 9], 1), np.stack([a, a + 9, a + 1], 1)])
    layout = geometric_bones(sheet, faces, elastic=False)
    assert [p.kind for p in layout.part_info] == ["sheet"] and len(layout.heads) > 1
    angle = math.pi * x.ravel()  # the same grid bent into half a cylinder
    shell = np.stack([np.cos(angle), y.ravel(), np.sin(angle)], 1) * [0.3, 1.0, 0.3]
    layout = geometric_bones(shell, faces, elastic=False)
    assert [p.kind for p in layout.part_info] == ["rigid"]
