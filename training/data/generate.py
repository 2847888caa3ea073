"""Generate a dataset of 4D sequences: deterministic, parallel, resumable, with a manifest.

    python -m training.data generate --out DIR --count N --seed S --workers 2 --split train

Splits:
- ``train``: the families registered with split "train", per-sequence random streams of
  stream 0 of the seed.
- ``val``: the same families from a different random stream (stream 1), so no validation sequence
  repeats a training one, with the same seed or not.
- ``unseen`` (and any other split name a family registers): only the families registered with
  that split, e.g. the articulated families held out from training (see
  ``training.data.articulated``) and the held-out deformable scenarios. They measure
  generalisation to categories never seen in training.
Use one output folder per split (DIR/train, DIR/val, DIR/unseen).

Sequence i of a split is family ``families[i % F]`` (balanced over the split's families; F of
them, sorted by name) and gets its own generator, ``SeedSequence(seed, spawn_key=(stream, i,
attempt))``, so the result does not depend on the number of workers or on the order in which
they finish. A sequence that fails a check (``validation.check_sequence``) or whose generator
raises is a reject: it is counted in the manifest with its reason and never written; the slot
is retried with the next attempt's stream, up to ``max_attempts`` times. Files are written
atomically and a rerun skips every file that exists and loads, so an interrupted run resumes.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import sys
import time
import zlib
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from neurok_core.errors import NeuROKError, SequenceError
from neurok_core.sequence import load_sequence, save_sequence

from .manifest import build_manifest
from .registry import Family, all_families
from .validation import check_sequence

GENERATOR_VERSION = "1.0"
MANIFEST = "manifest.json"
_STREAMS = {"train": 0, "val": 1, "unseen": 2}


class DatasetError(NeuROKError, ValueError):
    """A dataset request that cannot be served (unknown family, mismatched resume, ...)."""


@dataclass(frozen=True)
class GenerateConfig:
    out: Path
    count: int
    seed: int = 0
    workers: int = 2
    split: str = "train"
    families: tuple[str, ...] = ()  # empty: every family of the split
    frames: tuple[int, int] = (24, 48)  # inclusive range of frames per sequence
    max_attempts: int = 3
    progress: bool = True


@dataclass(frozen=True)
class SlotTask:
    """Everything a worker needs to make sequence ``index`` (plain values: spawn-safe)."""

    path: str
    file: str
    family: str
    index: int
    within: int  # index among this family's sequences
    seed: int
    split: str
    frames: tuple[int, int]
    max_attempts: int


@dataclass
class SlotResult:
    file: str
    family: str
    status: str  # written, existing, failed
    record: dict = field(default_factory=dict)
    rejects: list[str] = field(default_factory=list)


def stream_of(split: str) -> int:
    return _STREAMS.get(split, 16 + zlib.crc32(split.encode()) % 65536)


def sequence_rng(seed: int, split: str, index: int, attempt: int = 0) -> np.random.Generator:
    """The random stream of one sequence slot (independent of workers and order)."""
    ss = np.random.SeedSequence(seed, spawn_key=(stream_of(split), index, attempt))
    return np.random.default_rng(ss)


def split_families(split: str, names: tuple[str, ...] = ()) -> list[Family]:
    """Families that make up ``split`` ("train" and "val" share the "train" families)."""
    registry = all_families()
    wanted = "train" if split in ("train", "val") else split
    members = [f for f in registry.values() if f.split == wanted]
    if not members:
        known = sorted({f.split for f in registry.values()} | {"val"})
        raise DatasetError(f"split {split!r} has no families; known splits: {known}")
    if names:
        unknown = [n for n in names if n not in registry]
        if unknown:
            raise DatasetError(f"unknown families {unknown}; known: {sorted(registry)}")
        outside = [n for n in names if registry[n].split != wanted]
        if outside:
            raise DatasetError(
                f"families {outside} are not in split {split!r} (they are held out or belong to"
                " another split); pick the matching --split"
            )
        members = [registry[n] for n in sorted(set(names))]
    return members


def plan(cfg: GenerateConfig) -> list[SlotTask]:
    fams = split_families(cfg.split, cfg.families)
    tasks = []
    for i in range(cfg.count):
        fam = fams[i % len(fams)]
        within = i // len(fams)
        file = f"{fam.name}/{fam.name}_{within:05d}.npz"
        tasks.append(
            SlotTask(
                str(Path(cfg.out) / file),
                file,
                fam.name,
                i,
                within,
                cfg.seed,
                cfg.split,
                cfg.frames,
                cfg.max_attempts,
            )
        )
    return tasks


def reject_reason(exc: BaseException) -> str:
    """A short, aggregatable reason: the exception type and its message without the name."""
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    msg = re.sub(r"^[\w./-]+: ", "", msg, count=1)
    return f"{type(exc).__name__}: {msg}"[:300]


def _record(seq, task: SlotTask, path: Path, attempt: int) -> dict:
    return {
        "file": task.file,
        "family": task.family,
        "category": seq.category,
        "name": seq.name,
        "frames": seq.num_frames,
        "vertices": seq.num_vertices,
        "faces": int(len(seq.faces)),
        "closed": bool(seq.closed),
        "bytes": path.stat().st_size,
        "index": task.index,
        "attempt": attempt,
    }


def run_slot(task: SlotTask) -> SlotResult:
    """Make (or find) one sequence; never raises for a bad sequence, returns it as rejects."""
    path = Path(task.path)
    if path.is_file():
        try:
            seq = load_sequence(path)
            return SlotResult(task.file, task.family, "existing", _record(seq, task, path, -1))
        except SequenceError:
            pass  # unreadable or invalid: make it again
    Path(str(path) + ".tmp.npz").unlink(missing_ok=True)  # left by an interrupted write
    fam = all_families()[task.family]
    rejects = []
    for attempt in range(task.max_attempts):
        rng = sequence_rng(task.seed, task.split, task.index, attempt)
        frames = int(rng.integers(task.frames[0], task.frames[1] + 1))
        try:
            seq = fam.generate(rng, frames)
            seq = replace(
                seq,
                name=f"{task.family}_{task.split}_{task.within:05d}",
                source=f"{seq.source} [{seq.name}] neurok-data {GENERATOR_VERSION} "
                f"seed={task.seed} split={task.split} index={task.index} attempt={attempt}",
            )
            if seq.num_frames != frames:
                raise SequenceError(f"asked for {frames} frames, got {seq.num_frames}")
            check_sequence(seq)
            save_sequence(seq, path)
        except Exception as exc:  # a failing generator is a reject, never a crashed run
            rejects.append(reject_reason(exc))
            continue
        return SlotResult(
            task.file, task.family, "written", _record(seq, task, path, attempt), rejects
        )
    return SlotResult(task.file, task.family, "failed", {}, rejects)


def _read_manifest(out: Path) -> dict | None:
    p = out / MANIFEST
    if not p.is_file():
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _check_resume(cfg: GenerateConfig, old: dict | None, fams: list[str]) -> None:
    if old is None:
        return
    mine = {
        "split": cfg.split,
        "seed": cfg.seed,
        "families": fams,
        "frames_range": list(cfg.frames),
        "generator_version": GENERATOR_VERSION,
    }
    theirs = {k: old.get(k) for k in mine}
    if theirs != mine:
        diff = {k: (theirs[k], mine[k]) for k in mine if theirs[k] != mine[k]}
        raise DatasetError(
            f"{cfg.out} holds a dataset made with other settings {diff} (old, new); resume with"
            " the same --split/--seed/--families/--frames or write to a new --out folder"
        )


def _run_all(tasks: list[SlotTask], workers: int, progress: bool):
    bar = tqdm(
        total=len(tasks),
        desc="generate",
        unit="seq",
        disable=not progress,
        file=sys.stderr,
        dynamic_ncols=True,
    )
    counts = Counter()
    try:
        if workers <= 1:
            results = map(run_slot, tasks)
            yield from _progress(results, bar, counts)
        else:
            saved = {k: os.environ.get(k) for k in _THREAD_VARS}
            os.environ.update({k: "1" for k in _THREAD_VARS})  # one BLAS thread per worker
            try:
                pool = mp.get_context("spawn").Pool(workers)
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            with pool:
                yield from _progress(pool.imap_unordered(run_slot, tasks), bar, counts)
    finally:
        bar.close()


_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _progress(results, bar, counts):
    for r in results:
        counts[r.status] += 1
        counts["rejects"] += len(r.rejects)
        bar.update(1)
        bar.set_postfix(
            new=counts["written"],
            kept=counts["existing"],
            rejects=counts["rejects"],
            failed=counts["failed"],
            refresh=False,
        )
        yield r


def generate_dataset(cfg: GenerateConfig) -> dict:
    """Generate (or complete) the dataset described by ``cfg``; returns the manifest."""
    if cfg.count < 1:
        raise DatasetError(f"--count must be at least 1, got {cfg.count}")
    if not 2 <= cfg.frames[0] <= cfg.frames[1]:
        raise DatasetError(f"frames must be a range lo-hi with 2 <= lo <= hi, got {cfg.frames}")
    out = Path(cfg.out)
    fams = [f.name for f in split_families(cfg.split, cfg.families)]
    old = _read_manifest(out)
    _check_resume(cfg, old, fams)
    out.mkdir(parents=True, exist_ok=True)
    tasks = plan(cfg)
    start = time.perf_counter()
    results = sorted(_run_all(tasks, cfg.workers, cfg.progress), key=lambda r: r.file)
    wall = time.perf_counter() - start
    previous = {r["file"]: r for r in (old or {}).get("sequences", [])}
    for r in results:  # a kept file keeps the record (and the rejects) of the run that made it
        if r.status == "existing" and r.file in previous:
            r.record = {**previous[r.file], "bytes": r.record["bytes"]}
            r.rejects = list(previous[r.file].get("rejects", []))
    manifest = build_manifest(cfg, fams, results, wall, GENERATOR_VERSION)
    tmp = out / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1))
    os.replace(tmp, out / MANIFEST)
    return manifest


def config_dict(cfg: GenerateConfig) -> dict:
    d = asdict(cfg)
    d["out"] = str(cfg.out)
    return d
