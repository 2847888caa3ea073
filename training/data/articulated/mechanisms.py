"""Small mechanisms: scissors (held out), desk lamp, fan, wheel on an axle.

Conventions as in ``furniture``: Z up, metres, standing on z = 0, front towards -y.
"""

from __future__ import annotations

import math

import numpy as np

from .. import primitives as P
from .builder import ObjectBuilder, articulated_family

deg = math.radians


@articulated_family("scissors", split="unseen")
def scissors(rng: np.random.Generator):
    """Scissors lying flat: two blades in stacked layers about a pivot screw (held out)."""
    lb, w = rng.uniform(0.05, 0.12), rng.uniform(0.012, 0.022)
    lh = rng.uniform(0.05, 0.09)
    ring_r, ring_t = rng.uniform(0.012, 0.02), rng.uniform(0.003, 0.005)
    stretch = rng.uniform(1.0, 1.6)
    t, gap = rng.uniform(0.0015, 0.003), 0.0004
    upper = deg(rng.uniform(35, 60))
    tail = 0.3 * w
    blade = np.array([(-tail, -w / 2), (0.9 * lb, -0.15 * w), (lb, 0.05 * w), (-tail, w / 2)])
    offset_y = stretch * ring_r + ring_t + 0.002  # rings side by side, never overlapping

    def build(b: ObjectBuilder):
        moving = b.link("blade")
        for link, sign, z0 in ((b.BASE, 1.0, 0.0), (moving, -1.0, t + gap)):
            poly = blade * [1.0, sign]
            b.prism(link, poly if sign > 0 else poly[::-1], t, offset=(0, 0, z0))
            centre = np.array([-lh, sign * offset_y, z0 + t / 2])
            # a flat shank in the blade's layer from the blade root to the ring
            root, grip = np.array([-tail, 0.0]), centre[:2] - [0, sign * stretch * ring_r]
            along = grip - root
            turn = P.rotation((0, 0, 1), math.atan2(along[1], along[0]))
            size = (float(np.linalg.norm(along)), 0.35 * w, t)
            b.box(link, size, (*(root + grip) / 2, z0 + t / 2), turn)
            ring = np.diag([1.0, stretch, 0.75 * t / ring_t])
            b.add(link, P.torus(ring_r, ring_t, b.edge), ring, centre)
        b.cylinder(b.BASE, 0.12 * w + 0.002, 2 * t + gap + 0.001, (0, 0, t + gap / 2))
        b.joint("revolute", b.BASE, moving, (0, 0, 1), (0, 0, 0), 0.0, upper)

    return build


@articulated_family("desk_lamp")
def desk_lamp(rng: np.random.Generator):
    """Desk lamp: swivel on a heavy base, two arm links and a shade (four revolute joints)."""
    rb, hb = rng.uniform(0.06, 0.11), rng.uniform(0.015, 0.03)
    l1 = rng.uniform(0.2, 0.35)
    l2 = l1 * rng.uniform(0.6, 0.95)
    a1, a2, a3 = deg(rng.uniform(5, 30)), deg(rng.uniform(45, 85)), deg(rng.uniform(0, 40))
    r_arm = rng.uniform(0.006, 0.012)
    twin = rng.random() < 0.5
    shade_r, shade_h = rng.uniform(0.05, 0.09), rng.uniform(0.06, 0.12)
    swivel = deg(rng.uniform(45, 160))
    # the elbow never folds the upper arm back across the lower one
    limits = [(-deg(20), deg(25)), (-min(deg(35), a2 - a1 - deg(15)), deg(35)), (-deg(45), deg(45))]

    def build(b: ObjectBuilder):
        turn, lower, upper, head = (b.link(n) for n in ("swivel", "lower_arm", "upper_arm", "head"))
        b.cylinder(b.BASE, rb, hb, (0, 0, hb / 2))
        b.cylinder(turn, 0.025, 0.03, (0, 0, hb + 0.015))
        s = np.array([0, 0, hb + 0.03 + 0.02])
        e = s + l1 * np.array([0, -math.sin(a1), math.cos(a1)])
        w = e + l2 * np.array([0, -math.sin(a2), math.cos(a2)])
        d_head = np.array([0, -math.sin(a3), -math.cos(a3)])
        b.rod(turn, (0, 0, hb + 0.03), s, 0.012)
        for link, p, q in ((lower, s, e), (upper, e, w)):
            if twin:
                for dx in (-1.5 * r_arm, 1.5 * r_arm):
                    b.rod(link, p + [dx, 0, 0], q + [dx, 0, 0], r_arm * 0.7)
            else:
                b.rod(link, p, q, r_arm)
        b.cylinder(turn, 0.016, 0.05, s, (1, 0, 0))
        b.cylinder(lower, 0.014, 0.045, e, (1, 0, 0))
        b.cylinder(upper, 0.012, 0.04, w, (1, 0, 0))
        b.rod(head, w, w + 0.03 * d_head, 0.008)
        b.frustum(head, 0.022, shade_r, shade_h, w + 0.03 * d_head, d_head)
        b.joint("revolute", b.BASE, turn, (0, 0, 1), (0, 0, 0), -swivel, swivel, closed=0.0)
        for (link, parent, p), (lo, hi) in zip(
            ((lower, turn, s), (upper, lower, e), (head, upper, w)), limits, strict=True
        ):
            b.joint("revolute", parent, link, (1, 0, 0), p, lo, hi, closed=0.0)

    return build


