"""Random assemblies: random parts joined by random joints, for kinematic diversity.

A base block stands on the floor; 2-6 moving links hang off it in a random tree. Each link is a
rod (capsule, cylinder or rounded box) with an optional end piece (ball, disc, ring or paddle),
attached by one of: a hinge at the parent's end (revolute about an axis across the rod), a twist
about the rod's own axis (continuous or revolute), a telescoping slide out of the parent, a block
sliding along the parent's side, or a hinge on the parent's side. Joint points sit one child
radius plus a gap away from the parent so that the limits below keep the parts apart (the parent
itself is never crossed; distant branches may still touch).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .builder import ObjectBuilder, articulated_family

deg = math.radians
GAP = 0.004


@dataclass(frozen=True)
class Rod:
    """One link's main shape: from ``start`` along unit ``direction``, ``length`` by ``radius``."""

    shape: str  # capsule, cylinder, box
    start: np.ndarray
    direction: np.ndarray
    length: float
    radius: float
    end_piece: str  # none, ball, disc, ring, paddle
    side: np.ndarray  # a unit vector across the rod (for paddles and side attachments)

    @property
    def end(self) -> np.ndarray:
        return self.start + self.length * self.direction


@dataclass(frozen=True)
class Link:
    rod: Rod
    parent: int
    kind: str
    axis: np.ndarray
    point: np.ndarray
    lower: float
    upper: float


def _unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def _across(rng, d: np.ndarray) -> np.ndarray:
    """A random unit vector perpendicular to ``d``."""
    v = rng.normal(size=3)
    return _unit(v - v.dot(d) * d)


def _tilted(rng, d: np.ndarray, max_angle: float) -> np.ndarray:
    """A random unit vector within ``max_angle`` of ``d``."""
    a = rng.uniform(0.0, max_angle)
    return _unit(math.cos(a) * d + math.sin(a) * _across(rng, d))


def _plan(rng: np.random.Generator) -> tuple[tuple[str, np.ndarray], list[Link]]:
    scale = rng.uniform(0.1, 1.0)
    base_shape = str(rng.choice(["box", "cylinder"]))
    base = np.array([rng.uniform(0.4, 1.0), rng.uniform(0.4, 1.0), rng.uniform(0.1, 0.4)]) * scale
    links: list[Link] = []
    for _ in range(int(rng.integers(2, 7))):
        weights = 2.0 ** np.arange(len(links) + 1)
        parent = int(rng.choice(len(links) + 1, p=weights / weights.sum()))
        r = scale * rng.uniform(0.02, 0.07)
        length = scale * rng.uniform(0.2, 0.7)
        shape = str(rng.choice(["capsule", "cylinder", "box"], p=[0.5, 0.25, 0.25]))
        piece = str(
            rng.choice(["none", "ball", "disc", "ring", "paddle"], p=[0.4, 0.15, 0.15, 0.15, 0.15])
        )
        if parent == 0:
            reach = 0.35 * min(base[0], base[1])
            top = np.array([rng.uniform(-reach, reach), rng.uniform(-reach, reach), base[2]])
            kind = str(rng.choice(["hinge", "twist", "hinge"]))
            p_end, d_p, r_p = top, np.array([0.0, 0.0, 1.0]), 0.0
            max_total = deg(80)
        else:
            prod = links[parent - 1].rod
            kind = str(
                rng.choice(
                    ["hinge", "twist", "telescope", "slider", "side_hinge"],
                    p=[0.45, 0.15, 0.15, 0.12, 0.13],
                )
            )
            if prod.end_piece != "none" and kind in ("hinge", "twist", "telescope"):
                kind = str(rng.choice(["slider", "side_hinge"]))  # the end is taken
            # a square rod's rounded corners reach 1.3 r from its axis
            p_end, d_p = prod.end, prod.direction
            r_p = prod.radius * (1.3 if prod.shape == "box" else 1.0)
            max_total = deg(110)
        if kind == "twist":
            piece = "paddle"
        lo_hi = None
        if kind in ("hinge", "twist"):
            point = p_end + (r_p + r + GAP) * d_p
            tilt = rng.uniform(0.0, deg(40))
            d = _tilted(rng, d_p, tilt) if tilt > 0 else d_p
            if kind == "hinge":
                axis = _across(rng, d)
                room = max_total - math.acos(np.clip(d.dot(d_p), -1, 1))
                lo_hi = (-rng.uniform(0.2, 1.0) * room, rng.uniform(0.2, 1.0) * room)
                joint = "revolute"
            else:
                axis = d
                joint = "continuous" if rng.random() < 0.5 else "revolute"
                lo_hi = (-deg(rng.uniform(60, 180)), deg(rng.uniform(60, 180)))
            start = point
        elif kind == "telescope":
            r = 0.6 * r_p
            d, axis, joint = d_p, d_p, "prismatic"
            start = p_end - min(0.6 * length, 0.8 * links[parent - 1].rod.length) * d_p
            point = start
            lo_hi = (0.0, 0.5 * length)
            shape = "cylinder" if shape == "capsule" else shape
        else:  # a block on the parent's side, or a hinged rod on it
            n = _across(rng, d_p)
            prod = links[parent - 1].rod
            along = prod.start + rng.uniform(0.3, 0.7) * prod.length * d_p
            point = along + (r_p + r + GAP) * n
            if kind == "slider":
                joint, axis, d = "prismatic", d_p, n
                length = 2.5 * r
                start = point - r * n
                room = 0.25 * prod.length
                lo_hi = (-rng.uniform(0.3, 1.0) * room, rng.uniform(0.3, 1.0) * room)
                shape, piece = "box", "none"
            else:
                joint, axis, d = "revolute", d_p, n
                start = point
                lim = deg(rng.uniform(30, 80))
                lo_hi = (-lim, lim)
        rod = Rod(shape, np.asarray(start), d, length, r, piece, _across(rng, d))
        links.append(Link(rod, parent, joint, axis, np.asarray(point), *lo_hi))
    return (base_shape, base), links


