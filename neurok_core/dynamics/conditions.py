"""Physical conditions of a simulation as typed, validated, frozen values (design section 7).

Units are world units: metres, seconds, kilograms, newtons. Frames are 0-based indices of the
simulated animation (frame 0 is the rest shape, at time 0; frame f is at time f / fps); the caller
maps its scene frames onto them. A condition that acts "from frame a to frame b" acts during the
time interval [a / fps, b / fps].

Where a condition is applied to the object it names either a mesh ``vertex`` (an index) or a
``point`` (a position in metres on or near the rest surface; the kinematic space attaches it to the
surface). Both are turned into an :class:`Anchor`; the dynamics track one point per anchor.

Everything here is plain Python (no torch, no numpy at import), so the Blender side can build and
validate conditions, and they cross the worker boundary as JSON through ``to_dict``/``from_dict``.
Every bad value raises :class:`~neurok_core.errors.ConditionError` with a message that says what
to change. Construction checks each value on its own; :meth:`SimulationConditions.validate` adds
the checks that need the mesh (vertex indices in range, pins not covering every vertex).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ..errors import ConditionError

Vec3 = tuple[float, float, float]

DEVICES = ("auto", "cpu", "cuda", "mps")
# the coordinates a motion is integrated in (``NeuROK.simulate(dynamics=)``, ``--dynamics``, the
# worker's request): the learned latent space, or the rig space (the bones' rigid motions)
DYNAMICS = ("latent", "rig")
# the default of all three: the rig space (it needs no model, and wins the motion scenes)
DEFAULT_DYNAMICS = "rig"
MAX_FRAMES = 100_000
MAX_STIFFNESS_HZ = 100.0
MAX_SUBSTEPS = 1024
MAX_COLLIDER_FACES = 200_000


def _vec3(value: Any, what: str, *, nonzero: bool = False) -> Vec3:
    """A finite 3-vector as a tuple of floats."""
    try:
        items = [float(v) for v in value]
    except (TypeError, ValueError):
        raise ConditionError(f"{what} must be 3 numbers, got {value!r}") from None
    if len(items) != 3:
        raise ConditionError(f"{what} must be 3 numbers, got {len(items)}")
    if not all(math.isfinite(v) for v in items):
        raise ConditionError(f"{what} contains NaN or infinity: {items}")
    if nonzero and math.sqrt(sum(v * v for v in items)) < 1e-12:
        raise ConditionError(f"{what} has zero length; give a direction")
    return (items[0], items[1], items[2])


def _scaled_unit(direction: Vec3, length: float) -> Vec3:
    n = math.sqrt(sum(v * v for v in direction))
    return (length * direction[0] / n, length * direction[1] / n, length * direction[2] / n)


def _index(value: Any, what: str) -> int:
    """A non-negative integer (bools and non-integral numbers are refused)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConditionError(f"{what} must be a whole number, got {value!r}")
    value = int(value)
    if value < 0:
        raise ConditionError(f"{what} must be >= 0, got {value}")
    return value


def _pin_indices(pins) -> tuple[int, ...]:
    """Sorted unique vertex indices of ``pins``: integers (or an integer array's) at once (a
    live preview sends 10,000 pins at every change), anything else index by index (refusing
    bools, fractions and negatives as ``_index`` does). No numpy here: Blender's side
    imports this module without it."""
    values = pins.tolist() if hasattr(pins, "tolist") else pins
    if isinstance(values, (list, tuple)) and all(type(p) is int for p in values):
        unique = sorted(set(values))
        if unique and unique[0] < 0:
            raise ConditionError(f"pinned vertex must be >= 0, got {unique[0]}")
        return tuple(unique)
    return tuple(sorted({_index(p, "pinned vertex") for p in values}))


def _number(value: Any, what: str, *, low: float, low_open: bool, high: float = math.inf) -> float:
    """A finite float in (low, high] or [low, high]."""
    if isinstance(value, bool):
        raise ConditionError(f"{what} must be a number, got {value!r}")
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConditionError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(x):
        raise ConditionError(f"{what} must be finite, got {x}")
    if x < low or (low_open and x == low):
        bound = ">" if low_open else ">="
        raise ConditionError(f"{what} must be {bound} {low:g}, got {x:g}")
    if x > high:
        raise ConditionError(f"{what} must be <= {high:g}, got {x:g}")
    return x


