"""The plausibility benchmark: standard scenes an artist would try, simulated and scored.

    python -m training.eval.scenes --out DIR [--dynamics rig|latent] [--checkpoint CKPT]
        [--scenes laptop,flag,...] [--frames 48] [--no-undamped] [--undamped-fps 12]
        [--timeout 120] [--threads 1] [--setting NAME=VALUE ...] [--space NAME=VALUE ...]

Every scene of :mod:`training.eval.scene_specs` (its mesh from
:mod:`training.eval.scene_meshes`) is simulated in the rig space (``--dynamics rig``, the
default: design section 12, no model), or with ``--dynamics latent`` in the kinematic space
of the checkpoint (no cache, so the timings are those of a first run), for ``frames`` frames
and, unless ``--no-undamped``, once more undamped for 10 s of animation at ``--undamped-fps``
(12 by default, to keep the benchmark short), and is scored by
:func:`training.eval.scene_metrics.score_motion`. Prints one row per scene and writes
``scenes.json`` (every score, condition, timing, the checkpoint and the versions) and
``contact_sheet.png`` (:mod:`training.eval.scene_sheet`) into ``--out``. A run that fails is
reported with its error; one that times out is scored on the frames it made and fails its
targets.
``--setting`` / ``--space`` override fields of the latent engine's ``DynamicsSettings`` (the
rig space's ``RigSettings`` with ``--dynamics rig``, e.g. ``--setting cloth_step=quasi-newton``)
/ ``SpaceSettings`` (e.g. ``--setting shape_keeping_hz=0``), recorded in the JSON.
One torch thread by default: the model's matrices are small, and it leaves the other cores free.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from neurok_core.dynamics import SimulationConditions

from ..options import add_setting_option
from .scene_meshes import BUILDERS, SceneMesh
from .scene_metrics import score_motion
from .scene_scaling import scaled_conditions, scaled_mesh
from .scene_specs import (
    FPS,
    SCENES,
    UNDAMPED_SECONDS,
    check_targets,
    lookup,
    scene_conditions,
    undamped_conditions,
)


def _run(space, conditions: SimulationConditions, timeout: float, settings=None, method="rig"):
    """(result or None, info): ``motion.run_simulation`` that also reports unexpected
    errors (any exception) instead of raising them."""
    from .motion import run_simulation

    started = time.perf_counter()
    try:
        result, info = run_simulation(space, conditions, timeout, settings, method)
    except Exception as exc:  # a benchmark reports every failure and goes on
        result, info = None, {"error": f"{type(exc).__name__}: {exc}"}
        info["seconds"] = round(time.perf_counter() - started, 3)
    info["complete"] = result is not None and len(result.positions) == conditions.frames
    return result, info


def scene_obstacles(mesh: SceneMesh):
    """The scene's ground and colliders for scoring (exact distances), or None."""
    if mesh.ground is None and not mesh.colliders:
        return None
    from neurok_core.dynamics.obstacles import MeshDistance, Obstacles

    size = mesh.size
    meshes = [MeshDistance(v, f, size / 100, 0.1 * size, name) for name, v, f in mesh.colliders]
    return Obstacles(mesh.ground, meshes)


def _thickness(info: dict) -> float:
    """The collision thickness (m) a run reports (a cloth's), 0 where it keeps none."""
    space = info.get("space")
    return float(space.get("thickness") or 0.0) if isinstance(space, dict) else 0.0


def _score(name: str, mesh: SceneMesh, cond: SimulationConditions, result) -> dict:
    s = SCENES[name]
    drag = None
    if cond.drags:
        drag = (cond.drags[0].vertex, cond.drags[0].target, cond.drags[0].frame)
    return score_motion(
        mesh.vertices,
        result.positions,
        mesh.faces,
        mesh.parts,
        mesh.pins,
        strain=s.strain,
        volume=s.volume,
        hinge=mesh.hinge,
        drag=drag,
        obstacles=scene_obstacles(mesh),
        fps=cond.fps,
        thickness=_thickness(result.info),
    )