def _add_rod(b: ObjectBuilder, link: int, rod: Rod) -> None:
    centre = rod.start + 0.5 * rod.length * rod.direction
    if rod.shape == "capsule":
        b.rod(link, rod.start, rod.end, rod.radius)
    elif rod.shape == "cylinder":
        b.cylinder(link, rod.radius, rod.length, centre, rod.direction)
    else:
        frame = np.column_stack([rod.side, np.cross(rod.direction, rod.side), rod.direction])
        b.box(
            link,
            (2 * rod.radius, 2 * rod.radius, rod.length),
            centre,
            frame,
            radius=0.3 * rod.radius,
        )
    r, e, d = rod.radius, rod.end, rod.direction
    if rod.end_piece == "ball":
        b.sphere(link, 1.8 * r, e + 0.8 * r * d)
    elif rod.end_piece == "disc":
        b.cylinder(link, 3.0 * r, 0.8 * r, e + 0.4 * r * d, d)
    elif rod.end_piece == "ring":
        b.torus(link, 3.0 * r, 0.6 * r, e + 3.0 * r * d, rod.side)
    elif rod.end_piece == "paddle":
        frame = np.column_stack([rod.side, np.cross(d, rod.side), d])
        b.box(
            link,
            (5.0 * r, 0.6 * r, 3.0 * r),
            e + 2.0 * r * rod.side + 1.5 * r * d,
            frame,
            radius=0.2 * r,
        )


def segment_distance(p0, p1, q0, q1) -> np.ndarray:
    """Closest distance between segments [p0, p1] and [q0, q1], each (T, 3): (T,).

    Clamped closest points of the two supporting lines (Ericson, "Real-Time Collision
    Detection", 2005, section 5.1.9).
    """
    d1, d2, r = p1 - p0, q1 - q0, p0 - q0
    a, e = (d1 * d1).sum(-1), (d2 * d2).sum(-1)
    b, c, f = (d1 * d2).sum(-1), (d1 * r).sum(-1), (d2 * r).sum(-1)
    a_, e_ = np.maximum(a, 1e-18), np.maximum(e, 1e-18)
    denom = a * e - b * b
    s = np.where(
        denom > 1e-18 * a_ * e_, np.clip((b * f - c * e) / np.maximum(denom, 1e-30), 0, 1), 0
    )
    t = (b * s + f) / e_
    s = np.where(t < 0, np.clip(-c / a_, 0, 1), np.where(t > 1, np.clip((b - c) / a_, 0, 1), s))
    t = np.clip(t, 0, 1)
    return np.linalg.norm(p0 + d1 * s[:, None] - q0 - d2 * t[:, None], axis=-1)


