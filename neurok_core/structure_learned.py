"""The learned half of what moves how: a small network that types the joints geometry finds.

:func:`~neurok_core.structure.find_structure` reads parts and joints off the rig space's
geometric rules; those rules cannot tell a knuckle's overlap (a hinge) from a bolted overlap
(fixed), or a drawer's runner (a slider) from a lid's edge (a hinge). The data generator knows
every joint's type, so a classifier trained on its objects (``training/train_joint_typer.py``)
re-types each joint between two parts from features of the pair and their interface:

- the geometric type (one-hot over ``JOINT_TYPES``) and its confidence;
- each part's sorted extents (in object sizes) and share of the vertices;
- the interface (each part's vertices within ``REACH`` object sizes of the other's): the
  shares of each part in it, its principal spreads (object sizes) and their ratios, its
  centre's distance to each part's centre;
- the geometric axis (if any) against the interface's principal directions, and each part's
  principal directions against the interface's first;
- the share of each part's vertices inside the other's bounding box (a pin sunk in a hole);
- the distance between the parts' nearest vertices (object sizes): a bridge's gap
  (:func:`~neurok_core.structure.bridges`), about the vertex spacing where they touch; the
  interface is taken that much wider.

The network (``JointTyper``: two hidden ReLU layers, a softmax over ``JOINT_TYPES``) is a
numpy forward pass over weights stored with their feature means and spreads
(``weights/structure/joint_typer.npz``), with the training joints' standardised features: a
joint far from all of them (:meth:`JointTyper.familiar`) keeps geometry's type. Each hinge and
slider it types, or keeps, takes the axis the axis chooser stored with it picks
(:mod:`neurok_core.structure_axes`); a typer file without one gives a re-typed hinge or slider
the interface's first principal direction where the interface is a line (a lid's edge, a
runner), else its normal (a disc: a knuckle's face, a wheel's hub). Joints to the world
(pins) are the user's word and are kept.

Shapes: vertices (N, 3) float64 metres; features (J, FEATURES) float64.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from .errors import CheckpointError
from .structure_axes import ALIGNMENTS, SOURCES, AxisChooser, mlp

JOINT_TYPES = ("fixed", "hinge", "slider", "ball", "contact")  # as structure.JOINT_TYPES
FEATURES = 36
REACH = 0.02  # object sizes: a part's vertices this near the other's are the interface
FIXED = JOINT_TYPES.index("fixed")
WELD_SURE = 0.99  # the typer's probability of "fixed" below which a joint takes its next type
NEIGHBOURS = 5  # the neighbour of the reference set whose distance says a joint is familiar
AXIS_FEATURES = SOURCES + ALIGNMENTS + 2 + FEATURES  # an axis candidate's (structure_axes)
LINE_RATIO = 0.5  # an interface whose second spread is under this share of its first: a line
DEFAULT_TYPER = Path(__file__).resolve().parent / "weights" / "structure" / "joint_typer.npz"


class _Part:
    """A part's vertices, centre, principal directions and k-d tree, built once a part."""

    def __init__(self, points: np.ndarray):
        self.points = points
        self.centre = points.mean(0)
        spread = np.cov((points - self.centre).T) if len(points) > 1 else np.zeros((3, 3))
        self.directions = np.linalg.eigh(spread)[1][:, ::-1]  # (3, 3) columns, largest first
        self.tree = cKDTree(points)
        self.lo, self.hi = points.min(0), points.max(0)


@dataclass(frozen=True)
class JointView:
    """What the typer and the axis chooser see of a joint: its parts ``a`` and ``b``,
    geometry's ``axis`` (or None) and its interface's principal ``directions`` (3, 3) columns,
    largest first (None where the parts share fewer than 3 points near each other)."""

    a: _Part
    b: _Part
    axis: tuple | None
    directions: np.ndarray | None


