"""Furniture-like families: laptop, chest, cabinet, drawers, door in a frame, oven.

Conventions: Z up, metres, the object stands on z = 0 with its front facing -y; hinges open
towards the front so that a moving part never passes through the fixed ones.
"""

from __future__ import annotations

import math

import numpy as np

from .builder import ObjectBuilder, articulated_family

deg = math.radians


@articulated_family("laptop")
def laptop(rng: np.random.Generator):
    """Laptop: base and lid on a hinge along the back edge, closed to 100-135 degrees open."""
    w = rng.uniform(0.28, 0.40)
    d = w * rng.uniform(0.62, 0.75)
    tb, tl = rng.uniform(0.012, 0.024), rng.uniform(0.005, 0.010)
    rb, rl = rng.uniform(0.1, 0.45) * tb, rng.uniform(0.1, 0.45) * tl
    foot = rng.uniform(0.002, 0.005)
    upper = deg(rng.uniform(100, 135))
    z_lid = foot + tb + 0.001

    def build(b: ObjectBuilder):
        lid = b.link("lid")
        for sx in (-1, 1):
            for sy in (-1, 1):
                c = (sx * (w / 2 - 0.03), sy * (d / 2 - 0.02), foot / 2)
                b.cylinder(b.BASE, 0.007, foot, c)
        b.slab(b.BASE, (-w / 2, -d / 2, foot), (w / 2, d / 2, foot + tb), radius=rb)
        b.slab(lid, (-w / 2, -d / 2, z_lid), (w / 2, d / 2, z_lid + tl), radius=rl)
        b.joint("revolute", b.BASE, lid, (-1, 0, 0), (0, d / 2, z_lid), 0.0, upper)

    return build


@articulated_family("chest")
def chest(rng: np.random.Generator):
    """Box or chest with a lid hinged at the back (jewellery box to blanket chest)."""
    w = rng.uniform(0.15, 1.0)
    d = w * rng.uniform(0.5, 0.9)
    h = w * rng.uniform(0.35, 0.8)
    t = w * rng.uniform(0.025, 0.06)
    tl = t * rng.uniform(0.8, 1.6)
    ov = rng.uniform(0.0, 1.0) * t  # lid overhang
    upper = deg(rng.uniform(80, 115))
    handle = rng.random() < 0.6
    r_lid = rng.uniform(0.0, 0.45) * tl

    def build(b: ObjectBuilder):
        lid = b.link("lid")
        b.slab(b.BASE, (-w / 2, -d / 2, 0), (w / 2, d / 2, t))
        for sy in (-1, 1):  # front and back walls
            y0, y1 = sorted((sy * d / 2, sy * (d / 2 - t)))
            b.slab(b.BASE, (-w / 2, y0, t), (w / 2, y1, h))
        for sx in (-1, 1):  # side walls between them
            x0, x1 = sorted((sx * w / 2, sx * (w / 2 - t)))
            b.slab(b.BASE, (x0, -d / 2 + t, t), (x1, d / 2 - t, h))
        z0 = h + 0.002
        b.slab(lid, (-w / 2 - ov, -d / 2 - ov, z0), (w / 2 + ov, d / 2 + ov, z0 + tl), r_lid)
        if handle:
            hw = 0.12 * w
            b.rod(
                lid,
                (-hw, -d / 2 - ov - 0.3 * t, z0 + tl / 2),
                (hw, -d / 2 - ov - 0.3 * t, z0 + tl / 2),
                0.25 * tl,
            )
        b.joint("revolute", b.BASE, lid, (-1, 0, 0), (0, d / 2 + ov, z0), 0.0, upper)

    return build


