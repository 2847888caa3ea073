"""The dataset command: determinism, parallel workers, resume, manifest, rejects, CLI."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from neurok_core.errors import SequenceError
from neurok_core.sequence import load_sequence
from training.data import registry
from training.data.__main__ import main
from training.data.generate import (
    DatasetError,
    GenerateConfig,
    generate_dataset,
    sequence_rng,
    split_families,
)
from training.data.validation import check_sequence

FAMS = ("chest", "laptop", "wheel")


def config(out, **kw) -> GenerateConfig:
    base = dict(out=out, count=6, seed=3, workers=1, families=FAMS, frames=(24, 26), progress=False)
    return GenerateConfig(**{**base, **kw})


def arrays(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*.npz")):
        s = load_sequence(p)
        out[str(p.relative_to(root))] = (s.vertices, s.faces, s.parts)
    return out


def test_generate_parallel_resume_and_manifest(tmp_path):
    par, ser = tmp_path / "par", tmp_path / "ser"
    m = generate_dataset(config(par, workers=2))
    # manifest: balanced counts, statistics, settings
    assert m["count"] == 6 and m["this_run"]["written"] == 6 and m["this_run"]["kept"] == 0
    assert m["counts"]["per_family"] == {f: 2 for f in FAMS}
    assert m["counts"]["per_category"] == {"articulated": 6}
    assert m["rejects"]["total"] == 0 and m["missing"] == []
    assert m["seed"] == 3 and m["split"] == "train" and m["families"] == list(FAMS)
    assert m["generator_version"] and m["bytes_on_disk"] > 0 and m["mb_per_sequence"] > 0
    assert 24 <= m["frames"]["min"] <= m["frames"]["max"] <= 26
    assert m["vertices"]["min"] >= 100 and m["per_family"]["laptop"]["closed_fraction"] == 1.0
    on_disk = json.loads((par / "manifest.json").read_text())
    assert on_disk["count"] == 6 and len(on_disk["sequences"]) == 6
    # the files are valid sequences in per-family folders
    for rec in m["sequences"]:
        seq = load_sequence(par / rec["file"])
        check_sequence(seq)
        assert rec["file"].startswith(rec["family"] + "/")
        assert seq.num_vertices == rec["vertices"] and seq.num_frames == rec["frames"]
    # same seed in one process: identical arrays, whatever the number of workers
    generate_dataset(config(ser))
    a, b = arrays(par), arrays(ser)
    assert a.keys() == b.keys()
    for k in a:
        for x, y in zip(a[k], b[k], strict=True):
            assert np.array_equal(x, y)
    # resume: nothing new is written, files untouched
    mtimes = {p: p.stat().st_mtime_ns for p in par.rglob("*.npz")}
    again = generate_dataset(config(par, workers=2))
    assert again["this_run"]["written"] == 0 and again["this_run"]["kept"] == 6
    assert {p: p.stat().st_mtime_ns for p in par.rglob("*.npz")} == mtimes
    assert again["counts"] == m["counts"]
    # a damaged file is made again, identical to the original
    victim = par / m["sequences"][0]["file"]
    original = load_sequence(victim).vertices
    victim.write_bytes(b"not a zip")
    fixed = generate_dataset(config(par))
    assert fixed["this_run"]["written"] == 1
    assert np.array_equal(load_sequence(victim).vertices, original)


def test_seeds_and_splits_change_the_data(tmp_path):
    generate_dataset(config(tmp_path / "a", count=3))
    generate_dataset(config(tmp_path / "b", count=3, seed=4))
    generate_dataset(config(tmp_path / "v", count=3, split="val"))
    a, b, v = (arrays(tmp_path / n) for n in "abv")
    for other in (b, v):
        for k in a:
            assert a[k][0].shape != other[k][0].shape or not np.array_equal(a[k][0], other[k][0])
    r0, r1 = sequence_rng(0, "train", 5), sequence_rng(0, "val", 5)
    assert r0.random() != r1.random()


def test_resume_with_other_settings_is_refused(tmp_path):
    generate_dataset(config(tmp_path, count=3))
    with pytest.raises(DatasetError, match="other settings"):
        generate_dataset(config(tmp_path, count=3, seed=99))


def test_split_membership():
    train = {f.name for f in split_families("train")}
    unseen = {f.name for f in split_families("unseen")}
    assert {"scissors", "sliding_window"} <= unseen and not train & unseen
    assert {f.name for f in split_families("val")} == train
    with pytest.raises(DatasetError, match="not in split"):
        split_families("train", ("scissors",))
    with pytest.raises(DatasetError, match="unknown families"):
        split_families("train", ("no_such_family",))
    with pytest.raises(DatasetError, match="no families"):
        split_families("nonsense")


def _laptop(rng, frames):
    return registry.all_families()["laptop"].generate(rng, frames)


def _nan(rng, frames):
    s = _laptop(rng, frames)
    v = s.vertices.copy()
    v[frames // 2, 0, 0] = np.nan
    return replace(s, vertices=v)


def _bad_face(rng, frames):
    s = _laptop(rng, frames)
    f = s.faces.copy()
    f[0, 0] = s.num_vertices + 5
    return replace(s, faces=f)


def _exploded(rng, frames):
    s = _laptop(rng, frames)
    v = s.vertices.copy()
    v[-1, :10] *= 1000.0
    return replace(s, vertices=v)


def _raises(rng, frames):
    raise RuntimeError("the simulator diverged")


@pytest.fixture
def corrupt_families(monkeypatch):
    for name, fn in (
        ("bad_nan", _nan),
        ("bad_face", _bad_face),
        ("bad_exploded", _exploded),
        ("bad_raises", _raises),
    ):
        monkeypatch.setitem(
            registry._REGISTRY, name, registry.Family(name, "articulated", "train", fn)
        )
    return ("bad_exploded", "bad_face", "bad_nan", "bad_raises")


def test_rejects_are_counted_never_written(tmp_path, corrupt_families):
    names = corrupt_families
    m = generate_dataset(config(tmp_path, count=4, families=names, max_attempts=2))
    assert m["count"] == 0 and not list(tmp_path.rglob("*.npz"))
    assert m["rejects"]["total"] == 8 and len(m["missing"]) == 4
    per = m["rejects"]["per_family"]
    assert all(per[n]["count"] == 2 for n in names)

    def reasons(name):
        return " ".join(per[name]["reasons"])

    assert "NaN" in reasons("bad_nan")
    assert "face indices" in reasons("bad_face")
    assert "explosion" in reasons("bad_exploded") or "blow-up" in reasons("bad_exploded")
    assert "RuntimeError: the simulator diverged" in reasons("bad_raises")


def test_check_sequence_catches_bad_motion():
    s = _laptop(np.random.default_rng(0), 24)
    check_sequence(s)
    v = s.vertices.copy()
    v[1:] = v[1:] + 0.5 * (v[-1] - v[0])  # a jump right after frame 0
    with pytest.raises(SequenceError, match="frame 0"):
        check_sequence(replace(s, vertices=np.concatenate([s.vertices[:1], v[1:]])))
    with pytest.raises(SequenceError, match="nothing moves"):
        check_sequence(replace(s, vertices=np.repeat(s.vertices[:1], 24, axis=0)))
    v = s.vertices.copy()
    v[:, s.faces[0, 1]] = v[:, s.faces[0, 0]] + 1e-9 * (v[:, s.faces[0, 2]] - v[:, s.faces[0, 0]])
    with pytest.raises(SequenceError, match="degenerate"):
        check_sequence(replace(s, vertices=v))


def test_command_line(tmp_path, capsys):
    out = tmp_path / "unseen"
    rc = main(
        [
            "generate",
            "--out",
            str(out),
            "--count",
            "2",
            "--split",
            "unseen",
            "--families",
            "scissors,sliding_window",
            "--frames",
            "24",
            "--workers",
            "1",
            "--quiet",
        ]
    )
    assert rc == 0 and "2 sequences" in capsys.readouterr().out
    assert main(["stats", str(out)]) == 0
    text = capsys.readouterr().out
    assert "scissors" in text and "sliding_window" in text and "total" in text
    assert main(["preview", str(out), "--out", str(tmp_path / "sheet.png")]) == 0
    png = tmp_path / "sheet.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    assert main(["generate", "--out", str(out), "--count", "2", "--families", "scissors"]) == 2
    assert "not in split" in capsys.readouterr().err
