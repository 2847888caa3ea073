"""Inverse kinematics in the rig space (neurok_core.rigspace.fit, .ik, .ik_search, .ik_prior):
the skinning Jacobian against finite differences, the folded chamfer against its definition,
recovered part motions, rigid parts staying rigid, the rig that replays the fit, the CLI and the
worker."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
import trimesh
from conftest import ROOT
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from neurok_core.cli import main
from neurok_core.geometry import sample_surface_points
from neurok_core.ik import chamfer_loss
from neurok_core.rigspace.fit import RigProblem, fit_rig
from neurok_core.rigspace.ik import RigIKSettings, SkinnedPoints, Target, retract
from neurok_core.rigspace.ik_chain import centre_line
from neurok_core.rigspace.ik_prior import ShapePrior, bone_fit
from neurok_core.rigspace.ik_search import CLOSE, DISTINCT, PartSearch
from neurok_core.rigspace.space import build_rig_space


def hinged_lid(gap=0.0005):
    """A base and a lid (two loose boxes, the lid resting on the base) and the lid's vertices."""
    base = trimesh.creation.box((0.4, 0.3, 0.02))
    base.apply_translation((0.2, 0, 0.01))
    lid = trimesh.creation.box((0.4, 0.3, 0.02))
    lid.apply_translation((0.2, 0, 0.03 + gap))
    mesh = trimesh.util.concatenate([base.subdivide(), lid.subdivide()])
    top = np.arange(len(base.subdivide().vertices), len(mesh.vertices))
    return np.asarray(mesh.vertices), np.asarray(mesh.faces), top


def opened(vertices, top, degrees):
    """The lid turned about the base's edge x = 0 (the hinge, along y) by ``degrees``."""
    a = np.radians(degrees)
    turn = np.array([[np.cos(a), 0, -np.sin(a)], [0, 1, 0], [np.sin(a), 0, np.cos(a)]])
    out = vertices.copy()
    pivot = np.array([0.0, 0.0, 0.02])
    out[top] = (out[top] - pivot) @ turn.T + pivot
    return out


def surface_gap(vertices, faces, truth) -> float:
    """Squared chamfer between 4,000 surface samples of the mesh and of the truth (seeded)."""
    moved = sample_surface_points(vertices, faces, 4000, np.random.default_rng(1))
    want = sample_surface_points(truth, faces, 4000, np.random.default_rng(2))
    return float(chamfer_loss(torch.as_tensor(moved)[None], torch.as_tensor(want)[None])[0])


def test_the_skinning_jacobian_matches_finite_differences():
    rng = np.random.default_rng(0)
    nb = 4
    rows = np.zeros((30, 4 * nb))
    for m in range(30):
        for b in rng.choice(nb, 2, replace=False):
            w = rng.uniform(0.2, 1.0)
            rows[m, 4 * b : 4 * b + 3] = w * rng.normal(size=3)
            rows[m, 4 * b + 3] = w
    pts = SkinnedPoints(rows)
    rot = Rotation.from_rotvec(rng.normal(size=(nb, 3))).as_matrix()
    centre = rng.normal(size=(nb, 3))
    # positions: the rows times the state Q, as everywhere in the rig space
    q = np.concatenate([np.transpose(rot, (0, 2, 1)), centre[:, None]], 1).reshape(-1, 3)
    np.testing.assert_allclose(pts.positions(rot, centre), rows @ q, atol=1e-12)
    jac = pts.jacobian(pts.arms(rot)).toarray()  # (3M, 6B)
    e = 1e-6
    for k in range(6 * nb):
        step = np.zeros(6 * nb)
        step[k] = e
        up = pts.positions(*retract(rot, centre, step))
        down = pts.positions(*retract(rot, centre, -step))
        np.testing.assert_allclose((up - down).reshape(-1) / (2 * e), jac[:, k], atol=1e-6)