def run_scene(
    engine,
    name: str,
    frames: int,
    *,
    undamped: bool = True,
    undamped_fps: float = 12.0,
    timeout: float = 120.0,
    dynamics=None,
    space_settings=None,
    method: str = "rig",
    size: float | None = None,
) -> tuple[dict, SceneMesh, Any]:
    """Build, simulate and score scene ``name``: ``method`` "rig" (the default) in the rig
    space (no engine needed: None; ``dynamics`` a ``RigSettings`` or None), "latent" with a
    loaded ``engine`` (``NeuROK``) and optional ``DynamicsSettings`` / ``SpaceSettings``.
    ``size`` (metres): the scene scaled to that size (``scene_scaling``; None: as built).
    Returns (JSON record, the scene's mesh, SimulationResult of the main run or None)."""
    built = BUILDERS[name]()
    scale = 1.0 if size is None else float(size) / built.size
    mesh = scaled_mesh(built, scale) if size is not None else built
    record: dict[str, Any] = {"mesh": _describe(mesh)}
    started = time.perf_counter()
    try:
        cond = scene_conditions(name, built, frames)
        if size is not None:
            cond = scaled_conditions(cond, scale)
        record["conditions"] = cond.to_dict()
        if method == "rig":
            space = MeshOnly(mesh.vertices, mesh.faces)
            record["space"] = {"kind": "rig"}
        else:
            space = engine.space(
                mesh.vertices, mesh.faces, settings=space_settings, cache_dir=False
            )
            record["space"] = {
                "seconds": round(time.perf_counter() - started, 3),
                "reduced_dims": int(space.reduced_dims),
            }
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["targets"], record["pass"] = {}, False
        return record, mesh, None
    result, record["run"] = _run(space, cond, timeout, dynamics, method)
    try:
        scores = _score(name, mesh, cond, result) if result is not None else {}
    except Exception as exc:  # a score that cannot be computed fails the scene, not the run
        scores = {"error": f"{type(exc).__name__}: {exc}"}
    record["scores"] = scores
    if undamped:
        ucond = undamped_conditions(name, built, undamped_fps)
        if size is not None:
            ucond = scaled_conditions(ucond, scale)
        uresult, uinfo = _run(space, ucond, timeout, dynamics, method)
        if uresult is not None:
            uinfo["energy_drift"] = score_motion(
                mesh.vertices,
                uresult.positions,
                mesh.faces,
                pins=mesh.pins,
                energy=uresult.energy,
            )["energy_drift"]
            uinfo["simulated_seconds"] = float(uresult.times[-1])
        record["undamped"] = {"conditions": ucond.to_dict(), **uinfo}
    record["targets"] = check_targets(
        name,
        scores,
        record.get("undamped"),
        complete=record["run"]["complete"],
        pinned=len(mesh.pins) > 0,
    )
    record["pass"] = bool(record["targets"]) and all(t["pass"] for t in record["targets"].values())
    record["seconds"] = round(time.perf_counter() - started, 3)
    return record, mesh, result


class MeshOnly(NamedTuple):
    """What the rig space needs of a scene: its mesh."""

    vertices: np.ndarray
    faces: np.ndarray


def _describe(mesh: SceneMesh) -> dict:
    return {
        "vertices": len(mesh.vertices),
        "faces": len(mesh.faces),
        "pins": len(mesh.pins),
        "size_m": mesh.size,
        "category": mesh.category,
        "closed": mesh.closed,
        "parts": sorted(int(p) for p in np.unique(mesh.parts[mesh.parts >= 0])),
        "landmarks": mesh.landmarks,
        "hinge": None if mesh.hinge is None else vars(mesh.hinge),
    }


def _versions() -> dict:
    import torch
    import trimesh

    out = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "trimesh": trimesh.__version__,
    }
    try:
        out["neurok"] = metadata.version("neurok")
    except metadata.PackageNotFoundError:
        out["neurok"] = None
    return out


