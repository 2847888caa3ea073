"""Checkpoints: round trip, atomic overwrite, and every way a checkpoint can be broken."""

import hashlib
import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from torch.testing import assert_close

from neurok_core.checkpoint import (
    CONFIG_FILE,
    FORMAT_VERSION,
    WEIGHTS_FILE,
    checkpoint_info,
    load_checkpoint,
    save_checkpoint,
)
from neurok_core.errors import CheckpointError
from neurok_core.model import ModelConfig, NeuROKModel


def make_model(seed: int = 0, **overrides) -> NeuROKModel:
    torch.manual_seed(seed)
    model = NeuROKModel(ModelConfig.preset("tiny", **overrides))
    with torch.no_grad():  # a non-trivial decoder, so the round trip really compares outputs
        model.decoder.head.weight.normal_(0.0, 0.3)
    return model.eval()


@pytest.fixture
def saved(tmp_path):
    model = make_model()
    path = save_checkpoint(
        model,
        tmp_path / "ckpt",
        training={"steps": np.int64(1200), "families": ("doors", "lids")},
        metrics={"chamfer_l1": np.float32(0.03), "iou": float("nan")},
        extra={"note": "test"},
    )
    return model, path


def rewrite_weights(path, tensors, *, update_checksum=True):
    save_file(tensors, str(path / WEIGHTS_FILE))
    info = json.loads((path / CONFIG_FILE).read_text())
    if update_checksum:
        info["weights_sha256"] = hashlib.sha256((path / WEIGHTS_FILE).read_bytes()).hexdigest()
    (path / CONFIG_FILE).write_text(json.dumps(info))


def edit_config(path, **changes):
    info = json.loads((path / CONFIG_FILE).read_text())
    info.update(changes)
    (path / CONFIG_FILE).write_text(json.dumps(info))


def test_round_trip_gives_identical_outputs(saved, monkeypatch):
    model, path = saved

    def no_pickles(*args, **kwargs):
        raise AssertionError("checkpoint loading must not use torch.load")

    monkeypatch.setattr(torch, "load", no_pickles)
    loaded, info = load_checkpoint(path)
    assert not loaded.training
    assert loaded.config == model.config
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)
    rest = torch.rand(2, 64, 3) - 0.5
    z = torch.randn(2, model.config.latent_dim)
    with torch.no_grad():
        expected = model.deform(z, model.encode_shape(rest), rest)
        assert_close(loaded.deform(z, loaded.encode_shape(rest), rest), expected, rtol=0, atol=0)
    assert info["format_version"] == FORMAT_VERSION
    assert info["training"] == {"steps": 1200, "families": ["doors", "lids"]}
    assert info["metrics"]["iou"] is None  # NaN is not JSON
    assert info["metrics"]["chamfer_l1"] == pytest.approx(0.03)
    assert info["extra"] == {"note": "test"}
    assert info["num_parameters"] == model.num_parameters()
    assert checkpoint_info(path) == info
    assert load_checkpoint(path / CONFIG_FILE)[1] == info  # a file inside the folder works too


def test_overwrite_leaves_no_temporary_files(saved):
    _, path = saved
    other = make_model(seed=1, deformation="displacement")
    save_checkpoint(other, path)
    assert sorted(p.name for p in path.iterdir()) == [CONFIG_FILE, WEIGHTS_FILE]
    loaded, info = load_checkpoint(path)
    assert loaded.config.deformation == "displacement"
    assert info["metrics"] == {}


