"""What moves how: an object's parts, each part's kind and the joints between touching parts
(the JSON schema in ``docs/structure.md``).

A :class:`Structure` is a plain value: a part label per vertex, a :class:`Part` (kind and
confidence) per part and a :class:`PartJoint` per touching pair. :func:`find_structure` reads it
off what the rig space already decides from geometry (design section 12), then lets the
bundled joint typer (:mod:`neurok_core.structure_learned`) type the joints between parts and
choose their axes where a joint is like those it was trained on. From geometry:

- parts and their kinds from :func:`~neurok_core.rigspace.bones.geometric_bones` (loose parts,
  split where a closed part bends): rigid -> "rigid", chain -> "rope", sheet -> "cloth",
  elastic -> "bending solid";
- joints from the interfaces of :func:`~neurok_core.rigspace.joints.find_interfaces` and the
  kind :func:`~neurok_core.rigspace.joints.interface_joints` gives each: weld -> "fixed",
  hinge, revolute and axle -> "hinge" (about the joint's axis), slider -> "slider" (along its
  axis), ball -> "ball", an interface with no
  glue (a wide patch) -> "contact" (the parts only touch);
- pieces that nothing joins, a small gap apart, joined across it (:func:`bridges`);
- pins as :func:`~neurok_core.rigspace.space.pin_role` decides: a part held fully is "fixed" to
  the world (part -1), a rigid part pinned at a point or along a line a "ball" or "hinge" to it
  (:meth:`~neurok_core.rigspace.joints.Joint.to_world`), a part that bends, pinned somewhere, is
  "fixed" to the world at its pins (it still bends about them). Pinned parts are one world
  body: a joint to one of them is a joint to -1. A pin is the user's word: confidence 1.

Confidence. Every decision is a threshold test on a measure (an interface's extent against
the ball's, the line's, the disc's threshold; a part's slenderness against the rope's); a
decision taken far from its thresholds is clear. With r the ratio of the measure to its
threshold, a test's clarity is ``1 - 0.5 min(r, 1/r)`` (0.5 at the threshold, 0.75 a factor 2
away, 0.95 a factor 10), and a decision's confidence is the least clarity of the tests that led
to it (:func:`clarity`). Limits are not found from geometry (None).

Shapes: vertices (N, 3) float64 metres; faces (F, 3) int64; labels (N,) int64.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial import cKDTree

from .errors import StructureError
from .geometry import sample_surface_points
from .rigspace.bones import ROPE_SLENDERNESS, PartInfo, geometric_bones
from .rigspace.joints import (
    AXLE_DISTINCT,
    AXLE_OFF,
    AXLE_ROUND,
    BRIDGE,
    DISC,
    LINE,
    POINT,
    SLIDE_KEEP,
    Interface,
    InterfaceFrame,
    Joint,
    find_axle,
    find_interfaces,
    find_slider,
    interface_joints,
)
from .rigspace.space import pin_role
from .sheets import FLAT, flatness

FORMAT = "neurok-structure"
VERSION = 1
PART_KINDS = ("rigid", "bending solid", "cloth", "rope")
JOINT_TYPES = ("fixed", "hinge", "slider", "ball", "contact")
AXIS_TYPES = ("hinge", "slider")  # the types that need an axis
WORLD = -1
UNIT_TOLERANCE = 1e-3  # an axis' length may differ from 1 by this much
BRIDGE_SAMPLES = 500  # surface points of a part that ``bridges`` measures its gaps with

# the rig space's kinds -> the structure's
_PART_KIND = {"rigid": "rigid", "elastic": "bending solid", "sheet": "cloth", "chain": "rope"}
_JOINT_TYPE = {
    "weld": "fixed",
    "hinge": "hinge",
    "revolute": "hinge",
    "axle": "hinge",
    "slider": "slider",
    "ball": "ball",
    "pin-ball": "ball",
    "pin-hinge": "hinge",
}


@dataclass(frozen=True)
class Part:
    """One part: its ``kind`` (one of ``PART_KINDS``) and the ``confidence`` in it, in [0, 1]."""

    kind: str
    confidence: float


@dataclass(frozen=True)
class PartJoint:
    """A joint of ``type`` (one of ``JOINT_TYPES``) between ``part_a`` and ``part_b`` (-1: the
    world, the pinned parts); ``axis``: a unit vector (a hinge's rotation axis, a slider's
    direction; None for the other types); ``point`` (3,) metres: on the axis, or the
    interface's centre; ``limits``: (lower, upper) radians (hinge) or metres (slider) from the
    rest pose, None where not known; ``confidence`` in [0, 1]."""

    type: str
    part_a: int
    part_b: int
    point: tuple[float, float, float]
    axis: tuple[float, float, float] | None = None
    limits: tuple[float, float] | None = None
    confidence: float = 1.0


@dataclass(frozen=True, eq=False)
class Structure:
    """An object's structure: ``labels`` (N,) int64 the part of each vertex, ``parts`` one
    :class:`Part` per label, ``joints`` the joints between touching parts. Checked on
    construction (:class:`~neurok_core.errors.StructureError` on a bad value)."""

    labels: np.ndarray
    parts: tuple[Part, ...]
    joints: tuple[PartJoint, ...] = field(default_factory=tuple)

    def __post_init__(self):
        _check(self)

    @property
    def num_vertices(self) -> int:
        return int(len(self.labels))

    def bodies(self) -> np.ndarray:
        """(N,) int64 labels with the parts that "fixed" joints join made one (the world's
        fixed parts one body with each other), numbered 0.. in order of first vertex: the
        bodies that move as one."""
        count = len(self.parts) + 1  # the world last
        owner = np.arange(count)

        def root(i: int) -> int:
            while owner[i] != i:
                i = owner[i]
            return i

        for j in self.joints:
            if j.type == "fixed":
                a, b = root(j.part_a % count), root(j.part_b % count)
                owner[max(a, b)] = min(a, b)
        body = np.array([root(i) for i in range(count)])[self.labels]
        return np.unique(body, return_inverse=True)[1].reshape(-1).astype(np.int64)

    def to_json(self) -> str:
        """The structure as JSON text (``docs/structure.md``)."""
        return json.dumps(
            {
                "format": FORMAT,
                "version": VERSION,
                "num_vertices": self.num_vertices,
                "parts": [{"kind": p.kind, "confidence": p.confidence} for p in self.parts],
                "vertex_parts": self.labels.tolist(),
                "joints": [_joint_dict(j) for j in self.joints],
            },
            indent=1,
        )

    @classmethod
    def from_json(cls, text: str, num_vertices: int) -> Structure:
        """The structure in JSON ``text`` for a mesh of ``num_vertices`` vertices; a
        :class:`~neurok_core.errors.StructureError` that says what is wrong otherwise."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise StructureError(f"the structure is not JSON ({exc})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StructureError(f'the structure must be a JSON object with "format": "{FORMAT}"')
        if data.get("version") != VERSION:
            raise StructureError(f"structure version {data.get('version')!r}: expected {VERSION}")
        labels = _field(data, "vertex_parts", list)
        if len(labels) != num_vertices or data.get("num_vertices", num_vertices) != num_vertices:
            raise StructureError(
                f"the structure is for {len(labels)} vertices, the mesh has {num_vertices}"
            )
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in labels):
            raise StructureError("vertex_parts: expected one whole part index per vertex")
        parts = []
        for i, p in enumerate(_field(data, "parts", list)):
            if not isinstance(p, dict):
                raise StructureError(f"parts[{i}]: expected an object with kind and confidence")
            parts.append(Part(p.get("kind"), _number(p.get("confidence", 1.0), f"parts[{i}]")))
        joints = []
        for i, j in enumerate(_field(data, "joints", list)):
            if not isinstance(j, dict):
                raise StructureError(f"joints[{i}]: expected an object")
            pair = j.get("parts")
            if not isinstance(pair, list) or len(pair) != 2:
                raise StructureError(f"joints[{i}].parts: expected two part indices")
            joints.append(
                PartJoint(
                    type=j.get("type"),
                    part_a=pair[0],
                    part_b=pair[1],
                    point=_vector(j.get("point"), 3, f"joints[{i}].point"),
                    axis=_vector(j["axis"], 3, f"joints[{i}].axis") if j.get("axis") else None,
                    limits=_vector(j["limits"], 2, f"joints[{i}].limits")
                    if j.get("limits") is not None
                    else None,
                    confidence=_number(j.get("confidence", 1.0), f"joints[{i}].confidence"),
                )
            )
        return cls(np.asarray(labels, dtype=np.int64), tuple(parts), tuple(joints))