def run_scenes(
    checkpoint=None,
    names=None,
    frames: int = 48,
    *,
    undamped: bool = True,
    undamped_fps: float = 12.0,
    timeout: float = 120.0,
    threads: int | None = None,
    out_dir=None,
    log=print,
    dynamics=None,
    space_settings=None,
    method: str = "rig",
    size: float | None = None,
) -> dict:
    """Run the scenes ``names`` (None: all, in ``SCENES`` order) in the rig space, or with
    ``method`` "latent" with ``checkpoint`` (None: the bundled model), and return the report
    (JSON data: every score, condition, timing, the checkpoint (None in the rig space) and the
    versions). With ``out_dir``, also write ``scenes.json`` and ``contact_sheet.png`` there.
    ``log`` gets one line per scene."""
    import torch

    from neurok_core.api import NeuROK, default_checkpoint

    from .scene_sheet import SheetRow, contact_sheet

    names = list(SCENES) if names is None else list(names)
    unknown = [n for n in names if n not in SCENES]
    if unknown:
        raise ValueError(f"unknown scene(s) {', '.join(unknown)}; choose from {', '.join(SCENES)}")
    if threads:
        torch.set_num_threads(int(threads))
    started = time.perf_counter()
    engine = NeuROK.load(checkpoint, device="cpu") if method == "latent" else None
    report: dict[str, Any] = {
        "method": method,
        "checkpoint": (
            str(Path(checkpoint) if checkpoint else default_checkpoint()) if engine else None
        ),
        "weights_sha256": engine.info.get("weights_sha256") if engine else None,
        "versions": _versions(),
        "settings": {
            "frames": frames,
            "fps": FPS,
            "undamped": undamped,
            "undamped_fps": undamped_fps,
            "undamped_seconds": UNDAMPED_SECONDS,
            "timeout_s": timeout,
            "threads": torch.get_num_threads(),
            "dynamics": None if dynamics is None else dataclasses.asdict(dynamics),
            "space": None if space_settings is None else dataclasses.asdict(space_settings),
            "size_m": size,
        },
        "scenes": {},
    }
    rows = []
    for name in names:
        record, mesh, result = run_scene(
            engine,
            name,
            frames,
            undamped=undamped,
            undamped_fps=undamped_fps,
            timeout=timeout,
            dynamics=dynamics,
            space_settings=space_settings,
            method=method,
            size=size,
        )
        report["scenes"][name] = record
        log(f"{name}: {'pass' if record['pass'] else 'FAIL'} ({record.get('seconds', 0):.1f} s)")
        cond = record.get("conditions", {})
        grabbed = (*cond.get("forces", ()), *cond.get("drags", ()), *cond.get("velocities", ()))
        marked = tuple(c["vertex"] for c in grabbed if c.get("vertex") is not None)
        targets = np.array([d["target"] for d in cond.get("drags", ())]).reshape(-1, 3)
        positions = None if result is None else result.positions
        note = "; ".join(record_errors(record))
        colliders = tuple((v, f) for _, v, f in mesh.colliders)
        rows.append(
            SheetRow(
                name,
                mesh.faces,
                positions,
                mesh.pins,
                marked,
                targets,
                note,
                mesh.ground,
                colliders,
            )
        )
    report["wall_seconds"] = round(time.perf_counter() - started, 2)
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "scenes.json").write_text(json.dumps(report, indent=1, default=_jsonable))
        contact_sheet(rows, out / "contact_sheet.png")
    return report


def record_errors(record: dict) -> list[str]:
    """The errors of a scene's record: building it, its run, its scores, its undamped run."""
    found = [("", record.get("error"))]
    found += [(f"{k}: ", record.get(k, {}).get("error")) for k in ("run", "scores", "undamped")]
    return [f"{where}{text}" for where, text in found if text]


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --------------------------------------------------------------------------------------------
# The table

COLUMNS = (
    ("motion", "motion", "{:.3f}"),
    ("part res", "part_residual", "{:.4f}"),
    ("turn max/fin", ("turn_max_deg", "turn_final_deg"), "{:.0f}"),
    ("closing", "closing_max_deg", "{:.0f}"),
    ("strain mean/max", ("edge_strain.mean", "edge_strain.max"), "{:.3f}"),
    ("vol min/max", ("volume_ratio.min", "volume_ratio.max"), "{:.3f}"),
    ("pin drift", "pinned_drift", "{:.1e}"),
    ("drag miss", "drag_miss", "{:.3f}"),
    ("depth obst/parts", ("penetration", "penetration_parts"), "{:.3f}"),
    ("drape", "drape", "{:.2f}"),
    ("E drift", "energy_drift", "{:.1e}"),
)
ALIASES = {"motion": ("moves",)}  # targets shown in another score's column


def _cell(scores: dict, targets: dict, keys, fmt: str) -> str:
    keys = (keys,) if isinstance(keys, str) else keys
    values = [lookup(scores, k) for k in keys]
    if all(v is None for v in values):
        return "-"
    text = "/".join("-" if v is None else fmt.format(v) for v in values)
    names = [t for k in keys for t in (k, *ALIASES.get(k, ()))]
    checked = [targets[t]["pass"] for t in names if t in targets]
    return text + ("" if not checked else " ok" if all(checked) else " NO")


