"""The ``neurok`` command: simulate a mesh, fit a target shape, find its structure, describe a
model.

    neurok simulate MESH --force VERTEX:DX,DY,DZ:STRENGTH[:START-END] --frames 120 --out anim.pc2
    neurok simulate MESH --drag VERTEX:X,Y,Z:FRAME --pin-below 0.01 --out anim.npz
    neurok simulate A.obj B.obj ... --out DIR --velocity A:all:3,0,0 --pin B:1,2 [--static C]
    neurok ik REST_MESH TARGET_MESH --out fitted.obj [--space rig|latent] [--rig pose.json]
    neurok structure MESH --out structure.json [--pin V1,V2,...] [--pin-below Z]
    neurok info [--checkpoint DIR]

Meshes (OBJ, PLY, STL, GLB, OFF, ...) are read with every vertex in the file's order
(:mod:`~neurok_core.meshio`), so results and vertex indices map 1:1 onto the file's vertices;
vertices no face uses are carried along unmoved (:mod:`~neurok_core.surface`). Every check that
the mesh and the arguments decide runs before a model is loaded. Units are the file's (metres
expected).
Conditions can also come as a JSON file (``--conditions``, a SimulationConditions dict).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from .blas import pick_blas_kernel
from .doubts import warning
from .dynamics.conditions import CLOTH_MATERIALS, DEFAULT_DYNAMICS, DYNAMICS
from .errors import ConditionError, MeshError, NeuROKError, SimulationError
from .meshio import read_mesh
from .solids import SOLID_MATERIALS


def read_collider(path: str):
    """A static collider (``Collider``) from a mesh file, in the simulation's frame."""
    from .dynamics import Collider

    vertices, faces = read_mesh(path)
    if len(faces) == 0:
        raise MeshError(f"--collider {path}: the mesh has no faces")
    return Collider(
        tuple(map(tuple, vertices.tolist())), tuple(map(tuple, faces.tolist())), Path(path).stem
    )