def _joint_dict(j: PartJoint) -> dict:
    return {
        "type": j.type,
        "parts": [int(j.part_a), int(j.part_b)],
        "axis": None if j.axis is None else [float(c) for c in j.axis],
        "point": [float(c) for c in j.point],
        "limits": None if j.limits is None else [float(c) for c in j.limits],
        "confidence": float(j.confidence),
    }


def _field(data: dict, name: str, kind: type):
    if not isinstance(data.get(name), kind):
        raise StructureError(f"the structure's {name!r} is missing or not a {kind.__name__}")
    return data[name]


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StructureError(f"{what}: expected a number, got {value!r}")
    return float(value)


def _vector(value, count: int, what: str) -> tuple[float, ...]:
    if not isinstance(value, list) or len(value) != count:
        raise StructureError(f"{what}: expected {count} numbers, got {value!r}")
    return tuple(_number(v, what) for v in value)


def _check(s: Structure) -> None:
    """Refuse a structure whose fields disagree (the rules of ``docs/structure.md``)."""
    labels = np.asarray(s.labels)
    count = len(s.parts)
    if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
        raise StructureError("vertex_parts: expected one whole part index per vertex")
    if len(labels) and (labels.min() < 0 or labels.max() >= count):
        bad = int(labels[(labels < 0) | (labels >= count)][0])
        raise StructureError(f"vertex_parts: part {bad} out of range (there are {count} parts)")
    for i, p in enumerate(s.parts):
        if p.kind not in PART_KINDS:
            raise StructureError(f"parts[{i}]: kind {p.kind!r} is none of {', '.join(PART_KINDS)}")
        _check_confidence(p.confidence, f"parts[{i}]")
    for i, j in enumerate(s.joints):
        what = f"joints[{i}]"
        if j.type not in JOINT_TYPES:
            raise StructureError(f"{what}: type {j.type!r} is none of {', '.join(JOINT_TYPES)}")
        for p in (j.part_a, j.part_b):
            if isinstance(p, bool) or not isinstance(p, int | np.integer) or not -1 <= p < count:
                raise StructureError(
                    f"{what}: part {p!r} out of range (0 to {count - 1}, or -1 for the world)"
                )
        if j.part_a == j.part_b:
            raise StructureError(f"{what}: joins part {j.part_a} to itself")
        if not np.isfinite(j.point).all():
            raise StructureError(f"{what}: point {j.point} is not finite")
        if j.type in AXIS_TYPES and j.axis is None:
            raise StructureError(f"{what}: a {j.type} needs an axis")
        if j.axis is not None and not abs(float(np.linalg.norm(j.axis)) - 1.0) <= UNIT_TOLERANCE:
            raise StructureError(f"{what}: axis {list(j.axis)} is not a unit vector")
        if j.limits is not None and not (
            np.isfinite(j.limits).all() and j.limits[0] <= j.limits[1]
        ):
            raise StructureError(f"{what}: limits {list(j.limits)} are not finite lower <= upper")
        _check_confidence(j.confidence, what)