TRACKED_PINS = 24
"""Pinned vertices the dynamics track (a well-spread subset); every pinned vertex is still held
exactly (the clamp of ``neurok_core.pinclamp`` blends the nearest tracked ones)."""


@dataclass(frozen=True)
class Anchor:
    """Where a condition grabs the object: a mesh vertex index or a point (metres)."""

    vertex: int | None = None
    point: Vec3 | None = None

    def __post_init__(self):
        if (self.vertex is None) == (self.point is None):
            raise ConditionError("give exactly one of vertex (an index) or point (x, y, z)")
        if self.vertex is not None:
            object.__setattr__(self, "vertex", _index(self.vertex, "vertex"))
        else:
            object.__setattr__(self, "point", _vec3(self.point, "point"))

    def describe(self) -> str:
        return f"vertex {self.vertex}" if self.vertex is not None else f"point {self.point}"


def _anchor_of(obj: Any, what: str, *, optional: bool = False) -> Anchor | None:
    """Normalise the vertex/point fields of a condition and return its anchor."""
    if optional and obj.vertex is None and obj.point is None:
        return None
    try:
        anchor = Anchor(vertex=obj.vertex, point=obj.point)
    except ConditionError as err:
        raise ConditionError(f"{what}: {err}") from None
    object.__setattr__(obj, "vertex", anchor.vertex)
    object.__setattr__(obj, "point", anchor.point)
    return anchor


@dataclass(frozen=True)
class Force:
    """A constant force on a surface point from ``start_frame`` to ``end_frame``.

    direction: (3,) any non-zero length (only its direction counts); strength: newtons, >= 0;
    end_frame: None means until the last frame. Enters the dynamics as J^T f.
    """

    direction: Vec3
    strength: float
    vertex: int | None = None
    point: Vec3 | None = None
    start_frame: int = 0
    end_frame: int | None = None

    def __post_init__(self):
        _anchor_of(self, "force")
        _timed_push(self, "force")

    @property
    def anchor(self) -> Anchor:
        return Anchor(self.vertex, self.point)

    @property
    def vector(self) -> Vec3:
        """The force in newtons, (3,): strength times the unit direction."""
        return _scaled_unit(self.direction, self.strength)


@dataclass(frozen=True)
class Wind:
    """A uniform push on the whole object, spread over its surface in proportion to area.

    direction: (3,) non-zero (only its direction counts); strength: total force in newtons, >= 0.
    With area-weighted masses this is a per-point force f_i = strength * (m_i / m) * direction.
    """

    direction: Vec3
    strength: float
    start_frame: int = 0
    end_frame: int | None = None

    def __post_init__(self):
        _timed_push(self, "wind")

    @property
    def vector(self) -> Vec3:
        """The total wind force in newtons, (3,)."""
        return _scaled_unit(self.direction, self.strength)


@dataclass(frozen=True)
class Drag:
    """A drag handle: the grabbed point reaches ``target`` (metres) at ``frame``, then is let go.

    The hand takes the point from where it is at ``start_frame`` along a smooth path to the target
    (see ``dynamics.drag``); from ``frame`` on the object moves freely.
    """

    target: Vec3
    frame: int
    vertex: int | None = None
    point: Vec3 | None = None
    start_frame: int = 0

    def __post_init__(self):
        _anchor_of(self, "drag")
        object.__setattr__(self, "target", _vec3(self.target, "drag target"))
        object.__setattr__(self, "frame", _index(self.frame, "drag frame"))
        object.__setattr__(self, "start_frame", _index(self.start_frame, "drag start_frame"))
        if self.frame <= self.start_frame:
            raise ConditionError(
                f"drag on {self.anchor.describe()}: frame ({self.frame}) must come after "
                f"start_frame ({self.start_frame})"
            )

    @property
    def anchor(self) -> Anchor:
        return Anchor(self.vertex, self.point)


