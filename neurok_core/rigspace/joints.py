"""Joints where parts touch at rest, decided by the shape of the interface (design section 12).

The parts held fully by pins are one static body (the world). For every moving part, the
interface with the world and with each other moving part is the set of its surface samples
within ``TOUCH`` object sizes of the other's surface (and theirs of its). Glue (zero-length
springs, :class:`~neurok_core.rigspace.energies.Glue`) at points **on one line** leaves the
rotation about that line free, so the interface's shape decides the joint:

- the parts overlap round an axle (one of them round about an axis, ``AXLE_ROUND``, the overlap
  centred on that axis, ``AXLE_OFF``, and that part not a rod sunk by its end into the other:
  a pin through a blade, an axle through a hub, a pole into a swivel): an **axle**, a revolute
  joint about that axis, glue at three points on it (:func:`find_axle`);
- the parts overlap otherwise (one sunk into the other): a **weld**, glue at spread points;
- the interface is small in every direction (a point): a **ball**, glue at its centre;
- it is long and thin (a line: its second extent under ``LINE`` x its first): a **hinge**
  about it, glue at its two ends and its middle;
- a sleeve round an axis (a cap's skirt round a bottle's neck, a wheel's bore round its axle:
  the interface's outer points surround the axis on every side, ``SECTORS`` of them, over a
  length along it of ``SLEEVE`` x their radius at least): a **revolute** joint about the axis,
  glue at three points on it;
- a patch small against the parts (a disc: its extent under ``DISC`` x the smaller part's
  size): a **revolute** joint about its normal, glue at its centre and at two points on the
  normal, one on each side;
- a wide patch (a drawer's front against its cabinet, a box on a table): **no glue**: the parts
  only touch (contact), so they can slide apart or separate;
- before the line, sleeve and patch rules, a **slider** (:func:`find_slider`, probed with
  small rigid motions of part a against b, :class:`MotionProbe`): a line on no plate's edge
  that part a cannot turn about, either way, but can shift along, one way at least, keeping
  half the interface in touch (a sash's bar lying in its track, a runner on its rail); or
  any other interface that shifts so along exactly one of its principal axes and turns about
  none (a box in a sleeve open at its end). Glue only across the axis at four points (two on
  it, two levers off it; :class:`~neurok_core.rigspace.energies.SliderGlue`), so the part
  slides and does nothing else. A part whose sliders would run along two directions has none
  (:func:`interface_joints`: a lid lying on a chest's four walls). No range yet: the glue holds
  the line however far the part slides.

Two segments of one loose part (a part that bends, :func:`~neurok_core.rigspace.bones.
bend_segments`) are joined where they share vertices: their seam is the interface (a welded
hinge's shared edge is a line: a hinge), whatever else of their surfaces comes near.

A part that touches nothing is free (it falls under gravity). The joint's glue points come with
their kind for the run's report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..dynamics.obstacles import MeshDistance
from ..geometry import sample_surface_points

TOUCH = 0.01  # object sizes: surfaces closer than this touch
BRIDGE = 0.05  # object sizes: pieces nothing joins, this near, are joined across the gap
OVERLAP = 0.002  # object sizes: deeper than this inside the other part: the parts overlap
LINE = 0.25
DISC = 0.6
POINT = 0.1
SLEEVE = 0.3
SECTORS = 8
SAMPLES_PER_PART = 1500
AXLE_ROUND = 0.2  # a part is round about an axis: its outline's radius varies less than this
AXLE_SECTORS = 16  # ... over this many angular sectors about the axis (a square's: 0.29)
AXLE_DISTINCT = 2.0  # ... and by this x more about its other principal axes (a ball is round
# about every axis, a cube's corners nearly so: neither is an axle)
AXLE_OFF = 0.3  # the overlap's centre within this x the round part's radius of its axis
AXLE_ROD = 3.0  # a round part longer than this x its diameter, overlapping only at its end
AXLE_END = 0.7  # (the overlap's middle beyond this x its half-length from its own middle): a
# rod sunk into the other part (a spoke into a rim, an arm into its knuckle), welded
SLIDE = 2.0  # x TOUCH: how far a probe moves the interface's points (find_slider)
SLIDE_KEEP = 0.5  # a slide keeps this share of the interface's points in touch at least
MAX_TURN = 0.5  # radians: the most a probe turns a part
PLATE = 4.0  # a part whose second extent is this x its thickness is a plate (find_slider)
SLIDE_SPREAD = 10.0  # degrees: a part's sliders along axes further apart are none


@dataclass(frozen=True)
class Joint:
    """Glue between ``part_a`` and ``part_b`` (-1: the world, at rest) at ``points`` (G, 3)
    metres, of ``kind`` (weld, ball, hinge, revolute, axle, slider, pin), with the interface's
    ``axis`` (a slider's: the line it slides along)."""

    part_a: int
    part_b: int
    points: np.ndarray
    kind: str
    axis: np.ndarray | None = None

    def describe(self) -> dict:
        out = {"kind": self.kind, "parts": [int(self.part_a), int(self.part_b)]}
        if self.axis is not None:
            out["axis"] = [round(float(c), 4) for c in self.axis]
        return out

    @classmethod
    def to_world(cls, part: int, pinned: np.ndarray, size: float) -> Joint:
        """A rigid part pinned at a point or along a line: a ball or a hinge to the world."""
        centre = pinned.mean(0)
        d = pinned - centre
        if len(pinned) < 2 or np.abs(d).max() < POINT * size * 0.1:
            return cls(part, -1, centre[None], "pin-ball")
        _, _, vt = np.linalg.svd(d, full_matrices=False)
        axis = vt[0]
        s = d @ axis
        points = centre + np.array([s.min(), 0.5 * (s.min() + s.max()), s.max()])[:, None] * axis
        return cls(part, -1, points, "pin-hinge", axis)


@dataclass(frozen=True)
class Interface:
    """Where ``part_a`` and ``part_b`` (-1: the world) touch at rest: ``near`` (M, 3) metres,
    the surface samples of each within ``TOUCH`` of the other (or a seam's shared vertices);
    ``deep``: the most samples of one part deeper than ``OVERLAP`` inside the other (3 or more:
    the parts overlap); ``sizes``: the two parts' sizes (m); ``on_mesh()``: the meshes'
    vertices in the interface (a sleeve's axis is fitted to them where there are enough, since
    they keep the mesh's own symmetry), or None; ``overlap`` (K, 3): the samples of both
    parts deeper than ``OVERLAP`` inside the other; ``shapes``: the two parts' surface samples
    ((S, 3) each), or None (a seam); ``probe``: what tries small motions of part a against b
    (:class:`MotionProbe`; a seam: None)."""

    part_a: int
    part_b: int
    near: np.ndarray
    deep: int
    sizes: tuple[float, float]
    on_mesh: Callable[[], np.ndarray] | None = None
    overlap: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    shapes: tuple[np.ndarray, np.ndarray] | None = None
    probe: MotionProbe | None = None

    @property
    def inside(self) -> bool:
        return self.deep >= 3


@dataclass(frozen=True)
class InterfaceFrame:
    """An interface's principal frame: ``centre`` (3,), ``axes`` (3, 3) rows by descending
    spread, the 2nd and 98th percentiles ``lo``, ``hi`` (3,) of the points along them
    (metres) and ``extents`` = hi - lo (3,)."""

    centre: np.ndarray
    axes: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @property
    def extents(self) -> np.ndarray:
        return self.hi - self.lo

    @classmethod
    def of(cls, near: np.ndarray) -> InterfaceFrame:
        """The frame of the points ``near`` (M, 3), M >= 1."""
        centre = near.mean(0)
        d = near - centre
        if len(near) >= 3:
            _, _, vt = np.linalg.svd(d, full_matrices=False)
        else:
            vt = np.eye(3)
        proj = d @ vt.T
        lo, hi = np.percentile(proj, 2, axis=0), np.percentile(proj, 98, axis=0)
        return cls(centre, vt, lo, hi)


@dataclass(frozen=True)
class MotionProbe:
    """Tries small rigid motions of part a against part b at an interface (GEOPARD's test of a
    candidate articulation: the motion must neither run one part into the other nor, for a
    slide, detach them; Sun et al. 2024): ``dist_a``, ``dist_b`` the parts' distance fields,
    ``count_a`` how many of the interface's points (the first) are a's samples, the rest b's,
    ``size`` the object's size (m)."""

    dist_a: MeshDistance
    dist_b: MeshDistance
    count_a: int
    size: float

    def motion(self, near: np.ndarray, centre, turn: np.ndarray, shift) -> tuple[bool, float]:
        """(free, kept) of moving part a by the rotation ``turn`` (3, 3) about ``centre`` (3,)
        then by ``shift`` (3,) (b's points by the inverse motion) at the interface's points
        ``near`` (M, 3): free when fewer than 3 of them end deeper than ``OVERLAP`` inside the
        other part; kept: the share of them still within ``TOUCH`` of it."""
        a, b = near[: self.count_a], near[self.count_a :]
        moved_a = (a - centre) @ turn.T + centre + shift  # (Ma, 3)
        moved_b = (b - centre - shift) @ turn + centre  # (Mb, 3)
        band = (1.0 + SLIDE) * TOUCH * self.size
        d = np.concatenate([self.dist_b.within(moved_a, band), self.dist_a.within(moved_b, band)])
        deep = int((d < -OVERLAP * self.size).sum())
        return deep < 3, float((np.abs(d) < TOUCH * self.size).mean()) if len(d) else 0.0

    def slides(self, near: np.ndarray, centre, axis) -> float:
        """The most of the interface kept in touch by a free shift of ``SLIDE`` x ``TOUCH``
        along ``axis`` (3,), either way (0: neither way is free)."""
        step = SLIDE * TOUCH * self.size * np.asarray(axis)
        kept = [self.motion(near, centre, np.eye(3), s * step) for s in (1.0, -1.0)]
        return max((k for free, k in kept if free), default=0.0)

    def turns(self, near: np.ndarray, centre, axis) -> bool:
        """Whether a turn about the line through ``centre`` along ``axis`` (3,), either way,
        is free: by the angle that moves the interface's points ``SLIDE`` x ``TOUCH`` (98th
        percentile of their distance from the line; at most ``MAX_TURN``)."""
        d = near - centre
        r = np.linalg.norm(d - np.outer(d @ axis, axis), axis=1)  # (M,)
        reach = max(float(np.percentile(r, 98)), 1e-12)
        angle = min(SLIDE * TOUCH * self.size / reach, MAX_TURN)
        return any(
            self.motion(near, centre, _rotation(axis, s * angle), np.zeros(3))[0]
            for s in (1.0, -1.0)
        )


def _rotation(axis: np.ndarray, angle: float) -> np.ndarray:
    """(3, 3) the rotation by ``angle`` (radians) about the unit ``axis`` (3,) (Rodrigues)."""
    k = np.cross(np.eye(3), axis)  # [axis]x
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


@dataclass(frozen=True)
class Slider:
    """A slider found at an interface (:func:`find_slider`): its glue ``points`` (4, 3), its
    unit ``axis`` (3,) and the share ``kept`` of the interface that its slide keeps in touch."""

    points: np.ndarray
    axis: np.ndarray
    kept: float


def find_slider(interface: Interface) -> Slider | None:
    """The :class:`Slider` of an interface that is neither an overlap nor a point, or None.

    A line (the interface's second extent under ``LINE`` x its first) on no plate's edge
    (``PLATE``: a door's edge on its jamb turns) is a slider along itself when part a cannot
    turn about it either way (a face lying along a
    runner or a track, not an edge that a lid can turn on) and can shift along it one way at
    least, keeping ``SLIDE_KEEP`` of the interface in touch. Any other interface is a slider
    along the one of its principal axes along which it so shifts when it shifts along no
    other and cannot turn about any (a box in a sleeve open at its end). Glue at the ends
    of the interface's span along the axis, on the axis, and at its middle a lever to either
    side across it (half the interface's width, at least a quarter of its span), so that
    its glue, holding each point across the axis only, leaves no turn."""
    probe = interface.probe
    near = interface.near
    if probe is None or interface.inside or len(near) < 6:
        return None
    frame = InterfaceFrame.of(near)
    centre, axes, extents = frame.centre, frame.axes, frame.extents
    if extents[0] < POINT * float(min(interface.sizes)):
        return None
    line = extents[1] < LINE * extents[0]
    if line and any(_plate_edge(shape, axes[2]) for shape in interface.shapes or ()):
        return None
    if any(probe.turns(near, centre, axis) for axis in (axes[:1] if line else axes)):
        return None
    kept = [probe.slides(near, centre, axis) for axis in (axes[:1] if line else axes)]
    free = [k for k in range(len(kept)) if kept[k] >= SLIDE_KEEP]
    if len(free) != 1:
        return None
    k = free[0]
    axis = _mesh_axis(interface, axes[k])
    across = max((j for j in range(3) if j != k), key=lambda j: extents[j])
    lo, hi = frame.lo[k], frame.hi[k]
    lever = max(0.5 * extents[across], 0.25 * (hi - lo))
    mid = centre + 0.5 * (lo + hi) * axis
    points = np.stack(
        [
            centre + lo * axis,
            centre + hi * axis,
            mid + lever * axes[across],
            mid - lever * axes[across],
        ]
    )
    return Slider(points, axis, kept[k])


def _plate_edge(samples: np.ndarray, normal: np.ndarray) -> bool:
    """Whether a part with surface ``samples`` (S, 3) is a plate (its second extent over
    ``PLATE`` x its thickness) whose thickness lies across the interface's ``normal`` (3,):
    the interface is on the plate's edge (a door's edge on its jamb, a wall's top under a lid),
    where it turns."""
    if len(samples) < 3:
        return False
    frame = InterfaceFrame.of(samples)
    e = frame.extents
    return bool(e[1] > PLATE * e[2] and abs(float(frame.axes[2] @ normal)) < 0.5)


def _mesh_axis(interface: Interface, axis: np.ndarray) -> np.ndarray:
    """``axis`` (3,) refined: the nearest principal axis (within ``SLIDE_SPREAD``) of the
    meshes' vertices in the interface (``on_mesh``: they keep the mesh's own symmetry, where
    the random samples' axes are a degree or two off theirs), or ``axis`` itself."""
    if interface.on_mesh is None:
        return axis
    mesh = interface.on_mesh()
    if len(mesh) < 4:
        return axis
    axes = InterfaceFrame.of(mesh).axes  # (3, 3)
    best = axes[int(np.argmax(np.abs(axes @ axis)))]
    if abs(float(best @ axis)) < np.cos(np.radians(SLIDE_SPREAD)):
        return axis
    return best * np.sign(best @ axis)


def interface_joints(interfaces: list[Interface]) -> list[Joint | None]:
    """The joint of every interface (:func:`interface_joint`), where a part would slide along
    two directions (more than ``SLIDE_SPREAD`` apart) none of its sliders taken: a part slides
    along one line at most (a lid lying on a chest's four walls slides along none of them)."""
    joints = [interface_joint(i) for i in interfaces]
    axes: dict[int, list[np.ndarray]] = {}
    for j in joints:
        if j is not None and j.kind == "slider":
            for p in (j.part_a, j.part_b):
                axes.setdefault(p, []).append(j.axis)
    spread = np.cos(np.radians(SLIDE_SPREAD))
    torn = {p for p, a in axes.items() if p >= 0 and (np.abs(np.stack(a) @ a[0]) < spread).any()}
    return [
        interface_joint(i, slide=False)
        if j is not None and j.kind == "slider" and {j.part_a, j.part_b} & torn
        else j
        for i, j in zip(interfaces, joints, strict=True)
    ]


def interface_joint(interface: Interface, slide: bool = True) -> Joint | None:
    """The joint of an interface (module docstring), or None (no glue: the parts only touch,
    or nothing is near); ``slide``: whether it may be a slider."""
    if interface.inside:
        axle = find_axle(interface)
        if axle is not None:
            return Joint(interface.part_a, interface.part_b, axle.points, "axle", axle.axis)
    slider = find_slider(interface) if slide else None
    if slider is not None:
        return Joint(interface.part_a, interface.part_b, slider.points, "slider", slider.axis)
    return _interface_joint(
        interface.part_a,
        interface.part_b,
        interface.near,
        interface.inside,
        interface.sizes,
        interface.on_mesh,
    )


def _interface_joint(
    pa: int, pb: int, near: np.ndarray, inside: bool, sizes, on_mesh=None
) -> Joint | None:
    """The joint of an interface sampled at ``near`` (M, 3) (module docstring), or None;
    ``on_mesh()``: see :class:`Interface`."""
    if len(near) == 0:
        return None
    frame = InterfaceFrame.of(near)
    centre, vt, lo, hi, extents = frame.centre, frame.axes, frame.lo, frame.hi, frame.extents
    small = float(min(sizes))
    if inside:
        pick = np.unique(np.linspace(0, len(near) - 1, 8).astype(int))
        return Joint(pa, pb, np.concatenate([centre[None], near[pick]]), "weld")
    if extents[0] < POINT * small:
        return Joint(pa, pb, centre[None], "ball")
    if extents[1] < LINE * extents[0]:
        axis = vt[0]
        ends = centre + np.array([lo[0], 0.5 * (lo[0] + hi[0]), hi[0]])[:, None] * axis
        return Joint(pa, pb, ends, "hinge", axis)
    sleeve = _sleeve(near, centre, vt, on_mesh)
    if sleeve is not None:
        return Joint(pa, pb, *sleeve)
    if extents[0] < DISC * small:
        axis = vt[2]
        r = 0.5 * extents[0]
        pts = np.stack([centre, centre + r * axis, centre - r * axis])
        return Joint(pa, pb, pts, "revolute", axis)
    return None


def _sleeve(near: np.ndarray, centre: np.ndarray, vt: np.ndarray, on_mesh=None):
    """(glue points (3, 3), "revolute", axis) when the interface ``near`` (M, 3) is a sleeve
    round one of its principal axes ``vt`` (rows; the first or the last: the one about which it
    is round), else None. Its outer points (beyond half the largest radius) must lie in each of
    ``SECTORS`` angular sectors about the axis and span ``SLEEVE`` x their mean radius along
    it (a flat ring or disc does not: it is left to the disc and patch rules)."""
    for k in (2, 0):
        axis = vt[k]
        d = near - centre
        along = d @ axis  # (M,)
        radial = d - along[:, None] * axis
        radius = np.linalg.norm(radial, axis=1)
        outer = radius > 0.5 * radius.max()
        if outer.sum() < SECTORS:
            continue
        u, w = vt[(k + 1) % 3], vt[(k + 2) % 3]
        angle = np.arctan2(radial[outer] @ w, radial[outer] @ u)
        sector = np.floor((angle + np.pi) / (2 * np.pi) * SECTORS).astype(int) % SECTORS
        span = np.percentile(along[outer], 98) - np.percentile(along[outer], 2)
        if len(np.unique(sector)) == SECTORS and span >= SLEEVE * radius[outer].mean():
            fit = near[outer]
            if on_mesh is not None:
                mesh = on_mesh()
                r = np.linalg.norm(np.cross(mesh - centre, axis), axis=1)
                mesh = mesh[r > 0.5 * radius.max()]
                fit = mesh if len(mesh) >= 4 * SECTORS else fit
            origin, axis = _sleeve_axis(fit, centre, axis)
            lo, hi = np.percentile((near[outer] - origin) @ axis, [2, 98])
            points = origin + np.array([lo, 0.5 * (lo + hi), hi])[:, None] * axis
            return points, "revolute", axis
    return None


def _sleeve_axis(points: np.ndarray, origin: np.ndarray, axis: np.ndarray, passes: int = 3):
    """(a point (3,), unit direction (3,)) of the axis of the sleeve ``points`` (P, 3) from a
    first guess: the line through the centres of the circles fitted (least squares, Kasa) to
    its lower and its upper half along the axis, refitted ``passes`` times. A sleeve sampled at
    random has principal axes a few degrees off its own; its skirt would swing into what it
    surrounds."""
    for _ in range(passes):
        u = np.cross(axis, [1.0, 0.0, 0.0] if abs(axis[0]) < 0.9 else [0.0, 1.0, 0.0])
        u /= np.linalg.norm(u)
        w = np.cross(axis, u)
        along = (points - origin) @ axis
        centres = []
        for half in (along <= np.median(along), along > np.median(along)):
            if half.sum() < 3:
                return origin, axis
            x, y = (points[half] - origin) @ u, (points[half] - origin) @ w
            a = np.column_stack([x, y, np.ones_like(x)])
            d, e, _ = np.linalg.lstsq(a, -(x * x + y * y), rcond=None)[0]
            centres.append(origin - 0.5 * (d * u + e * w) + along[half].mean() * axis)
        step = centres[1] - centres[0]
        if np.linalg.norm(step) <= 0:
            break
        axis = step / np.linalg.norm(step) * np.sign(step @ axis)
        origin = 0.5 * (centres[0] + centres[1])
    return origin, axis


@dataclass(frozen=True)
class RoundAxis:
    """A part round about an axis: ``centre`` (3,) and unit ``axis`` (3,) (its centroid and
    principal axis), ``radius`` (m, its outline's largest), ``lo``, ``hi`` (m, its extent
    along the axis from the centre), ``roundness`` (the outline's relative radius variation
    about the axis) and ``other`` (the least about its other principal axes)."""

    centre: np.ndarray
    axis: np.ndarray
    radius: float
    lo: float
    hi: float
    roundness: float
    other: float

    @classmethod
    def of(cls, samples: np.ndarray) -> RoundAxis | None:
        """The principal axis of the surface ``samples`` (S, 3) about which their outline is
        roundest: the largest radius in each of ``AXLE_SECTORS`` angular sectors about it varies
        by ``roundness`` = (max - min) / max (a polygon of n sides: 1 - cos(pi / n)); None for
        fewer than ``4 AXLE_SECTORS`` samples."""
        if len(samples) < 4 * AXLE_SECTORS:
            return None
        centre = samples.mean(0)
        d = samples - centre
        _, _, vt = np.linalg.svd(d, full_matrices=False)
        rounds = []
        for k in range(3):
            along = d @ vt[k]  # (S,)
            radial = d - along[:, None] * vt[k]
            r = np.linalg.norm(radial, axis=1)
            angle = np.arctan2(radial @ vt[(k + 2) % 3], radial @ vt[(k + 1) % 3])
            sector = np.floor((angle + np.pi) / (2 * np.pi) * AXLE_SECTORS).astype(int)
            outline = np.zeros(AXLE_SECTORS)
            np.maximum.at(outline, sector % AXLE_SECTORS, r)
            top = max(float(outline.max()), 1e-300)
            rounds.append((1.0 - float(outline.min()) / top, top, along.min(), along.max()))
        k = int(np.argmin([x[0] for x in rounds]))
        other = min(x[0] for i, x in enumerate(rounds) if i != k)
        roundness, radius, lo, hi = rounds[k]
        return cls(centre, vt[k], radius, float(lo), float(hi), roundness, other)

    def offset(self, points: np.ndarray) -> float:
        """How far the centroid of ``points`` (K, 3) lies from the axis, in radii."""
        d = points.mean(0) - self.centre
        return float(np.linalg.norm(d - (d @ self.axis) * self.axis)) / self.radius

    def end(self, points: np.ndarray) -> float:
        """Where the middle of ``points`` (K, 3) lies along the axis: 0 at the part's middle,
        1 at its ends."""
        s = (points - self.centre) @ self.axis
        half = max(0.5 * (self.hi - self.lo), 1e-300)
        return abs(0.5 * (s.min() + s.max()) - 0.5 * (self.lo + self.hi)) / half


@dataclass(frozen=True)
class Axle:
    """An overlap round an axle (module docstring): the glue ``points`` (3, 3) on the ``axis``
    (3,), the round part's :class:`RoundAxis` ``round`` and the overlap's ``offset`` from it
    (radii)."""

    points: np.ndarray
    axis: np.ndarray
    round: RoundAxis
    offset: float


def find_axle(interface: Interface) -> Axle | None:
    """The :class:`Axle` of an overlapping ``interface``, or None: of its two parts, those round
    about an axis (``roundness`` under ``AXLE_ROUND``, ``other`` over ``AXLE_DISTINCT`` x
    ``roundness``) whose axis the overlap
    is centred on (``offset`` under ``AXLE_OFF``), rods sunk by an end left out (``AXLE_ROD``,
    ``AXLE_END``); the one whose overlap is nearest its middle. Glue at the overlap's middle on
    the axis and a radius (or half the overlap's span along it, if more) to each side."""
    overlap = interface.overlap
    if interface.shapes is None or len(overlap) < 3:
        return None
    found = []
    for shape in interface.shapes:
        r = RoundAxis.of(shape)
        if r is None or not (r.roundness < AXLE_ROUND and r.other > AXLE_DISTINCT * r.roundness):
            continue
        offset, end = r.offset(overlap), r.end(overlap)
        rod = (r.hi - r.lo) > AXLE_ROD * 2.0 * r.radius and end > AXLE_END
        if offset < AXLE_OFF and not rod:
            found.append((end, offset, r))
    if not found:
        return None
    _, offset, r = min(found, key=lambda x: x[0])
    s = (overlap - r.centre) @ r.axis
    middle, half = 0.5 * (s.min() + s.max()), max(0.5 * (s.max() - s.min()), r.radius)
    points = r.centre + np.array([middle - half, middle, middle + half])[:, None] * r.axis
    return Axle(points, r.axis, r, offset)


def find_joints(vertices, faces, layout, fixed_parts: np.ndarray, size: float) -> list[Joint]:
    """Joints between the moving parts of ``layout`` and the world (the fixed parts as one
    body) and between moving parts whose boxes come within ``TOUCH`` of each other."""
    joints = interface_joints(find_interfaces(vertices, faces, layout, fixed_parts, size))
    return [j for j in joints if j is not None]


def find_interfaces(
    vertices, faces, layout, fixed_parts: np.ndarray, size: float
) -> list[Interface]:
    """The :class:`Interface` of every moving part of ``layout`` with the world (the fixed
    parts as one body) and with every moving part whose box comes within ``TOUCH`` of its own
    (segments of one loose part: their seam), in :func:`find_joints`' order; pairs with nothing
    near are left out."""
    parts = layout.parts
    face_part = layout.part_of_faces(faces)
    num = len(layout.part_info)
    rng = np.random.default_rng(0)
    tol = TOUCH * size
    bodies: dict[int, tuple] = {}  # body -> (vertices, faces) ; -1 = world

    def body(p: int):
        if p in bodies:
            return bodies[p]
        mask = fixed_parts[face_part] if p == -1 else face_part == p
        f = faces[mask]
        if not len(f):
            bodies[p] = None
            return None
        used, local = np.unique(f.reshape(-1), return_inverse=True)
        v = vertices[used]
        samples = sample_surface_points(v, local.reshape(-1, 3), SAMPLES_PER_PART, rng)
        dist = MeshDistance(v, local.reshape(-1, 3), max(tol, 1e-9), max(tol, 1e-9))
        bodies[p] = (v, samples, dist, float(np.ptp(v, axis=0).max()))
        return bodies[p]

    moving = [p for p in range(num) if not fixed_parts[p]]
    boxes = {p: (vertices[parts == p].min(0), vertices[parts == p].max(0)) for p in range(num)}
    others = [-1] if fixed_parts.any() else []
    seams: dict[tuple[int, int], list[np.ndarray]] = {}
    for seam in layout.seams:  # between moving segments, and from each to the world
        a, b = (-1 if fixed_parts[p] else int(p) for p in (seam.part_a, seam.part_b))
        if a != b:
            seams.setdefault((min(a, b), max(a, b)), []).append(seam.vertices)
    out: list[Interface] = []
    for i, pa in enumerate(moving):
        for pb in others + moving[i + 1 :]:
            shared = seams.get((min(pa, pb), max(pa, pb)))
            if shared is not None:
                a, b = body(pa), body(pb)
                sizes = (a[3] if a else size, b[3] if b else size)
                pts = vertices[np.unique(np.concatenate(shared))]
                if len(pts):
                    out.append(Interface(pa, pb, pts, 0, sizes))
                continue
            if pb >= 0:
                (la, ha), (lb, hb) = boxes[pa], boxes[pb]
                if ((la - tol > hb) | (lb - tol > ha)).any():
                    continue
            a, b = body(pa), body(pb)
            if a is None or b is None:
                continue
            near_pts, deep, overlap = [], 0, []
            for (_, samples, _, _), (v, _, dist, _) in ((a, b), (b, a)):
                # only the samples within the other body's box (padded) can be near it
                box = ((samples > v.min(0) - tol) & (samples < v.max(0) + tol)).all(1)
                samples = samples[box]
                d = dist.within(samples, tol) if len(samples) else np.zeros(0)
                near_pts.append(samples[np.abs(d) < tol])
                overlap.append(samples[d < -OVERLAP * size])
                deep = max(deep, int((d < -OVERLAP * size).sum()))
            near = np.concatenate(near_pts)

            def on_mesh(near=near, a=a, b=b):  # the bodies' vertices in the interface
                lo, hi = near.min(0) - tol, near.max(0) + tol
                out = []
                for (v, _, _, _), (_, _, dist, _) in ((a, b), (b, a)):
                    v = v[((v > lo) & (v < hi)).all(1)]
                    out.append(v[np.abs(dist.within(v, tol)) < tol] if len(v) else v)
                return np.concatenate(out)

            if len(near):
                shapes = (a[1], b[1])
                probe = MotionProbe(a[2], b[2], len(near_pts[0]), size)
                out.append(
                    Interface(
                        pa,
                        pb,
                        near,
                        deep,
                        (a[3], b[3]),
                        on_mesh,
                        np.concatenate(overlap),
                        shapes,
                        probe,
                    )
                )
    return out