def _check_confidence(value: float, what: str) -> None:
    if not 0.0 <= value <= 1.0:
        raise StructureError(f"{what}: confidence {value} is not within 0 to 1")


# -- from geometry -----------------------------------------------------------------------------
def clarity(measure: float, threshold: float) -> float:
    """How clearly ``measure`` passes or fails ``threshold`` (both > 0): 1 - 0.5 min(r, 1/r),
    r = measure / threshold (module docstring); 0.5 at the threshold, towards 1 far from it."""
    r = max(float(measure), 1e-300) / max(float(threshold), 1e-300)
    return 1.0 - 0.5 * min(r, 1.0 / r)


def part_kind(info: PartInfo, vertices: np.ndarray, faces: np.ndarray) -> Part:
    """The :class:`Part` of the rig space's part ``info`` (its ``faces`` (F, 3), global): its
    kind mapped (module docstring); its confidence the clarity of its slenderness against the
    rope's (``ROPE_SLENDERNESS``) and, for an open part, of its flatness against the cloth's
    (``FLAT``, as 1 - flatness)."""
    e = info.extents
    tests = [clarity(e[0] / max(e[1], 1e-12), ROPE_SLENDERNESS)]
    if not info.closed and len(faces):
        tests.append(clarity(max(1.0 - flatness(vertices, faces), 1e-6), 1.0 - FLAT))
    return Part(_PART_KIND[info.kind], min(tests))


