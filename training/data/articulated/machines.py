"""Robot-arm-like serial chains and sliding windows (held out).

Conventions as in ``furniture``: Z up, metres, standing on z = 0, front towards -y.
"""

from __future__ import annotations

import math

import numpy as np

from .builder import ObjectBuilder, articulated_family

deg = math.radians


@articulated_family("robot_arm")
def robot_arm(rng: np.random.Generator):
    """Serial arm: base yaw, 2-3 pitch joints, optional wrist roll and a two-finger gripper."""
    s = rng.uniform(0.5, 1.5)
    r0, h0 = s * rng.uniform(0.06, 0.12), s * rng.uniform(0.05, 0.12)
    n_pitch = int(rng.integers(2, 4))
    lengths = s * rng.uniform(0.15, 0.35, size=n_pitch)
    radii = s * np.linspace(rng.uniform(0.035, 0.05), rng.uniform(0.02, 0.03), n_pitch)
    pitch_limits = [deg(rng.uniform(30, 70))] + [deg(rng.uniform(45, 110))] * (n_pitch - 1)
    yaw = deg(rng.uniform(90, 180))
    roll = rng.random() < 0.6
    gripper = rng.random() < 0.7
    box_links = rng.random() < 0.4

    def build(b: ObjectBuilder):
        turret = b.link("turret")
        b.cylinder(b.BASE, r0, h0, (0, 0, h0 / 2))
        h1 = radii[0] * 1.5
        b.cylinder(turret, 0.8 * r0, h1, (0, 0, h0 + h1 / 2))
        b.joint("revolute", b.BASE, turret, (0, 0, 1), (0, 0, 0), -yaw, yaw, closed=0.0)
        p = np.array([0.0, 0.0, h0 + h1 + radii[0]])
        parent, housing = turret, radii[0] * 1.25
        for k in range(n_pitch):
            link = b.link(f"link_{k + 1}")
            b.cylinder(parent, housing, 2.2 * radii[k], p, (1, 0, 0))
            q = p + [0.0, 0.0, lengths[k]]
            if box_links:
                b.box(
                    link,
                    (1.6 * radii[k], 1.6 * radii[k], lengths[k]),
                    (p + q) / 2,
                    radius=0.3 * radii[k],
                )
            else:
                b.rod(link, p, q, radii[k])
            lim = pitch_limits[k]
            b.joint("revolute", parent, link, (1, 0, 0), p, -lim, lim, closed=0.0)
            parent, p = link, q
            housing = radii[min(k + 1, n_pitch - 1)] * 1.25
        r_end = radii[-1]
        b.cylinder(parent, 0.9 * r_end, 0.02 * s, p + [0, 0, 0.01 * s])
        p = p + [0.0, 0.0, 0.02 * s]
        if roll:
            wrist = b.link("wrist")
            b.cylinder(wrist, 0.85 * r_end, 0.04 * s, p + [0, 0, 0.02 * s])
            b.joint("revolute", parent, wrist, (0, 0, 1), p, -deg(170), deg(170), closed=0.0)
            parent, p = wrist, p + [0.0, 0.0, 0.04 * s]
        if gripper:
            _gripper(b, parent, p, r_end, s)

    return build


def _gripper(b: ObjectBuilder, parent: int, p: np.ndarray, r: float, s: float) -> None:
    """Palm across x and two fingers that slide towards each other (prismatic)."""
    width, depth, fw = 3.0 * r, 1.2 * r, 0.5 * r
    length = 0.08 * s
    b.box(parent, (width, depth, 0.3 * r), p + [0, 0, 0.15 * r])
    z0 = p[2] + 0.3 * r
    travel = width / 2 - fw - 0.1 * r
    for sx in (-1, 1):
        finger = b.link("finger_left" if sx < 0 else "finger_right")
        xc = sx * (width / 2 - fw / 2)
        b.box(finger, (fw, 0.8 * depth, length), (xc, p[1], z0 + length / 2), radius=0.1 * fw)
        b.joint("prismatic", parent, finger, (-sx, 0, 0), p, 0.0, travel)


@articulated_family("sliding_window", split="unseen")
def sliding_window(rng: np.random.Generator):
    """Window frame with two sashes in separate tracks, sliding sideways or up (held out)."""
    w, h = rng.uniform(0.6, 1.6), rng.uniform(0.5, 1.5)
    fw, fd = rng.uniform(0.04, 0.07), rng.uniform(0.09, 0.14)
    ts, sw = rng.uniform(0.025, 0.035), rng.uniform(0.03, 0.06)
    vertical = rng.random() < 0.4
    both = rng.random() < 0.3
    overlap = rng.uniform(0.02, 0.06)
    fraction = rng.uniform(0.6, 0.95)

    def build(b: ObjectBuilder):
        # the frame lies in the x-z plane; u is the sliding direction (x or z), v the other
        for lo, hi in (
            ((-w / 2, 0, 0), (w / 2, fd, fw)),
            ((-w / 2, 0, h - fw), (w / 2, fd, h)),
            ((-w / 2, 0, fw), (-w / 2 + fw, fd, h - fw)),
            ((w / 2 - fw, 0, fw), (w / 2, fd, h - fw)),
        ):
            b.slab(b.BASE, lo, hi)
        u0, u1 = (-w / 2 + fw, w / 2 - fw) if not vertical else (fw, h - fw)
        v0, v1 = (fw, h - fw) if not vertical else (-w / 2 + fw, w / 2 - fw)
        mid = 0.5 * (u0 + u1)
        travel = fraction * (mid - u0 - overlap / 2)
        sashes = (
            ("sash_front", 0.15 * fd, u0, mid + overlap / 2, (0.0, travel)),
            ("sash_back", 0.55 * fd, mid - overlap / 2, u1, (-travel, 0.0)),
        )
        for k, (name, y0, a, c, (lo, hi)) in enumerate(sashes):
            moving = k == 0 or both
            link = b.link(name) if moving else b.BASE
            _sash(b, link, vertical, a, c, v0, v1, y0, ts, sw)
            if moving:
                axis = (0, 0, 1) if vertical else (1, 0, 0)
                closed = 0.0
                b.joint("prismatic", b.BASE, link, axis, (0, 0, 0), lo, hi, closed=closed)

    return build


def _sash(b, link, vertical, u0, u1, v0, v1, y0, ts, sw):
    """Rectangular sash (four members and a glass pane) spanning [u0, u1] x [v0, v1]."""

    def slab(ua, ub, va, vb, ya, yb):
        if vertical:  # u along z, v along x
            b.slab(link, (va, ya, ua), (vb, yb, ub))
        else:
            b.slab(link, (ua, ya, va), (ub, yb, vb))

    g = 0.002
    u0, u1, v0, v1 = u0 + g, u1 - g, v0 + g, v1 - g
    y1 = y0 + ts
    slab(u0, u1, v0, v0 + sw, y0, y1)
    slab(u0, u1, v1 - sw, v1, y0, y1)
    slab(u0, u0 + sw, v0 + sw, v1 - sw, y0, y1)
    slab(u1 - sw, u1, v0 + sw, v1 - sw, y0, y1)
    yc = 0.5 * (y0 + y1)
    slab(u0 + sw / 2, u1 - sw / 2, v0 + sw / 2, v1 - sw / 2, yc - 0.003, yc + 0.003)