def _floats(text: str, count: int, what: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        raise ConditionError(f"{what}: expected {count} numbers, got {text!r}") from None
    if len(values) != count:
        raise ConditionError(f"{what}: expected {count} numbers, got {len(values)} in {text!r}")
    return values


def _number(text: str, what: str, kind=float):
    """``kind(text)`` or a ConditionError that names the option and the expected value."""
    try:
        return kind(text)
    except ValueError:
        raise ConditionError(f"{what}: expected {_noun(kind)}, got {text!r}") from None


def _noun(kind) -> str:
    return "a whole number" if kind is int else "a number"


def _anchor(text: str, what: str) -> dict:
    """``12`` (a vertex index) or ``x,y,z`` (a point) -> Anchor fields."""
    if "," in text:
        return {"point": tuple(_floats(text, 3, what))}
    try:
        return {"vertex": int(text)}
    except ValueError:
        raise ConditionError(f"{what}: {text!r} is neither a vertex index nor x,y,z") from None


def parse_force(text: str):
    """``ANCHOR:DX,DY,DZ:STRENGTH[:START-END]`` -> Force."""
    from .dynamics import Force

    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ConditionError(f"--force {text!r}: use ANCHOR:DX,DY,DZ:STRENGTH[:START-END]")
    kwargs = _anchor(parts[0], "--force anchor")
    kwargs["direction"] = tuple(_floats(parts[1], 3, "--force direction"))
    kwargs["strength"] = _number(parts[2], "--force strength (newtons)")
    if len(parts) == 4:
        start, _, end = parts[3].partition("-")
        kwargs["start_frame"] = _number(start, "--force start frame (START-END)", int)
        kwargs["end_frame"] = _number(end, "--force end frame (START-END)", int) if end else None
    return Force(**kwargs)


def parse_drag(text: str):
    """``ANCHOR:X,Y,Z:FRAME[:START]`` -> Drag."""
    from .dynamics import Drag

    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ConditionError(f"--drag {text!r}: use ANCHOR:X,Y,Z:FRAME[:START]")
    kwargs = _anchor(parts[0], "--drag anchor")
    kwargs["target"] = tuple(_floats(parts[1], 3, "--drag target"))
    kwargs["frame"] = _number(parts[2], "--drag frame", int)
    if len(parts) == 4:
        kwargs["start_frame"] = _number(parts[3], "--drag start frame", int)
    return Drag(**kwargs)


def parse_velocity(text: str):
    """``ANCHOR:VX,VY,VZ`` -> InitialVelocity (ANCHOR ``all``: the whole object)."""
    from .dynamics import InitialVelocity

    parts = text.split(":")
    if len(parts) != 2:
        raise ConditionError(f"--velocity {text!r}: use ANCHOR:VX,VY,VZ (ANCHOR: all for all)")
    kwargs = {} if parts[0] == "all" else _anchor(parts[0], "--velocity anchor")
    kwargs["velocity"] = tuple(_floats(parts[1], 3, "--velocity"))
    return InitialVelocity(**kwargs)


def parse_pins(args, vertices: np.ndarray) -> set[int]:
    """The vertex indices of ``--pin V1,V2,...`` (repeatable) and ``--pin-below Z``."""
    pins = {
        _number(v.strip(), "--pin (vertex indices V1,V2,...)", int)
        for spec in args.pin
        for v in spec.split(",")
        if v.strip()
    }
    return pins | pins_below(args, vertices)


def pins_below(args, vertices: np.ndarray) -> set[int]:
    """The vertices at or below ``--pin-below Z`` (none without it)."""
    if args.pin_below is None:
        return set()
    if not np.isfinite(args.pin_below):
        raise ConditionError(f"--pin-below: expected a finite height, got {args.pin_below}")
    return set(np.flatnonzero(vertices[:, 2] <= args.pin_below).tolist())


def read_conditions_file(args):
    """``--conditions FILE`` as SimulationConditions, or None without it."""
    from .dynamics import SimulationConditions

    if not args.conditions:
        return None
    try:
        data = json.loads(Path(args.conditions).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConditionError(f"--conditions {args.conditions}: unreadable ({exc})") from None
    return SimulationConditions.from_dict(data)


def scene_flags(args, fields: dict) -> dict:
    """``fields`` (SimulationConditions keywords) with the flags of the run and the world on
    top: frames, fps, damping, ground, friction, bounciness, colliders (added to the
    fields'), gravity, device."""
    for name in ("frames", "fps", "damping", "ground", "friction", "bounciness"):
        if getattr(args, name) is not None:  # else the file's or the default
            fields[name] = getattr(args, name)
    fields["colliders"] = tuple(fields.get("colliders", ())) + tuple(
        read_collider(path) for path in args.collider
    )
    if args.no_gravity:
        fields["gravity"] = (0.0, 0.0, 0.0)
    elif args.gravity is not None:
        fields["gravity"] = tuple(_floats(args.gravity, 3, "--gravity"))
    fields["device"] = args.device
    return fields


def material_fields(name: str | None, vertices: np.ndarray, faces: np.ndarray) -> dict:
    """``--material NAME``'s fields: a cloth's preset (Blender's cloth presets) for a mesh of
    open sheets, a solid's (``neurok_core.solids``: mass from its density and the mesh's
    volume, stiffness, friction, bounciness) for any other; "rubber" is either."""
    from .sheets import has_cloth
    from .solids import is_closed, solid_fields

    if name is None:
        return {}
    name = name.lower()
    cloth = has_cloth(vertices, faces)  # a cloth, or a mesh with cloth (its cloth's preset)
    if cloth and name in CLOTH_MATERIALS:
        return {"material": name}
    if not cloth and name in SOLID_MATERIALS:
        return solid_fields(name, vertices, faces, is_closed(faces))
    kind, names = ("cloth", CLOTH_MATERIALS) if cloth else ("solid", tuple(SOLID_MATERIALS))
    raise ConditionError(
        f"--material {name}: the mesh is a {kind}, whose materials are {', '.join(names)}"
    )


def build_conditions(args, vertices: np.ndarray, faces: np.ndarray):
    """SimulationConditions from the command line (or a JSON file, with flags on top); a
    ``--material`` preset's fields under the flags given (``material_fields``)."""
    from .dynamics import SimulationConditions

    read = read_conditions_file(args)
    base = {} if read is None else read.__dict__.copy()
    pins = set(base.get("pins", ())) | parse_pins(args, vertices)
    fields = dict(base)
    fields.update(
        forces=tuple(base.get("forces", ())) + tuple(parse_force(f) for f in args.force),
        drags=tuple(base.get("drags", ())) + tuple(parse_drag(d) for d in args.drag),
        velocities=tuple(base.get("velocities", ()))
        + tuple(parse_velocity(v) for v in args.velocity),
        pins=tuple(sorted(pins)),
    )
    fields.update(material_fields(args.material, vertices, faces))
    if getattr(args, "self_collision", None) is not None:
        fields["self_collision"] = bool(args.self_collision)
    for name in ("mass", "stiffness"):  # else the preset's, the file's or the default
        value = getattr(args, name)
        if isinstance(value, list):  # --mass and --stiffness may be repeated (several meshes)
            value = _last_number(value, f"--{name}")
        if value is not None:
            fields[name] = value
    return SimulationConditions(**scene_flags(args, fields))


RESULT_SUFFIXES = (".npz", ".pc2", ".json")
MESH_SUFFIXES = (".obj", ".ply", ".stl", ".glb", ".off")


def check_output(path: str, suffixes: tuple[str, ...], what: str) -> Path:
    """The output path, refused before any work if its folder is missing or its extension is
    not one of ``suffixes`` (so a long run never ends in a file it cannot write)."""
    out = Path(path)
    if out.suffix.lower() not in suffixes:
        raise ConditionError(
            f"--out {path}: {what} must end in {' or '.join(suffixes)},"
            f" not {out.suffix or '(no extension)'}"
        )
    if not out.parent.is_dir():
        raise ConditionError(f"--out {path}: the folder {out.parent} does not exist; create it")
    return out


def checked_simulation(args):
    """The mesh and the conditions of ``neurok simulate``, with every check that they alone
    decide done (no model is loaded): the mesh (:func:`~neurok_core.geometry.validate_mesh`), the
    conditions against the file's vertices, anchors on vertices no face uses, the start inside
    the ground (:func:`~neurok_core.dynamics.limits.check_mesh_start`) and, for the latent
    dynamics, the loads (:func:`~neurok_core.dynamics.limits.check_mesh_loads`, the checks the
    dynamics run again).

    Returns (vertices (N, 3), surface, conditions in file indices, the surface's conditions,
    the dynamics settings of the latent path)."""
    from .dynamics.limits import check_mesh_loads, check_mesh_start
    from .dynamics.settings import DEFAULT_SETTINGS
    from .geometry import validate_mesh
    from .surface import Surface

    vertices, faces = read_mesh(args.mesh)
    validate_mesh(vertices, faces)  # refusals only: the engine drops degenerate faces itself
    conditions = build_conditions(args, vertices, faces).validate(len(vertices))
    surface = Surface.of(len(vertices), faces)
    body = surface.conditions(conditions)
    settings = DEFAULT_SETTINGS
    if args.exact_kinematics:
        settings = DEFAULT_SETTINGS.with_overrides(local_model=False)
    if args.dynamics == "latent":
        check_mesh_loads(vertices[surface.used], body, settings)
    else:
        check_mesh_start(vertices[surface.used], body, settings)
    return vertices, surface, conditions, body, settings


def read_structure(args, vertices: np.ndarray, surface):
    """``--structure FILE`` for the file's vertices, on the ones the engine simulates (those
    in a face), or None."""
    if not args.structure:
        return None
    from .structure import Structure

    if args.dynamics != "rig":
        raise ConditionError("--structure: the joints of a structure are the rig space's")
    try:
        text = Path(args.structure).read_text()
    except OSError as exc:
        raise ConditionError(f"--structure {args.structure}: unreadable ({exc})") from None
    whole = Structure.from_json(text, len(vertices))
    return Structure(whole.labels[surface.used], whole.parts, whole.joints)


class _Clock:
    """The run's wall time and its parts, for the summary line."""

    def __init__(self) -> None:
        self.started = self.mark = time.monotonic()
        self.parts: dict[str, float] = {}

    def lap(self, part: str) -> None:
        now = time.monotonic()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.mark
        self.mark = now

    def split(self, part: str, seconds: float) -> None:
        """Count ``seconds`` of the time since the last lap as ``part`` (a stage that ran
        inside the next one, as the rig space's build inside its simulation)."""
        self.parts[part] = self.parts.get(part, 0.0) + seconds
        self.mark += seconds

    def words(self) -> str:
        parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in self.parts.items())
        return f"{time.monotonic() - self.started:.2f} s ({parts})"


def _last_number(values, option: str) -> float | None:
    """One mesh: the last ``--mass`` / ``--stiffness`` given, a plain number."""
    if not values:
        return None
    if ":" in values[-1]:
        raise ConditionError(f"{option} {values[-1]!r}: STEM:VALUE is for several meshes")
    return _number(values[-1], option)


def cmd_simulate(args) -> int:
    if len(args.mesh) > 1 or args.static:
        from .cli_objects import cmd_simulate_objects

        return cmd_simulate_objects(args)
    args.mesh = args.mesh[0]
    clock = _Clock()
    out = check_output(args.out, RESULT_SUFFIXES, "a simulation result")
    if not args.time_limit >= 0:
        raise ConditionError(f"--time-limit: expected seconds >= 0, got {args.time_limit:g}")
    vertices, surface, conditions, body, settings = checked_simulation(args)
    rest, faces = vertices[surface.used], surface.faces  # what the engine simulates
    clock.lap("read")

    from tqdm import tqdm

    from .pc2 import write_pc2
    from .results import save_result

    bar = tqdm(total=conditions.frames, desc="simulate", unit="frame", disable=args.quiet)
    over_time = []

    def on_frame(index, positions, energy):
        bar.update(1)
        bar.set_postfix(energy=f"{energy:.4g}")
        if args.time_limit > 0 and time.monotonic() - clock.started > args.time_limit:
            over_time.append(index)
            return False  # stop: the engine returns the frames so far
        return None

    rig_only = out.suffix.lower() == ".json"
    structure = read_structure(args, vertices, surface)
    if args.dynamics == "rig":  # the rig space needs no learned model
        from .rigspace import simulate_rig

        bar.set_description("simulate (rig)")
        result = simulate_rig(
            rest,
            faces,
            body,
            structure=structure,
            on_frame=on_frame,
            want_vertices=not rig_only,
            # the rest of the limit, checked inside the integration too (before every step)
            time_limit=max(args.time_limit - (time.monotonic() - clock.started), 0.0)
            if args.time_limit > 0
            else None,
        )
        if result.info.get("timed_out"):
            over_time.append(len(result.times) - 1)
        clock.split("space", result.info["space_seconds"])  # built inside simulate_rig
    else:
        from .api import NeuROK

        engine = NeuROK.load(args.checkpoint, device=args.device)
        if rig_only and not engine.model.skinned:
            raise ConditionError(
                f"--out {args.out}: a rig (.json) needs a model with bones (deformation"
                " 'skinned') or --dynamics rig; this one moves every point on its own: write"
                " a .npz result or a .pc2 cache"
            )
        clock.lap("load")
        space = engine.space(
            rest,
            faces,
            cache_dir=args.cache_dir,
            on_status=lambda stage, msg: bar.set_description(stage),
        )
        clock.lap("space")
        result = engine.simulate(
            space,
            body,
            dynamics="latent",
            on_frame=on_frame,
            settings=settings,
            vertices=not rig_only,
            rig=space.skinned and out.suffix.lower() != ".pc2",
            # the rest of the limit, checked inside the integration too (between its steps)
            time_limit=max(args.time_limit - (time.monotonic() - clock.started), 0.0)
            if args.time_limit > 0
            else None,
        )
        if result.info.get("timed_out"):
            over_time.append(len(result.times) - 1)
    clock.lap("simulate")
    bar.close()
    stopped = None
    if over_time:
        stopped = (
            f"stopped at the time limit of {args.time_limit:g} s (--time-limit) after frame "
            f"{over_time[0]} of {conditions.frames - 1}"
        )
        if len(result.times) < 2:  # the rest frame alone: nothing was simulated
            raise SimulationError(
                f"{stopped}; nothing was written. Raise the limit (0: none), or ask for fewer"
                " frames or a smaller mesh"
            )
    moved, rig = result.positions, result.rig
    result = dataclasses.replace(  # back in the file's vertices, the loose ones unmoved
        result,
        positions=None if moved is None else surface.positions(moved, vertices),
        rig=None if rig is None else surface.rig(rig, vertices),
        conditions=conditions.to_dict(),
    )
    info = result.info
    loose = len(vertices) - len(surface.used)
    counted = f"{len(vertices)} vertices" + (f" ({loose} in no face, unmoved)" if loose else "")
    if rig_only:
        result.rig.save_json(out, result.times)
        clock.lap("write")
        print(
            f"wrote {out}: a rig of {result.rig.num_bones} bones x {len(result.times)} frames"
            f" for {counted}, {_space_words(info)}, {clock.words()}"
        )
    else:
        if out.suffix.lower() == ".pc2":
            write_pc2(out, result.positions)
        else:
            save_result(result, out)
        clock.lap("write")
        print(
            f"wrote {out}: {len(result.positions)} frames x {counted},"
            f" {_space_words(info)}, {clock.words()}"
            + (f", with a rig of {result.rig.num_bones} bones" if result.rig is not None else "")
        )
    if stopped:  # the frames so far are written; the run still did not finish
        raise SimulationError(
            f"{stopped}; {out} holds its first {len(result.times)} frames. Raise the limit"
            " (0: none), or ask for fewer frames or a smaller mesh"
        )
    doubt = warning(info, len(result.times))  # the warning Simulate gives in Blender
    if doubt:
        print(f"warning: {doubt}")
    return 0


def _space_words(info: dict) -> str:
    """The coordinates a run used, in a few words."""
    if info.get("dynamics") == "rig":
        bones = info["space"].get("bones")
        return "rig space" if bones is None else f"rig space of {bones} bones"
    return f"kq = {info['reduced_dims']}"


def cmd_ik(args) -> int:
    import trimesh

    from .geometry import sample_surface_points

    started = time.perf_counter()
    out = check_output(args.out, MESH_SUFFIXES, "the fitted mesh")
    rig_out = check_output(args.rig, (".json",), "the rig pose") if args.rig else None
    report_out = check_output(args.report, (".json",), "the fit's report") if args.report else None
    for name in ("points", "steps", "restarts"):
        if getattr(args, name) < 1:
            raise ConditionError(f"--{name} must be at least 1")
    if rig_out is not None and args.space != "rig":
        raise ConditionError("--rig needs --space rig (the latent space has no bones to pose)")
    vertices, faces = read_mesh(args.rest)
    target_v, target_f = read_mesh(args.target)
    if len(target_f) == 0:
        raise MeshError(f"{args.target}: the target has no faces to sample its surface from")
    shared = target_v.shape == vertices.shape and np.array_equal(target_f, faces)
    rng = np.random.default_rng(args.seed)
    target = sample_surface_points(target_v, target_f, args.points, rng)
    budget = dict(steps=args.steps, restarts=args.restarts, seed=args.seed)
    engine = None
    if args.space == "latent" or args.prior:
        from .api import NeuROK

        engine = NeuROK.load(args.checkpoint, device=args.device)
    if args.space == "latent":
        from .ik import IKSettings

        fit = engine.ik(
            vertices, faces, target, space="latent", settings=IKSettings(**budget),
            cache_dir=args.cache_dir,
        )  # fmt: skip
        figures = {"space": "latent", "chamfer": fit.loss}
    else:
        from .rigspace.fit import fit_rig
        from .rigspace.ik import RigIKSettings

        kspace = engine.space(vertices, faces, cache_dir=args.cache_dir) if engine else None
        fit = fit_rig(
            vertices, faces, target, settings=RigIKSettings(**budget),
            target_vertices=target_v if shared else None, kspace=kspace,
        )  # fmt: skip
        figures = {
            "space": "rig",
            "chamfer": fit.loss,
            "bones": fit.space.num_bones,
            "start": fit.start,
            "correspondences": shared,
            "starts": [
                {"name": n, "energy": e, "chamfer": c, "iterations": k} for n, e, c, k in fit.starts
            ],
            "seconds": fit.seconds,
        }
        if rig_out is not None:
            fit.rig().save_json(rig_out)
    trimesh.Trimesh(fit.vertices, faces, process=False).export(out)
    figures["total_seconds"] = round(time.perf_counter() - started, 3)
    if report_out is not None:
        report_out.write_text(json.dumps(figures, indent=1, default=float) + "\n")
    words = (
        f"{figures.get('bones')} bones, start {figures.get('start')}"
        if args.space == "rig"
        else "latent"
    )
    print(
        f"wrote {args.out}: chamfer (normalised, squared) {fit.loss:.3g} ({words}; "
        f"{figures['total_seconds']:.1f} s)"
    )
    return 0


def cmd_structure(args) -> int:
    from .geometry import validate_mesh
    from .structure import find_structure

    out = check_output(args.out, (".json",), "the structure")
    vertices, faces = read_mesh(args.mesh)
    validate_mesh(vertices, faces)
    pins = sorted(parse_pins(args, vertices))
    bad = [p for p in pins if not 0 <= p < len(vertices)]
    if bad:
        raise ConditionError(f"--pin: vertex {bad[0]} out of range (the mesh has {len(vertices)})")
    started = time.perf_counter()
    structure = find_structure(vertices, faces, pins, learned=not args.geometry)
    out.write_text(structure.to_json() + "\n")
    kinds = ", ".join(f"{n} {k}" for k, n in Counter(p.kind for p in structure.parts).items())
    types = ", ".join(f"{n} {t}" for t, n in Counter(j.type for j in structure.joints).items())
    print(
        f"wrote {args.out}: {len(structure.parts)} parts ({kinds}), {len(structure.joints)}"
        f" joints ({types or 'none'}; {time.perf_counter() - started:.2f} s)"
    )
    return 0


def cmd_info(args) -> int:
    from .api import checkpoint_summary

    print(json.dumps(checkpoint_summary(args.checkpoint), indent=2, default=str))
    return 0


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose refusals are one line, as the command's own are: ``neurok: error:
    --frames: expected a whole number, got 'abc' (neurok simulate --help)`` and exit 2, not the
    whole usage block. Subcommands' parsers are of this class too (argparse makes them so)."""

    _INVALID = re.compile(r"argument (\S+): invalid (int|float) value: (.*)")

    def error(self, message: str):
        found = self._INVALID.fullmatch(message)
        if found:
            option, kind, value = found.groups()
            message = f"{option}: expected {_noun(int if kind == 'int' else float)}, got {value}"
        elif message.startswith("argument "):
            message = message[len("argument ") :]
        self.exit(2, f"neurok: error: {message} ({self.prog} --help)\n")


def make_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="neurok", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p):
        p.add_argument("--checkpoint", default=None, help="checkpoint folder (default: bundled)")
        p.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
        p.add_argument("--cache-dir", default=None, help="kinematic-space cache folder")

    sim = sub.add_parser("simulate", help="simulate a mesh under forces, drags, velocities")
    sim.add_argument(
        "mesh",
        nargs="+",
        help="a mesh file, or several: the objects of one scene, each named by its file's stem"
        " (conditions then start with STEM:, --out is a folder; neurok_core.cli_objects)",
    )
    sim.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="STEM",
        help="with several meshes: this one is a collider of the others (repeatable)",
    )
    sim.add_argument(
        "--out",
        required=True,
        help="result .npz (with the rig, for a model with bones), .pc2 point cache, or .json"
        " rig alone (bones, per-frame transforms, weights; a model with bones)",
    )
    sim.add_argument("--force", action="append", default=[], metavar="A:DX,DY,DZ:N[:S-E]")
    sim.add_argument("--drag", action="append", default=[], metavar="A:X,Y,Z:FRAME[:START]")
    sim.add_argument("--velocity", action="append", default=[], metavar="A:VX,VY,VZ")
    sim.add_argument(
        "--time-limit",
        type=float,
        default=3600.0,
        metavar="SECONDS",
        help="stop with a message after this long, counted from the start (0: no limit)",
    )
    sim.add_argument("--pin", action="append", default=[], metavar="V1,V2,...")
    sim.add_argument("--pin-below", type=float, default=None, help="pin vertices with z <= this")
    sim.add_argument("--conditions", default=None, help="a SimulationConditions JSON file")
    sim.add_argument(
        "--structure",
        default=None,
        metavar="FILE",
        help="a structure JSON file (neurok structure's, edited): its joints replace the ones"
        " the geometry gives (the rig space)",
    )
    sim.add_argument(
        "--frames", type=int, default=None, help="output frames, the rest shape included (120)"
    )
    sim.add_argument("--fps", type=float, default=None, help="frames per second (24)")
    sim.add_argument(
        "--mass", action="append", default=None, help="kg (1); several meshes: STEM:KG too"
    )
    sim.add_argument(
        "--stiffness", action="append", default=None, help="Hz; several meshes: STEM:HZ too"
    )
    sim.add_argument("--damping", type=float, default=None, help="1/s")
    sim.add_argument("--gravity", default=None, metavar="GX,GY,GZ")
    sim.add_argument("--no-gravity", action="store_true")
    sim.add_argument(
        "--ground", type=float, default=None, metavar="Z", help="a ground plane at height Z (m)"
    )
    sim.add_argument(
        "--collider",
        action="append",
        default=[],
        metavar="MESH",
        help="a static obstacle mesh file in the object's frame (repeatable)",
    )
    sim.add_argument(
        "--friction", type=float, default=None, help="friction coefficient of the contact (0.5)"
    )
    sim.add_argument(
        "--bounciness",
        type=float,
        default=None,
        help="restitution of the contact, 0 to 1 (0.1)",
    )
    sim.add_argument(
        "--material",
        default=None,
        help="a material preset: for a cloth, Blender's cloth presets ("
        + ", ".join(CLOTH_MATERIALS)
        + "; default: its own, with --damping as its air damping); for a solid, "
        + ", ".join(SOLID_MATERIALS)
        + " (its mass from the density and the mesh's volume, stiffness, friction,"
        " bounciness; flags given win)",
    )
    sim.add_argument(
        "--self-collision",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a cloth's layers kept apart, with friction between them (as Blender's cloth's Self"
        " Collisions, and as them off by default: 2-16x the time)",
    )
    sim.add_argument(
        "--exact-kinematics",
        action="store_true",
        help="evaluate the decoder at every step instead of its local model (slower, ~10x)",
    )
    sim.add_argument(
        "--dynamics",
        choices=DYNAMICS,
        default=DEFAULT_DYNAMICS,
        help="the coordinates of the motion: the rig space (the default: the bones' rigid"
        " motions, with joints, elasticity and contact as energies; needs no model) or the"
        " learned latent space (the model's)",
    )
    sim.add_argument("--quiet", action="store_true")
    common(sim)
    sim.set_defaults(run=cmd_simulate)

    ik = sub.add_parser("ik", help="fit REST to TARGET's shape (its surface; any topology)")
    ik.add_argument("rest")
    ik.add_argument("target")
    ik.add_argument("--out", required=True, help="fitted mesh (REST's topology)")
    ik.add_argument(
        "--space",
        choices=("rig", "latent"),
        default="rig",
        help="fit the rig space's bones (the default; needs no model) or the model's latent state",
    )
    ik.add_argument("--rig", default=None, help="the fitted pose as a one-frame rig (.json)")
    ik.add_argument("--report", default=None, help="the fit's figures (.json)")
    ik.add_argument(
        "--prior",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="with --space rig: the model's prior draws (and the posterior of a target of the"
        " same topology) among the starts (default: off; see the docs' IK table)",
    )
    ik.add_argument("--points", type=int, default=2048, help="points sampled on the target")
    ik.add_argument("--steps", type=int, default=150, help="solver iterations per start")
    ik.add_argument("--restarts", type=int, default=8, help="starts")
    ik.add_argument("--seed", type=int, default=0)
    common(ik)
    ik.set_defaults(run=cmd_ik)

    struct = sub.add_parser(
        "structure", help="find MESH's parts and the joints between them (what moves how)"
    )
    struct.add_argument("mesh")
    struct.add_argument("--out", required=True, help="the structure (.json, docs/structure.md)")
    struct.add_argument("--pin", action="append", default=[], metavar="V1,V2,...")
    struct.add_argument("--pin-below", type=float, default=None, help="pin vertices with z <= this")
    struct.add_argument(
        "--geometry",
        action="store_true",
        help="joint types from geometry's rules alone, without the bundled joint typer",
    )
    # the typer was opt-in before it became the default: the old flag is accepted, and does
    # what the default does
    struct.add_argument("--learned", action="store_true", help=argparse.SUPPRESS)
    struct.set_defaults(run=cmd_structure)

    info = sub.add_parser("info", help="describe a checkpoint")
    info.add_argument("--checkpoint", default=None)
    info.set_defaults(run=cmd_info)
    return parser