def test_wrapped_model_is_unwrapped_and_non_models_are_refused(tmp_path):
    class Wrapper(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    model = make_model()
    path = save_checkpoint(Wrapper(model), tmp_path / "w")
    assert "module.decoder.head.weight" not in load_file(str(path / WEIGHTS_FILE))
    with pytest.raises(CheckpointError, match="NeuROKModel"):
        save_checkpoint(torch.nn.Linear(2, 2), tmp_path / "x")
    with pytest.raises(CheckpointError, match="not JSON data"):
        save_checkpoint(model, tmp_path / "y", training={"bad": object()})


def test_missing_directory_and_files(tmp_path, saved):
    _, path = saved
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nowhere")
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        load_checkpoint(tmp_path / "file.txt")
    (path / WEIGHTS_FILE).unlink()
    with pytest.raises(CheckpointError, match=f"{WEIGHTS_FILE} is missing"):
        load_checkpoint(path)
    (path / CONFIG_FILE).unlink()
    with pytest.raises(CheckpointError, match=f"{CONFIG_FILE} is missing"):
        checkpoint_info(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a NeuROK checkpoint config"),
        ('{"format": "other"}', "not a NeuROK checkpoint config"),
        ('{"format": "neurok-checkpoint", "format_version": "1", "model": {}}', "invalid format"),
        ('{"format": "neurok-checkpoint", "format_version": 1}', "no 'model' config"),
    ],
)
def test_bad_config_json(saved, text, message):
    _, path = saved
    (path / CONFIG_FILE).write_text(text)
    with pytest.raises(CheckpointError, match=message) as err:
        load_checkpoint(path)
    assert CONFIG_FILE in str(err.value)


def test_newer_format_version_and_unknown_model_keys(saved):
    _, path = saved
    edit_config(path, format_version=FORMAT_VERSION + 1)
    with pytest.raises(CheckpointError, match="newer .* update NeuROK"):
        checkpoint_info(path)
    edit_config(path, format_version=FORMAT_VERSION)
    info = json.loads((path / CONFIG_FILE).read_text())
    edit_config(path, model={**info["model"], "dropout": 0.1})
    with pytest.raises(CheckpointError, match="unknown model config keys"):
        load_checkpoint(path)
    edit_config(path, model={**info["model"], "width": -3})
    with pytest.raises(CheckpointError, match="model config .* is invalid"):
        load_checkpoint(path)


def test_truncated_and_corrupted_weights(saved):
    _, path = saved
    data = (path / WEIGHTS_FILE).read_bytes()
    (path / WEIGHTS_FILE).write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(path)
    # Without a checksum, safetensors itself notices the truncation.
    info = json.loads((path / CONFIG_FILE).read_text())
    del info["weights_sha256"]
    (path / CONFIG_FILE).write_text(json.dumps(info))
    with pytest.raises(CheckpointError, match="not a readable safetensors file") as err:
        load_checkpoint(path)
    assert WEIGHTS_FILE in str(err.value)
    (path / WEIGHTS_FILE).write_bytes(b"\x00" * 64)
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        load_checkpoint(path)
    # A flipped byte in the tensor data is only visible to the checksum.
    corrupted = bytearray(data)
    corrupted[-10] ^= 0xFF
    (path / WEIGHTS_FILE).write_bytes(bytes(corrupted))
    edit_config(path, weights_sha256=hashlib.sha256(data).hexdigest())
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(path)


def test_missing_unexpected_misshapen_and_non_finite_tensors(saved):
    _, path = saved
    tensors = load_file(str(path / WEIGHTS_FILE))
    key = "decoder.head.weight"

    rewrite_weights(path, {k: v for k, v in tensors.items() if k != key})
    with pytest.raises(CheckpointError, match=f"missing tensors: {key}"):
        load_checkpoint(path)

    rewrite_weights(path, {**tensors, "decoder.extra": torch.zeros(2)})
    with pytest.raises(CheckpointError, match="unexpected tensors: decoder.extra"):
        load_checkpoint(path)

    rewrite_weights(path, {**tensors, key: torch.zeros(3, 5)})
    with pytest.raises(CheckpointError, match="shapes .* decoder.head.weight"):
        load_checkpoint(path)

    broken = tensors[key].clone()
    broken[0, 0] = float("nan")
    rewrite_weights(path, {**tensors, key: broken})
    with pytest.raises(CheckpointError, match="non-finite"):
        load_checkpoint(path)

    rewrite_weights(path, tensors)
    load_checkpoint(path)  # and the original tensors load again