def _proxies(links: list[Link]) -> list[list[tuple[np.ndarray, np.ndarray, float]]]:
    """Per moving link, capsules (a, b, radius) enclosing its rod and end piece."""
    out = []
    for spec in links:
        rod = spec.rod
        r, e, d = rod.radius, rod.end, rod.direction
        caps = [(rod.start, e, r * (1.42 if rod.shape == "box" else 1.0))]
        piece = {
            "ball": (e + 0.8 * r * d, 1.8 * r),
            "disc": (e + 0.4 * r * d, 3.0 * r),
            "ring": (e + 3.0 * r * d, 3.6 * r),
            "paddle": (e + 2.0 * r * rod.side + 1.5 * r * d, 3.0 * r),
        }.get(rod.end_piece)
        if piece is not None:
            caps.append((piece[0], piece[0], piece[1]))
        out.append(caps)
    return out


def collides(art, base: np.ndarray, links: list[Link], clearance: float = GAP) -> bool:
    """True when two links that are not parent and child, or a link and the base block, come
    closer than their proxies' radii plus ``clearance`` at some frame."""
    tf = art.tree.link_transforms(art.q)  # (T, L, 4, 4)
    caps = _proxies(links)

    def moved(link: int, point: np.ndarray) -> np.ndarray:  # (T, 3)
        return tf[:, link, :3, :3] @ point + tf[:, link, :3, 3]

    parents = [0] + [spec.parent for spec in links]
    half = np.array([base[0] / 2, base[1] / 2])
    for i in range(1, len(parents)):
        if parents[i] != 0:  # the base block, as a box; 9 points along each capsule
            for a, b, r in caps[i - 1]:
                pa, pb = moved(i, a), moved(i, b)
                pts = pa[:, None] + (pb - pa)[:, None] * np.linspace(0, 1, 9)[None, :, None]
                out_xy = np.maximum(np.abs(pts[..., :2]) - half, 0)
                out_z = np.maximum(np.maximum(-pts[..., 2], pts[..., 2] - base[2]), 0)
                dist = np.sqrt((out_xy**2).sum(-1) + out_z**2)  # (T, 9)
                if (dist < r + clearance).any():
                    return True
        for j in range(i + 1, len(parents)):
            if parents[j] == i:
                continue
            for a, b, r in caps[i - 1]:
                for c, d, rr in caps[j - 1]:
                    dist = segment_distance(moved(i, a), moved(i, b), moved(j, c), moved(j, d))
                    if (dist < r + rr + clearance).any():
                        return True
    return False


@articulated_family("random_assembly")
def random_assembly(rng: np.random.Generator):
    """Random rods and end pieces joined by random revolute, continuous and prismatic joints."""
    (base_shape, base), links = _plan(rng)

    def build(b: ObjectBuilder):
        if base_shape == "box":
            b.box(b.BASE, base, (0, 0, base[2] / 2), radius=0.1 * base.min())
        else:
            b.cylinder(b.BASE, 0.5 * min(base[0], base[1]), base[2], (0, 0, base[2] / 2))
        ids = [b.BASE] + [b.link(f"part_{k + 1}") for k in range(len(links))]
        for k, spec in enumerate(links):
            _add_rod(b, ids[k + 1], spec.rod)
        for k, spec in enumerate(links):
            closed = 0.0 if spec.kind == "continuous" else min(max(0.0, spec.lower), spec.upper)
            b.joint(
                spec.kind,
                ids[spec.parent],
                ids[k + 1],
                spec.axis,
                spec.point,
                spec.lower,
                spec.upper,
                closed=closed,
            )

    return build, lambda art: not collides(art, base, links)