def _carcass(b: ObjectBuilder, w, d, h, t, plinth, shelves=()):
    """Open-front cabinet body: sides, top, bottom on a plinth, back panel, shelves."""
    for sx in (-1, 1):
        x0, x1 = sorted((sx * w / 2, sx * (w / 2 - t)))
        b.slab(b.BASE, (x0, -d / 2, 0), (x1, d / 2, h))
    b.slab(b.BASE, (-w / 2 + t, -d / 2, h - t), (w / 2 - t, d / 2, h))
    b.slab(b.BASE, (-w / 2 + t, -d / 2, plinth), (w / 2 - t, d / 2, plinth + t))
    if plinth > 0:
        b.slab(b.BASE, (-w / 2 + t, -d / 2 + t, 0), (w / 2 - t, d / 2 - t, plinth))
    b.slab(b.BASE, (-w / 2 + t, d / 2 - t, plinth + t), (w / 2 - t, d / 2, h - t))
    for z in shelves:
        b.slab(b.BASE, (-w / 2 + t, -d / 2 + t, z), (w / 2 - t, d / 2 - t, z + t))


@articulated_family("cabinet")
def cabinet(rng: np.random.Generator):
    """Cabinet with one or two doors on vertical hinges at the outer front edges."""
    w = rng.uniform(0.35, 1.2)
    d = rng.uniform(0.3, 0.6)
    h = rng.uniform(0.5, 2.0)
    t = rng.uniform(0.015, 0.025)
    td = rng.uniform(0.015, 0.025)
    plinth = rng.choice([0.0, rng.uniform(0.03, 0.1)])
    n_shelves = int(rng.integers(0, 4))
    shelves = plinth + t + (h - plinth - 2 * t) * (np.arange(1, n_shelves + 1) / (n_shelves + 1))
    sides = [-1, 1] if w > 0.6 and rng.random() < 0.8 else [int(rng.choice([-1, 1]))]
    uppers = [deg(rng.uniform(85, 120)) for _ in sides]
    knob_z = plinth + (h - plinth) * rng.uniform(0.4, 0.6)
    gap = 0.002

    def build(b: ObjectBuilder):
        _carcass(b, w, d, h, t, plinth, shelves)
        door_w = (w - gap * (len(sides) + 1)) / len(sides)
        for s, upper in zip(sides, uppers, strict=True):
            door = b.link("door_left" if s < 0 else "door_right")
            outer = s * (w / 2 - gap)
            inner = outer - s * door_w
            x0, x1 = sorted((outer, inner))
            b.slab(door, (x0, -d / 2 - td, plinth + gap), (x1, -d / 2 - gap, h - gap))
            knob_x = inner + s * 0.05
            b.cylinder(door, 0.006, 0.02, (knob_x, -d / 2 - td - 0.01, knob_z), (0, 1, 0))
            b.sphere(door, 0.014, (knob_x, -d / 2 - td - 0.028, knob_z))
            # left door (s = -1) turns about -z, right door about +z: both open to the front
            b.joint("revolute", b.BASE, door, (0, 0, s), (s * w / 2, -d / 2 - gap, 0), 0.0, upper)

    return build


@articulated_family("drawers")
def drawers(rng: np.random.Generator):
    """Chest of drawers: 1-5 rows in 1-2 columns, each drawer on a prismatic slide."""
    cols = 1 if rng.random() < 0.6 else 2
    rows = int(rng.integers(1, 6))
    w = rng.uniform(0.35, 0.6) * cols
    d = rng.uniform(0.3, 0.6)
    h = rng.uniform(0.12, 0.3) * rows + 0.05
    t = rng.uniform(0.012, 0.022)
    tf = rng.uniform(0.015, 0.025)
    plinth = rng.choice([0.0, rng.uniform(0.03, 0.08)])
    travel = d * rng.uniform(0.55, 0.85)
    bar = rng.random() < 0.5
    gap = 0.003

    def build(b: ObjectBuilder):
        z_in0, z_in1 = plinth + t, h - t
        cell_h = (z_in1 - z_in0 - (rows - 1) * t) / rows
        shelves = [z_in0 + (r + 1) * cell_h + r * t for r in range(rows - 1)]
        _carcass(b, w, d, h, t, plinth, shelves)
        cell_w = (w - 2 * t - (cols - 1) * t) / cols
        if cols == 2:
            b.slab(b.BASE, (-t / 2, -d / 2, z_in0), (t / 2, d / 2 - t, z_in1))
        for r in range(rows):
            for c in range(cols):
                x0 = -w / 2 + t + c * (cell_w + t)
                z0 = z_in0 + r * (cell_h + t)
                dr = b.link(f"drawer_{r}_{c}")
                _drawer(b, dr, x0, x0 + cell_w, z0, z0 + cell_h, d, t, tf, gap, bar)
                b.joint("prismatic", b.BASE, dr, (0, -1, 0), (0, 0, 0), 0.0, travel)

    return build


