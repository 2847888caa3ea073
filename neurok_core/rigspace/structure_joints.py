"""The rig space's joints from a given :class:`~neurok_core.structure.Structure` (``neurok
simulate --structure``): what an artist or a tool decided replaces what the geometry guessed.

Each joint of the structure becomes glue (design section 12) at points of the two parts'
interface (:func:`~.joints.find_interfaces`: where they touch at rest), or, for parts that do
not touch, at the nearest points between them:

- **fixed**: glue at up to ``WELD_POINTS`` points spread over the interface and the part (the
  two parts move as one rigid body; against the world, the part is held where it is);
- **hinge**: glue at three points on the joint's axis line (through its point, along its axis),
  spanning the interface's extent along it: the part turns about that line and nothing else;
- **slider**: the slider's glue (:class:`~.energies.SliderGlue`) at the ends of the part's
  and the interface's span on the axis and two levers across it at its middle: the part slides
  along the axis only;
- **ball**: glue at the joint's point;
- **contact**: no glue (the parts only meet).

For now the structure's parts must be those the mesh's geometry gives
(:func:`~.bones.geometric_bones`, as ``neurok structure`` writes them; their numbering may
differ) and keep their kinds: a :class:`~neurok_core.errors.StructureError` says so otherwise.
Its limits are not enforced yet.

Shapes: vertices (N, 3) float64 metres; faces (F, 3) int64.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..errors import StructureError
from ..geometry import farthest_point_subsample
from .bones import BoneLayout
from .joints import BRIDGE, Joint, find_interfaces

WELD_POINTS = 6  # glue points of a fixed joint, spread over its interface
NEAREST = 32  # for parts that do not touch: each part's vertices nearest the other's

# the structure's part kinds -> the rig space's
_KIND = {"rigid": "rigid", "bending solid": "elastic", "cloth": "sheet", "rope": "chain"}


def part_mapping(structure, layout: BoneLayout) -> np.ndarray:
    """(P_s,) the layout's part of each of the structure's parts; a StructureError where the
    structure's parts are not the geometry's (a part split or merged). Their kinds are the
    structure's (:func:`part_kinds`: the layout is made with them)."""
    labels, parts = structure.labels, layout.parts
    pairs = np.unique(np.stack([labels, parts], 1), axis=0)
    if len(pairs) != len(np.unique(labels)) or len(pairs) != len(np.unique(parts)):
        raise StructureError(
            "the structure's parts must be those of the mesh's geometry for now (as `neurok"
            " structure` writes them): edit the joints' types and axes, not the parts"
        )
    out = np.full(len(structure.parts), -1, dtype=np.int64)
    out[pairs[:, 0]] = pairs[:, 1]
    return out


def part_kinds(structure, layout: BoneLayout) -> dict:
    """{layout part: the rig space's kind} of the parts whose kind the structure changes (an
    artist's edit: a rope made a rigid rod, a rigid link a bending solid); a StructureError
    where an edit would make a solid part cloth or a cloth solid (a cloth is simulated at its
    own resolution: its kind is the mesh's)."""
    out = {}
    for s, p in enumerate(part_mapping(structure, layout)):
        if p < 0:
            continue
        given = _KIND.get(structure.parts[s].kind)
        found = layout.part_info[p].kind
        if given == found:
            continue
        if "sheet" in (given, found):
            raise StructureError(
                f"part {s}: a {_structure_kind(found)} cannot be made a"
                f" {structure.parts[s].kind} (a cloth's kind is its mesh's: an open, flat sheet)"
            )
        out[int(p)] = given
    return out


def _structure_kind(kind: str) -> str:
    return next((k for k, v in _KIND.items() if v == kind), kind)


def _contact_points(
    vertices, layout, a: int, b: int, interfaces, fixed_parts, size: float
) -> np.ndarray:
    """(M, 3) where parts ``a`` and ``b`` (-1: the world, the ``fixed_parts``) meet: their
    interface's samples, or for parts that do not touch (a bridge across a gap), each one's
    vertices nearest the other; a joint to a world farther than ``BRIDGE`` object sizes (the
    structure's bridges' reach) is refused."""
    found = interfaces.get((min(a, b), max(a, b))) if b >= 0 else interfaces.get((a, -1))
    if found is not None and len(found.near):
        return found.near
    va = vertices[layout.part_info[a].vertices]
    if b >= 0:
        vb = vertices[layout.part_info[b].vertices]
    else:
        pinned = [layout.part_info[p].vertices for p in np.flatnonzero(fixed_parts)]
        vb = vertices[np.concatenate(pinned)] if pinned else va[:0]
    da = cKDTree(vb).query(va)[0] if len(vb) else np.full(len(va), np.inf)
    if b < 0 and not da.min() <= BRIDGE * size:
        raise StructureError(
            f"a joint holds part {a} to the world, but it touches no pinned part: pin some"
            " of its vertices, or make the joint another part's"
        )
    db, _ = cKDTree(va).query(vb)
    near_a = va[np.argsort(da)[:NEAREST]]
    near_b = vb[np.argsort(db)[:NEAREST]]
    return np.concatenate([near_a, near_b])


