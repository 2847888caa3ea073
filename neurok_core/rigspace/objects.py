"""Several objects in one simulation (design section 16): every moving object with its own
bones, joints, mass, stiffness, pins and conditions, touching the others, the ground and the
static colliders.

Each moving object's rig space is built on its own (:func:`~.space.build_rig_space`: its parts,
its joints between its own parts, its pins, its mass spread over its own surface, bones that
bend where its own stiffness asks), and the spaces are put side by side into one
(:func:`merge_spaces`): the bones of every object, then the still bones of the pinned ones.
No joint joins two objects; they meet by contact only: every moving part's points against
every other moving rigid part (:func:`~.simulate._contact`), as the parts of one object meet,
so a collision exchanges momentum through the one implicit step of the whole scene. The
objects' conditions are moved onto the merged vertices (a condition placed at a point is held
by its own object's vertex nearest to it); an "all" velocity moves only its own object.

A static object is a collider of the scene. A cloth is simulated at its own resolution
(:mod:`~.cloth_simulate`), with the ground and the colliders, after the solid objects: each
loose part of a solid then moves as a rigid body on the path fitted to its frames
(:mod:`~neurok_core.dynamics.moving`), and the cloth meets it as a moving collider. The
coupling is one way, as Blender's cloth meets its collision objects: the solids do not feel the
cloth. One cloth a scene (two cloths would pass through each other).

Shapes: vertices (N, 3) float64 metres, faces (F, 3) int64, every object in the shared world
frame.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.spatial import cKDTree

from ..dynamics.conditions import Anchor, Collider, SimulationConditions
from ..dynamics.limits import check_mesh_start
from ..dynamics.moving import MovingBody, fit_track
from ..dynamics.settings import DEFAULT_SETTINGS
from ..errors import ConditionError
from ..results import SimulationResult
from ..rig import BoneRig
from ..sheets import sheet_parts
from .bones import BoneLayout, Seam, loose_parts
from .cloth_simulate import simulate_cloth
from .mixed import sheet_vertices
from .simulate import _noop, simulate_rig, simulate_space
from .space import RigSettings, RigSpace, build_rig_space

SCENE_FIELDS = (
    "gravity",
    "frames",
    "fps",
    "substeps",
    "tolerance",
    "device",
    "damping",
    "ground",
    "colliders",
    "friction",
    "bounciness",
    "winds",
)  # a scene's conditions; the others (forces, drags, velocities, pins, mass, stiffness,
# material) are each object's own


@dataclass(frozen=True)
class SceneObject:
    """One object of a scene: ``name`` (unique in the scene; a file's stem on the CLI), its
    mesh, its own ``conditions`` (forces, drags, velocities, pins, mass, stiffness, material;
    the scene's fields of it are not read) and whether it is ``static`` (a collider)."""

    name: str
    vertices: np.ndarray
    faces: np.ndarray
    conditions: SimulationConditions = SimulationConditions()
    static: bool = False


def object_conditions(scene: SimulationConditions, own: SimulationConditions):
    """An object's conditions alone in ``scene``: the scene's fields with its own."""
    return dataclasses.replace(own, **{f: getattr(scene, f) for f in SCENE_FIELDS})


def _check(objects: Sequence[SceneObject]) -> list[SceneObject]:
    objects = list(objects)
    if not objects:
        raise ConditionError("a scene needs at least one object")
    names = [o.name for o in objects]
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConditionError("every object of a scene needs a name")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConditionError(f"object names must differ within a scene: {', '.join(twice)}")
    if all(o.static for o in objects):
        raise ConditionError("every object is static: at least one must move")
    for o in objects:
        if not isinstance(o.conditions, SimulationConditions):
            raise ConditionError(f"{o.name}: conditions must be a SimulationConditions")
        o.conditions.validate(len(o.vertices))
    return objects


def _vertex_anchor(anchor: Anchor | None, tree: cKDTree, offset: int) -> Anchor | None:
    """An object's anchor on the merged vertices: a vertex moved by ``offset``, a point held by
    the object's own nearest vertex (``tree`` over its vertices)."""
    if anchor is None:
        return None
    if anchor.vertex is not None:
        return Anchor(vertex=int(anchor.vertex) + offset)
    return Anchor(vertex=int(tree.query(np.asarray(anchor.point))[1]) + offset)


def _placed(condition, tree: cKDTree, offset: int):
    """A force, drag or point velocity of one object, anchored on the merged vertices."""
    anchor = _vertex_anchor(condition.anchor, tree, offset)
    return dataclasses.replace(condition, vertex=anchor.vertex, point=None)


def merge_conditions(scene: SimulationConditions, objects, offsets) -> SimulationConditions:
    """The moving ``objects``' conditions on their merged vertices (``offsets``: each one's
    first vertex there), the scene's fields from ``scene``; "all" velocities are left out
    (:func:`uniform_velocities` gives them to their own object's bones)."""
    forces, drags, velocities, pins = [], [], [], []
    for o, offset in zip(objects, offsets, strict=True):
        c = o.conditions
        tree = cKDTree(np.asarray(o.vertices, dtype=np.float64))
        forces += [_placed(f, tree, offset) for f in c.forces]
        drags += [_placed(d, tree, offset) for d in c.drags]
        velocities += [_placed(v, tree, offset) for v in c.velocities if v.anchor is not None]
        pins += [int(p) + offset for p in c.pins]
    own = SimulationConditions(
        forces=tuple(forces),
        drags=tuple(drags),
        velocities=tuple(velocities),
        pins=tuple(pins),
        mass=float(sum(o.conditions.mass for o in objects)),
        stiffness=float(max(o.conditions.stiffness for o in objects)),
    )
    return object_conditions(scene, own)


def merge_spaces(spaces: Sequence[RigSpace]) -> tuple[RigSpace, list[np.ndarray]]:
    """One space of several objects' ``spaces`` side by side (module docstring), and for each
    object the indices (B_o,) of its bones in it, in its own space's order. Every object's
    vertices, parts and joints keep their order, moved past the ones before; the bones of
    every object come first, then the still bones (a space's still bone is its last)."""
    n_off = np.cumsum([0] + [len(s.vertices) for s in spaces])
    p_off = np.cumsum([0] + [len(s.layout.part_info) for s in spaces])
    regular = [len(s.layout.heads) for s in spaces]
    stills = [s.num_bones - r for s, r in zip(spaces, regular, strict=True)]
    b_off = np.cumsum([0] + regular)
    s_off = b_off[-1] + np.cumsum([0] + stills)
    bone_index = [
        np.concatenate([b_off[i] + np.arange(regular[i]), s_off[i] + np.arange(stills[i])])
        for i in range(len(spaces))
    ]
    total = int(s_off[-1])
    order = np.concatenate(bone_index)  # merged index of each space's bone, in space order

    def by_bone(values):  # (B_o, ...) per space -> (B, ...) in merged order
        out = np.empty((total,) + values[0].shape[1:], dtype=values[0].dtype)
        out[order] = np.concatenate(values)
        return out

    def part_moved(parts, i):
        return np.where(parts >= 0, parts + p_off[i], parts)

    layout = BoneLayout(
        heads=np.concatenate([s.layout.heads for s in spaces]),
        bone_parts=np.concatenate(
            [part_moved(s.layout.bone_parts, i) for i, s in enumerate(spaces)]
        ),
        vertex_bones=np.concatenate(
            [bone_index[i][s.layout.vertex_bones] for i, s in enumerate(spaces)]
        ),
        vertex_weights=np.concatenate([s.layout.vertex_weights for s in spaces]),
        parts=np.concatenate([s.layout.parts + p_off[i] for i, s in enumerate(spaces)]),
        part_info=tuple(
            dataclasses.replace(info, vertices=info.vertices + n_off[i])
            for i, s in enumerate(spaces)
            for info in s.layout.part_info
        ),
        face_parts=np.concatenate(
            [s.layout.part_of_faces(s.faces) + p_off[i] for i, s in enumerate(spaces)]
        ),
        seams=tuple(
            Seam(seam.part_a + p_off[i], seam.part_b + p_off[i], seam.vertices + n_off[i])
            for i, s in enumerate(spaces)
            for seam in s.layout.seams
        ),
    )
    # bone b's four columns 4 b .. 4 b + 3 of a space's rows and moments move to its merged
    # index's: every object's rows stacked, its moments a block of the merged ones
    blocks = []
    moments = np.zeros((4 * total, 4 * total))
    gravity_moment = np.zeros(4 * total)
    for i, s in enumerate(spaces):
        cols = (4 * bone_index[i][:, None] + np.arange(4)).reshape(-1)
        coo = s.rows.tocoo()
        blocks.append(
            sparse.csr_matrix((coo.data, (coo.row, cols[coo.col])), shape=(coo.shape[0], 4 * total))
        )
        moments[np.ix_(cols, cols)] = s.moments
        gravity_moment[cols] = s.gravity_moment
    rows = sparse.vstack(blocks).tocsr()
    joints = [
        dataclasses.replace(
            j, part_a=j.part_a + p_off[i], part_b=j.part_b + p_off[i] if j.part_b >= 0 else -1
        )
        for i, s in enumerate(spaces)
        for j in s.joints
    ]
    vertices = np.concatenate([s.vertices for s in spaces])
    faces = np.concatenate([s.faces + n_off[i] for i, s in enumerate(spaces)])
    width = max(s.vertex_bones.shape[1] for s in spaces)  # the most bones a vertex has
    # the largest object's size (the contact's margin, the grids' cells, the slip scale), not
    # the scene's extent: two objects far apart meet as they would side by side
    size = max(s.object_size for s in spaces)
    merged = RigSpace(
        vertices=vertices,
        faces=faces,
        layout=layout,
        heads=by_bone([s.heads for s in spaces]),
        fixed=by_bone([s.fixed for s in spaces]),
        rows=rows,
        masses=np.concatenate([s.masses for s in spaces]),
        moments=moments,
        gravity_moment=gravity_moment,
        vertex_bones=np.concatenate(
            [_widened(bone_index[i][s.vertex_bones], width) for i, s in enumerate(spaces)]
        ),
        vertex_weights=np.concatenate([_widened(s.vertex_weights, width) for s in spaces]),
        bone_parts=by_bone([part_moved(s.bone_parts, i) for i, s in enumerate(spaces)]),
        joints=joints,
        object_size=size,
        part_mass=np.concatenate([s.part_mass for s in spaces]),
        fixed_parts=np.concatenate([s.fixed_parts for s in spaces]),
        axes=by_bone([s.axes for s in spaces]),
        seen=by_bone([s.seen for s in spaces]),
    )
    merged.info = {
        "bones": int(total),
        "still_bone": any(s.info.get("still_bone") for s in spaces),
        "parts": [kind for s in spaces for kind in s.info.get("parts", [])],
        "fixed_parts": int(merged.fixed_parts.sum()),
        "joints": [j.describe() for j in joints],
    }
    return merged, bone_index


def _widened(table: np.ndarray, width: int) -> np.ndarray:
    """(N, width): ``table`` (N, K) with zero columns after its own (a vertex's bones beside
    another object's vertices that have more: the extra ones bone 0 at weight 0)."""
    out = np.zeros((len(table), width), dtype=table.dtype)
    out[:, : table.shape[1]] = table
    return out


def uniform_velocities(objects, bone_index, num_bones: int) -> np.ndarray:
    """(B, 3) each bone's share of its object's "all" velocities (m/s)."""
    out = np.zeros((num_bones, 3))
    for o, bones in zip(objects, bone_index, strict=True):
        for v in o.conditions.velocities:
            if v.anchor is None:
                out[bones] += np.asarray(v.velocity, dtype=np.float64)
    return out


def _split(result: SimulationResult, scene, objects, offsets, bone_index) -> dict:
    """Each object's own result out of the ``scene``'s ``result``."""
    out = {}
    rig = result.rig
    for o, offset, bones in zip(objects, offsets, bone_index, strict=True):
        n = len(o.vertices)
        positions = None
        if result.positions is not None:
            positions = result.positions[:, offset : offset + n]
        own_rig = None
        if rig is not None:
            local = np.full(rig.num_bones, -1, dtype=np.int64)
            local[bones] = np.arange(len(bones))
            own_rig = BoneRig(
                rig.heads[bones],
                rig.rotations[:, bones],
                rig.translations[:, bones],
                local[rig.vertex_bones[offset : offset + n]].astype(np.int32),
                rig.vertex_weights[offset : offset + n],
                blend=rig.blend,
            )
        q = None
        if result.q is not None:
            states = result.q.reshape(len(result.q), -1, 4, 3)
            q = states[:, bones].reshape(len(result.q), -1)
        info = dict(result.info)
        info["object"] = o.name
        out[o.name] = SimulationResult(
            positions=positions,
            times=result.times,
            energy=result.energy,
            conditions=object_conditions(scene, o.conditions).to_dict(),
            q=q,
            info=info,
            rig=own_rig,
        )
    return out


def simulate_objects(
    objects: Sequence[SceneObject],
    scene: SimulationConditions,
    *,
    settings: RigSettings | None = None,
    on_progress=_noop,
    want_vertices: bool = True,
    time_limit: float | None = None,
) -> dict[str, SimulationResult]:
    """Simulate the moving ``objects`` together (module docstring) under the ``scene``'s
    fields of ``scene`` (gravity, frames, fps, damping, ground, colliders, friction,
    bounciness, winds); the static ones join its colliders. Returns each moving object's
    result by name: its positions (T, N_o, 3) in the shared frame, its own rig, the scene's
    times and energy. Raises ConditionError for a scene that does not fit."""
    settings = settings or RigSettings()
    objects = _check(objects)
    if not isinstance(scene, SimulationConditions):
        raise ConditionError("the scene's conditions must be a SimulationConditions")
    colliders = tuple(scene.colliders) + tuple(
        Collider(
            vertices=np.asarray(o.vertices, dtype=np.float64).tolist(),
            faces=np.asarray(o.faces, dtype=np.int64).reshape(-1, 3).tolist(),
            name=o.name,
        )
        for o in objects
        if o.static
    )
    scene = dataclasses.replace(scene, colliders=colliders)
    moving = [o for o in objects if not o.static]
    if len(moving) == 1:
        o = moving[0]
        result = simulate_rig(
            o.vertices,
            o.faces,
            object_conditions(scene, o.conditions),
            settings=settings,
            on_progress=on_progress,
            want_vertices=want_vertices,
            time_limit=time_limit,
        )
        result.info["object"] = o.name
        return {o.name: result}
    found = {o.name: sheet_parts(o.vertices, o.faces) for o in moving}
    mixed = [
        o.name
        for o in moving
        if found[o.name] is not None
        and sheet_vertices(o.vertices, o.faces, found[o.name]) is not None
    ]
    if mixed:
        raise ConditionError(
            f"{', '.join(mixed)}: a mesh of cloth and solid parts together moves alone for now;"
            " simulate it on its own, or split its cloth and its solids into two objects"
        )
    welding = {name: f[0] if f is not None and f[1].all() else None for name, f in found.items()}
    cloths = [o for o in moving if welding[o.name] is not None]
    if len(cloths) > 1:
        raise ConditionError(
            f"{', '.join(o.name for o in cloths)}: one cloth a scene for now (two cloths would "
            "pass through each other); make the others static colliders or simulate them apart"
        )
    if not cloths:
        return _simulate_together(moving, scene, settings, on_progress, want_vertices, time_limit)
    return cloth_with_solids(
        cloths[0],
        welding[cloths[0].name],
        moving,
        scene,
        settings,
        on_progress,
        want_vertices,
        time_limit,
    )


def moving_bodies(objects, results, fps: float) -> tuple[list[MovingBody], float]:
    """(bodies, residual): every loose part of each solid of ``objects`` as a rigid body on the
    path fitted to its frames in ``results`` (by name; positions (T, N, 3)), and the largest
    distance of a part's vertex from its fitted path over the part's size (0: every part moved
    rigidly; a bending part is met as the rigid body nearest its motion)."""
    bodies, residual = [], 0.0
    for o in objects:
        positions = np.asarray(results[o.name].positions, dtype=np.float64)
        faces = np.asarray(o.faces, dtype=np.int64).reshape(-1, 3)
        vertices = np.asarray(o.vertices, dtype=np.float64)
        label = loose_parts(vertices, faces)  # as the rig space's (a soup's seams joined)
        times = np.arange(len(positions)) / fps
        for part in np.unique(label[faces[:, 0]]):
            mine = np.flatnonzero(label == part)
            index = np.full(len(vertices), -1)
            index[mine] = np.arange(len(mine))
            own = index[faces[label[faces[:, 0]] == part]]
            track, off = fit_track(vertices[mine], positions[:, mine], times)
            size = float(np.ptp(vertices[mine], 0).max()) or 1.0
            residual = max(residual, off / size)
            bodies.append(MovingBody(f"{o.name}:{part}", vertices[mine], own, track))
    return bodies, residual


def cloth_with_solids(
    cloth,
    welding,
    moving,
    scene,
    settings,
    on_progress,
    want_vertices,
    time_limit,
    *,
    on_cloth_frame=None,
    on_solids=None,
    want_rig: bool = True,
    want_figures: bool = True,
    wind_share=None,
):
    """The solids of ``moving`` first (together), then the ``cloth`` meeting them on their
    paths (module docstring); each object's result by name. ``on_solids(results)`` sees the
    solids' results before the cloth's run, ``on_cloth_frame`` (as ``simulate_rig``'s
    ``on_frame``) the cloth's frames; ``wind_share`` {name: share}: the share of the scene's
    winds an object takes (one mesh's parts: each its share of the mass)."""

    def own(o):
        c = object_conditions(scene, o.conditions)
        share = (wind_share or {}).get(o.name)
        if share is None or not c.winds:
            return c
        winds = tuple(dataclasses.replace(w, strength=w.strength * share) for w in c.winds)
        return dataclasses.replace(c, winds=winds)

    deadline = None if time_limit is None else time.monotonic() + max(float(time_limit), 0.0)
    solids = [o for o in moving if o.name != cloth.name]

    def first_half(stage, fraction=None):
        on_progress(stage, None if fraction is None else 0.5 * fraction)

    def second_half(stage, fraction=None):
        on_progress(stage, None if fraction is None else 0.5 + 0.5 * fraction)

    if len(solids) == 1:
        o = solids[0]
        results = {
            o.name: simulate_rig(
                o.vertices,
                o.faces,
                own(o),
                settings=settings,
                on_progress=first_half,
                time_limit=time_limit,
                want_rig=want_rig,
                want_figures=want_figures,
            )
        }
        results[o.name].info["object"] = o.name
    else:
        results = _simulate_together(solids, scene, settings, first_half, True, time_limit)
    if on_solids is not None:
        on_solids(results)
    bodies, residual = moving_bodies(solids, results, scene.fps)
    left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
    cloth_conditions = own(cloth)
    check_mesh_start(
        np.asarray(cloth.vertices, dtype=np.float64), cloth_conditions, DEFAULT_SETTINGS
    )
    result = simulate_cloth(
        np.asarray(cloth.vertices, dtype=np.float64),
        cloth.faces,
        cloth_conditions,
        settings=settings,
        welding=welding,
        on_frame=on_cloth_frame,
        on_progress=second_half,
        want_vertices=want_vertices,
        time_limit=left,
        movers=bodies,
        want_rig=want_rig,
        want_figures=want_figures,
    )
    result.info["object"] = cloth.name
    result.info["moving_obstacles_fit"] = residual
    results[cloth.name] = result
    if not want_vertices:
        for o in solids:
            results[o.name] = dataclasses.replace(results[o.name], positions=None)
    return {o.name: results[o.name] for o in moving}


def _simulate_together(moving, scene, settings, on_progress, want_vertices, time_limit):
    started = time.perf_counter()
    deadline = None if time_limit is None else time.monotonic() + max(float(time_limit), 0.0)
    spaces = []
    for o in moving:
        own = object_conditions(scene, o.conditions)
        vertices = np.asarray(o.vertices, dtype=np.float64)
        check_mesh_start(vertices, own, DEFAULT_SETTINGS)
        spaces.append(
            build_rig_space(
                vertices,
                o.faces,
                mass=own.mass,
                pins=own.pins,
                elastic=own.stiffness > 0,
                settings=settings,
            )
        )
    space, bone_index = merge_spaces(spaces)
    offsets = np.cumsum([0] + [len(o.vertices) for o in moving])[:-1]
    conditions = merge_conditions(scene, moving, offsets)
    conditions.validate(len(space.vertices))
    stiffness = np.concatenate([np.full(len(o.vertices), o.conditions.stiffness) for o in moving])
    result = simulate_space(
        space,
        conditions,
        settings=settings,
        on_progress=on_progress,
        want_vertices=want_vertices,
        deadline=deadline,
        started=started,
        stiffness=stiffness,
        uniform_velocity=uniform_velocities(moving, bone_index, space.num_bones),
    )
    result.info["objects"] = [o.name for o in moving]
    return _split(result, scene, moving, offsets, bone_index)


__all__ = [
    "SCENE_FIELDS",
    "SceneObject",
    "merge_conditions",
    "merge_spaces",
    "moving_bodies",
    "object_conditions",
    "simulate_objects",
]