def interface_confidence(interface: Interface, kind: str | None) -> float:
    """The confidence in the joint ``kind`` (the rig space's, None: no glue) of
    ``interface``: the least clarity of the tests of
    :func:`~neurok_core.rigspace.joints.interface_joint` that decided it (the overlap's depth
    count against 3; the extent against the ball's ``POINT``, the width against the line's
    ``LINE``, the extent against the disc's ``DISC``; an axle's roundness against ``AXLE_ROUND``,
    its roundness about other axes against ``AXLE_DISTINCT`` x that, its offset against
    ``AXLE_OFF``; a slider's extent against ``POINT`` and the share its slide keeps in touch
    against ``SLIDE_KEEP``, which also breaks a slider's tie with a hinge between the same
    bodies). A sleeve's own test is not measured."""
    if kind == "weld":
        return clarity(interface.deep, 3)
    if kind == "axle":
        axle = find_axle(interface)
        r = axle.round
        tests = [
            (r.roundness, AXLE_ROUND),
            (r.other, AXLE_DISTINCT * r.roundness),
            (axle.offset, AXLE_OFF),
        ]
        return min(clarity(max(m, 1e-6), t) for m, t in tests)
    frame = InterfaceFrame.of(interface.near)
    if kind == "slider":
        kept = find_slider(interface).kept
        small = float(min(interface.sizes))
        return min(clarity(frame.extents[0], POINT * small), clarity(max(kept, 1e-6), SLIDE_KEEP))
    e = np.maximum(frame.extents, 1e-12)
    small = float(min(interface.sizes))
    tests = [clarity(e[0], POINT * small)]
    if kind != "ball":
        tests.append(clarity(e[1], LINE * e[0]))
    if kind is None or (kind == "revolute" and e[0] < DISC * small):
        tests.append(clarity(e[0], DISC * small))
    if interface.deep:  # a few samples deep, not enough to weld
        tests.append(clarity(interface.deep, 3))
    return min(tests)


def _structure_joint(interface: Interface, joint: Joint | None) -> PartJoint:
    """The :class:`PartJoint` of one interface and its rig-space ``joint`` (module
    docstring)."""
    confidence = interface_confidence(interface, None if joint is None else joint.kind)
    pair = (interface.part_a, interface.part_b)
    if joint is None:
        return PartJoint("contact", *pair, _point(interface.near.mean(0)), confidence=confidence)
    return _from_rig_joint(joint, confidence)


def _from_rig_joint(joint: Joint, confidence: float) -> PartJoint:
    axis = None
    if _JOINT_TYPE[joint.kind] in AXIS_TYPES:
        axis = _point(joint.axis / np.linalg.norm(joint.axis))
    point = joint.points[0] if joint.kind == "weld" else joint.points.mean(0)
    return PartJoint(
        _JOINT_TYPE[joint.kind],
        int(joint.part_a),
        int(joint.part_b),
        _point(point),
        axis,
        confidence=confidence,
    )


def _point(x) -> tuple[float, float, float]:
    return tuple(float(c) for c in x)


