"""``neurok simulate`` with several meshes: the objects of one scene, simulated together.

    neurok simulate ball.obj door.obj --out DIR --velocity ball:all:0,3,0 --pin door:0,1,2
        [--force door:12:0,1,0:40:0-6] [--drag ball:X,Y,Z:FRAME] [--mass ball:2 --mass door:20]
        [--stiffness ball:3] [--pin-below Z] [--static NAME] [scene options]

Every mesh is an object named by its file's stem. Conditions name their object first
(``STEM:`` before the usual ``ANCHOR:...``; a velocity's anchor ``all`` moves the whole
object), ``--pin STEM:V1,V2,...`` pins an object's vertices, ``--pin-below Z`` every object's,
``--mass`` / ``--stiffness`` a number for every object or ``STEM:VALUE`` for one (repeatable),
``--static STEM`` makes an object a collider of the others. The scene's options (frames, fps,
damping, gravity, ground, colliders, friction, bounciness, a ``--conditions`` JSON file for
them) are those of one object. Writes ``DIR/<stem>.npz`` per moving object: its positions
(T, N, 3) in the files' shared frame and its rig
(:func:`~neurok_core.rigspace.objects.simulate_objects`).
"""

from __future__ import annotations

import time
from pathlib import Path

from .errors import ConditionError, SimulationError


def _stem_split(text: str, option: str, stems) -> tuple[str, str]:
    """``STEM:REST`` -> (stem, rest), the stem one of the scene's."""
    stem, sep, rest = text.partition(":")
    if not sep or stem not in stems:
        raise ConditionError(
            f"{option} {text!r}: with several meshes, name the object first (STEM:...), one of"
            f" {', '.join(sorted(stems))}"
        )
    return stem, rest


def _per_object(values, option: str, stems, kind=float) -> dict[str, float]:
    """``--mass 2`` (every object) and ``--mass ball:3`` (one) -> {stem: value}."""
    from .cli import _number

    named, every = {}, None
    for text in values or ():
        if ":" in text:
            stem, value = _stem_split(text, option, stems)
            named[stem] = _number(value, f"{option} {stem}", kind)
        else:
            every = _number(text, option, kind)  # the last one given, as for one mesh
    out = {} if every is None else dict.fromkeys(stems, every)
    out.update(named)
    return out


def _scene(args):
    """The scene's SimulationConditions (the fields of every object's own left at defaults)."""
    from .cli import read_conditions_file, scene_flags
    from .dynamics import SimulationConditions
    from .rigspace.objects import SCENE_FIELDS

    fields = {}
    base = read_conditions_file(args)
    if base is not None:
        own = [f for f in ("forces", "drags", "velocities", "pins") if getattr(base, f)]
        if own:
            raise ConditionError(
                f"--conditions {args.conditions}: its {', '.join(own)} are one object's; with"
                " several meshes give them per object (--force STEM:..., --pin STEM:...)"
            )
        fields = {f: getattr(base, f) for f in SCENE_FIELDS}
    return SimulationConditions(**scene_flags(args, fields))