@pytest.mark.parametrize("plane", [0.0, 0.8, 1.0])
def test_the_data_term_is_the_mixed_chamfer_and_its_gradient(plane):
    v, f, top = hinged_lid()
    space = build_rig_space(v / 0.4, f, mass=1.0)
    rng = np.random.default_rng(1)
    from neurok_core.geometry import sample_surface
    from neurok_core.rigspace.ik import RigFit

    settings = RigIKSettings(stretch_weight=0, glue_weight=0, plane=plane)
    fit = RigFit(space, settings, sample_surface(space.vertices, f, 64, rng))
    target = Target.of(opened(v, top, 40)[::3] / 0.4 + rng.normal(0, 0.01, (len(v[::3]), 3)))
    nb = space.num_bones
    rot = Rotation.from_rotvec(rng.normal(0, 0.1, (nb, 3))).as_matrix()
    centre = space.heads + rng.normal(0, 0.02, (nb, 3))
    x = fit.samples.positions(rot, centre)
    data, pairs = fit.data(x, target)
    # the reference: the chamfer of the IK module, and the pairs by brute force
    point = float(chamfer_loss(torch.as_tensor(x)[None], torch.as_tensor(target.points)[None])[0])
    d = ((x[:, None] - target.points[None]) ** 2).sum(-1)  # (P, Q)
    near_t, near_x = d.argmin(1), d.argmin(0)
    n = target.normals
    along = np.concatenate(
        [((x - target.points[near_t]) * n[near_t]).sum(1), ((x[near_x] - target.points) * n).sum(1)]
    )
    a = (along[: len(x)] ** 2).mean() + (along[len(x) :] ** 2).mean()
    assert data == pytest.approx((1 - plane) * point + plane * 0.5 * a, rel=1e-10)
    jac, res = fit.linearise(rot, centre, x, target, pairs, fit.glue_scale)
    # E = |r|^2 + const while the pairs (and the normals) are held: the gradient 2 J^T r
    # against finite differences of the data term with the pairs held
    grad = 2 * jac.T @ res

    def held(y):
        pt = ((y - target.points[near_t]) ** 2).sum(1).mean()
        pt += ((y[near_x] - target.points) ** 2).sum(1).mean()
        pl = (((y - target.points[near_t]) * n[near_t]).sum(1) ** 2).mean()
        pl += (((y[near_x] - target.points) * n).sum(1) ** 2).mean()
        return 0.5 * ((1 - plane) * pt + plane * pl)

    e = 1e-6
    for k in range(0, 6 * nb, 5):
        step = np.zeros(6 * nb)
        step[k] = e
        up = fit.samples.positions(*retract(rot, centre, step))
        down = fit.samples.positions(*retract(rot, centre, -step))
        assert grad[k] == pytest.approx((held(up) - held(down)) / (2 * e), rel=1e-5, abs=1e-9)


def test_point_normals_are_the_surfaces_normals():
    from neurok_core.rigspace.ik import point_normals

    rng = np.random.default_rng(0)
    flat = np.c_[rng.uniform(-1, 1, (500, 2)), rng.normal(0, 1e-4, 500)]  # a sheet z = 0
    sphere = rng.normal(size=(2000, 3))
    sphere /= np.linalg.norm(sphere, axis=1, keepdims=True)
    for points, expected in [(flat, np.tile([0.0, 0.0, 1.0], (500, 1))), (sphere, sphere)]:
        normals = point_normals(points, cKDTree(points))
        np.testing.assert_allclose(np.linalg.norm(normals, axis=1), 1.0, atol=1e-9)
        assert np.abs((normals * expected).sum(1)).min() > 0.95  # unsigned: |cos| near 1


@pytest.mark.parametrize("degrees", [35, 100])
def test_a_lid_turned_about_its_hinge_is_found_from_points_alone(degrees):
    v, f, top = hinged_lid()
    truth = opened(v, top, degrees)
    other = trimesh.Trimesh(truth, f).subdivide()  # another topology: points only
    points = sample_surface_points(other.vertices, other.faces, 2048, np.random.default_rng(0))
    fit = fit_rig(v, f, points)

    # the surfaces agree (a box has symmetries, so the vertices need not) to the sampling's
    # own floor (the truth's samples against the same target samples), far better than M0
    gap = surface_gap(fit.vertices, f, truth)
    assert gap < 1.2 * surface_gap(truth, f, truth) and gap < 0.05 * surface_gap(v, f, truth)
    # each part moves rigidly: its edges keep their lengths
    edges = trimesh.Trimesh(v, f, process=False).edges_unique
    lengths = np.linalg.norm(v[edges[:, 0]] - v[edges[:, 1]], axis=1)
    fitted = np.linalg.norm(fit.vertices[edges[:, 0]] - fit.vertices[edges[:, 1]], axis=1)
    np.testing.assert_allclose(fitted, lengths, atol=1e-9)


def test_a_target_of_the_same_topology_is_fitted_by_its_correspondences():
    v, f, top = hinged_lid()
    truth = opened(v, top, 70)
    points = sample_surface_points(truth, f, 512, np.random.default_rng(0))
    fit = fit_rig(v, f, points, target_vertices=truth)
    np.testing.assert_allclose(fit.vertices, truth, atol=1e-6)
    # the rig replays the fit: linear blend skinning of the rest by the fitted bones
    rig = fit.rig()
    assert rig.num_frames == 1 and rig.blend == "lbs"
    np.testing.assert_allclose(rig.skin(v, 0), fit.vertices, atol=1e-9)
    with pytest.raises(Exception, match="do not match the rest mesh"):
        RigProblem(v, f).solve(points, target_vertices=truth[:-1])