def _drawer(b, link, x0, x1, z0, z1, d, t, tf, gap, bar):
    """Front panel over the opening, tray behind it inside the cell, and a handle."""
    b.slab(
        link,
        (x0 - t / 2 + gap, -d / 2 - tf, z0 - t / 2 + gap),
        (x1 + t / 2 - gap, -d / 2 - gap, z1 + t / 2 - gap),
    )
    tw = 0.6 * t
    xa, xb, za, zb = x0 + gap, x1 - gap, z0 + gap, z1 - 0.25 * (z1 - z0)
    y0, y1 = -d / 2, d / 2 - t - gap
    b.slab(link, (xa, y0, za), (xb, y1, za + tw))
    b.slab(link, (xa, y1 - tw, za + tw), (xb, y1, zb))
    b.slab(link, (xa, y0, za + tw), (xa + tw, y1 - tw, zb))
    b.slab(link, (xb - tw, y0, za + tw), (xb, y1 - tw, zb))
    zc, xc, yf = 0.5 * (z0 + z1), 0.5 * (x0 + x1), -d / 2 - tf
    if bar:
        half = 0.25 * (x1 - x0)
        for sx in (-1, 1):
            b.cylinder(link, 0.005, 0.025, (xc + sx * half, yf - 0.0125, zc), (0, 1, 0))
        b.rod(link, (xc - half - 0.01, yf - 0.03, zc), (xc + half + 0.01, yf - 0.03, zc), 0.007)
    else:
        b.sphere(link, 0.015, (xc, yf - 0.012, zc))


@articulated_family("door")
def door(rng: np.random.Generator):
    """Door in a frame, hinged left or right, with a lever handle that turns (two joints)."""
    wd, hd, td = rng.uniform(0.7, 1.0), rng.uniform(1.95, 2.2), rng.uniform(0.035, 0.05)
    fw, fd = rng.uniform(0.05, 0.1), rng.uniform(0.1, 0.2)
    s = int(rng.choice([-1, 1]))  # hinge side
    upper = deg(rng.uniform(85, 110))
    lever_upper = deg(rng.uniform(30, 50))
    handle_z = rng.uniform(0.95, 1.1)
    lever = rng.uniform(0.1, 0.14)
    gap = 0.004

    def build(b: ObjectBuilder):
        leaf, handle = b.link("door"), b.link("handle")
        x_in = wd / 2 + gap  # inner face of the jambs
        for sx in (-1, 1):
            x0, x1 = sorted((sx * x_in, sx * (x_in + fw)))
            b.slab(b.BASE, (x0, 0, 0), (x1, fd, hd + gap + fw))
        b.slab(b.BASE, (-x_in, 0, hd + gap), (x_in, fd, hd + gap + fw))
        b.slab(leaf, (-wd / 2, 0, gap), (wd / 2, td, hd), radius=0.003)
        x_h = -s * (wd / 2 - 0.07)
        b.cylinder(handle, 0.008, td + 0.06, (x_h, td / 2, handle_z), (0, 1, 0))
        for y_rose, y_lever in ((-0.006, -0.03), (td + 0.006, td + 0.03)):
            b.cylinder(handle, 0.03, 0.012, (x_h, y_rose, handle_z), (0, 1, 0))
            b.rod(handle, (x_h, y_lever, handle_z), (x_h + s * lever, y_lever, handle_z), 0.009)
        # the hinge line lies on the door's front face, at the hinge-side edge: the door opens
        # to the front (-y) and its back corner swings away from the jamb
        b.joint("revolute", b.BASE, leaf, (0, 0, s), (s * wd / 2, 0, 0), 0.0, upper)
        b.joint("revolute", leaf, handle, (0, s, 0), (x_h, 0, handle_z), 0.0, lever_upper)

    return build


