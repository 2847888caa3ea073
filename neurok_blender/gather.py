# SPDX-License-Identifier: GPL-3.0-or-later
"""Turn the scene into a simulation request: the object's mesh in world space and its conditions.

The mesh is the object's own (``obj.data``, before modifiers) so that every simulated frame maps
one to one onto its vertices (shape keys, a point cache) and modifiers stay live on top. A posed
or otherwise deformed object (an Armature, Lattice, Hook... modifier) is therefore simulated in
its rest shape, with those modifiers applied on top of the result: ``Gathered.warnings`` says so,
and the panel and Simulate's report show it. Positions
go through ``obj.matrix_world`` (rotation, non-uniform scale, parenting); triangles are Blender's
own loop triangles (n-gons triangulated as Blender draws them). Scene frames
``first..last`` become engine frames ``0..last-first``.
"""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .core import Collider, ConditionError, Drag, Force, InitialVelocity, SimulationConditions
from .paths import space_cache_dir
from .preferences import EngineSettings
from .request import SceneRequest, SimulationRequest
from .scene_query import conditions_of, frame_range, scene_fps
from .structure_data import StructureDataError, has_structure, structure_json

ANCHOR_TOLERANCE = 1e-4  # relative to the object's size: an Empty still sits on its vertex


class GatherError(Exception):
    """The scene cannot be simulated as it is; the message says what to change."""


@dataclass(frozen=True, eq=False)
class Gathered:
    """A request plus what the bake needs to map the answer back."""

    request: SimulationRequest
    matrix_world: np.ndarray = field(repr=False)  # (4, 4): the frames go back through it
    object_name: str
    object_uid: int
    num_vertices: int
    frame_start: int
    frame_count: int
    warnings: tuple[str, ...] = ()


# Modifier types that move vertices without changing the topology (Blender's "Deform" group).
DEFORMING = frozenset(
    {
        "ARMATURE",
        "CAST",
        "CURVE",
        "DISPLACE",
        "HOOK",
        "LAPLACIANDEFORM",
        "LATTICE",
        "MESH_DEFORM",
        "SHRINKWRAP",
        "SIMPLE_DEFORM",
        "SMOOTH",
        "CORRECTIVE_SMOOTH",
        "LAPLACIANSMOOTH",
        "SURFACE_DEFORM",
        "WARP",
        "WAVE",
    }
)


def deforming_modifiers(obj) -> list[str]:
    """'Type 'Name'' of each enabled modifier of ``obj`` that deforms it, in stack order (our
    own result's modifier aside: a new bake replaces it)."""
    ours = obj.neurok.results.modifier_name
    return [
        f"{m.type.replace('_', ' ').title()} '{m.name}'"
        for m in obj.modifiers
        if m.type in DEFORMING and (m.show_viewport or m.show_render) and m.name != ours
    ]


def deformed_warning(obj) -> str | None:
    """What a user of a posed or deformed object must know, or None."""
    found = deforming_modifiers(obj)
    if not found:
        return None
    return (
        f"'{obj.name}' is deformed by {', '.join(found)}: NeuROK simulates its mesh's own (rest)"
        " shape, and those modifiers apply on top of the result. To simulate the shape you see,"
        " apply them first (Ctrl+A > Visual Geometry to Mesh, or Apply on each)"
    )


def check_object(obj, max_vertices: int) -> None:
    """Refuse what cannot be simulated, with the reason."""
    if obj is None:
        raise GatherError("no active object: select the mesh to simulate")
    if obj.type != "MESH":
        raise GatherError(
            f"'{obj.name}' is a {obj.type.lower()} object; NeuROK simulates mesh objects"
        )
    if obj.mode == "EDIT":
        raise GatherError(f"'{obj.name}' is in Edit Mode; press Tab to leave it, then simulate")
    n = len(obj.data.vertices)
    if n == 0:
        raise GatherError(f"'{obj.name}' has no vertices")
    if n > max_vertices:
        raise GatherError(
            f"'{obj.name}' has {n:,} vertices, more than the limit of {max_vertices:,} (raise it"
            " in Preferences > Add-ons > NeuROK > Vertex Limit, or simplify the mesh)"
        )
    if len(obj.data.polygons) == 0:
        raise GatherError(f"'{obj.name}' has no faces; NeuROK needs a surface")