@dataclass(frozen=True)
class InitialVelocity:
    """An initial velocity (m/s) of a point, or of the whole object when no point is given."""

    velocity: Vec3
    vertex: int | None = None
    point: Vec3 | None = None

    def __post_init__(self):
        _anchor_of(self, "initial velocity", optional=True)
        object.__setattr__(self, "velocity", _vec3(self.velocity, "initial velocity"))

    @property
    def anchor(self) -> Anchor | None:
        """None for a uniform velocity of the whole object."""
        if self.vertex is None and self.point is None:
            return None
        return Anchor(self.vertex, self.point)


@dataclass(frozen=True)
class Collider:
    """A static obstacle: a triangle mesh in the simulation's frame (world space in Blender).

    vertices: ((x, y, z), ...) metres; faces: ((i, j, k), ...) vertex indices (polygons split
    into triangles by the caller); name: for messages. Closed meshes are solid; an open one (a
    floor plane) is solid on the side opposite its faces' normals.
    """

    vertices: tuple[Vec3, ...]
    faces: tuple[tuple[int, int, int], ...]
    name: str = "collider"

    def __post_init__(self):
        name = str(self.name)
        object.__setattr__(self, "name", name)
        for what, items in (("vertices", self.vertices), ("faces", self.faces)):
            if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
                raise ConditionError(f"collider '{name}': {what} must be a list of triples")
        verts = tuple(_vec3(v, f"collider '{name}' vertex") for v in self.vertices)
        faces = []
        for f in self.faces:
            try:
                tri = tuple(_index(i, f"collider '{name}' face index") for i in f)
            except TypeError:
                raise ConditionError(
                    f"collider '{name}': a face is not a triple of indices"
                ) from None
            if len(tri) != 3:
                raise ConditionError(
                    f"collider '{name}': faces must be triangles (3 indices), got {len(tri)}"
                )
            if max(tri) >= len(verts):
                raise ConditionError(
                    f"collider '{name}': a face uses vertex {max(tri)}, but it has "
                    f"{len(verts)} vertices"
                )
            faces.append(tri)
        if not faces:
            raise ConditionError(f"collider '{name}' has no faces: give it a surface")
        if len(faces) > MAX_COLLIDER_FACES:
            raise ConditionError(
                f"collider '{name}' has {len(faces)} triangles, more than {MAX_COLLIDER_FACES}:"
                " use a simpler proxy mesh (e.g. a Decimate modifier) as the collider"
            )
        object.__setattr__(self, "vertices", verts)
        object.__setattr__(self, "faces", tuple(faces))


def _timed_push(obj: Force | Wind, what: str) -> None:
    """Normalise direction, strength (N, >= 0) and the frame range of a force or wind."""
    object.__setattr__(obj, "direction", _vec3(obj.direction, f"{what} direction", nonzero=True))
    strength = _number(obj.strength, f"{what} strength (N)", low=0, low_open=False)
    object.__setattr__(obj, "strength", strength)
    object.__setattr__(obj, "start_frame", _index(obj.start_frame, f"{what} start_frame"))
    if obj.end_frame is not None:
        object.__setattr__(obj, "end_frame", _index(obj.end_frame, f"{what} end_frame"))
        if obj.end_frame <= obj.start_frame:
            raise ConditionError(
                f"{what}: end_frame ({obj.end_frame}) must come after start_frame "
                f"({obj.start_frame})"
            )


def _conditions_of(items: Any, cls: type, what: str) -> tuple:
    if isinstance(items, (str, bytes, dict)) or not hasattr(items, "__iter__"):
        raise ConditionError(f"{what} must be a list of {cls.__name__}, got {type(items).__name__}")
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict):
            item = _from_dict(cls, item, f"{what}[{i}]")
        if not isinstance(item, cls):
            raise ConditionError(f"{what}[{i}] must be a {cls.__name__}, got {type(item).__name__}")
        out.append(item)
    return tuple(out)