@articulated_family("oven")
def oven(rng: np.random.Generator):
    """Oven (door hinged at the bottom) or microwave (door hinged at the side) with knobs."""
    microwave = rng.random() < 0.4
    w = rng.uniform(0.45, 0.6) if microwave else rng.uniform(0.5, 0.9)
    d = rng.uniform(0.3, 0.45) if microwave else rng.uniform(0.5, 0.65)
    h = rng.uniform(0.25, 0.35) if microwave else rng.uniform(0.6, 0.95)
    td = rng.uniform(0.02, 0.04)
    n_knobs = int(rng.integers(1, 5))
    upper = deg(rng.uniform(80, 100)) if not microwave else deg(rng.uniform(90, 120))
    feet = 0.0 if microwave else rng.uniform(td + 0.01, 0.08)
    gap = 0.003

    def build(b: ObjectBuilder):
        door = b.link("door")
        b.slab(b.BASE, (-w / 2, -d / 2, feet), (w / 2, d / 2, h), radius=0.01)
        if feet > 0:
            for sx in (-1, 1):
                for sy in (-1, 1):
                    b.cylinder(
                        b.BASE, 0.015, feet, (sx * (w / 2 - 0.04), sy * (d / 2 - 0.04), feet / 2)
                    )
        if microwave:  # door on the left two thirds, knob panel on the right
            x0, x1, z0, z1 = -w / 2 + gap, w / 6, feet + gap, h - gap
            b.slab(door, (x0, -d / 2 - td, z0), (x1, -d / 2 - gap, z1), radius=0.004)
            b.rod(
                door,
                (x1 - 0.03, -d / 2 - td - 0.03, z0 + 0.25 * (z1 - z0)),
                (x1 - 0.03, -d / 2 - td - 0.03, z1 - 0.25 * (z1 - z0)),
                0.008,
            )
            b.joint("revolute", b.BASE, door, (0, 0, -1), (-w / 2, -d / 2 - gap, 0), 0.0, upper)
            knob_xz = [(w / 3, feet + h * (k + 1) / (n_knobs + 1)) for k in range(n_knobs)]
        else:  # door below a control strip, hinged along its bottom edge
            strip = 0.12 * (h - feet)
            x0, x1, z0, z1 = -w / 2 + gap, w / 2 - gap, feet + gap, h - strip
            b.slab(door, (x0, -d / 2 - td, z0), (x1, -d / 2 - gap, z1), radius=0.004)
            b.rod(
                door,
                (x0 + 0.08, -d / 2 - td - 0.035, z1 - 0.04),
                (x1 - 0.08, -d / 2 - td - 0.035, z1 - 0.04),
                0.01,
            )
            for sx in (-1, 1):
                b.cylinder(
                    door,
                    0.006,
                    0.04,
                    (sx * (w / 2 - 0.1), -d / 2 - td - 0.018, z1 - 0.04),
                    (0, 1, 0),
                )
            b.joint("revolute", b.BASE, door, (1, 0, 0), (0, -d / 2 - gap, z0), 0.0, upper)
            knob_xz = [(w * ((k + 1) / (n_knobs + 1) - 0.5), h - strip / 2) for k in range(n_knobs)]
        for k, (x, z) in enumerate(knob_xz):
            knob = b.link(f"knob_{k}")
            r = min(0.022, 0.3 * (h - feet) / max(n_knobs, 2))
            b.cylinder(knob, r, 0.02, (x, -d / 2 - 0.01, z), (0, 1, 0))
            b.box(knob, (0.25 * r, 0.008, 1.4 * r), (x, -d / 2 - 0.022, z + 0.1 * r))
            b.joint("revolute", b.BASE, knob, (0, -1, 0), (x, 0, z), 0.0, deg(270))

    return build
