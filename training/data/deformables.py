"""Deformable data families, simulated with MuJoCo 4.0.0 flexes (importing this registers them).

| family              | category  | split  | scenario                                          |
|---------------------|-----------|--------|---------------------------------------------------|
| cloth_curtain       | cloth     | train  | hung from its top edge (or rings), gusty wind     |
| cloth_flag          | cloth     | train  | fixed along the pole edge, strong gusty wind      |
| cloth_corners       | cloth     | train  | hung by 1-2 corners or an edge, falls and swings  |
| cloth_over_collider | cloth     | unseen | free sheet dropped onto a sphere, box or table    |
| elastic_dropped     | elastic   | train  | box/cylinder/sphere/ellipsoid/beam dropped/thrown |
| elastic_poked       | elastic   | train  | glued to the ground, force pulse or falling ball  |
| elastic_cantilever  | elastic   | train  | beam or rod clamped at one end, bends, oscillates |
| rope_swinging       | continuum | train  | hung from one end, released at an angle, swings   |
| rope_clamped        | continuum | train  | cable clamped in position and direction, sags     |
| rope_draped         | continuum | unseen | free rope dropped across a bar, box or ball       |

The two ``unseen`` scenarios (``cloth_over_collider``, ``rope_draped``) are held out of training
to measure generalisation to unseen deformable scenarios: contact-dominated draping that no
training family shows (training cloth and ropes hang from pins and only meet the ground).

Every family is ``generate(rng, frames, *, tiny=False) -> Sequence4D``: frames at
``mujoco_util.FPS`` (24) per second of simulated time, frame 0 the rest shape (the compiled model
before any step), Z up, metres; ``tiny=True`` picks the lowest resolution (for tests). An unstable
simulation raises ``SimulationError`` (a reject). Details: ``cloth``, ``elastic``, ``rope``.
"""

from __future__ import annotations

from . import cloth, elastic, rope
from .mujoco_util import FPS

DEFORMABLE_FAMILIES = {
    "cloth_curtain": cloth.cloth_curtain,
    "cloth_flag": cloth.cloth_flag,
    "cloth_corners": cloth.cloth_corners,
    "cloth_over_collider": cloth.cloth_over_collider,
    "elastic_dropped": elastic.elastic_dropped,
    "elastic_poked": elastic.elastic_poked,
    "elastic_cantilever": elastic.elastic_cantilever,
    "rope_swinging": rope.rope_swinging,
    "rope_clamped": rope.rope_clamped,
    "rope_draped": rope.rope_draped,
}
UNSEEN = ("cloth_over_collider", "rope_draped")

__all__ = ["DEFORMABLE_FAMILIES", "FPS", "UNSEEN"]
