"""Do an object's parts run into each other as it moves? The check every articulated draw passes.

Each link's sampled vertices are measured against every other link's closed surface at a few frames
of the trajectory: signed distance, its sign from the winding number. A vertex counts as inside
only when it lies deeper than ``depth`` below that surface. A vertex *on* the other surface (a
knob's back face flush on its body, a door handle's rose on the door) is contact, not overlap: its
winding number is 0 or 1 depending on the last bits of the posed coordinates, so counting it would
make the verdict depend on the CPU's float kernels.

The rules (``part_overlap`` returns each broken one as a sentence):
- two links that are not parent and child never overlap;
- a child and its parent overlap only where their joint needs it (a knuckle, an axle, a pin in its
  hole, a telescope's inner tube): within the *joint zone*, the distance from the joint's line
  (its axis, through its point; for a slider, through the overlap at rest) that the overlap at
  the rest frame reaches, plus the object's longest edge for the polygons' facets. Turning
  about the axis or sliding along it keeps a joint's own overlap inside that zone; a part that
  swings or slides into its parent anywhere else leaves it.
"""

from __future__ import annotations

from dataclasses import dataclass

import igl
import numpy as np

from .. import primitives as P


@dataclass(frozen=True)
class OverlapCheck:
    """How densely the check samples, and its tolerances.

    samples: vertices per link; frames: frames of the trajectory, evenly spread, rest first;
    depth: a vertex is inside when deeper than this, in rest bounding-box diagonals;
    zone_margin: the joint zone's margin, in the object's longest rest edge.
    """

    samples: int = 96
    frames: int = 6
    depth: float = 2e-4
    zone_margin: float = 1.0


def _line_distance(points: np.ndarray, point: np.ndarray, axis: np.ndarray) -> np.ndarray:
    rel = points - point
    return np.linalg.norm(rel - np.outer(rel @ axis, axis), axis=1)


def part_overlap(art, check: OverlapCheck = OverlapCheck()) -> list[str]:
    """The overlap rules ``art`` (an ``Articulation``) breaks, each as a sentence; empty if none."""
    tree = art.tree
    t_all = art.q.shape[0]
    frames = np.unique(np.linspace(0, t_all - 1, min(check.frames, t_all)).round().astype(int))
    x = art.pose(art.q[frames])  # (K, N, 3)
    rest = x[0]
    depth = check.depth * float(np.linalg.norm(rest.max(0) - rest.min(0)))
    edges = rest[art.faces[:, 1]] - rest[art.faces[:, 0]]
    margin = check.zone_margin * float(np.linalg.norm(edges, axis=1).max())
    # each joint's line in the world at every checked frame: the parent carries it
    tf = tree.link_transforms(art.q[frames])  # (K, L, 4, 4)
    yaw = P.rotation((0.0, 0.0, 1.0), art.yaw)
    joint_of = {}
    for j in tree.joints:
        r, t = yaw @ tf[:, j.parent, :3, :3], tf[:, j.parent, :3, 3] @ yaw.T  # (K, 3, 3), (K, 3)
        joint_of[j.child] = (j.parent, j.kind, r, t, r @ j.axis, r @ j.point + t)
    face_link = art.links[art.faces[:, 0]]
    ids = np.unique(art.links)
    if len(ids) < 2:
        return []
    samples = {}
    for b in ids:
        idx = np.flatnonzero(art.links == b)
        samples[b] = idx[:: max(1, len(idx) // check.samples)]
    # Per link a, in its own zero-configuration frame (one distance tree for every query):
    # - dist[a, b]: (K, S_b) signed distance of b's samples to a's surface at the checked frames
    #   (+inf: outside a's box, so outside a);
    # - deep_in[a]: the vertices of the links joined to a lying deeper than the tolerance inside
    #   it at rest: every vertex, not only the samples, since the joint zones come from them.
    unposed = x @ yaw  # (K, N, 3): the object's yaw undone
    joined = {c: p for c, (p, *_) in joint_of.items()}
    dist: dict[tuple[int, int], np.ndarray] = {}
    deep_in: dict[int, np.ndarray] = {}
    for a in ids:
        own = art.faces[face_link == a].astype(np.int64)
        used = np.unique(own)
        lo, hi = art.vertices[used].min(0) - depth, art.vertices[used].max(0) + depth
        others = [b for b in ids if b != a]
        query = np.concatenate([samples[b] for b in others])
        bounds = np.cumsum([0] + [len(samples[b]) for b in others])
        joined_to_a = [b for b in others if joined.get(b) == a or joined.get(a) == b]
        related = np.flatnonzero(np.isin(art.links, joined_to_a))  # (R,) their vertices
        r, t = tf[:, a, :3, :3], tf[:, a, :3, 3]  # (K, 3, 3), (K, 3)
        local = np.einsum("kji,kqj->kqi", r, unposed[:, query] - t[:, None])  # (K, Q, 3)
        rest_local = (unposed[0, related] - t[0]) @ r[0]  # (R, 3)
        points = np.concatenate([local.reshape(-1, 3), rest_local])
        near = np.all((points > lo) & (points < hi), axis=1)  # only these can be inside
        d = np.full(len(points), np.inf)
        if near.any():
            d[near] = igl.signed_distance(
                points[near], art.vertices, own, sign_type=igl.SIGNED_DISTANCE_TYPE_WINDING_NUMBER
            )[0]
        d_frames = d[: local.shape[0] * local.shape[1]].reshape(local.shape[:2])
        for i, b in enumerate(others):
            dist[int(a), int(b)] = d_frames[:, bounds[i] : bounds[i + 1]]
        deep_in[a] = related[d[len(d) - len(related) :] < -depth]

    names, out = tree.link_names, []
    zones: dict[int, float] = {}  # child link -> its joint zone's radius
    lines: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for child, (parent, kind, r, t, axis, point) in joint_of.items():
        both = np.concatenate([deep_in[parent], deep_in[child]])
        overlap = rest[both[np.isin(art.links[both], (parent, child))]]
        if kind == "prismatic" and len(overlap):
            # the slide's line runs through its overlap at rest, carried by the parent
            local = r[0].T @ (overlap.mean(0) - t[0])  # in the parent's own frame
            point = r @ local + t  # (K, 3)
        lines[child] = (axis, point)
        reach = _line_distance(overlap, point[0], axis[0]) if len(overlap) else np.zeros(1)
        zones[child] = float(reach.max()) + margin
    for (a, b), d in dist.items():
        deep = d < -depth  # (K, S)
        if not deep.any():
            continue
        child = b if joined.get(b) == a else a if joined.get(a) == b else None
        if child is None:
            out.append(
                f"{names[b]} runs into {names[a]}: {deep.any(0).mean():.3f} of its samples deeper "
                f"than {depth:.2g} m (allowed: none, they are not joined)"
            )
            continue
        axis, point = lines[child]
        pts = x[:, samples[b]]  # (K, S, 3)
        reach = np.stack([_line_distance(pts[k], point[k], axis[k]) for k in range(len(frames))])
        out_of_zone = deep & (reach > zones[child])
        if out_of_zone.any():
            out.append(
                f"{names[b]} sinks into {names[a]} outside their joint: {out_of_zone.any(0).sum()} "
                f"samples deeper than {depth:.2g} m at {reach[out_of_zone].max():.4g} m from the "
                f"joint's line (the joint zone reaches {zones[child]:.4g} m)"
            )
    return out
