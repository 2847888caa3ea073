"""The learned axis of a hinge or a slider: which of a joint's candidate directions it turns
about (or slides along).

Geometry gives a joint's axis where its interface has one (a lid's edge, a pin's line); a
joint it types otherwise, or whose interface is a wide patch (a laptop's lid lying on its
base), has several directions it could be: the interface's principal directions, each part's
principal directions, geometry's own axis. The data generator knows every true axis, so a small
network (``AxisChooser``: two hidden ReLU layers, one score a candidate, trained in
``training/train_joint_typer.py``) scores each candidate from

- where it comes from (one-hot over ``SOURCES`` slots: geometry's axis, the interface's three
  directions, each part's three);
- its alignment (|cos|) with the interface's directions, each part's and geometry's axis, and
  with the line between the parts' centres;
- the joint's type (hinge or slider) and the joint typer's features of the joint;

and the joint takes the best-scoring one. Shapes: candidates (C, 3) unit vectors; features
(C, AXIS_FEATURES) float64.
"""

from __future__ import annotations

import numpy as np

SOURCES = 10  # geometry's axis, the interface's 3 directions, part a's 3, part b's 3
ALIGNMENTS = 9 + 1 + 1  # |cos| with the 9 directions, geometry's axis, the centres' line


def mlp(layers, x: np.ndarray) -> np.ndarray:
    """The forward pass of ``layers`` [(W (in, out), b (out,))] with ReLU between them."""
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0.0)
    return x


def candidates(joint) -> tuple[np.ndarray, np.ndarray]:
    """(directions (C, 3), their sources (C,) slots of ``SOURCES``) of a joint view (its
    ``axis``, interface ``directions`` (3, 3) columns or None, parts ``a`` and ``b``)."""
    out, source = [], []
    if joint.axis is not None:
        out.append(np.asarray(joint.axis, dtype=np.float64))
        source.append(0)
    if joint.directions is not None:
        for i in range(3):
            out.append(joint.directions[:, i])
            source.append(1 + i)
    for slot, part in ((4, joint.a), (7, joint.b)):
        for i in range(3):
            out.append(part.directions[:, i])
            source.append(slot + i)
    dirs = np.asarray(out)
    return dirs / np.linalg.norm(dirs, axis=1, keepdims=True), np.asarray(source)


def candidate_features(joint, row: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(candidates (C, 3), their features (C, SOURCES + ALIGNMENTS + 2 + len(row))) of a
    joint view of type ``kind`` ("hinge" or "slider") whose typer features are ``row``."""
    dirs, source = candidates(joint)
    onehot = np.eye(SOURCES)[source]  # (C, SOURCES)
    frames = [joint.directions, joint.a.directions, joint.b.directions]
    align = [
        np.abs(dirs @ m) if m is not None else np.zeros((len(dirs), 3)) for m in frames
    ]  # each (C, 3)
    geo = np.abs(dirs @ np.asarray(joint.axis)) if joint.axis is not None else np.zeros(len(dirs))
    line = joint.b.centre - joint.a.centre
    line = line / max(float(np.linalg.norm(line)), 1e-12)
    kinds = np.array([kind == "hinge", kind == "slider"], dtype=np.float64)
    x = np.column_stack(
        [onehot, *align, geo, np.abs(dirs @ line), np.tile(kinds, (len(dirs), 1))]
        + [np.tile(np.asarray(row, np.float64), (len(dirs), 1))]
    )
    return dirs, x


class AxisChooser:
    """A trained candidate scorer: ``layers`` [(W (in, out), b (out,))], the last of one
    output, over candidate features standardised by ``mean`` and ``scale``."""

    def __init__(self, layers, mean: np.ndarray, scale: np.ndarray):
        self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in layers]
        self.mean, self.scale = np.asarray(mean, np.float64), np.asarray(scale, np.float64)

    def scores(self, features: np.ndarray) -> np.ndarray:
        """(C,) each candidate's score (higher: likelier the axis)."""
        return mlp(self.layers, (np.asarray(features) - self.mean) / self.scale)[:, 0]

    def choose(self, joint, row: np.ndarray, kind: str) -> tuple[float, float, float]:
        """The best-scoring candidate axis of a joint view of type ``kind``."""
        dirs, x = candidate_features(joint, row, kind)
        return tuple(float(c) for c in dirs[int(np.argmax(self.scores(x)))])

    def arrays(self, prefix: str) -> dict:
        out = {f"{prefix}layers": np.array(len(self.layers))}
        out[f"{prefix}mean"], out[f"{prefix}scale"] = self.mean, self.scale
        for i, (w, b) in enumerate(self.layers):
            out[f"{prefix}w{i}"], out[f"{prefix}b{i}"] = w, b
        return out

    @classmethod
    def from_arrays(cls, data, prefix: str) -> AxisChooser | None:
        if f"{prefix}layers" not in data.files:
            return None
        count = int(data[f"{prefix}layers"])
        layers = [(data[f"{prefix}w{i}"], data[f"{prefix}b{i}"]) for i in range(count)]
        return cls(layers, data[f"{prefix}mean"], data[f"{prefix}scale"])