CLOTH_MATERIALS = ("cotton", "denim", "leather", "rubber", "silk")  # Blender's cloth presets


@dataclass(frozen=True)
class SimulationConditions:
    """Everything the simulator needs besides the object.

    gravity: (3,) m/s^2 (Blender's scene gravity; Z up).
    pins: vertex indices held at their rest positions.
    mass: total mass in kg (> 0), spread over the surface by area.
    stiffness: restoring frequency in Hz (>= 0): small motions about the rest shape oscillate at
        this frequency whatever the mass,
        V_s = 1/2 (2 pi stiffness)^2 sum_i m_i |x_i - x_i^rest|^2;
        0 for a free hinge, a few Hz for a wobbly jelly.
    damping: rate in 1/s (>= 0): kinetic energy decays like exp(-2 damping t) without other forces.
    frames: number of output frames including frame 0 (the rest shape), >= 1.
    fps: frames per second (> 0).
    substeps: None to choose automatically, or the minimum number of integration steps per frame.
    tolerance: allowed relative energy drift over 10 s of undamped motion (sets the step size).
    device: "auto" (cuda, then mps, then cpu), "cpu", "cuda" or "mps".
    ground: height (m) of a ground plane z = ground that the object rests on (None: none).
    colliders: static obstacle meshes (:class:`Collider`).
    friction: Coulomb friction coefficient of the contact with the ground and colliders (>= 0).
    bounciness: the contact's restitution, 0 to 1 (as Blender's rigid body Bounciness): an
        object that hits an obstacle leaves it at this share of the speed it came in with, so a
        dropped ball rebounds to bounciness^2 of its drop; 1 keeps the energy of an impact. The
        rig space gives each hitting point this share by an impulse; the latent dynamics damp
        their contact so that its restitution is this (``contact.restitution_damping``).
    material: a cloth's material, one of ``CLOTH_MATERIALS`` (Blender's cloth presets: it moves
        as Blender's preset does), or "" for the default one; acts on a cloth only (an object
        of open sheets in the rig space).
    self_collision: a cloth's layers kept apart, with friction between them (as Blender's
        cloth's Self Collisions; a cloth only, in the rig space; several times slower).
    With contact (a ground or colliders) and no pins, the object also moves as a whole (a free
    translation added to its learned coordinates), so it can fall onto what it meets.
    """

    forces: tuple[Force, ...] = ()
    drags: tuple[Drag, ...] = ()
    velocities: tuple[InitialVelocity, ...] = ()
    winds: tuple[Wind, ...] = ()
    gravity: Vec3 = (0.0, 0.0, -9.81)
    pins: tuple[int, ...] = ()
    mass: float = 1.0
    stiffness: float = 0.0
    damping: float = 0.0
    frames: int = 120
    fps: float = 24.0
    substeps: int | None = None
    tolerance: float = 5e-3
    device: str = "auto"
    ground: float | None = None
    colliders: tuple[Collider, ...] = ()
    friction: float = 0.5
    bounciness: float = 0.1
    material: str = ""
    self_collision: bool = False

    def __post_init__(self):
        s = object.__setattr__
        s(self, "forces", _conditions_of(self.forces, Force, "forces"))
        s(self, "drags", _conditions_of(self.drags, Drag, "drags"))
        s(self, "velocities", _conditions_of(self.velocities, InitialVelocity, "velocities"))
        s(self, "winds", _conditions_of(self.winds, Wind, "winds"))
        s(self, "gravity", _vec3(self.gravity, "gravity"))
        if isinstance(self.pins, (str, bytes)) or not hasattr(self.pins, "__iter__"):
            raise ConditionError(f"pins must be a list of vertex indices, got {self.pins!r}")
        s(self, "pins", _pin_indices(self.pins))
        s(self, "mass", _number(self.mass, "mass (kg)", low=0, low_open=True))
        s(
            self,
            "stiffness",
            _number(self.stiffness, "stiffness (Hz)", low=0, low_open=False, high=MAX_STIFFNESS_HZ),
        )
        s(self, "damping", _number(self.damping, "damping (1/s)", low=0, low_open=False))
        s(self, "fps", _number(self.fps, "fps", low=0, low_open=True))
        s(self, "tolerance", _number(self.tolerance, "tolerance", low=0, low_open=True, high=0.1))
        if isinstance(self.frames, int | float) and not isinstance(self.frames, bool):
            if self.frames < 1:  # one rule, one message (negative or zero)
                raise ConditionError(
                    f"frames must be between 1 and {MAX_FRAMES}, got {self.frames}"
                )
        frames = _index(self.frames, "frames")
        if not 1 <= frames <= MAX_FRAMES:
            raise ConditionError(f"frames must be between 1 and {MAX_FRAMES}, got {frames}")
        s(self, "frames", frames)
        if self.substeps is not None:
            sub = _index(self.substeps, "substeps")
            if not 1 <= sub <= MAX_SUBSTEPS:
                raise ConditionError(f"substeps must be between 1 and {MAX_SUBSTEPS}, got {sub}")
            s(self, "substeps", sub)
        if self.device not in DEVICES:
            raise ConditionError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")
        if self.ground is not None:
            s(
                self,
                "ground",
                _number(self.ground, "ground height (m)", low=-math.inf, low_open=True),
            )
        s(self, "colliders", _conditions_of(self.colliders, Collider, "colliders"))
        s(self, "friction", _number(self.friction, "friction", low=0, low_open=False, high=10.0))
        s(
            self,
            "bounciness",
            _number(self.bounciness, "bounciness", low=0, low_open=False, high=1.0),
        )
        if not isinstance(self.material, str) or self.material.lower() not in (
            "",
            *CLOTH_MATERIALS,
        ):
            raise ConditionError(
                f"material must be one of {', '.join(CLOTH_MATERIALS)} (or empty for the default);"
                f" got {self.material!r}"
            )
        s(self, "material", self.material.lower())
        if not isinstance(self.self_collision, bool):
            raise ConditionError(
                f"self_collision must be true or false, got {self.self_collision!r}"
            )
        s(self, "self_collision", bool(self.self_collision))
        self._check_frames()
        self._check_conflicts()

    @property
    def contact(self) -> bool:
        """Whether the object meets a ground or colliders."""
        return self.ground is not None or bool(self.colliders)

    # -- checks ------------------------------------------------------------------------------
    def _check_frames(self) -> None:
        last = self.frames - 1
        for what, items in (("force", self.forces), ("wind", self.winds)):
            for c in items:
                end = last if c.end_frame is None else c.end_frame
                if c.start_frame >= last or end > last:
                    raise ConditionError(
                        f"{what} acting from frame {c.start_frame} to {end} lies outside the "
                        f"animation (frames 0 to {last})"
                    )
        for d in self.drags:
            if d.frame > last:
                raise ConditionError(
                    f"drag on {d.anchor.describe()} arrives at frame {d.frame}, after the last "
                    f"frame {last}; lower its frame or simulate more frames"
                )

    def _check_conflicts(self) -> None:
        for i, a in enumerate(self.drags):
            for b in self.drags[i + 1 :]:
                if a.anchor == b.anchor and a.start_frame < b.frame and b.start_frame < a.frame:
                    raise ConditionError(
                        f"two drag handles hold {a.anchor.describe()} during overlapping frames"
                    )
        anchors = [v.anchor for v in self.velocities]
        if anchors.count(None) > 1:
            raise ConditionError("more than one uniform initial velocity; give a single one")
        named = [a for a in anchors if a is not None]
        if len(set(named)) != len(named):
            raise ConditionError("two initial velocities are given for the same point")
        pinned = set(self.pins)
        for d in self.drags:
            if d.vertex is not None and d.vertex in pinned:
                raise ConditionError(f"drag handle on vertex {d.vertex}, which is pinned")

    def validate(self, num_vertices: int) -> SimulationConditions:
        """Check the conditions against a mesh of ``num_vertices`` vertices; returns self."""
        n = _index(num_vertices, "number of vertices")
        if n == 0:
            raise ConditionError("the mesh has no vertices")
        for what, items in (
            ("force", self.forces),
            ("drag", self.drags),
            ("initial velocity", self.velocities),
        ):
            for c in items:
                if c.vertex is not None and c.vertex >= n:
                    raise ConditionError(
                        f"{what} on vertex {c.vertex}, but the mesh has {n} vertices "
                        f"(indices 0 to {n - 1})"
                    )
        if self.pins and self.pins[-1] >= n:
            raise ConditionError(
                f"pinned vertex {self.pins[-1]} out of range: the mesh has {n} vertices"
            )
        if len(self.pins) >= n:
            raise ConditionError("every vertex is pinned, so nothing can move; unpin some vertices")
        return self

    # -- anchors -----------------------------------------------------------------------------
    def anchors(self, vertices: Any = None, max_pins: int = TRACKED_PINS) -> tuple[Anchor, ...]:
        """The points the dynamics must track, unique, in a fixed order.

        Order: forces, drags, point velocities, then pinned vertices. When more than ``max_pins``
        vertices are pinned, a well-spread subset of ``max_pins`` is tracked: farthest-point
        sampling over ``vertices`` (N, 3) when given, else evenly spaced indices.
        """
        out: dict[Anchor, None] = {}
        for c in (*self.forces, *self.drags, *self.velocities):
            if c.anchor is not None:
                out.setdefault(c.anchor, None)
        for v in pin_subset(self.pins, vertices, max_pins):
            out.setdefault(Anchor(vertex=v), None)
        return tuple(out)

    # -- JSON --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-friendly dict (lists, numbers, strings, None)."""
        # field by field: ``asdict`` deep-copies every pin and collider vertex one by one
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "pins":
                out[f.name] = [int(i) for i in value]
            elif f.name == "colliders":  # big tuples of tuples: lists of lists, no deep copy
                out[f.name] = [
                    {
                        g.name: [list(item) for item in getattr(c, g.name)]
                        if isinstance(getattr(c, g.name), tuple)
                        else getattr(c, g.name)
                        for g in dataclasses.fields(c)
                    }
                    for c in value
                ]
            else:
                out[f.name] = _to_jsonable(value)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SimulationConditions:
        """Inverse of ``to_dict``; unknown or missing keys raise ConditionError."""
        return _from_dict(cls, data, "conditions")