def bridges(
    vertices, faces, face_part, labels, fixed_parts, joints, size: float
) -> list[PartJoint]:
    """Joints across the gaps between pieces that nothing else joins: the parts (``labels``
    (N,) of ``vertices``, ``face_part`` (F,) of ``faces``) fall into groups that ``joints``
    connect (the fixed parts one group with the world); the nearest two parts of two groups,
    closer than ``BRIDGE`` object sizes, are joined by a "ball" at the gap's middle
    (confidence 0.5: geometry cannot say more, the joint typer may), nearest gaps first,
    until no two groups are that near (a minimum spanning forest over the groups, as
    Kruskal's). A robot's links or a model's pieces built a few millimetres apart hang
    together; pieces farther apart stay loose."""
    count = int(labels.max()) + 1 if len(labels) else 0
    owner = np.arange(count + 1)  # the world last

    def root(i: int) -> int:
        while owner[i] != i:
            owner[i] = owner[owner[i]]
            i = owner[i]
        return i

    def join(a: int, b: int) -> bool:
        a, b = root(a), root(b)
        owner[max(a, b)] = min(a, b)
        return a != b

    for p in np.flatnonzero(fixed_parts):
        join(int(p), count)
    for j in joints:
        join(j.part_a % (count + 1), j.part_b % (count + 1))
    groups = {root(p) for p in range(count)}
    if len(groups) < 2:
        return []
    limit = BRIDGE * size
    rng = np.random.default_rng(0)
    points, boxes = [], []
    for p in range(count):
        mask = face_part == p
        v = vertices[labels == p]
        if mask.any():
            more = sample_surface_points(vertices, faces[mask], BRIDGE_SAMPLES, rng)
            v = np.concatenate([v, more])
        points.append(v)
        boxes.append((v.min(0), v.max(0)))
    lo = np.array([b[0] for b in boxes])  # (P, 3)
    hi = np.array([b[1] for b in boxes])
    pairs = []  # (gap, a, b, point)
    trees: dict[int, cKDTree] = {}
    for a in range(count):
        apart = np.maximum(np.maximum(lo[a + 1 :] - hi[a], lo[a] - hi[a + 1 :]), 0.0)
        for b in a + 1 + np.flatnonzero(np.linalg.norm(apart, axis=1) <= limit):
            if root(a) == root(int(b)):
                continue
            if int(b) not in trees:
                trees[int(b)] = cKDTree(points[b])
            tree = trees[int(b)]
            d, k = tree.query(points[a], distance_upper_bound=limit)
            i = int(np.argmin(d))
            if np.isfinite(d[i]):
                middle = 0.5 * (points[a][i] + points[b][k[i]])
                pairs.append((float(d[i]), a, int(b), middle))
    out = []
    for _, a, b, middle in sorted(pairs, key=lambda x: x[:3]):
        if join(a, b):
            out.append(PartJoint("ball", a, b, _point(middle), confidence=0.5))
    return out


def find_structure(
    vertices, faces, pins=(), learned: bool = True, typer=None, mode: str = "learned"
) -> Structure:
    """The :class:`Structure` of a mesh (``vertices`` (N, 3) metres, ``faces`` (F, 3)) with the
    vertices ``pins`` held, from its geometry (module docstring) and, unless ``learned`` is
    False, its joints between parts typed and their axes chosen by the bundled joint typer
    where a joint is like those it was trained on
    (:func:`neurok_core.structure_learned.retype` in ``mode``, by ``typer`` or the bundled
    one; figures in docs/experiments/structure.md); the others, and the axles geometry finds
    (a round part turning about its own axis), keep geometry's type."""
    vertices = np.asarray(vertices, dtype=np.float64)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    size = float(np.ptp(vertices, axis=0).max()) if len(vertices) else 1.0
    size = size if size > 0 else 1.0
    layout = geometric_bones(vertices, faces, elastic=False)
    face_part = layout.part_of_faces(faces)
    pinned = np.zeros(len(vertices), dtype=bool)
    pinned[np.asarray(sorted(set(int(p) for p in pins)), dtype=np.int64)] = True
    fixed_parts = np.zeros(len(layout.part_info), dtype=bool)
    parts, joints = [], []
    for p, info in enumerate(layout.part_info):
        parts.append(part_kind(info, vertices, faces[face_part == p]))
        mine = pinned[info.vertices]
        role = pin_role(info, mine, vertices, size)
        held = vertices[info.vertices[mine]]
        if role == "glue":
            joints.append(_from_rig_joint(Joint.to_world(p, held, size), 1.0))
        elif role is not None:
            fixed_parts[p] = role == "fixed"
            joints.append(PartJoint("fixed", p, WORLD, _point(held.mean(0))))
    interfaces = find_interfaces(vertices, faces, layout, fixed_parts, size)
    found = interface_joints(interfaces)
    axles = [len(joints) + k for k, j in enumerate(found) if j is not None and j.kind == "axle"]
    joints += [_structure_joint(i, j) for i, j in zip(interfaces, found, strict=True)]
    joints += bridges(vertices, faces, face_part, layout.parts, fixed_parts, joints, size)
    structure = Structure(layout.parts.astype(np.int64), tuple(parts), tuple(joints))
    if learned:
        from .structure_learned import retype

        structure = retype(vertices, structure, typer, mode=mode, keep=axles)
    return structure


__all__ = [
    "JOINT_TYPES",
    "PART_KINDS",
    "Part",
    "PartJoint",
    "Structure",
    "clarity",
    "find_structure",
    "interface_confidence",
    "part_kind",
]