def _dash_values(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``--ground -2e-09`` as ``--ground=-2e-09``: argparse takes a value that starts with a dash
    for an option unless it looks like a plain negative number (``-2``, not ``-2e-09``,
    ``-1:0,0,1:5`` or ``-9.81,0,0``). No option here is a single dash and a letter but ``-h``, so
    after an option that takes a value, such a word is always that value."""
    takes_value = {
        option
        for command in parser._actions
        if isinstance(command, argparse._SubParsersAction)
        for sub in command.choices.values()
        for action in sub._actions
        if action.nargs is None
        for option in action.option_strings
    }
    out, take = [], False
    for item in argv:
        if take and item.startswith("-") and not item.startswith("--") and item != "-h":
            out[-1] = f"{out[-1]}={item}"
            take = False
            continue
        out.append(item)
        take = item in takes_value
    return out


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(_dash_values(list(sys.argv[1:] if argv is None else argv), parser))
    try:
        return args.run(args)
    except NeuROKError as exc:
        print(f"neurok: error: {exc}", file=sys.stderr)
        return 2


def run() -> int:
    """The ``neurok`` command: a process of its own, so numpy's BLAS kernel is settled first
    (``neurok_core.blas``; a call of ``main`` from Python leaves its process alone)."""
    pick_blas_kernel()
    return main()


if __name__ == "__main__":
    sys.exit(run())