def _objects(args, meshes: dict):
    """The scene's :class:`SceneObject` list, each with its own conditions."""
    from .cli import _number, material_fields, parse_drag, parse_force, parse_velocity, pins_below
    from .dynamics import SimulationConditions
    from .rigspace.objects import SceneObject

    stems = set(meshes)
    own = {s: {"forces": [], "drags": [], "velocities": [], "pins": set()} for s in stems}
    for option, key, parse in (
        ("--force", "forces", parse_force),
        ("--drag", "drags", parse_drag),
        ("--velocity", "velocities", parse_velocity),
    ):
        for text in getattr(args, option[2:]):
            stem, rest = _stem_split(text, option, stems)
            own[stem][key].append(parse(rest))
    for text in args.pin:
        stem, rest = _stem_split(text, "--pin", stems)
        own[stem]["pins"].update(
            _number(v.strip(), f"--pin {stem} (vertex indices)", int)
            for v in rest.split(",")
            if v.strip()
        )
    for stem, (vertices, _) in meshes.items():
        own[stem]["pins"].update(pins_below(args, vertices))
    masses = _per_object(args.mass, "--mass", stems)
    stiffness = _per_object(args.stiffness, "--stiffness", stems)
    static = set(args.static)
    unknown = static - stems
    if unknown:
        raise ConditionError(
            f"--static {', '.join(sorted(unknown))}: not a mesh of the scene ({', '.join(stems)})"
        )
    out = []
    for stem, (vertices, faces) in meshes.items():
        c = own[stem]
        # the preset's fields, under the object's own --mass and --stiffness
        fields = {"mass": 1.0, "stiffness": 0.0}
        fields.update(material_fields(args.material, vertices, faces))
        fields.update(
            {k: v[stem] for k, v in (("mass", masses), ("stiffness", stiffness)) if stem in v}
        )
        if getattr(args, "self_collision", None) is not None:
            fields["self_collision"] = bool(args.self_collision)
        conditions = SimulationConditions(
            forces=tuple(c["forces"]),
            drags=tuple(c["drags"]),
            velocities=tuple(c["velocities"]),
            pins=tuple(sorted(c["pins"])),
            **fields,
        )
        out.append(SceneObject(stem, vertices, faces, conditions, static=stem in static))
    return out


def _out_folder(path: str) -> Path:
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ConditionError(f"--out {path}: a file is there; with several meshes it is a folder")
    from .cli import RESULT_SUFFIXES

    if out.suffix.lower() in RESULT_SUFFIXES:  # a result file's, not a folder's
        raise ConditionError(
            f"--out {path}: with several meshes the result is a folder (one STEM.npz per moving"
            " object), not a file"
        )
    if not out.parent.is_dir():
        raise ConditionError(f"--out {path}: the folder {out.parent} does not exist; create it")
    out.mkdir(exist_ok=True)
    return out


def cmd_simulate_objects(args) -> int:
    """``neurok simulate`` with several meshes (module docstring)."""
    from tqdm import tqdm

    from .geometry import validate_mesh
    from .meshio import read_mesh
    from .results import save_result
    from .rigspace.objects import simulate_objects

    started = time.monotonic()
    if args.dynamics != "rig":
        raise ConditionError("several objects are simulated in the rig space: --dynamics rig")
    if args.structure:
        raise ConditionError("--structure takes one mesh for now, not several")
    out = _out_folder(args.out)
    if not args.time_limit >= 0:
        raise ConditionError(f"--time-limit: expected seconds >= 0, got {args.time_limit:g}")
    meshes = {}
    for path in args.mesh:
        stem = Path(path).stem
        if stem in meshes:
            raise ConditionError(f"two meshes are named {stem!r}: their file stems must differ")
        vertices, faces = read_mesh(path)
        validate_mesh(vertices, faces)
        meshes[stem] = (vertices, faces)
    scene = _scene(args)
    objects = _objects(args, meshes)
    bar = tqdm(total=100, desc="simulate (rig)", unit="%", disable=args.quiet)

    def on_progress(stage, share):
        bar.n = int(round(100 * share))
        bar.refresh()

    results = simulate_objects(
        objects,
        scene,
        on_progress=on_progress,
        time_limit=args.time_limit if args.time_limit > 0 else None,
    )
    bar.close()
    for name, result in results.items():
        save_result(result, out / f"{name}.npz")
        print(
            f"wrote {out / (name + '.npz')}: {len(result.times)} frames x"
            f" {result.positions.shape[1]} vertices, a rig of {result.rig.num_bones} bones"
        )
    first = next(iter(results.values()))
    print(
        f"{len(results)} moving object(s), {len(objects) - len(results)} static, rig space of"
        f" {first.info['space']['bones']} bones, {time.monotonic() - started:.2f} s"
    )
    if first.info.get("timed_out"):
        raise SimulationError(
            f"stopped at the time limit of {args.time_limit:g} s (--time-limit) after frame"
            f" {len(first.times) - 1} of {scene.frames - 1}; the files hold the frames so far"
        )
    return 0