def _panel(lo, hi):
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    box = trimesh.creation.box(hi - lo)
    box.apply_translation((lo + hi) / 2)
    return box.subdivide()


def chest_of_one_drawer():
    """A carcass of five panels (0.6 x 0.5 x 0.4 m) and a drawer of five panels inside it, the
    drawer's vertices: every panel touches its neighbours, so the joints detected on the
    mesh tie the drawer's panels to each other and to the carcass alike."""
    t, g = 0.02, 0.002
    carcass = [
        _panel((0, 0, 0), (0.6, 0.5, t)),
        _panel((0, 0, 0.4 - t), (0.6, 0.5, 0.4)),
        _panel((0, 0, t), (t, 0.5, 0.4 - t)),
        _panel((0.6 - t, 0, t), (0.6, 0.5, 0.4 - t)),
        _panel((t, 0.5 - t, t), (0.6 - t, 0.5, 0.4 - t)),
    ]
    drawer = [
        _panel((t + g, -t, t), (0.6 - t - g, 0.0, 0.3)),  # front
        _panel((t + g, 0.0, t), (0.6 - t - g, 0.45, 2 * t)),  # bottom
        _panel((t + g, 0.0, 2 * t), (2 * t + g, 0.45, 0.3)),  # sides
        _panel((0.6 - 2 * t - g, 0.0, 2 * t), (0.6 - t - g, 0.45, 0.3)),
        _panel((2 * t + g, 0.45 - t, 2 * t), (0.6 - 2 * t - g, 0.45, 0.3)),  # back
    ]
    mesh = trimesh.util.concatenate(carcass + drawer)
    first = sum(len(m.vertices) for m in carcass)
    return np.asarray(mesh.vertices), np.asarray(mesh.faces), np.arange(first, len(mesh.vertices))


def test_a_drawer_of_jointed_panels_is_pulled_out_whole():
    """The search moves the drawer's panels together (they follow its front) and leaves the
    carcass: each vertex ends near where it belongs, not only the surface near the target's
    (a fit that moved carcass panels into the drawer's place can match the surface too)."""
    v, f, drawer = chest_of_one_drawer()
    truth = v.copy()
    truth[drawer, 1] -= 0.2  # pulled out by 0.2 m of its 0.45 m depth
    points = sample_surface_points(truth, f, 2048, np.random.default_rng(0))
    fit = fit_rig(v, f, points)

    assert surface_gap(fit.vertices, f, truth) < 1.5 * surface_gap(truth, f, truth)
    error = np.linalg.norm(fit.vertices - truth, axis=1)
    assert error.max() < 0.05 * 0.6 and error.mean() < 0.02 * 0.6  # (0.79 m and 0.12 m
    # when every panel moved on its own)


def sliding_panels(front: float, back: float):
    """A frame (2.2 x 1 m) with two panels in tracks one behind the other, the front one slid
    along x by ``front`` and the back one by ``back``: (vertices, faces)."""
    parts = [
        _panel((-1.1, 0, 0), (1.1, 0.2, 0.05)),
        _panel((-1.1, 0, 0.95), (1.1, 0.2, 1.0)),
        _panel((-1.1, 0, 0.05), (-1.0, 0.2, 0.95)),
        _panel((1.0, 0, 0.05), (1.1, 0.2, 0.95)),
        _panel((-1.0 + front, 0.03, 0.05), (0.05 + front, 0.07, 0.95)),
        _panel((-0.05 + back, 0.11, 0.05), (1.0 + back, 0.15, 0.95)),
    ]
    mesh = trimesh.util.concatenate(parts)
    return np.asarray(mesh.vertices), np.asarray(mesh.faces)


