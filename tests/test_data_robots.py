"""The pybullet_data robots dev set: forward kinematics, fixed base, rigid links, files."""

import json

import numpy as np
import pytest
import torch
from torch.testing import assert_close

from neurok_core.sequence import load_sequence, validate_sequence
from training.data import robots

KUKA = next(r for r in robots.ROBOTS if r.name == "kuka_iiwa")


def _close(a, b, **kw):
    assert_close(
        torch.tensor(np.asarray(a, np.float64)), torch.tensor(np.asarray(b, np.float64)), **kw
    )


@pytest.fixture(scope="module")
def kuka():
    robot = robots.load_robot(KUKA)
    yield robot
    robots.close(robot)


def test_kuka_sequence_moves_links_and_keeps_the_base(kuka):
    seq = robots.robot_sequence(kuka, np.random.default_rng(0), 8, "kuka")
    validate_sequence(seq)
    assert seq.category == "articulated"
    assert seq.source == "pybullet_data:kuka_iiwa/model.urdf"
    assert len(kuka.joints) == 7
    labels = np.unique(seq.parts)
    _close(labels, np.arange(8))  # base (0) + 7 links, link index + 1
    v = seq.vertices.astype(np.float64)
    base = seq.parts == 0
    assert base.sum() > 100
    _close(v[:, base], np.broadcast_to(v[0, base], v[:, base].shape), rtol=0, atol=0)
    moved = [np.abs(v[:, seq.parts == k] - v[0, seq.parts == k]).max() for k in labels[1:]]
    assert max(moved) > 0.05
    # Every link moves rigidly: distances to a few of its own vertices are preserved.
    for k in labels:
        idx = np.flatnonzero(seq.parts == k)[:: max(1, (seq.parts == k).sum() // 50)]
        d = np.linalg.norm(v[:, idx, None] - v[:, None, idx], axis=-1)  # (T, n, n)
        _close(d, np.broadcast_to(d[0], d.shape), rtol=0, atol=2e-6)


def test_frame0_is_the_rest_pose_and_seeds_are_deterministic(kuka):
    a = robots.robot_sequence(kuka, np.random.default_rng(5), 6, "a")
    b = robots.robot_sequence(kuka, np.random.default_rng(5), 6, "b")
    np.testing.assert_array_equal(a.vertices, b.vertices)
    rest = robots.pose_sequence(kuka, kuka.rest[None])[0]
    _close(a.vertices[0], rest, rtol=0, atol=1e-6)
    # The upright rest pose of the arm: its top is ~1.3 m above the base.
    assert 1.1 < rest[:, 2].max() < 1.5


def test_vertex_clustering_fits_a_budget():
    robot = robots.load_robot(KUKA, max_vertices=1500)
    try:
        total = sum(len(g.vertices) for g in robot.links)
        assert 500 < total <= 1500
        seq = robots.robot_sequence(robot, np.random.default_rng(1), 3, "small")
        validate_sequence(seq)
    finally:
        robots.close(robot)
    v, f = robots.cluster_vertices(
        np.random.default_rng(0).random((400, 3)), np.arange(399).reshape(-1, 3), 0.25
    )
    assert len(v) <= 64 and f.max() < len(v)
    assert ((f[:, 0] != f[:, 1]) & (f[:, 1] != f[:, 2]) & (f[:, 0] != f[:, 2])).all()


def test_build_robot_set_and_cli(tmp_path):
    m = robots.build_robot_set(
        tmp_path / "a", frames=4, seed=1, sequences_per_robot=2, robots=(KUKA,), progress=False
    )
    assert m["count"] == 2
    on_disk = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert on_disk == m
    for entry in m["sequences"]:
        seq = load_sequence(tmp_path / "a" / entry["file"])
        assert seq.num_vertices == entry["vertices"] and entry["links"] == 8
        assert seq.num_frames == 4
    first = load_sequence(tmp_path / "a" / "kuka_iiwa_00.npz")
    second = load_sequence(tmp_path / "a" / "kuka_iiwa_01.npz")
    assert not np.array_equal(first.vertices, second.vertices)
    assert (
        robots.main(
            [
                "--out",
                str(tmp_path / "b"),
                "--robots",
                "kuka_iiwa",
                "--per-robot",
                "1",
                "--frames",
                "4",
                "--seed",
                "1",
            ]
        )
        == 0
    )
    again = load_sequence(tmp_path / "b" / "kuka_iiwa_00.npz")
    np.testing.assert_array_equal(again.vertices, first.vertices)  # same seed, same sequence
    with pytest.raises(SystemExit):
        robots.main(["--out", str(tmp_path / "c"), "--robots", "no_such_robot"])
