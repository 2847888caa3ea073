"""Evaluation: the inverse-kinematics table of design section 6 (the paper's Table 1 and its
ablations) on folders of 4D sequences, and the plausibility of generated motion.

    python -m training.eval.evaluate --data DIR [--data DIR2 ...] --checkpoint CKPT \
        [--ablation displacement=CKPT2 --ablation no_augmentation=CKPT3] --out results.json \
        [--figures DIR] [--max-per-family N] [--targets 4] [--ik-steps 150 --ik-restarts 8] \
        [--methods neurok,rigid,...] [--motion/--no-motion] [--seed 0]

Sequences: every ``.npz`` of each ``--data`` folder (``FAMILY/*.npz`` or flat), at most
``--max-per-family`` per family, evenly spaced in file order. The IK task (rows = methods,
columns = categories) is described in :mod:`training.eval.ik`, the baselines in
:mod:`training.eval.baselines`. Motion (:mod:`training.eval.motion`): the first
``--motion-per-category`` sequences of each category are simulated by the ``--motion-methods``
checkpoints under fixed standard conditions. Prints one IK table (and one motion table) per data
folder; ``--out`` gets every raw number, the summaries, the settings, the checkpoints' SHA-256
and the timings; ``--figures`` the PNGs of :mod:`training.eval.plots`.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from neurok_core.errors import NeuROKError
from neurok_core.ik import IKSettings
from neurok_core.metrics import DEFAULT_SAMPLES
from neurok_core.rigspace.ik import RigIKSettings
from neurok_core.sequence import load_sequence
from neurok_core.space import SpaceSettings

from .baselines import BASELINES, BaselineSettings
from .ik import (
    FULL_LATENT,
    MAIN,
    RIG_METHODS,
    IKTask,
    Models,
    SequenceSpaces,
    find_sequences,
    fit_targets,
    resolve_methods,
    select_sequences,
)
from .motion import RUNS, evaluate_motion, ground_truth_scores
from .report import format_motion_table, format_table, jsonable, summarize, summarize_motion


@dataclass(frozen=True)
class EvalSettings:
    """Everything that fixes the numbers (stored in the JSON)."""

    task: IKTask = field(default_factory=IKTask)
    max_per_family: int | None = None
    motion: bool = True
    motion_per_category: int = 2
    motion_frames: int = 24
    motion_timeout: float = 60.0
    motion_runs: tuple[str, ...] = RUNS
    motion_methods: tuple[str, ...] = (MAIN,)
    figure_examples: int = 2


def simulate_sequence(seq, family, methods, spaces: SequenceSpaces, settings, *, damped: bool):
    """The motion record of ``seq`` (standard conditions, every simulated row) and the
    simulations of the main model (run name -> SimulationResult) for the figures."""
    record = {
        "sequence": seq.name,
        "family": family,
        "category": seq.category,
        "ground_truth": ground_truth_scores(seq),
        "methods": {},
    }
    sims = {}
    for method in settings.motion_methods:
        if method not in methods or method in (*BASELINES, *RIG_METHODS, FULL_LATENT):
            continue  # only checkpoints with a reduced space are simulated
        scores, results = evaluate_motion(
            spaces.get(method),
            seq,
            settings.motion_frames,
            runs=settings.motion_runs,
            timeout=settings.motion_timeout,
            damped=damped and method == MAIN,
        )
        record["methods"][method] = scores
        if method == MAIN:
            sims = results
    return record, sims


def _log(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def run_dataset(root, methods, models, settings: EvalSettings, *, figures: bool, quiet: bool):
    """Evaluate one data folder -> (its JSON section, the examples for the figures)."""
    root = Path(root)
    chosen = select_sequences(find_sequences(root), settings.max_per_family)
    targets, motions, examples = [], [], []
    simulated: dict[str, int] = {}
    shown: dict[str, int] = {}
    timing = {"space": 0.0, "fit": 0.0, "score": 0.0, "motion": 0.0}
    started = time.perf_counter()
    for i, (family, path) in enumerate(chosen):
        t0 = time.perf_counter()
        seq = load_sequence(path)
        cat = seq.category
        spaces = SequenceSpaces(models, seq, settings.task.space, settings.task.rig)
        records, last_fits = fit_targets(seq, family, methods, spaces, settings.task, timing)
        targets.extend(records)
        keep = figures and shown.get(cat, 0) < settings.figure_examples
        sims = {}
        if settings.motion and simulated.get(cat, 0) < settings.motion_per_category:
            t1 = time.perf_counter()
            damped = keep and not any("damped" in ex["simulations"] for ex in examples)
            record, sims = simulate_sequence(seq, family, methods, spaces, settings, damped=damped)
            motions.append(record)
            simulated[cat] = simulated.get(cat, 0) + 1
            timing["motion"] += time.perf_counter() - t1
        timing["space"] += spaces.seconds
        if keep:
            frame = records[-1]["frame"]
            examples.append(
                {"sequence": seq, "frame": frame, "fits": last_fits, "simulations": sims}
            )
            shown[cat] = shown.get(cat, 0) + 1
        _log(
            quiet,
            f"[{root.name} {i + 1}/{len(chosen)}] {seq.name} ({cat}, {seq.num_vertices} "
            f"vertices): {time.perf_counter() - t0:.1f} s",
        )
    timing["total"] = time.perf_counter() - started
    section = {
        "folder": str(root),
        "name": root.name,
        "sequences": len(chosen),
        "targets": targets,
        "summary": summarize(targets, methods),
        "motion": motions,
        "motion_summary": {m: summarize_motion(motions, m) for m in settings.motion_methods},
        "seconds": {k: round(v, 2) for k, v in timing.items()},
    }
    return section, examples


def print_section(section: dict, methods: list[str]) -> None:
    title = (
        f"\n{section['name']}: {section['sequences']} sequences, {len(section['targets'])} "
        "targets (inverse kinematics; normalised frame of M0)"
    )
    print(format_table(section["summary"], methods, title))
    for method, summary in section["motion_summary"].items():
        if summary:
            print(format_motion_table(summary, f"\n{section['name']}: motion of {method}"))
    sys.stdout.flush()


# --------------------------------------------------------------------------------------------
# Command line


def _ablation(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not path or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise argparse.ArgumentTypeError(f"--ablation wants NAME=CHECKPOINT, got {text!r}")
    return name, path


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m training.eval.evaluate", description=__doc__.split("\n\n")[0]
    )
    add = p.add_argument
    add("--data", action="append", required=True, help="folder of sequences (repeatable)")
    add("--checkpoint", required=True, help="the model evaluated as the 'neurok' row")
    add("--ablation", action="append", type=_ablation, default=[], metavar="NAME=CKPT",
        help="another checkpoint as its own row, e.g. displacement=runs/x/checkpoint")  # fmt: skip
    add("--out", required=True, help="results JSON")
    add("--figures", help="folder for the PNG figures (default: none)")
    add("--methods", help="comma-separated rows (default: all available)")
    add("--max-per-family", type=int, help="sequences per family (default: all)")
    add("--targets", type=int, default=4, help="target frames per sequence")
    add("--target-points", type=int, default=2048, help="points sampled on each target")
    add("--samples", type=int, default=DEFAULT_SAMPLES, help="surface/volume samples of a metric")
    add("--ik-steps", type=int, default=150, help="Adam steps per start (every method)")
    add("--ik-restarts", type=int, default=8, help="starts per target (every method)")
    add("--ik-points", type=int, default=512, help="samples of M0 in the loss (every method)")
    add("--rig-prior-weight", type=float, default=RigIKSettings.prior_weight,
        help="weight of the learned prior's energy in the 'rig' row")  # fmt: skip
    add("--arap-weight", type=float, default=BaselineSettings.arap_weight,
        help="weight of the ARAP energy in the per_vertex_arap baseline")  # fmt: skip
    add("--motion", action=argparse.BooleanOptionalAction, default=True,
        help="simulate the standard conditions (default: on)")  # fmt: skip
    add("--motion-per-category", type=int, default=2, help="simulated sequences per category")
    add("--motion-frames", type=int, default=24, help="frames per simulation")
    add("--motion-timeout", type=float, default=60.0, help="seconds per simulation")
    add("--motion-runs", default=",".join(RUNS), help="standard runs (force, undamped, drag)")
    add("--motion-methods", default=MAIN, help="checkpoint rows to simulate (comma-separated)")
    add("--figure-examples", type=int, default=2, help="IK examples per category in figures")
    add("--device", default="cpu", help="cpu, cuda, mps or auto")
    add("--cache-dir", help="kinematic-space cache (default: the engine's)")
    add("--no-cache", action="store_true", help="rebuild every kinematic space")
    add("--seed", type=int, default=0)
    add("--quiet", action="store_true", help="no progress lines")
    return p


def _names(text: str, allowed, flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise NeuROKError(f"{flag}: unknown {', '.join(unknown)}; choose from {', '.join(allowed)}")
    return names


def settings_from_args(args) -> EvalSettings:
    for name in ("targets", "target_points", "samples", "ik_steps", "ik_restarts", "ik_points"):
        if getattr(args, name) < 1:
            raise NeuROKError(f"--{name.replace('_', '-')} must be at least 1")
    budget = dict(steps=args.ik_steps, restarts=args.ik_restarts, points=args.ik_points)
    task = IKTask(
        targets=args.targets,
        target_points=args.target_points,
        samples=args.samples,
        ik=IKSettings(**budget, seed=args.seed),
        rig=RigIKSettings(**budget, seed=args.seed, prior_weight=args.rig_prior_weight),
        baseline=BaselineSettings(**budget, seed=args.seed, arap_weight=args.arap_weight),
        space=replace(SpaceSettings(), seed=args.seed),
        seed=args.seed,
    )
    return EvalSettings(
        task=task,
        max_per_family=args.max_per_family,
        motion=args.motion,
        motion_per_category=args.motion_per_category,
        motion_frames=args.motion_frames,
        motion_timeout=args.motion_timeout,
        motion_runs=_names(args.motion_runs, RUNS, "--motion-runs"),
        motion_methods=tuple(m for m in args.motion_methods.split(",") if m),
        figure_examples=args.figure_examples,
    )


def evaluate(args, command: str | None = None) -> dict[str, Any]:
    """Run the evaluation of parsed ``args``; returns the report (also written to --out).
    command: the command line, kept in the report (what ``training.eval.record`` cites)."""
    import torch

    from . import plots as eval_plots

    started = time.perf_counter()
    settings = settings_from_args(args)
    ablations = dict(args.ablation)
    clash = set(ablations) & {MAIN, FULL_LATENT, *RIG_METHODS, *BASELINES}
    if clash:
        raise NeuROKError(f"--ablation name(s) {', '.join(sorted(clash))} are taken by other rows")
    methods = resolve_methods(args.methods.split(",") if args.methods else None, ablations)
    _names(",".join(settings.motion_methods), [MAIN, *ablations], "--motion-methods")
    for root in args.data:  # fail early, before loading anything
        find_sequences(root)
    checkpoints = {MAIN: args.checkpoint, **ablations}
    needed = {Models.checkpoint_of(m) for m in methods} - {None}
    cache = False if args.no_cache else args.cache_dir
    models = Models({k: v for k, v in checkpoints.items() if k in needed}, args.device, cache)
    figures = Path(args.figures) if args.figures else None
    report: dict[str, Any] = {
        "command": command,
        "settings": asdict(settings) | {"methods": methods, "device": args.device},
        "checkpoints": models.describe(),
        "torch": torch.__version__,
        "datasets": [],
        "figures": [],
    }
    for root in args.data:
        section, examples = run_dataset(
            root, methods, models, settings, figures=figures is not None, quiet=args.quiet
        )
        report["datasets"].append(section)
        print_section(section, methods)
        if figures is not None:
            paths = eval_plots.dataset_figures(section["name"], examples, methods, figures)
            report["figures"] += [str(p) for p in paths]
    if figures is not None:
        used = {k: v for k, v in checkpoints.items() if k in needed}
        report["figures"] += [str(p) for p in eval_plots.training_figures(used, figures)]
    report["seconds"] = round(time.perf_counter() - started, 2)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(jsonable(report), indent=1, allow_nan=False) + "\n")
    print(f"\nwrote {out} ({report['seconds']:.0f} s)")
    return report


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    words = sys.argv[1:] if argv is None else argv
    try:
        evaluate(args, command="python -m training.eval.evaluate " + shlex.join(words))
    except NeuROKError as exc:
        print(f"evaluate: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