def joint_features(a: _Part, b: _Part, kind: str, confidence: float, axis, count: int, size):
    """(features (FEATURES,), interface directions (3, 3) columns largest first, or None) of
    the joint of ``kind`` between parts ``a`` and ``b`` of an object of ``count`` vertices and
    ``size`` metres (module docstring)."""
    out = [float(kind == t) for t in JOINT_TYPES] + [float(confidence)]
    for p in (a, b):
        out += list(np.sort(p.hi - p.lo)[::-1] / size) + [len(p.points) / count]
    # parts a gap apart (a bridge's) have the interface of parts that touch, across it
    gap = float(b.tree.query(a.points)[0].min())
    reach = REACH * size + gap
    in_a = np.isfinite(b.tree.query(a.points, distance_upper_bound=reach)[0])
    in_b = np.isfinite(a.tree.query(b.points, distance_upper_bound=reach)[0])
    out += [float(in_a.mean()), float(in_b.mean())]
    touch = np.concatenate([a.points[in_a], b.points[in_b]])
    directions = None
    if len(touch) >= 3:
        centre = touch.mean(0)
        w, directions = np.linalg.eigh(np.cov((touch - centre).T))
        w, directions = np.sqrt(np.maximum(w[::-1], 0.0)) / size, directions[:, ::-1]
        out += list(w) + [w[1] / max(w[0], 1e-12), w[2] / max(w[1], 1e-12)]
        out += [np.linalg.norm(centre - a.centre) / size, np.linalg.norm(centre - b.centre) / size]
        out += list(np.abs(directions.T @ np.asarray(axis))) if axis is not None else [0.0] * 3
        for p in (a, b):
            out += list(np.abs(p.directions.T @ directions[:, 0]))
    else:
        out += [0.0] * 16
    out += [float(((a.points >= b.lo) & (a.points <= b.hi)).all(1).mean())]
    out += [float(((b.points >= a.lo) & (b.points <= a.hi)).all(1).mean())]
    out += [float(axis is not None), gap / size]
    return np.asarray(out, dtype=np.float64), directions


class JointTyper:
    """A trained joint-type classifier: ``layers`` [(W (in, out), b (out,))], ReLU between
    them, over features standardised by ``mean`` and ``scale`` (FEATURES,); ``reference``
    (R, FEATURES): its training set's standardised features, and ``novelty``: the distance to
    the ``NEIGHBOURS``-th nearest of them beyond which a joint is unlike what it was trained on
    (:meth:`familiar`; without them, every joint is familiar); ``axes``: its axis chooser. The
    bundled file is read once a process (a file written over it is read by the next)."""

    def __init__(
        self, layers, mean, scale, reference=None, novelty=None, axes: AxisChooser | None = None
    ):
        self.axes = axes  # the axis chooser trained with it, or None
        self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in layers]
        self.mean, self.scale = np.asarray(mean, np.float64), np.asarray(scale, np.float64)
        self.reference = None if reference is None else np.asarray(reference, np.float32)
        self.novelty = None if novelty is None else float(novelty)
        self._tree = None

    @classmethod
    def load(cls, path=DEFAULT_TYPER) -> JointTyper:
        """The typer saved at ``path`` (``save``'s .npz); a clear error when it is missing or
        does not fit. The bundled one is read once a process."""
        key = str(Path(path).resolve())
        if key in _LOADED:
            return _LOADED[key]
        try:
            with np.load(path) as data:
                count = int(data["layers"])
                layers = [(data[f"w{i}"], data[f"b{i}"]) for i in range(count)]
                known = "reference" in data.files
                typer = cls(
                    layers,
                    data["mean"],
                    data["scale"],
                    data["reference"] if known else None,
                    float(data["novelty"]) if known else None,
                    AxisChooser.from_arrays(data, "axis_"),
                )
        except (OSError, KeyError, ValueError) as exc:
            raise CheckpointError(f"the joint typer at {path} cannot be read: {exc}") from None
        if typer.mean.shape != (FEATURES,) or typer.layers[-1][1].shape != (len(JOINT_TYPES),):
            raise CheckpointError(f"the joint typer at {path} does not fit {FEATURES} features")
        if typer.reference is not None and typer.reference.shape[1:] != (FEATURES,):
            raise CheckpointError(f"the joint typer at {path}: its reference set does not fit")
        if typer.axes is not None and typer.axes.mean.shape != (AXIS_FEATURES,):
            raise CheckpointError(f"the joint typer at {path}: its axis chooser does not fit")
        if key == str(DEFAULT_TYPER.resolve()):
            _LOADED[key] = typer
        return typer

    def save(self, path) -> None:
        arrays = {"layers": np.array(len(self.layers)), "mean": self.mean, "scale": self.scale}
        for i, (w, b) in enumerate(self.layers):
            arrays[f"w{i}"], arrays[f"b{i}"] = w, b
        if self.reference is not None and self.novelty is not None:
            arrays["reference"] = self.reference
            arrays["novelty"] = np.array(self.novelty)
        if self.axes is not None:
            arrays.update(self.axes.arrays("axis_"))
        np.savez_compressed(path, **arrays)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """(J, len(JOINT_TYPES)) each joint's probabilities of the types."""
        x = mlp(self.layers, (np.asarray(features, np.float64) - self.mean) / self.scale)
        x -= x.max(1, keepdims=True)
        p = np.exp(x)
        return p / p.sum(1, keepdims=True)

    def distances(self, features: np.ndarray) -> np.ndarray:
        """(J,) each joint's distance (standardised features) to its ``NEIGHBOURS``-th nearest
        joint of the reference set; zeros without one."""
        features = np.asarray(features, np.float64).reshape(-1, FEATURES)
        if self.reference is None or not len(features):
            return np.zeros(len(features))
        if self._tree is None:
            self._tree = cKDTree(self.reference)
        x = (features - self.mean) / self.scale
        k = min(NEIGHBOURS, len(self.reference))
        return self._tree.query(x, k=k)[0].reshape(len(x), k)[:, -1]

    def familiar(self, features: np.ndarray) -> np.ndarray:
        """(J,) bool: the joints within ``novelty`` of the reference set (:meth:`distances`),
        whose types the typer may give: out of the generator's world (two boxes sunk into each
        other, a rod sunk by its end: 6.5-10, where the bundled typer's novelty is 4.69 and
        the held-out generated joints' 99th percentile 4.6) it is confidently wrong, so
        geometry's rules keep those."""
        if self.novelty is None:
            return np.ones(len(np.atleast_2d(features)), dtype=bool)
        return self.distances(features) <= self.novelty