def test_the_second_search_begins_with_a_close_move_that_lands_elsewhere():
    """Both panels slid: their two moves gain nearly alike; the second search takes the other
    one first. A queue with no such move has no second search."""
    v, f = sliding_panels(0.0, 0.0)
    truth, _ = sliding_panels(0.6, -0.6)
    points = sample_surface_points(truth, f, 2048, np.random.default_rng(0))
    problem = RigProblem(v, f)
    target = Target.of(problem.normalization.apply(points))
    nb = problem.space.num_bones
    rest = (np.repeat(np.eye(3)[None], nb, 0), problem.space.heads.copy())
    search = PartSearch(problem.fit, *rest, target.points, target.tree)
    queue = []
    for i, cand in enumerate(search.candidates):
        found = search.best_move(cand)
        if found is not None and found[1] > 0:
            queue.append((-found[0], i, 0, found))
    queue.sort()
    second = search.second_first(list(queue))
    assert second is not None
    chosen = min(second)
    assert chosen[1] != queue[0][1]
    gain = next(-e[0] for e in queue if e[1] == chosen[1])
    assert gain >= CLOSE * -queue[0][0]
    assert np.abs(search._landing(chosen[3]) - search._landing(queue[0][3])).max() > DISTINCT
    assert search.second_first(queue[:1]) is None

    fit = problem.solve(points)  # both panels in place: near the sampling's own floor (the
    # rest is 3.7x it; the frame is symmetric, so the vertices may land turned)
    assert surface_gap(fit.vertices, f, truth) < 2.0 * surface_gap(truth, f, truth)


def test_a_sheet_bends_onto_a_folded_target_without_stretching():
    xs, ys = np.meshgrid(np.linspace(0, 1, 15), np.linspace(0, 0.6, 9), indexing="ij")
    flat = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], 1)
    i, j = np.meshgrid(np.arange(14), np.arange(8), indexing="ij")
    a = (i * 9 + j).ravel()
    faces = np.concatenate([np.stack([a, a + 9, a + 1], 1), np.stack([a + 1, a + 9, a + 10], 1)])
    # folded over a line at x = 0.5 by 90 degrees: lengths kept
    folded = flat.copy()
    right = flat[:, 0] > 0.5
    folded[right, 0] = 0.5
    folded[right, 2] = flat[right, 0] - 0.5
    points = sample_surface_points(folded, faces, 2048, np.random.default_rng(0))
    fit = fit_rig(flat, faces, points)

    gap = surface_gap(fit.vertices, faces, folded)
    # within a few times the sampling's own floor (the blended bones round the fold's corner)
    assert gap < 2.5 * surface_gap(folded, faces, folded)
    assert gap < 0.05 * surface_gap(flat, faces, folded)
    edges = trimesh.Trimesh(flat, faces, process=False).edges_unique
    l0 = np.linalg.norm(flat[edges[:, 0]] - flat[edges[:, 1]], axis=1)
    l1 = np.linalg.norm(fit.vertices[edges[:, 0]] - fit.vertices[edges[:, 1]], axis=1)
    assert np.mean(np.abs(l1 / l0 - 1)) < 0.03  # the cloth keeps its size


def _rope(centre_lines):
    """A capped tube of radius 0.012 about each centre line (T, 64, 3): (vertices (T, V, 3),
    faces)."""
    from training.data.rope import tube_faces, tube_vertices

    return tube_vertices(centre_lines, 0.012), tube_faces(centre_lines.shape[1])


def _coiled(count=64, bend=6.0):
    """A straight rope of length 1 along x and the same rope bent into an arc of ``bend``
    radians (its length kept), lying on its side: centre lines (2, count, 3)."""
    s = np.linspace(0.0, 1.0, count)
    straight = np.stack([s, np.zeros(count), np.full(count, 0.3)], 1)
    r = 1.0 / bend
    arc = np.stack([r * np.sin(bend * s), r * (1 - np.cos(bend * s)), np.zeros(count)], 1)
    return np.stack([straight, arc + (0.2, -0.1, 0.012)])


def test_a_chains_centre_line_runs_along_its_tube_from_end_to_end():
    lines = _coiled()
    verts, faces = _rope(lines)
    points = sample_surface_points(verts[1], faces, 2048, np.random.default_rng(0))
    line = centre_line(points)
    gap, _ = cKDTree(lines[1]).query(line)
    assert gap.max() < 0.03  # on the axis, within about 2 radii (the ends' caps)
    ends = np.linalg.norm(line[[0, -1]][:, None] - lines[1][[0, -1]][None], axis=2)  # (2, 2)
    assert min(ends[0, 0] + ends[1, 1], ends[0, 1] + ends[1, 0]) < 0.03  # from end to end
    assert abs(np.linalg.norm(np.diff(line, axis=0), axis=1).sum() - 1.0) < 0.1


def test_a_rope_coiled_far_from_its_rest_is_laid_along_the_target():
    lines = _coiled()
    verts, faces = _rope(lines)
    points = sample_surface_points(verts[1], faces, 2048, np.random.default_rng(0))
    fit = fit_rig(verts[0], faces, points)
    assert fit.start.startswith("chain")
    gap = surface_gap(fit.vertices, faces, verts[1])
    assert gap < 3.0 * surface_gap(verts[1], faces, verts[1])  # (140x with the turned starts only)
    # the rope keeps its length: its rings' centres stay 1/63 apart
    centres = fit.vertices[: 64 * 8].reshape(64, 8, 3).mean(1)
    length = np.linalg.norm(np.diff(centres, axis=0), axis=1).sum()
    assert abs(length - 1.0) < 0.03


