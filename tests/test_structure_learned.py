"""The joint typer (neurok_core.structure_learned): its file, its forward pass, what re-typing
keeps, and that the bundled typer types held-out generated joints better than geometry."""

import json

import numpy as np
import pytest
from mesh_pieces import box_mesh, join_meshes

from neurok_core.errors import CheckpointError
from neurok_core.structure import Structure, find_structure
from neurok_core.structure_axes import AxisChooser
from neurok_core.structure_learned import (
    FEATURES,
    JOINT_TYPES,
    NEIGHBOURS,
    JointTyper,
    retype,
    structure_features,
)


def _typer(seed: int = 0, axes: bool = False) -> JointTyper:
    rng = np.random.default_rng(seed)
    layers = [
        (rng.normal(size=(FEATURES, 8)), rng.normal(size=8)),
        (rng.normal(size=(8, len(JOINT_TYPES))), rng.normal(size=len(JOINT_TYPES))),
    ]
    chooser = None
    if axes:
        width = 10 + 11 + 2 + FEATURES  # candidate_features' columns
        chooser = AxisChooser(
            [(rng.normal(size=(width, 4)), rng.normal(size=4)), (rng.normal(size=(4, 1)), [0.0])],
            np.zeros(width),
            np.ones(width),
        )
    return JointTyper(
        layers, rng.normal(size=FEATURES), rng.uniform(0.5, 2.0, FEATURES), axes=chooser
    )


def _sunk_boxes():
    return join_meshes(
        box_mesh((0.3, 0.3, 0.2), (0, 0, 0), 1), box_mesh((0.3, 0.3, 0.05), (0, 0, 0.12), 1)
    )


def test_the_typer_round_trips_its_file_and_its_forward_pass_is_a_softmax_mlp(tmp_path):
    typer = _typer(axes=True)
    rng = np.random.default_rng(2)
    typer.reference, typer.novelty = rng.normal(size=(40, FEATURES)).astype(np.float32), 3.0
    typer.save(tmp_path / "t.npz")
    back = JointTyper.load(tmp_path / "t.npz")
    x = np.random.default_rng(1).normal(size=(5, FEATURES))
    np.testing.assert_allclose(back(x), typer(x))
    np.testing.assert_allclose(back.distances(x), typer.distances(x))
    np.testing.assert_array_equal(back.familiar(x), typer.familiar(x))
    c = rng.normal(size=(7, typer.axes.mean.size))
    np.testing.assert_allclose(back.axes.scores(c), typer.axes.scores(c))
    # the distance is to the NEIGHBOURS-th nearest reference joint, in standardised features
    z = (x - typer.mean) / typer.scale
    d = np.sort(np.linalg.norm(z[:, None] - typer.reference[None], axis=2), axis=1)
    np.testing.assert_allclose(typer.distances(x), d[:, NEIGHBOURS - 1], rtol=1e-5)
    (w0, b0), (w1, b1) = typer.layers
    z = np.maximum(((x - typer.mean) / typer.scale) @ w0 + b0, 0.0) @ w1 + b1
    want = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(typer(x), want / want.sum(1, keepdims=True), rtol=1e-12)


def test_a_missing_or_foreign_typer_file_is_refused_clearly(tmp_path):
    with pytest.raises(CheckpointError, match="cannot be read"):
        JointTyper.load(tmp_path / "none.npz")
    (tmp_path / "bad.npz").write_bytes(b"not an npz")
    with pytest.raises(CheckpointError, match="cannot be read"):
        JointTyper.load(tmp_path / "bad.npz")
    small = JointTyper([(np.zeros((3, 5)), np.zeros(5))], np.zeros(3), np.ones(3))
    small.save(tmp_path / "small.npz")
    with pytest.raises(CheckpointError, match="does not fit"):
        JointTyper.load(tmp_path / "small.npz")


