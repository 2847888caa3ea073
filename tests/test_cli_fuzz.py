"""``neurok simulate`` on seeded random meshes and conditions (:mod:`fuzz_meshes`), as a user
runs it: a process per run, the bundled model on the latent path, none on the rig path.

Every run must end, within its ``--time-limit`` and a margin for starting Python and torch, with
exit 0 and a result, or exit 2 and one line that begins ``neurok: error:`` and nothing written
(but for a run stopped by its time limit: the frames it finished); never a traceback.
A result holds every frame asked for, every vertex of the file in its order (frame 0 is the
file's vertices to float32 rounding, vertices no face uses never move) and finite numbers only.

A failure names each failing seed and the command that reproduces it
(``python tests/fuzz_meshes.py SEED FOLDER`` writes the mesh and prints the command).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from fuzz_meshes import FuzzCase, fuzz_case

from neurok_core.pc2 import read_pc2

SEEDS = range(32)  # per dynamics: about a minute each on 2 busy cores
TIME_LIMIT = 20.0  # --time-limit of every run, seconds (docs/testing.md)
STARTUP = 40.0  # more for the process: Python, torch and the model's load on a busy machine
WORKERS = 2


def run_case(case: FuzzCase, dynamics: str, folder: Path) -> tuple[list[str], float, list[str]]:
    """Run ``case`` through ``neurok simulate`` in its own process; (what is wrong with the run,
    empty if nothing, its wall time in seconds, the command line)."""
    out_suffix = ".pc2" if case.seed % 2 else ".npz"
    args = case.write(folder, out_suffix)
    command = [sys.executable, "-m", "neurok_core.cli", "simulate", *args]
    command += ["--dynamics", dynamics, "--time-limit", f"{TIME_LIMIT:g}", "--device", "cpu"]
    command += ["--cache-dir", str(folder / "cache")]
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    started = time.monotonic()
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=TIME_LIMIT + STARTUP, env=env
        )
    except subprocess.TimeoutExpired:
        wall = time.monotonic() - started
        return [f"still running after {wall:.0f} s (--time-limit {TIME_LIMIT:g})"], wall, command
    wall = time.monotonic() - started
    return problems(case, proc, Path(args[2])), wall, command


def _frames(out: Path) -> np.ndarray:
    """The positions (T, N, 3) a run wrote to ``out`` (.pc2 or .npz)."""
    if out.suffix == ".pc2":
        return read_pc2(out).frames
    with np.load(out, allow_pickle=False) as data:
        return data["positions"]


def problems(case: FuzzCase, proc: subprocess.CompletedProcess, out: Path) -> list[str]:
    """What is wrong with a finished run of ``case`` that wrote (or not) ``out``."""
    text = proc.stdout + proc.stderr
    found = []
    if "Traceback" in text:
        found.append("a traceback: " + " | ".join(text.strip().splitlines()[-3:]))
    if proc.returncode == 2:
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        if len(lines) != 1 or not lines[0].startswith("neurok: error:"):
            found.append(f"exit 2 without one 'neurok: error:' line: {lines[-3:]}")
        partial = re.search(r"holds its first (\d+) frames", proc.stderr)
        if partial is None and out.exists():
            found.append(f"exit 2, yet {out.name} was written")
        elif partial is not None:  # stopped by the time limit: the frames it finished
            frames = _frames(out) if out.exists() else None
            count = int(partial.group(1))
            if frames is None or frames.shape != (count, case.file_vertices, 3):
                found.append(f"the time limit's {count} frames, yet {out.name} holds {frames}")
            elif not np.isfinite(frames).all():
                found.append("non-finite positions in the frames written at the time limit")
        return found
    if proc.returncode != 0:
        return [*found, f"exit {proc.returncode}: " + " | ".join(text.strip().splitlines()[-3:])]
    if not out.exists():
        return [*found, f"exit 0 without {out.name}"]
    frames = _frames(out)
    if frames.shape != (case.frames, case.file_vertices, 3):
        found.append(f"frames {frames.shape}, expected {(case.frames, case.file_vertices, 3)}")
        return found
    if not np.isfinite(frames).all():
        found.append("non-finite positions")
    rest = case.vertices.astype(np.float32)
    if np.abs(frames[0] - rest).max() > 1e-5 * np.abs(rest).max():  # float32, within 100 ulp
        found.append("frame 0 is not the file's vertices in the file's order")
    loose = np.setdiff1d(np.arange(case.file_vertices), case.faces)
    if len(loose) and not (frames[:, loose] == rest[loose]).all():
        found.append(f"vertices in no face moved ({len(loose)} of them)")
    return found


def fuzz(dynamics: str, folder: Path) -> None:
    """Run every seed (``WORKERS`` at a time) and fail with all that went wrong."""

    def one(seed: int):
        case = fuzz_case(seed)
        (folder / str(seed)).mkdir()
        return case, *run_case(case, dynamics, folder / str(seed))

    with ThreadPoolExecutor(WORKERS) as pool:
        runs = list(pool.map(one, SEEDS))
    walls = ", ".join(f"{case.seed}: {wall:.1f}" for case, _, wall, _ in runs)
    print(f"{dynamics}: seconds per seed {walls}")
    failures = [
        f"{case.describe()}\n  {'; '.join(found)}\n  command: {' '.join(command)}\n  the mesh"
        f" again: python tests/fuzz_meshes.py {case.seed} FOLDER"
        for case, found, _, command in runs
        if found
    ]
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_latent_dynamics_survive_random_meshes_and_conditions(tmp_path):
    fuzz("latent", tmp_path)


@pytest.mark.slow
def test_rig_dynamics_survive_random_meshes_and_conditions(tmp_path):
    fuzz("rig", tmp_path)


def test_the_fuzz_cases_are_seeded_and_cover_what_they_promise():
    """The same seed gives the same case; over the seeds the cases span 4 to 5,000 vertices,
    1 mm to 1 km, every file format, loose vertices, duplicate and degenerate faces."""
    a, b = fuzz_case(3), fuzz_case(3)
    assert a.options == b.options and np.array_equal(a.vertices, b.vertices)
    cases = [fuzz_case(seed) for seed in range(200)]
    counts = [c.file_vertices for c in cases]
    assert min(counts) <= 8 and max(counts) >= 2_000 and max(counts) <= 6_000
    sizes = [np.ptp(c.vertices[np.unique(c.faces)], axis=0).max() for c in cases]
    assert min(sizes) < 3e-3 and max(sizes) > 300
    assert {c.suffix for c in cases} == {".obj", ".ply", ".stl"}
    assert any(len(np.setdiff1d(np.arange(c.file_vertices), c.faces)) for c in cases)
    assert any(len(np.unique(np.sort(c.faces, 1), axis=0)) < len(c.faces) for c in cases)
    assert any((np.diff(np.sort(c.faces, 1), axis=1) == 0).any() for c in cases)
    options = " ".join(" ".join(c.options) for c in cases)
    for flag in ("--force", "--pin", "--pin-below", "--stiffness", "--damping", "--gravity"):
        assert f"{flag} " in options
    for flag in ("--no-gravity", "--ground", "--velocity", "--drag", "--mass", "--fps"):
        assert f"{flag}" in options