def pin_subset(pins: tuple[int, ...], vertices: Any, max_pins: int) -> tuple[int, ...]:
    """At most ``max_pins`` pinned vertices, spread over the pinned region."""
    if max_pins < 1:
        raise ValueError("max_pins must be >= 1")
    if len(pins) <= max_pins:
        return tuple(pins)
    if vertices is None:
        step = len(pins) / max_pins
        return tuple(pins[int(i * step)] for i in range(max_pins))
    import numpy as np

    pos = np.asarray(vertices, dtype=np.float64)[list(pins)]  # (P, 3)
    chosen = [0]
    dist = np.linalg.norm(pos - pos[0], axis=1)  # (P,)
    for _ in range(max_pins - 1):
        i = int(np.argmax(dist))
        chosen.append(i)
        dist = np.minimum(dist, np.linalg.norm(pos - pos[i], axis=1))
    return tuple(sorted(pins[i] for i in chosen))


def _to_jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _to_jsonable(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {k: _to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_jsonable(v) for v in value]
    return value


def _from_dict(cls: type, data: Any, what: str) -> Any:
    if not isinstance(data, dict):
        raise ConditionError(f"{what} must be a JSON object, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConditionError(
            f"{what}: unknown key(s) {', '.join(unknown)}; expected some of {', '.join(fields)}"
        )
    required = [
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    missing = [name for name in required if name not in data]
    if missing:
        raise ConditionError(f"{what}: missing key(s) {', '.join(missing)}")
    try:
        return cls(**data)
    except ConditionError as err:
        raise ConditionError(f"{what}: {err}") from None


__all__ = [
    "Anchor",
    "CLOTH_MATERIALS",
    "Collider",
    "Drag",
    "Force",
    "InitialVelocity",
    "SimulationConditions",
    "Wind",
    "pin_subset",
]