def _axis_span(points, point, axis) -> tuple[float, float]:
    t = (points - point) @ axis
    lo, hi = float(t.min()), float(t.max())
    if hi - lo < 1e-9:
        reach = float(np.linalg.norm(points - point, axis=1).max(initial=0.0)) or 1e-3
        lo, hi = -reach, reach
    return lo, hi


def structure_joints(
    structure, vertices, faces, layout, fixed_parts, size: float, held=()
) -> list[Joint]:
    """The rig space's joints of ``structure`` on the mesh (module docstring); joints to the
    world of parts the pins already hold (``fixed_parts``, or ``held``: glued at their pins)
    are left to the pins."""
    held = set(int(p) for p in held)
    mapping = part_mapping(structure, layout)
    interfaces = {}
    for i in find_interfaces(vertices, faces, layout, fixed_parts, size):
        key = (i.part_a, i.part_b) if i.part_b < 0 else tuple(sorted((i.part_a, i.part_b)))
        interfaces[key] = i
    rng = np.random.default_rng(0)
    out = []
    for j in structure.joints:
        if j.type == "contact":
            continue
        a = int(mapping[j.part_a])
        b = int(mapping[j.part_b]) if j.part_b >= 0 else -1
        if a < 0 and b >= 0:
            a, b = b, -1
        if b < 0 and (a < 0 or fixed_parts[a] or a in held):
            continue  # the pins hold it (or the pinned parts among themselves)
        if b >= 0 and fixed_parts[a] and fixed_parts[b]:
            continue  # two pinned parts: the world holds both
        if b >= 0 and fixed_parts[a] and not fixed_parts[b]:
            a, b = b, a
        if b >= 0 and fixed_parts[b]:
            b = -1  # the pinned parts are the world
        points = _contact_points(vertices, layout, a, b, interfaces, fixed_parts, size)
        point = np.asarray(j.point, dtype=np.float64)
        if j.type == "fixed":
            # spread over the interface and over part a itself: a line interface (a lid's
            # edge) glued alone would still turn about it
            own = vertices[layout.part_info[a].vertices]
            pool = np.concatenate([points, own])
            count = min(WELD_POINTS, len(pool))
            glue = pool[farthest_point_subsample(pool, count, rng)]
            out.append(Joint(a, b, glue, "weld"))
        elif j.type == "ball":
            out.append(Joint(a, b, point[None], "ball"))
        else:
            axis = np.asarray(j.axis, dtype=np.float64)
            axis = axis / np.linalg.norm(axis)
            lo, hi = _axis_span(points, point, axis)
            if j.type == "hinge":
                line = point + np.array([lo, 0.5 * (lo + hi), hi])[:, None] * axis
                out.append(Joint(a, b, line, "hinge", axis))
            else:  # slider: the ends on the axis, two levers across it at the middle
                # spanning the part's own length along the axis (a drawer's depth, not only
                # the front edge it touches at rest), so that it cannot yaw as it slides out
                own = vertices[layout.part_info[a].vertices]
                lo, hi = _axis_span(np.concatenate([points, own]), point, axis)
                across = points - point - np.outer((points - point) @ axis, axis)
                width = float(np.linalg.norm(across, axis=1).max(initial=0.0))
                side = np.cross(axis, [1.0, 0.0, 0.0])
                if np.linalg.norm(side) < 0.5:
                    side = np.cross(axis, [0.0, 1.0, 0.0])
                side /= np.linalg.norm(side)
                lever = max(width, 0.25 * (hi - lo))
                mid = point + 0.5 * (lo + hi) * axis
                glue = np.stack(
                    [point + lo * axis, point + hi * axis, mid + lever * side, mid - lever * side]
                )
                out.append(Joint(a, b, glue, "slider", axis))
    return out


__all__ = ["part_kinds", "part_mapping", "structure_joints"]