def test_retyping_keeps_the_parts_and_the_pins_and_gives_an_axis_to_each_hinge():
    v, f = join_meshes(  # a slab on a base, and a wall standing on its edge
        box_mesh((0.2, 0.2, 0.05), (0.0, 0.0, 0.0), 1),
        box_mesh((0.2, 0.2, 0.02), (0.0, 0.0, 0.035), 1),
        box_mesh((0.2, 0.02, 0.15), (0.0, 0.09, 0.12), 1),
    )
    pins = np.flatnonzero(v[:, 2] < 0.0)
    geometric = find_structure(v, f, pins=pins, learned=False)
    for mode in ("learned", "both"):
        for seed in range(4):  # typers that type every way
            s = retype(v, geometric, _typer(seed), mode=mode)
            assert isinstance(s, Structure)
            np.testing.assert_array_equal(s.labels, geometric.labels)
            assert s.parts == geometric.parts
            for old, new in zip(geometric.joints, s.joints, strict=True):
                if old.part_b < 0:
                    assert new == old  # a pin is the user's word
                if new.type in ("hinge", "slider"):
                    assert new.axis is not None and abs(np.linalg.norm(new.axis) - 1) < 1e-9
        typer = _typer(seed, axes=True)
        s = retype(v, geometric, typer, mode="learned")
        index, features, views = structure_features(v, geometric)
        for k, row, view in zip(index, features, views, strict=True):
            new = s.joints[k]
            if new.type in ("hinge", "slider"):  # the chooser's pick, for each such joint
                assert new.axis == typer.axes.choose(view, row, new.type)
    with pytest.raises(ValueError, match="mode"):
        retype(v, geometric, _typer(), mode="other")
    index, features, _ = structure_features(v, geometric)
    assert features.shape == (len(index), FEATURES) and np.isfinite(features).all()


def test_the_bundled_typer_types_held_out_generated_joints_better_than_geometry():
    """Three held-out generated objects of each of five families (the validation stream,
    never trained on): the learned typing (the default) gets more of their true joints' types
    right than geometry alone, and their axes within 10 degrees (the median); nearly all of
    their joints are familiar to it (docs/experiments/structure.md has the whole table)."""
    from training.eval.structure_eval import articulated_cases, evaluate_case, summarise

    families = ["drawers", "laptop", "sliding_window", "door", "random_assembly"]
    cases = list(articulated_cases(families, 3, 44))
    right = {}
    for typing in ("geometry", "learned", "both"):
        right[typing] = summarise([evaluate_case(c, typing=typing) for c in cases])
    assert right["learned"]["type_accuracy"] >= right["geometry"]["type_accuracy"] + 0.2
    assert right["both"]["type_accuracy"] >= right["geometry"]["type_accuracy"] + 0.1
    assert right["learned"]["axis_error_median"] <= 10.0
    typer = JointTyper.load()
    features = np.concatenate(
        [
            structure_features(c.vertices, find_structure(c.vertices, c.faces, learned=False))[1]
            for c in cases
        ]
    )
    assert typer.familiar(features).mean() >= 0.95


def test_joints_unlike_the_typers_training_keep_geometrys_type():
    """Two boxes sunk into each other and a rod sunk by its end into a block: the typer was
    never shown such joints (they lie far from its reference set), so geometry's weld stays."""
    import trimesh

    block = box_mesh((0.1, 0.1, 0.1), (0.0, 0.0, 0.0), subdivisions=2)
    rod = trimesh.creation.cylinder(0.01, 0.4, sections=32)
    rod = (np.asarray(rod.vertices) + (0.0, 0.0, 0.23), np.asarray(rod.faces))
    typer = JointTyper.load()
    for v, f in (_sunk_boxes(), join_meshes(block, rod)):
        geometric = find_structure(v, f, learned=False)
        _, features, _ = structure_features(v, geometric)
        assert not typer.familiar(features).any()
        assert typer.distances(features).min() > 1.2 * typer.novelty
        assert [j.type for j in find_structure(v, f).joints] == ["fixed"]


def test_the_cli_types_joints_with_the_typer_unless_told_geometry(tmp_path, capsys):
    import trimesh

    from neurok_core.cli import main
    from training.eval.structure_eval import articulated_cases

    (case,) = articulated_cases(["laptop"], 1, 44)  # held out: geometry calls its hinge contact
    for name, (v, f) in (("sunk", _sunk_boxes()), ("laptop", (case.vertices, case.faces))):
        trimesh.Trimesh(v, f, process=False).export(tmp_path / f"{name}.obj")
    types = {}
    for name in ("sunk", "laptop"):
        for flag in ([], ["--geometry"]):
            out = tmp_path / f"{name}{len(flag)}.json"
            assert main(["structure", str(tmp_path / f"{name}.obj"), "--out", str(out), *flag]) == 0
            found = json.loads(out.read_text())
            types[name, bool(flag)] = sorted(j["type"] for j in found["joints"])
    assert types["sunk", True] == types["sunk", False] == ["fixed"]  # unfamiliar: geometry's
    # the lid on the base: one hinge by the typer (its pieces welded), a contact by geometry
    assert types["laptop", False].count("hinge") == 1 and "contact" not in types["laptop", False]
    assert "contact" in types["laptop", True]