def world_matrix(obj) -> np.ndarray:
    """obj.matrix_world as (4, 4) float64; refuses a flat (zero-scale) transform."""
    matrix = np.array(obj.matrix_world, dtype=np.float64)  # (4, 4)
    if abs(np.linalg.det(matrix[:3, :3])) < 1e-12:
        raise GatherError(f"'{obj.name}' has zero scale on some axis; fix its scale")
    return matrix


def mesh_arrays(obj) -> tuple[np.ndarray, np.ndarray]:
    """Local vertices (N, 3) float64 and loop triangles (F, 3) int32 of ``obj.data``."""
    mesh = obj.data
    co = np.empty(len(mesh.vertices) * 3, dtype=np.float32)
    mesh.vertices.foreach_get("co", co)
    mesh.calc_loop_triangles()
    tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", tris)
    return co.reshape(-1, 3).astype(np.float64), tris.reshape(-1, 3)


def check_finite(obj, points: np.ndarray, before: str) -> None:
    """Refuse vertices (N, 3) of ``obj`` at NaN or infinite positions (``before``: what the
    user is about to do, e.g. "simulating")."""
    bad = int((~np.isfinite(points).all(axis=1)).sum())
    if bad:
        raise GatherError(
            f"'{obj.name}' has {bad} of {len(points)} vertices at NaN or infinite positions (or"
            " a transform that is not finite); fix them (e.g. Mesh > Clean Up, or re-import the"
            f" mesh) before {before}"
        )


def collider_objects(obj, scene, moving=()) -> list:
    """The static obstacles of ``obj``'s simulation (its Collision settings): the other meshes
    with Blender's Collision physics, or the meshes of a collection, and the selected meshes
    whose role is Static Collider (never ``obj`` itself, nor the ``moving`` objects
    simulated with it)."""
    physics = obj.neurok.physics
    pool = []
    if physics.collider_source == "COLLECTION":
        if physics.collider_collection is None:
            raise GatherError(
                f"'{obj.name}': Colliders is set to a collection, but none is chosen (NeuROK >"
                " Collision > Collection)"
            )
        pool = list(physics.collider_collection.all_objects)
    elif physics.collider_source == "PHYSICS":
        pool = [o for o in scene.objects if any(m.type == "COLLISION" for m in o.modifiers)]
    pool += [o for o in scene.objects if o.select_get() and o.neurok.physics.role == "STATIC"]
    skip = {obj, *moving}
    return list(
        dict.fromkeys(o for o in pool if o.type == "MESH" and o not in skip)
    )  # in order, each once


def _moves(obj) -> bool:
    """Whether ``obj`` (or a parent) is animated or constrained: it may move."""
    while obj is not None:
        anim = obj.animation_data
        if anim is not None and (anim.action is not None or len(anim.drivers)):
            return True
        if len(obj.constraints):
            return True
        obj = obj.parent
    return False


def collider_meshes(obj, scene, moving=()) -> tuple:
    """``Collider`` conditions (world space, triangles) of ``obj``'s colliders; a collider that
    may move (animated, driven or constrained) is refused: colliders are static for now."""
    out = []
    for other in collider_objects(obj, scene, moving):
        if _moves(other):
            raise GatherError(
                f"collider '{other.name}' is animated or constrained, and NeuROK's colliders are"
                " static for now: remove its animation, or leave it out of the colliders (NeuROK"
                " > Collision)"
            )
        local, tris = mesh_arrays(other)
        if len(tris) == 0:
            continue  # a mesh without faces holds nothing back
        matrix = world_matrix(other)
        digest = hashlib.blake2b(digest_size=16)
        for part in (other.name.encode(), matrix.tobytes(), local.tobytes(), tris.tobytes()):
            digest.update(part)
        key = digest.digest()
        collider = _COLLIDERS.pop(key, None)
        if collider is None:  # (building its tuples is the slow part: 0.1 s at 25k vertices)
            world = transform(matrix, local)
            try:
                collider = Collider(
                    tuple(map(tuple, world.tolist())), tuple(map(tuple, tris.tolist())), other.name
                )
            except ConditionError as exc:
                raise GatherError(str(exc)) from None
        _COLLIDERS[key] = collider
        while len(_COLLIDERS) > COLLIDER_CACHE:
            del _COLLIDERS[next(iter(_COLLIDERS))]
        out.append(collider)
    return tuple(out)