_LOADED: dict[str, JointTyper] = {}


def structure_features(vertices: np.ndarray, structure) -> tuple[list[int], np.ndarray, list]:
    """(the joints' indices between two parts, their features (J, FEATURES), their
    :class:`JointView` s) of a :class:`~neurok_core.structure.Structure` of ``vertices``."""
    vertices = np.asarray(vertices, dtype=np.float64)
    size = float(np.ptp(vertices, 0).max()) or 1.0
    parts: dict[int, _Part] = {}

    def part(p: int) -> _Part:
        if p not in parts:
            parts[p] = _Part(vertices[structure.labels == p])
        return parts[p]

    index, rows, views = [], [], []
    for k, j in enumerate(structure.joints):
        if j.part_a < 0 or j.part_b < 0:
            continue  # a pin: the user's word
        a, b = part(j.part_a), part(j.part_b)
        f, d = joint_features(a, b, j.type, j.confidence, j.axis, len(vertices), size)
        index.append(k)
        rows.append(f)
        views.append(JointView(a, b, j.axis, d))
    return index, np.asarray(rows).reshape(-1, FEATURES), views


def retype(vertices: np.ndarray, structure, typer: JointTyper | None = None, mode="both", keep=()):
    """``structure`` with each joint between two parts typed by ``typer`` (default: the
    bundled one), its confidence the type's probability, each hinge's and slider's axis the
    typer's axis chooser's (without one: geometry's, or the interface's where the new type
    needs one and geometry gave none; module docstring). A joint is welded only where the
    typer's probability of "fixed" is at least ``WELD_SURE`` (a weld takes every motion away;
    an unsure one takes the likeliest other type). Joints unlike the typer's
    training set (:meth:`JointTyper.familiar`) keep geometry's type. ``mode`` "learned": every
    other joint takes the typer's type; "both": only where the typer is surer of its type than
    geometry's rules were of theirs (its probability over their confidence). The joints of
    the indices ``keep`` stay as they are."""
    from dataclasses import replace

    if mode not in ("learned", "both"):
        raise ValueError(f"mode must be 'learned' or 'both', not {mode!r}")
    typer = typer or JointTyper.load()
    index, features, views = structure_features(vertices, structure)
    if not index:
        return structure
    probs = typer(features).copy()
    # a weld takes every motion away: only where the typer is sure of it
    unsure = probs[:, FIXED] < WELD_SURE
    probs[unsure, FIXED] = 0.0
    probs /= probs.sum(1, keepdims=True)
    familiar = typer.familiar(features)
    joints = list(structure.joints)
    for k, row, p, view, known in zip(index, features, probs, views, familiar, strict=True):
        j = joints[k]
        if not known or k in keep:
            continue
        kind = JOINT_TYPES[int(p.argmax())]
        if mode == "both" and p.max() <= j.confidence:
            kind = j.type
        axis, confidence = j.axis, j.confidence
        if kind != j.type:
            axis, confidence = None, float(p.max())
        if kind in ("hinge", "slider"):
            if typer.axes is not None:
                axis = typer.axes.choose(view, row, kind)
            elif axis is None and view.directions is not None:
                d = view.directions  # the interface's line, or its normal (a disc)
                line = row[19] < LINE_RATIO  # spread 2 / spread 1
                axis = tuple(float(c) for c in (d[:, 0] if line or kind == "slider" else d[:, 2]))
            if axis is None:  # no interface to read an axis off: keep geometry's type
                continue
        limits = j.limits if kind == j.type and axis == j.axis else None
        joints[k] = replace(j, type=kind, axis=axis, limits=limits, confidence=confidence)
    return replace(structure, joints=tuple(joints))
