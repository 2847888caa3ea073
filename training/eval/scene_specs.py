"""The plausibility scenes' conditions and targets (design sections 7 and 10).

Each scene (meshes: :mod:`training.eval.scene_meshes`) runs once under its own conditions at 24 fps,
with gravity (0, 0, -9.81) m/s^2:

- laptop / chest: base pinned, a push on the middle of the lid's free edge along its closing
  direction (hinge axis x lid direction) for the first quarter / sixth of the run;
- door: jamb pinned, a push at the handle along +Y (the door's normal) for the first quarter;
- drawer: cabinet pinned, a drag handle on the drawer front pulling it out (-Y) by 15 cm (36% of
  the drawer's 42 cm depth) by frame 2/3 of the run, then released;
- flag: pole edge pinned, a drag of the free bottom corner 30 cm out of the flag's plane and
  10 cm up by frame 2/3; curtain: top edge pinned, a push at its centre along its normal (+Y)
  for the first third;
- jelly_beam: one end pinned (a cantilever), stiffness 2 Hz; ball: nothing pinned, stiffness
  3 Hz, an initial velocity of -2 m/s (whole ball) and -3 m/s at its top so it squashes and
  wobbles; rope: top end pinned, a push at its bottom end along +X for the first quarter;
- arm, bottle_cap, gripper: the base (the bottle, the palm) pinned, a push along +Y at the
  last link's tip, the cap's rim, the first finger's knuckle for the first quarter;
- contact scenes (2.5 s each, long enough to land and settle): ball_drop, the ball (nothing
  pinned, 12 Hz: a stiffness is the object's lowest mode, and a 3 Hz ball dropped 30 cm
  flattens as a 3 Hz jelly does) dropped 30 cm onto the ground; cloth_on_box, a free cloth
  dropped 5 cm onto a box standing on the ground; laptop_on_desk, the laptop with nothing
  pinned on a desk (a box collider) under its lid's push for the first tenth.

The **undamped run** of a scene keeps the mesh and the pins but has no gravity, no damping,
fully elastic frictionless contact (bounciness 1, friction 0), stiffness 1 Hz and an initial
velocity of 0.5 L/s on the scene's key vertex (L: the longest side of the rest bounding box)
along its push or drag direction, for 10 s of animation at a chosen fps (the same simulated
time whatever the fps).

Targets (``TARGETS``) are the design's: articulated motion >= 0.05 L, worst part residual <= 0.01 L,
parts that touched at rest at most 0.02 L farther apart (``detached``) and no part deeper than 0.01
L inside another (``penetration_parts``), the laptop's lid closing >= 30 deg, cloth edge strain <=
0.05 (held in every frame: the max over frames of the mean strain), elastic volume within +-10%,
pinned drift <= 1e-3 L and undamped energy drift < 0.01; plus a ``moves`` guard (motion >= 0.01 L)
on the scenes without a motion target, so that an object that never moves cannot pass its strain or
volume targets vacuously. Contact scenes also hold penetration <= 0.01 L in every frame (the deepest
vertex inside an obstacle), rest_motion <= 0.005 L (the largest vertex motion over the last 10
frames) and settle_seconds <= 2 (from the first touch to rest). A run that did not make every frame
fails every target."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from neurok_core.dynamics import Collider, Drag, Force, InitialVelocity, SimulationConditions

from .scene_meshes import SceneMesh

GRAVITY = (0.0, 0.0, -9.81)
FPS = 24.0
UNDAMPED_SECONDS = 10.0
KICK = 0.5  # undamped run: initial speed of the key vertex, in L per second


class Push(NamedTuple):
    """A force on landmark ``landmark`` along ``direction`` (None: a lid's closing direction) of
    ``newtons`` N, from frame 0 to the fraction ``until`` of the run."""

    landmark: str
    direction: tuple | None
    newtons: float
    until: float


class Pull(NamedTuple):
    """A drag handle taking landmark ``landmark`` to its rest position + ``offset`` (metres) by
    the fraction ``at`` of the run, then letting go."""

    landmark: str
    offset: tuple
    at: float


@dataclass(frozen=True)
class Scene:
    """How a scene is run: total ``mass`` kg, the ``kick`` (landmark, direction or None for a
    lid's closing direction) of its undamped run, damping 1/s, stiffness Hz, an optional
    ``push`` and ``pull``, initial ``velocities`` ((landmark or None for the whole object,
    velocity m/s), ...), and whether it is scored by edge ``strain`` and by ``volume``."""

    mass: float
    kick: tuple[str, tuple | None]
    damping: float = 0.5
    stiffness: float = 0.0
    push: Push | None = None
    pull: Pull | None = None
    velocities: tuple = ()
    strain: bool = False
    volume: bool = False
    seconds: float | None = None


SCENES: dict[str, Scene] = {
    "laptop": Scene(1.5, ("lid_edge", None), push=Push("lid_edge", None, 2.0, 0.25)),
    "chest": Scene(15.0, ("lid_edge", None), push=Push("lid_edge", None, 20.0, 0.15)),
    "door": Scene(20.0, ("handle", (0, 1, 0)), push=Push("handle", (0, 1, 0), 30.0, 0.25)),
    "drawer": Scene(
        8.0, ("handle", (0, -1, 0)), damping=1.0, pull=Pull("handle", (0, -0.15, 0), 2 / 3)
    ),
    "flag": Scene(
        0.2,
        ("corner", (0, 1, 0)),
        damping=1.0,
        pull=Pull("corner", (-0.05, 0.3, 0.1), 2 / 3),
        strain=True,
    ),
    "curtain": Scene(
        1.0, ("middle", (0, 1, 0)), push=Push("middle", (0, 1, 0), 5.0, 1 / 3), strain=True
    ),
    "jelly_beam": Scene(6.0, ("tip", (0, 0, -1)), damping=0.3, stiffness=2.0, volume=True),
    "ball": Scene(
        0.5,
        ("top", (0, 0, -1)),
        damping=0.2,
        stiffness=3.0,
        volume=True,
        velocities=((None, (0, 0, -2.0)), ("top", (0, 0, -3.0))),
    ),
    "rope": Scene(0.3, ("end", (1, 0, 0)), push=Push("end", (1, 0, 0), 1.0, 0.25)),
    "ball_drop": Scene(
        0.5, ("top", (0, 0, -1)), damping=0.2, stiffness=12.0, volume=True, seconds=2.5
    ),
    "cloth_on_box": Scene(0.3, ("corner", (0, 0, -1)), damping=0.5, strain=True, seconds=2.5),
    "laptop_on_desk": Scene(
        1.5, ("lid_edge", None), push=Push("lid_edge", None, 2.0, 0.1), seconds=2.5
    ),
    "arm": Scene(3.0, ("tip", (0, 1, 0)), push=Push("tip", (0, 1, 0), 3.0, 0.25)),
    "laptop_welded": Scene(1.5, ("lid_edge", None), push=Push("lid_edge", None, 2.0, 0.25)),
    "bottle_cap": Scene(0.5, ("rim", (0, 1, 0)), push=Push("rim", (0, 1, 0), 0.3, 0.25)),
    "gripper": Scene(0.5, ("knuckle", (0, 1, 0)), push=Push("knuckle", (0, 1, 0), 1.0, 0.25)),
}

ARTICULATED = (
    ("motion", ">=", 0.05),
    ("part_residual", "<=", 0.01),
    ("detached", "<=", 0.02),
    ("penetration_parts", "<=", 0.01),
)
CONTACT = (
    ("penetration", "<=", 0.01),
    ("rest_motion", "<=", 0.005),
    ("settle_seconds", "<=", 2.0),
)
TARGETS: dict[str, tuple] = {
    "laptop": (*ARTICULATED, ("closing_max_deg", ">=", 30.0)),
    "chest": ARTICULATED,
    "door": ARTICULATED,
    "drawer": ARTICULATED,
    "flag": (("edge_strain.max", "<=", 0.05),),
    "curtain": (("edge_strain.max", "<=", 0.05),),
    "jelly_beam": (("volume_ratio.min", ">=", 0.9), ("volume_ratio.max", "<=", 1.1)),
    "ball": (("volume_ratio.min", ">=", 0.9), ("volume_ratio.max", "<=", 1.1)),
    "rope": (),
    "ball_drop": (
        ("volume_ratio.min", ">=", 0.9),
        ("volume_ratio.max", "<=", 1.1),
        *CONTACT,
    ),
    "cloth_on_box": (("edge_strain.max", "<=", 0.05), ("drape", ">=", 0.25), *CONTACT),
    "arm": ARTICULATED,
    "laptop_welded": (*ARTICULATED, ("closing_max_deg", ">=", 30.0)),
    "bottle_cap": ARTICULATED,
    "gripper": ARTICULATED,
    "laptop_on_desk": (
        ("part_residual", "<=", 0.01),
        ("detached", "<=", 0.02),
        ("penetration_parts", "<=", 0.01),
        *CONTACT,
    ),
}
"""Scene -> (score, op, bound): the design's targets. Every scene with pins also holds
``pinned_drift <= 1e-3``, every scene without a motion target ``moves`` (motion >= 0.01), and
the undamped run ``energy_drift < 0.01``."""


def _frame(fraction: float, frames: int) -> int:
    return min(frames - 1, max(1, round(fraction * (frames - 1))))


def _direction(mesh: SceneMesh, direction) -> tuple:
    """``direction``, or a lid's closing direction (hinge axis x lid direction) for None."""
    if direction is not None:
        return tuple(float(c) for c in direction)
    return tuple(np.cross(mesh.hinge.axis, mesh.hinge.lid).tolist())


def scene_frames(name: str, frames: int) -> int:
    """The frames scene ``name`` runs: its own length (contact scenes: long enough to land and
    come to rest) or ``frames``."""
    seconds = SCENES[name].seconds
    return frames if seconds is None else int(round(seconds * FPS)) + 1


def obstacles_of(mesh: SceneMesh) -> dict:
    """The scene's ground and colliders as ``SimulationConditions`` fields."""
    colliders = tuple(
        Collider(tuple(map(tuple, v.tolist())), tuple(map(tuple, f.tolist())), name)
        for name, v, f in mesh.colliders
    )
    return {"ground": mesh.ground, "colliders": colliders}


def scene_conditions(name: str, mesh: SceneMesh, frames: int) -> SimulationConditions:
    """The conditions of scene ``name`` (module docstring) for ``frames`` frames at 24 fps (a
    contact scene: its own length, ``scene_frames``), with its obstacles."""
    s = SCENES[name]
    frames = scene_frames(name, frames)
    forces, drags = (), ()
    if s.push:
        end = _frame(s.push.until, frames) if frames > 2 else None
        d = _direction(mesh, s.push.direction)
        vertex = mesh.landmarks[s.push.landmark]
        forces = (Force(d, s.push.newtons, vertex=vertex, end_frame=end),)
    if s.pull:
        vertex = mesh.landmarks[s.pull.landmark]
        target = tuple((mesh.vertices[vertex] + np.asarray(s.pull.offset)).tolist())
        drags = (Drag(target, _frame(s.pull.at, frames), vertex=vertex),)
    velocities = tuple(
        InitialVelocity(v, vertex=None if m is None else mesh.landmarks[m]) for m, v in s.velocities
    )
    return SimulationConditions(
        forces=forces,
        drags=drags,
        velocities=velocities,
        gravity=GRAVITY,
        pins=tuple(mesh.pins.tolist()),
        mass=s.mass,
        stiffness=s.stiffness,
        damping=s.damping,
        frames=frames,
        fps=FPS,
        device="cpu",
        **obstacles_of(mesh),
    )


def undamped_conditions(name: str, mesh: SceneMesh, fps: float) -> SimulationConditions:
    """The scene's undamped run: no gravity or damping, fully elastic frictionless contact
    (bounciness 1, friction 0), 0.5 L/s on the key vertex, 10 s."""
    mark, direction = SCENES[name].kick
    d = np.asarray(_direction(mesh, direction))
    kick = InitialVelocity(
        tuple((KICK * mesh.size * d / np.linalg.norm(d)).tolist()), vertex=mesh.landmarks[mark]
    )
    return SimulationConditions(
        velocities=(kick,),
        gravity=(0.0, 0.0, 0.0),
        pins=tuple(mesh.pins.tolist()),
        mass=SCENES[name].mass,
        stiffness=1.0,
        damping=0.0,
        bounciness=1.0,
        friction=0.0,
        frames=int(round(UNDAMPED_SECONDS * fps)) + 1,
        fps=fps,
        device="cpu",
    )


def lookup(scores: dict, key: str):
    """``scores[a][b]`` for the key "a.b" (None where missing)."""
    value: Any = scores
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def check_targets(
    name: str, scores: dict, undamped: dict | None, *, complete: bool, pinned: bool
) -> dict:
    """Target name -> {value, op, bound, pass} for scene ``name`` (``TARGETS`` and its
    docstring) from the main run's ``scores`` and the ``undamped`` run's record (None: not run).
    ``complete``: the main run made every frame (else every target of it fails); ``pinned``:
    the scene has pins."""
    wanted = list(TARGETS[name])
    if pinned:
        wanted.append(("pinned_drift", "<=", 1e-3))
    if not any(key == "motion" for key, _, _ in wanted):
        wanted.append(("motion", ">=", 0.01, "moves"))
    out = {}
    for key, op, bound, *label in wanted:
        value = lookup(scores, key)
        ok = value is not None and math.isfinite(value) and complete
        ok = ok and (value >= bound if op == ">=" else value <= bound)
        out[label[0] if label else key] = {"value": value, "op": op, "bound": bound, "pass": ok}
    if undamped is not None:
        drift = undamped.get("energy_drift")
        ok = drift is not None and drift < 0.01 and undamped.get("complete", False)
        out["energy_drift"] = {"value": drift, "op": "<", "bound": 0.01, "pass": bool(ok)}
    return out