# the colliders gathered last, by their name, transform and mesh: a live preview gathers at
# every change, and the colliders rarely change with it
COLLIDER_CACHE = 8
_COLLIDERS: dict = {}


def transform(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Apply a (4, 4) affine matrix to (..., 3) points."""
    return points @ matrix[:3, :3].T + matrix[:3, 3]


# the pins read last, by the object, its mesh, the group and its caller's count of the mesh's
# edits (``gather``'s ``edits``): a live preview gathers at every change, and Blender reads a
# vertex group one vertex at a time (14 ms of a 20k-vertex laptop's 20 ms gathering)
_PINS: dict = {}


def pinned_vertices(obj, group_name: str, edits: int | None = None) -> tuple[int, ...]:
    """Vertices of ``group_name`` with weight >= 0.5 (none when the name is empty). With
    ``edits`` (a count of the geometry updates of the object's mesh seen so far, which a
    weight's change is), the answer read at the same count is reused."""
    if not group_name:
        return ()
    group = obj.vertex_groups.get(group_name)
    if group is None:
        raise GatherError(f"pin group '{group_name}' does not exist on '{obj.name}'")
    index = group.index
    key = (obj.session_uid, obj.data.session_uid, group_name, index, len(obj.data.vertices))
    if edits is not None and _PINS.get(key, (None,))[0] == edits:
        return _PINS[key][1]
    pins = tuple(
        v.index for v in obj.data.vertices for g in v.groups if g.group == index and g.weight >= 0.5
    )
    if edits is not None:
        _PINS.clear()  # one object's at a time: the previewed one
        _PINS[key] = (edits, pins)
    if len(pins) >= len(obj.data.vertices):
        raise GatherError(f"every vertex is in pin group '{group_name}', so nothing can move")
    return pins


class _ConditionReader:
    """Reads the condition Empties of one object into the engine's conditions (world space,
    engine frames); a value the engine refuses is a GatherError naming the Empty."""

    def __init__(self, obj, world: np.ndarray, matrix: np.ndarray, first: int, last: int):
        self.obj, self.world, self.matrix = obj, world, matrix
        self.first, self.last = first, last
        extent = world.max(axis=0) - world.min(axis=0)
        self.tolerance = ANCHOR_TOLERANCE * max(float(np.linalg.norm(extent)), 1e-6)

    def _engine_frame(self, frame: int) -> int:
        return frame - self.first

    def _anchor(self, empty) -> tuple[int | None, tuple | None]:
        """Where a force or velocity acts: its vertex while the Empty still sits on it."""
        location = np.array(empty.matrix_world.translation, dtype=np.float64)
        vertex = empty.neurok.condition.anchor_vertex
        if 0 <= vertex < len(self.world):
            if np.linalg.norm(self.world[vertex] - location) <= self.tolerance:
                return vertex, None
        return None, tuple(location)

    def _grabbed(self, empty) -> tuple[int | None, tuple | None]:
        """The point a drag handle grabbed: its vertex, else the stored local point."""
        cond = empty.neurok.condition
        if 0 <= cond.anchor_vertex < len(self.world):
            return cond.anchor_vertex, None
        return None, tuple(transform(self.matrix, np.array(cond.anchor_point, dtype=np.float64)))

    @staticmethod
    def _direction(empty) -> tuple:
        z = np.array(empty.matrix_world.to_3x3().col[2], dtype=np.float64)
        norm = float(np.linalg.norm(z))
        if norm < 1e-12 or not math.isfinite(norm):
            raise GatherError(f"'{empty.name}' has zero scale, so it has no direction")
        return tuple(z / norm)

    def force(self, empty) -> Force:
        cond = empty.neurok.condition
        vertex, point = self._anchor(empty)
        start, end = 0, None
        if cond.use_frame_range:
            if not self.first <= cond.frame_start < cond.frame_end <= self.last:
                raise GatherError(
                    f"force '{empty.name}' acts from frame {cond.frame_start} to"
                    f" {cond.frame_end}, which must lie inside the simulated frames"
                    f" {self.first}-{self.last} (start before end)"
                )
            start, end = self._engine_frame(cond.frame_start), self._engine_frame(cond.frame_end)
        return Force(
            direction=self._direction(empty),
            strength=cond.strength,
            vertex=vertex,
            point=point,
            start_frame=start,
            end_frame=end,
        )

    def drag(self, empty) -> Drag:
        cond = empty.neurok.condition
        if not self.first < cond.frame <= self.last:
            raise GatherError(
                f"drag handle '{empty.name}' arrives at frame {cond.frame}, outside the simulated"
                f" frames {self.first + 1}-{self.last}"
            )
        vertex, point = self._grabbed(empty)
        return Drag(
            target=tuple(empty.matrix_world.translation),
            frame=self._engine_frame(cond.frame),
            vertex=vertex,
            point=point,
        )

    def velocity(self, empty) -> InitialVelocity:
        cond = empty.neurok.condition
        velocity = tuple(cond.speed * c for c in self._direction(empty))
        if cond.whole_object:
            return InitialVelocity(velocity=velocity)
        vertex, point = self._anchor(empty)
        return InitialVelocity(velocity=velocity, vertex=vertex, point=point)


def gather(context, obj, settings: EngineSettings, moving=(), edits: int | None = None) -> Gathered:
    """Everything the engine needs for ``obj`` in ``context.scene``; raises GatherError.
    ``moving``: the other objects simulated with it (never its colliders); ``edits``: the
    caller's count of the geometry updates seen (a live preview's), with which what is read
    of the mesh alone is reused while it stays the same (``pinned_vertices``)."""
    check_object(obj, settings.max_vertices)
    scene = context.scene
    first, last = frame_range(scene)
    if last - first < 1:
        raise GatherError(f"the frame range {first}-{last} must hold at least two frames")
    latent = obj.neurok.physics.dynamics == "latent"  # the rig space needs no model
    if latent and settings.checkpoint and not os.path.isdir(settings.checkpoint):
        raise GatherError(
            f"the checkpoint folder {settings.checkpoint!r} does not exist (Preferences > Add-ons"
            " > NeuROK > Checkpoint; empty = the bundled model)"
        )
    context.view_layer.update()  # the Empties' world matrices must be current
    matrix = world_matrix(obj)
    local, faces = mesh_arrays(obj)
    if len(faces) == 0:
        raise GatherError(f"'{obj.name}' has no faces; NeuROK needs a surface")
    world = transform(matrix, local)  # (N, 3)
    check_finite(obj, world, "simulating")
    physics = obj.neurok.physics
    reader = _ConditionReader(obj, world, matrix, first, last)
    forces, drags, velocities = [], [], []
    readers = {"FORCE": (reader.force, forces), "DRAG": (reader.drag, drags)}
    readers["VELOCITY"] = (reader.velocity, velocities)
    for empty in conditions_of(obj):
        read, into = readers.get(empty.neurok.condition.kind, (None, None))
        if read is None:
            continue
        try:
            into.append(read(empty))
        except ConditionError as exc:
            raise GatherError(f"'{empty.name}': {exc}") from None
    gravity = (0.0, 0.0, 0.0)
    if scene.use_gravity and physics.use_gravity:
        gravity = tuple(scene.gravity)
    ground = None
    if physics.use_ground:
        ground = float(world[:, 2].min()) if physics.ground_at_lowest else physics.ground_height
    colliders = collider_meshes(obj, scene, moving)
    try:
        conditions = SimulationConditions(
            forces=tuple(forces),
            drags=tuple(drags),
            velocities=tuple(velocities),
            gravity=gravity,
            pins=pinned_vertices(obj, physics.pin_group, edits),
            mass=physics.mass,
            stiffness=physics.stiffness,
            damping=physics.damping,
            frames=last - first + 1,
            fps=scene_fps(scene),
            device=settings.device,
            ground=ground,
            colliders=colliders,
            friction=physics.friction,
            bounciness=physics.bounciness,
            material="" if physics.cloth_material == "NONE" else physics.cloth_material.lower(),
            self_collision=bool(physics.cloth_self_collision),
        )
        conditions.validate(len(world))
    except ConditionError as exc:
        raise GatherError(f"'{obj.name}': {exc}") from None
    request = SimulationRequest(
        vertices=world.astype(np.float32),
        faces=faces,
        conditions=conditions,
        dynamics=physics.dynamics,
        checkpoint=settings.checkpoint or None,
        device=settings.device,
        cache_dir=str(space_cache_dir()),
        structure=_structure(obj, matrix, len(world), moving),
    )
    return Gathered(
        request=request,
        matrix_world=matrix,
        object_name=obj.name,
        object_uid=obj.session_uid,
        num_vertices=len(local),
        frame_start=first,
        frame_count=last - first + 1,
        warnings=tuple(w for w in (deformed_warning(obj),) if w),
    )


def _structure(obj, matrix: np.ndarray, num_vertices: int, moving) -> dict | None:
    """The object's stored structure as the request carries it (world space), or None: none
    found, its Use off, or not the rig space alone (several objects keep the geometry's)."""
    settings = obj.neurok.structure
    if not settings.use or not has_structure(settings):
        return None
    if obj.neurok.physics.dynamics != "rig":
        raise GatherError(
            f"'{obj.name}': its structure holds the Rig Space's joints (NeuROK > Physics >"
            " Dynamics: Rig Space), or turn the structure's Use off"
        )
    if moving:
        raise GatherError(
            f"'{obj.name}': a structure is used when the object moves alone for now: turn its"
            " Use off (NeuROK > Structure) to simulate it with the others"
        )
    try:
        return structure_json(settings, matrix, num_vertices, obj.name)
    except StructureDataError as exc:
        raise GatherError(str(exc)) from None


@dataclass(frozen=True, eq=False)
class GatheredScene:
    """Several selected objects that move, simulated together: each one's own ``Gathered``
    (its request: its mesh in world space and its own conditions), the active one's first;
    the scene's fields (frames, gravity, damping, ground, colliders, friction, bounciness) are
    the active object's."""

    parts: tuple[Gathered, ...]

    @property
    def frame_count(self) -> int:
        return self.parts[0].frame_count

    @property
    def request(self) -> SceneRequest:
        return SceneRequest(tuple((g.object_name, g.request) for g in self.parts))


def moving_selection(context, active) -> list:
    """The selected meshes whose role is Moves, the active object first (it moves whatever
    its role says: it is the one Simulate is asked for); the active object's colliders (its
    Collision settings: Blender's Collision physics, a collection) stay colliders however
    they are selected."""
    if active is None or active.type != "MESH":
        return [active]
    try:
        colliders = set(collider_objects(active, context.scene))
    except GatherError:
        colliders = set()  # gather() says what is wrong with the settings
    others = [
        o
        for o in context.selected_objects
        if o.type == "MESH"
        and o != active
        and o.neurok.physics.role == "MOVES"
        and o not in colliders
    ]
    return [active, *sorted(others, key=lambda o: o.name)]


def gather_scene(context, objects, settings: EngineSettings) -> GatheredScene | None:
    """``objects`` (the active one first) gathered to move together (``GatheredScene``), or
    None for one object alone."""
    objects = list(dict.fromkeys(objects))
    if len(objects) < 2:
        return None
    for obj in objects:
        if obj.neurok.physics.dynamics != "rig":
            raise GatherError(
                f"'{obj.name}': several objects move together in the rig space only (NeuROK >"
                " Physics > Dynamics: Rig Space)"
            )
    parts = [gather(context, o, settings, moving=objects) for o in objects]
    return GatheredScene(tuple(parts))