def test_bone_fit_recovers_the_bones_of_a_skinned_pose():
    v, f, top = hinged_lid()
    space = build_rig_space(v, f, mass=1.0)
    rng = np.random.default_rng(3)
    rot = Rotation.from_rotvec(rng.normal(0, 0.5, (space.num_bones, 3))).as_matrix()
    centre = space.heads + rng.normal(0, 0.05, (space.num_bones, 3))
    posed = SkinnedPoints(space.vertex_rows(np.arange(len(v)))).positions(rot, centre)
    got_rot, got_centre = bone_fit(space, posed)
    np.testing.assert_allclose(got_rot, rot, atol=1e-9)
    np.testing.assert_allclose(got_centre, centre, atol=1e-9)


def test_the_shape_prior_is_a_gaussian_energy_with_linear_residuals():
    rng = np.random.default_rng(4)
    draws = rng.normal(size=(40, 10, 3)) * 0.1
    prior = ShapePrior(draws)
    x = rng.normal(size=(10, 3)) * 0.1
    r = prior.residuals(x)
    np.testing.assert_allclose(prior.matrix() @ (x.reshape(-1) - prior.mean), r, atol=1e-12)
    assert float(r @ r) < float(prior.residuals(x * 5) @ prior.residuals(x * 5))
    assert float(prior.residuals(prior.mean.reshape(10, 3)) @ prior.residuals(
        prior.mean.reshape(10, 3))) == pytest.approx(0.0, abs=1e-20)  # fmt: skip


def test_neurok_ik_writes_the_fit_the_rig_and_the_report(tmp_path, capsys):
    v, f, top = hinged_lid()
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "rest.obj")
    truth = opened(v, top, 60)
    trimesh.Trimesh(truth, f, process=False).subdivide().export(tmp_path / "target.obj")
    out, rig, report = tmp_path / "fit.obj", tmp_path / "pose.json", tmp_path / "fit.json"
    args = ["ik", str(tmp_path / "rest.obj"), str(tmp_path / "target.obj"), "--out", str(out)]
    assert main(args + ["--rig", str(rig), "--report", str(report), "--restarts", "4"]) == 0
    assert "bones" in capsys.readouterr().out
    fitted = trimesh.load(out, process=False)
    assert len(fitted.vertices) == len(v)
    figures = json.loads(report.read_text())
    assert figures["space"] == "rig" and not figures["correspondences"]
    assert len(figures["starts"]) == 4 and figures["chamfer"] < 3e-3  # M0: about 0.05
    pose = json.loads(rig.read_text())
    assert pose["format"] == "neurok-rig" and len(pose["frames"]) == 1
    # refusals before any work
    assert main(args + ["--space", "latent", "--rig", str(rig)]) == 2
    assert "--rig needs --space rig" in capsys.readouterr().err
    assert main(args + ["--steps", "0"]) == 2
    assert "at least 1" in capsys.readouterr().err


def test_the_worker_answers_an_ik_request(tmp_path):
    v, f, top = hinged_lid()
    truth = opened(v, top, 50)
    np.savez(tmp_path / "mesh.npz", vertices=v.astype(np.float32), faces=f.astype(np.int32))
    np.savez(tmp_path / "target.npz", vertices=truth.astype(np.float32), faces=f.astype(np.int32))
    request = {
        "protocol": 1, "task": "ik", "mesh": "mesh.npz", "target": "target.npz",
        "settings": {"restarts": 3}, "output": {"frames": "fit.npy", "rig": "rig.npz"},
    }  # fmt: skip
    (tmp_path / "request.json").write_text(json.dumps(request))
    proc = subprocess.run(
        [sys.executable, "-m", "neurok_core.worker", "--request", str(tmp_path / "request.json")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    assert done["type"] == "done" and done["info"]["correspondences"] is True
    fitted = np.load(tmp_path / "fit.npy")
    assert fitted.shape == (1, len(v), 3)
    np.testing.assert_allclose(fitted[0], truth, atol=1e-4)  # same topology: exact
    assert (tmp_path / "rig.npz").is_file()
    bad = dict(request, settings={"steps": 0})
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    proc = subprocess.run(
        [sys.executable, "-m", "neurok_core.worker", "--request", str(tmp_path / "bad.json")],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2 and "at least 1" in proc.stdout
