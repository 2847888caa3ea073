"""Training pairs: shapes, correspondence, normalisation, augmentation, listing, sampler."""

import json
import math

import numpy as np
import pytest
import torch
from bounds import assert_within
from scipy.spatial.transform import Rotation

from neurok_core.errors import SequenceError
from neurok_core.model.losses import knn_indices
from neurok_core.sequence import Sequence4D, save_sequence
from training.dataset import (
    Augmentation,
    PairBatchSampler,
    PairDataset,
    list_sequences,
    nearest_others,
)

HALF = np.array([1.0, 0.5, 0.25])  # half-extents of the test box: 2 x 1 x 0.5 m


def box_mesh(offset=(0.3, -0.2, 1.0)) -> tuple[np.ndarray, np.ndarray]:
    """A closed box (8 vertices, 12 triangles) centred at ``offset``."""
    corners = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    faces = np.array(
        [
            [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
            [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],
        ],
        dtype=np.int32,
    )  # fmt: skip
    return corners * HALF + np.asarray(offset), faces


def rigid_sequence(name: str, rotation: np.ndarray, translation: np.ndarray, **kw) -> Sequence4D:
    """Two frames: the box and the box moved rigidly (x -> R x + t)."""
    rest, faces = box_mesh()
    moved = rest @ rotation.T + translation
    return Sequence4D(
        vertices=np.stack([rest, moved]).astype(np.float32),
        faces=faces,
        parts=np.zeros(len(rest), np.int32),
        closed=True,
        category=kw.get("category", "articulated"),
        source="test",
        name=name,
    )


@pytest.fixture()
def rigid_folder(tmp_path):
    rotation = Rotation.from_rotvec([0.3, -0.5, 0.9]).as_matrix()
    translation = np.array([0.2, 0.1, -0.3])
    save_sequence(rigid_sequence("box", rotation, translation), tmp_path / "boxes" / "box.npz")
    return tmp_path, rotation, translation


def fit_affine(rest: np.ndarray, deformed: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Least-squares deformed ~ rest @ M.T + b: (M (3, 3), b (3,), max residual)."""
    design = np.concatenate([rest, np.ones((len(rest), 1))], axis=1)  # (P, 4)
    coef, *_ = np.linalg.lstsq(design, deformed, rcond=None)  # (4, 3)
    residual = np.abs(design @ coef - deformed).max()
    return coef[:3].T, coef[3], float(residual)


def test_item_shapes_and_types(rigid_folder):
    root, _, _ = rigid_folder
    ds = PairDataset(root, num_points=64, augmentation=Augmentation(), neighbors=5)
    assert len(ds) == 1
    item = ds[3]
    assert item["rest"].shape == (64, 3) and item["rest"].dtype == torch.float32
    assert item["deformed"].shape == (64, 3) and item["deformed"].dtype == torch.float32
    assert item["neighbors"].shape == (64, 5) and item["neighbors"].dtype == torch.int64


def test_rigid_motion_without_augmentation(rigid_folder):
    """Same material points on both frames: deformed = R rest + t' in M0's normalised frame,
    with t' = (R c + t - c) s for M0's box centre c and scale s."""
    root, rotation, translation = rigid_folder
    ds = PairDataset(root, num_points=200, rest_probability=0.0)
    rest_vertices, _ = box_mesh()
    center = 0.5 * (rest_vertices.min(0) + rest_vertices.max(0))
    scale = 1.0 / (2.0 * HALF.max())
    expected_shift = (rotation @ center + translation - center) * scale
    for key in (0, 1, 7):
        item = ds[key]
        rest = item["rest"].double()
        deformed = item["deformed"].double()
        predicted = rest @ torch.from_numpy(rotation).T + torch.from_numpy(expected_shift)
        torch.testing.assert_close(deformed, predicted, atol=1e-5, rtol=0)


def test_rest_points_lie_on_the_normalised_box(rigid_folder):
    """Centre of the bounding box at 0, longest side 1: every point is inside the scaled box and
    on one of its faces."""
    root, _, _ = rigid_folder
    rest = PairDataset(root, num_points=500)[0]["rest"].double().numpy()
    half = HALF / (2.0 * HALF.max())  # (0.5, 0.25, 0.125)
    assert_within(np.abs(rest), below=half + 1e-6, what="|rest points| vs the half box")
    on_face = np.isclose(np.abs(rest), half, atol=1e-6).any(axis=1)
    assert on_face.all()
    # area-uniform: the share of points on the two big faces (z = +-) is their share of the area
    areas = 4 * np.array([HALF[1] * HALF[2], HALF[0] * HALF[2], HALF[0] * HALF[1]])
    big = np.isclose(np.abs(rest[:, 2]), half[2], atol=1e-6).mean()
    assert abs(big - areas[2] / areas.sum()) < 0.08


def test_augmentation_keeps_correspondence(rigid_folder):
    """With the augmentation A, a rigid motion R becomes the affine A R A^-1 (exactly affine);
    with rotations only (no stretch) it stays a rotation."""
    root, rotation, _ = rigid_folder
    stretch = PairDataset(root, num_points=200, augmentation=Augmentation(), rest_probability=0)
    plain = PairDataset(root, num_points=200, rest_probability=0)
    for key in range(4):
        rest = stretch[key]["rest"].double().numpy()
        deformed = stretch[key]["deformed"].double().numpy()
        linear, _, residual = fit_affine(rest, deformed)
        assert residual < 1e-5
        # similar to R: same eigenvalues (trace and determinant are invariants)
        assert math.isclose(np.trace(linear), np.trace(rotation), abs_tol=1e-4)
        assert math.isclose(np.linalg.det(linear), 1.0, abs_tol=1e-4)
        assert np.abs(rest).max() <= 0.5 + 1e-6
        assert not np.allclose(rest, plain[key]["rest"].numpy())

    rigid_only = Augmentation(scale_range=(1.0, 1.0))
    ds = PairDataset(root, num_points=200, augmentation=rigid_only, rest_probability=0)
    for key in range(3):
        linear, _, residual = fit_affine(ds[key]["rest"].double().numpy(),
                                         ds[key]["deformed"].double().numpy())  # fmt: skip
        assert residual < 1e-5
        np.testing.assert_allclose(linear @ linear.T, np.eye(3), atol=1e-4)


def test_augmentation_matrix():
    """A = R_x R_y R_z diag(s): stretches in range, Z tilted by at most twice the tilt."""
    aug = Augmentation(max_tilt_deg=10.0, scale_range=(0.8, 1.25))
    rng = np.random.default_rng(0)
    for _ in range(50):
        a = aug.sample(rng)
        stretch = np.linalg.norm(a, axis=0)  # columns of R diag(s) have length s
        assert_within(stretch, above=0.8 - 1e-12, below=1.25 + 1e-12, what="stretches")
        up = a[:, 2] / stretch[2]
        assert math.degrees(math.acos(np.clip(up[2], -1, 1))) <= 20.0 + 1e-9
    with pytest.raises(ValueError):
        Augmentation(scale_range=(1.2, 0.9))


def test_items_are_a_function_of_the_key(rigid_folder):
    root, _, _ = rigid_folder
    a = PairDataset(root, num_points=32, augmentation=Augmentation(), seed=3)
    b = PairDataset(root, num_points=32, augmentation=Augmentation(), seed=3)
    torch.testing.assert_close(a[5]["rest"], b[5]["rest"], rtol=0, atol=0)
    torch.testing.assert_close(a[5]["deformed"], b[5]["deformed"], rtol=0, atol=0)
    assert not torch.equal(a[5]["rest"], a[6]["rest"])  # resampled points per item
    c = PairDataset(root, num_points=32, augmentation=Augmentation(), seed=4)
    assert not torch.equal(a[5]["rest"], c[5]["rest"])


def test_rest_probability_gives_no_motion_pairs(rigid_folder):
    root, _, _ = rigid_folder
    ds = PairDataset(root, num_points=16, rest_probability=1.0, augmentation=Augmentation())
    item = ds[0]
    torch.testing.assert_close(item["rest"], item["deformed"], rtol=0, atol=0)


def test_neighbors_match_the_model(rigid_folder):
    points = np.random.default_rng(1).random((100, 3))
    mine = nearest_others(points, 6)
    reference = knn_indices(torch.from_numpy(points)[None], 6)[0].numpy()
    assert (np.sort(mine, axis=1) == np.sort(reference, axis=1)).all()
    twins = np.concatenate([points, points[:5]])  # coincident points: still never the point itself
    found = nearest_others(twins, 3)
    assert (found != np.arange(len(twins))[:, None]).all()


def test_listing_manifest_filters_and_errors(tmp_path):
    eye, zero = np.eye(3), np.zeros(3)
    files = {
        "door/a.npz": "articulated",
        "door/b.npz": "articulated",
        "flag/c.npz": "cloth",
    }
    for rel, category in files.items():
        save_sequence(rigid_sequence(rel, eye, zero, category=category), tmp_path / rel)
    entries, manifest = list_sequences(tmp_path)
    assert [e.family for e in entries] == ["door", "door", "flag"] and manifest == {}
    entries, _ = list_sequences(tmp_path, categories=["cloth"])
    assert [e.path.name for e in entries] == ["c.npz"]
    records = [{"file": rel, "family": rel.split("/")[0], "category": cat}
               for rel, cat in files.items()]  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps({"split": "train", "sequences": records}))
    ds = PairDataset(tmp_path, num_points=8, families=["door"])
    assert len(ds) == 2 and ds.summary()["per_family"] == {"door": 2}
    assert ds.summary()["manifest"] == {"split": "train"}
    with pytest.raises(SequenceError, match="no sequence files"):
        list_sequences(tmp_path, families=["laptop"])
    with pytest.raises(SequenceError, match="no such data folder"):
        list_sequences(tmp_path / "missing")
    (tmp_path / "flag" / "c.npz").unlink()
    with pytest.raises(SequenceError, match="missing"):
        list_sequences(tmp_path)


def test_cache_is_bounded(tmp_path):
    eye, zero = np.eye(3), np.zeros(3)
    for i in range(3):
        save_sequence(rigid_sequence(f"s{i}", eye, zero), tmp_path / f"s{i}.npz")
    ds = PairDataset(tmp_path, num_points=8, cache_mb=0.0)
    for key in range(6):
        ds[key]
    assert len(ds._cache) == 1
    ds = PairDataset(tmp_path, num_points=8)
    for key in range(6):
        ds[key]
    assert len(ds._cache) == 3


def test_sampler_splits_ranks_and_resumes():
    num, batch = 10, 3
    streams = []
    for rank in range(2):
        it = iter(PairBatchSampler(num, batch, rank=rank, world_size=2, seed=5))
        streams.append([k for _ in range(5) for k in next(it)])  # 15 keys = 3 epochs of 5
    for epoch in range(3):
        both = streams[0][epoch * 5 : (epoch + 1) * 5] + streams[1][epoch * 5 : (epoch + 1) * 5]
        assert sorted(both) == list(range(epoch * num, (epoch + 1) * num))  # disjoint, complete
    resumed = iter(PairBatchSampler(num, batch, rank=1, world_size=2, seed=5, start_batch=2))
    assert next(resumed) + next(resumed) == streams[1][6:12]
    with pytest.raises(SequenceError):
        PairBatchSampler(1, 2, world_size=2)