@articulated_family("fan")
def fan(rng: np.random.Generator):
    """Desk or standing fan: an oscillating head and a rotor on a continuous joint."""
    rb, zh = rng.uniform(0.1, 0.16), rng.uniform(0.25, 1.2)
    rm, lm = rng.uniform(0.04, 0.07), rng.uniform(0.05, 0.1)
    n_blades = int(rng.integers(3, 7))
    r_blade = rng.uniform(0.1, 0.22)
    pitch = deg(rng.uniform(15, 35))
    chord = rng.uniform(0.35, 0.6) * r_blade
    yaw = deg(rng.uniform(20, 60))

    def build(b: ObjectBuilder):
        head, rotor = b.link("head"), b.link("rotor")
        b.cylinder(b.BASE, rb, 0.025, (0, 0, 0.0125))
        b.cylinder(b.BASE, 0.015, zh - 0.025, (0, 0, 0.025 + (zh - 0.025) / 2))
        zc = zh + rm + 0.01
        b.cylinder(head, 0.02, rm + 0.02, (0, 0, zh + (rm + 0.02) / 2 - 0.005))
        b.capsule(head, rm, lm, (0, 0.02, zc), (0, 1, 0))
        y_front = 0.02 - lm / 2 - rm  # front of the motor
        depth = 0.5 * chord * math.sin(pitch) + 0.003  # half the pitched blades' depth
        y_rotor = y_front - 0.015 - depth
        b.cylinder(head, 0.01, y_front - y_rotor, (0, (y_front + y_rotor) / 2, zc), (0, 1, 0))
        cage = r_blade + 0.025
        y_back, y_grill = y_front + 0.2 * rm, y_rotor - depth - 0.015
        for y in (y_back, y_grill):
            b.torus(head, cage, 0.004, (0, y, zc), (0, 1, 0))
        for k in range(6):
            a = 2 * math.pi * k / 6
            radial = np.array([math.cos(a), 0, math.sin(a)])
            b.rod(head, (0, y_back, zc) + radial * 0.5 * rm, (0, y_back, zc) + radial * cage, 0.003)
            b.rod(head, (0, y_back, zc) + radial * cage, (0, y_grill, zc) + radial * cage, 0.003)
        b.cylinder(rotor, 0.035, 0.03, (0, y_rotor, zc), (0, 1, 0))
        for k in range(n_blades):
            a = 2 * math.pi * k / n_blades
            radial = np.array([math.cos(a), 0, math.sin(a)])
            # the blade's long axis is radial; pitch it about that axis
            spin = P.rotation((0.0, 1.0, 0.0), -a)
            tilt = P.rotation((1.0, 0.0, 0.0), pitch)
            centre = np.array([0, y_rotor, zc]) + radial * (0.02 + r_blade) / 2
            b.box(rotor, (r_blade - 0.02, 0.003, chord), centre, spin @ tilt, radius=0.0012)
        b.joint("revolute", b.BASE, head, (0, 0, 1), (0, 0, 0), -yaw, yaw, closed=0.0)
        b.joint("continuous", head, rotor, (0, -1, 0), (0, 0, zc))

    return build


@articulated_family("wheel")
def wheel(rng: np.random.Generator):
    """Wheel (spoked or solid) spinning on an axle between two uprights (continuous joint)."""
    r = rng.uniform(0.08, 0.5)
    tire = r * rng.uniform(0.06, 0.15)
    hub_l = r * rng.uniform(0.25, 0.5)
    hub_r = r * rng.uniform(0.1, 0.2)
    n_spokes = int(rng.integers(3, 13)) if rng.random() < 0.7 else 0
    t = r * rng.uniform(0.05, 0.1)
    clearance = 0.5 * t + rng.uniform(0.01, 0.1) * r + 0.005

    def build(b: ObjectBuilder):
        wl = b.link("wheel")
        zc = r + clearance
        x_up = max(hub_l / 2, tire) + 0.004 + t / 2
        b.slab(b.BASE, (-x_up - t, -0.5 * r, 0), (x_up + t, 0.5 * r, 0.5 * t))
        for sx in (-1, 1):
            b.slab(
                b.BASE,
                (sx * x_up - t / 2, -hub_r, 0.5 * t),
                (sx * x_up + t / 2, hub_r, zc + hub_r),
                radius=0.2 * t,
            )
        b.cylinder(b.BASE, 0.4 * hub_r, 2 * x_up + 1.5 * t, (0, 0, zc), (1, 0, 0))
        b.torus(wl, r - tire, tire, (0, 0, zc), (1, 0, 0))
        b.cylinder(wl, hub_r, hub_l, (0, 0, zc), (1, 0, 0))
        if n_spokes:
            for k in range(n_spokes):
                a = 2 * math.pi * k / n_spokes
                radial = np.array([0, math.cos(a), math.sin(a)])
                b.rod(
                    wl,
                    np.array([0, 0, zc]) + 0.8 * hub_r * radial,
                    np.array([0, 0, zc]) + (r - 1.5 * tire) * radial,
                    0.25 * tire,
                    False,
                )
        else:
            b.cylinder(wl, r - 1.5 * tire, 0.3 * hub_l, (0, 0, zc), (1, 0, 0))
        b.joint("continuous", b.BASE, wl, (1, 0, 0), (0, 0, zc))

    return build
