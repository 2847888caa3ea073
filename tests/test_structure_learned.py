"""The joint typer (neurok_core.structure_learned): its file, its forward pass, what re-typing
keeps, and that the bundled typer types held-out generated joints better than geometry."""

import numpy as np
import pytest
from mesh_pieces import box_mesh, join_meshes

from neurok_core.errors import CheckpointError
from neurok_core.structure import Structure, find_structure
from neurok_core.structure_learned import (
    FEATURES,
    JOINT_TYPES,
    JointTyper,
    retype,
    structure_features,
)


def _typer(seed: int = 0) -> JointTyper:
    rng = np.random.default_rng(seed)
    layers = [
        (rng.normal(size=(FEATURES, 8)), rng.normal(size=8)),
        (rng.normal(size=(8, len(JOINT_TYPES))), rng.normal(size=len(JOINT_TYPES))),
    ]
    return JointTyper(layers, rng.normal(size=FEATURES), rng.uniform(0.5, 2.0, FEATURES))


def test_the_typer_round_trips_its_file_and_its_forward_pass_is_a_softmax_mlp(tmp_path):
    typer = _typer()
    typer.save(tmp_path / "t.npz")
    back = JointTyper.load(tmp_path / "t.npz")
    x = np.random.default_rng(1).normal(size=(5, FEATURES))
    np.testing.assert_allclose(back(x), typer(x))
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
    with pytest.raises(ValueError, match="mode"):
        retype(v, geometric, _typer(), mode="other")
    index, features, _ = structure_features(v, geometric)
    assert features.shape == (len(index), FEATURES) and np.isfinite(features).all()


def test_the_bundled_typer_types_held_out_generated_joints_better_than_geometry():
    """Three held-out generated objects of each of four families (the validation stream,
    never trained on): the learned typing (and "both") gets more of their true joints' types
    right than geometry alone (docs/experiments/structure.md has the whole table)."""
    from training.eval.structure_eval import articulated_cases, evaluate_case, summarise

    cases = list(articulated_cases(["drawers", "laptop", "sliding_window", "door"], 3, 44))
    right = {}
    for typing in ("geometry", "learned", "both"):
        right[typing] = summarise([evaluate_case(c, typing=typing) for c in cases])
    assert right["learned"]["type_accuracy"] >= right["geometry"]["type_accuracy"] + 0.1
    assert right["both"]["type_accuracy"] >= right["geometry"]["type_accuracy"] + 0.1


def test_the_cli_types_joints_with_the_typer_when_asked(tmp_path, capsys):
    import trimesh

    from neurok_core.cli import main

    v, f = join_meshes(
        box_mesh((0.3, 0.3, 0.2), (0, 0, 0), 1), box_mesh((0.3, 0.3, 0.05), (0, 0, 0.12), 1)
    )
    trimesh.Trimesh(v, f, process=False).export(tmp_path / "m.obj")
    types = {}
    for flag in ([], ["--learned"]):
        out = tmp_path / f"s{len(flag)}.json"
        assert main(["structure", str(tmp_path / "m.obj"), "--out", str(out), *flag]) == 0
        found = Structure.from_json(out.read_text(), len(v))
        types[bool(flag)] = [j.type for j in found.joints]
    assert types[False] == ["fixed"]  # geometry welds two boxes sunk into each other
    assert len(types[True]) == 1  # the typer types that joint too (a hinge: its known miss)
