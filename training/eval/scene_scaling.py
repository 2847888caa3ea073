"""A plausibility scene at another size (``training.eval.scenes --size``): its mesh and its
conditions scaled uniformly about the origin by s = size / L.

Scaled by s: every position (the mesh's vertices, its hinge, ground and colliders; the
conditions' point anchors, drag targets and colliders), the forces' strengths and winds and the
initial velocities (so that a push moves the object the same share of its size when gravity is
left out). Kept: masses, gravity (a small object feels it 1/s times stronger for its size),
friction, bounciness, damping, stiffness (Hz), frames and fps; pins and landmarks are vertex
indices.
"""

from __future__ import annotations

import dataclasses

from neurok_core.dynamics import Collider, SimulationConditions

from .scene_meshes import SceneMesh


def scaled_mesh(mesh: SceneMesh, s: float) -> SceneMesh:
    """``mesh`` scaled by ``s`` about the origin."""
    hinge = mesh.hinge
    if hinge is not None:
        hinge = dataclasses.replace(hinge, point=tuple(float(c) * s for c in hinge.point))
    return dataclasses.replace(
        mesh,
        vertices=mesh.vertices * s,
        hinge=hinge,
        ground=None if mesh.ground is None else mesh.ground * s,
        colliders=tuple((name, v * s, f) for name, v, f in mesh.colliders),
    )


def scaled_conditions(cond: SimulationConditions, s: float) -> SimulationConditions:
    """``cond`` for the mesh scaled by ``s`` (module docstring)."""

    def point(p):
        return None if p is None else tuple(float(c) * s for c in p)

    return dataclasses.replace(
        cond,
        forces=tuple(
            dataclasses.replace(f, strength=f.strength * s, point=point(f.point))
            for f in cond.forces
        ),
        winds=tuple(dataclasses.replace(w, strength=w.strength * s) for w in cond.winds),
        drags=tuple(
            dataclasses.replace(d, target=point(d.target), point=point(d.point)) for d in cond.drags
        ),
        velocities=tuple(
            dataclasses.replace(
                v, velocity=tuple(float(c) * s for c in v.velocity), point=point(v.point)
            )
            for v in cond.velocities
        ),
        colliders=tuple(
            Collider(tuple(point(p) for p in c.vertices), c.faces, c.name) for c in cond.colliders
        ),
        ground=None if cond.ground is None else cond.ground * s,
    )