def format_table(report: dict) -> str:
    """One row per scene: the scores (``-`` where they do not apply; E drift: the undamped run),
    ``ok``/``NO`` after each score that has a target (the ``moves`` guard after motion), the
    seconds, the verdict with the count of targets met, then one line per error."""
    head = ["scene", *(c[0] for c in COLUMNS), "s", "result"]
    lines = []
    for name, rec in report["scenes"].items():
        scores = dict(rec.get("scores", {}))
        scores["energy_drift"] = rec.get("undamped", {}).get("energy_drift")
        targets = rec.get("targets", {})
        cells = [name, *(_cell(scores, targets, k, f) for _, k, f in COLUMNS)]
        cells.append(f"{rec.get('seconds', 0):.1f}")
        passed = sum(t["pass"] for t in targets.values())
        cells.append(f"{'PASS' if rec['pass'] else 'FAIL'} {passed}/{len(targets)}")
        if any(rec.get(k, {}).get("timed_out") for k in ("run", "undamped")):
            cells[-1] += " (timed out)"
        lines.append(cells)
    widths = [max(len(r[i]) for r in [head, *lines]) for i in range(len(head))]

    def fmt_row(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    notes = [f"  {n}: {e}" for n, r in report["scenes"].items() for e in record_errors(r)]
    return "\n".join(
        [fmt_row(head), fmt_row(["-" * w for w in widths]), *map(fmt_row, lines), *notes]
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m training.eval.scenes", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", required=True, help="folder for scenes.json and contact_sheet.png")
    parser.add_argument(
        "--checkpoint", default=None, help="--dynamics latent: the model (default: the bundled one)"
    )
    parser.add_argument(
        "--scenes", default="", help=f"comma-separated (default: {','.join(SCENES)})"
    )
    parser.add_argument(
        "--frames", type=int, default=48, help="frames of each scene's run (24 fps)"
    )
    parser.add_argument("--no-undamped", action="store_true", help="skip the undamped 10 s runs")
    parser.add_argument("--undamped-fps", type=float, default=12.0)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument(
        "--size",
        type=float,
        default=None,
        help="metres: every scene scaled to this size (gravity kept; training.eval.scene_scaling)",
    )
    add_setting_option(parser)
    parser.add_argument(
        "--dynamics",
        choices=("rig", "latent"),
        default="rig",
        help="the coordinates of the motion: the rig space (default) or the learned latent space",
    )
    parser.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="override a SpaceSettings field (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.frames < 2 or args.timeout <= 0 or args.undamped_fps <= 0:
        parser.error("--frames must be >= 2, --timeout and --undamped-fps > 0")
    if args.size is not None and not args.size > 0:
        parser.error("--size must be > 0 (metres)")
    names = [n for n in args.scenes.split(",") if n] or None
    from neurok_core.dynamics.settings import DEFAULT_SETTINGS
    from neurok_core.errors import NeuROKError
    from neurok_core.space import SpaceSettings

    from ..options import parse_fields, parse_settings

    try:
        dynamics = None
        if args.dynamics == "latent":
            dynamics = DEFAULT_SETTINGS.with_overrides(**parse_settings(args.setting))
        elif args.setting:  # the rig space's RigSettings (e.g. cloth_step=quasi-newton)
            from neurok_core.rigspace.space import RigSettings

            dynamics = RigSettings(**parse_fields(RigSettings, args.setting, "--setting"))
        space_settings = SpaceSettings(**parse_fields(SpaceSettings, args.space, "--space"))
        report = run_scenes(
            args.checkpoint,
            names,
            args.frames,
            undamped=not args.no_undamped,
            undamped_fps=args.undamped_fps,
            timeout=args.timeout,
            threads=args.threads,
            out_dir=args.out,
            dynamics=dynamics,
            space_settings=space_settings,
            method=args.dynamics,
            size=args.size,
        )
    except (ValueError, NeuROKError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        (f"{report['checkpoint']}" if args.dynamics == "latent" else "rig space")
        + f": {args.frames} frames at {FPS:g} fps"
        + (f", undamped 10 s at {args.undamped_fps:g} fps" if not args.no_undamped else "")
    )
    print(format_table(report))
    passed = sum(r["pass"] for r in report["scenes"].values())
    print(
        f"{passed}/{len(report['scenes'])} scenes pass; wall time {report['wall_seconds']:.1f} s"
        f" ({report['settings']['threads']} thread(s)); wrote {args.out}/scenes.json and"
        " contact_sheet.png"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
