# SPDX-License-Identifier: GPL-3.0-or-later
"""The live preview: while it is on, every change of what Simulate would send (a force arrow's
strength dragged by its gizmo, a drag handle moved, a setting, the mesh) re-simulates the first
frames in the background, and the viewport plays them over the object (``preview_draw``).

Nothing is written to the object or the scene: the preview is drawn, not baked, so stopping it
(Esc, the button) or undoing leaves everything as it was. Its runtime state is module-level
(like the engine registry): it belongs to this Blender session, never to the .blend.

Each tick (``tick``: the Live Preview operator's timer, every ``POLL`` seconds) first compares
a cheap signature of the inputs (the object's transform and settings, its conditions' Empties
and settings, the scene's frames and gravity, the colliders' transforms, a counter of the
mesh's edits); only when it changed is the request gathered as Simulate gathers it, and only a
request that differs from the last one is sent. The preview engine
(:class:`~.engine.preview.PreviewEngine`) stops the run it is on when a newer one arrives, so
the newest change always wins. The viewport shows the newest run that has frames.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import bpy
import numpy as np

from .engine.command import engine_command
from .engine.preview import PreviewEngine, PreviewRun
from .gather import GatherError, collider_objects, gather
from .paths import deps_root, engine_dir
from .preferences import engine_settings
from .request import SimulationRequest
from .scene_query import conditions_of, frame_range, scene_fps
from .viewport import tag_redraw

POLL = 0.02  # seconds between ticks of the preview's timer
KEEP_RUNS = 4  # finished runs whose files are kept (the one shown among them)


@dataclass(eq=False)
class Shown:
    """What the viewport plays: (T, N, 3) world-space ``frames`` of ``faces`` (F, 3) at
    ``fps``, from ``run``; ``since`` (monotonic) the time they replaced the last."""

    run: PreviewRun
    frames: np.ndarray
    faces: np.ndarray
    fps: float
    since: float


@dataclass(eq=False)
class _State:
    object_name: str
    object_uid: int
    engine: PreviewEngine | None = None
    signature: object = None
    request: SimulationRequest | None = None
    runs: list = field(default_factory=list)  # (run, faces, fps), oldest first
    shown: Shown | None = None
    error: str | None = None
    edits: int = 0  # geometry updates (of any mesh: the object, its colliders) seen
    timer: tuple | None = None  # (window manager, its event timer) of the operator


_state: _State | None = None
_drawing = None  # ``preview_draw`` once a preview showed (imported then: it imports this module)


def active() -> bool:
    return _state is not None


def session():
    """The running preview's own state object (an operator's handle on its preview), or None."""
    return _state


def shown() -> Shown | None:
    """The preview the viewport plays now, if any."""
    return None if _state is None else _state.shown


def runs() -> list[PreviewRun]:
    """The preview runs sent since the start, oldest first (the last ``KEEP_RUNS`` finished
    ones and every one still running)."""
    return [] if _state is None else [run for run, _, _ in _state.runs]


def start(context, obj) -> None:
    """Preview ``obj`` from now on (the first tick sends its first preview)."""
    global _state, _drawing
    stop()
    _state = _State(obj.name, obj.session_uid)
    for handlers, handler in _HANDLERS:
        if handler not in handlers:
            handlers.append(handler)
    from . import preview_draw

    _drawing = preview_draw
    preview_draw.show()


def stop() -> None:
    """End the preview: its engine, its files, its timer and its drawing go; the scene is
    untouched."""
    global _state
    if _drawing is not None:  # (no import here: it also runs as the add-on goes away)
        _drawing.hide()
    for handlers, handler in _HANDLERS:
        if handler in handlers:
            handlers.remove(handler)
    state, _state = _state, None
    if state is None:
        return
    if state.engine is not None:
        state.engine.stop()
    if state.timer is not None:
        wm, timer = state.timer
        try:
            wm.event_timer_remove(timer)
        except (ReferenceError, ValueError, RuntimeError):
            pass  # its window is gone


def keep_timer(wm, timer) -> None:
    """The operator's timer, removed with the preview however it ends."""
    if _state is not None:
        _state.timer = (wm, timer)


def status() -> str:
    """One line for the panel: what the preview shows, or why it shows nothing."""
    state = _state
    if state is None:
        return "off"
    if state.error:
        return state.error
    if state.engine is not None and not state.engine.ready:
        return "starting the preview engine"
    if any(not run.finished for run, _, _ in state.runs):
        return "updating"
    if state.shown is not None:
        run = state.shown.run
        took = (run.done_at or time.monotonic()) - run.sent
        return f"{len(state.shown.frames)} frames in {took:.2f} s"
    return "waiting for a change"


def previewed_object(context=None):
    """The object being previewed (found again after a rename), if it still exists."""
    state = _state
    if state is None:
        return None
    obj = bpy.data.objects.get(state.object_name)
    if obj is None or obj.session_uid != state.object_uid:
        obj = next((o for o in bpy.data.objects if o.session_uid == state.object_uid), None)
        if obj is not None:
            state.object_name = obj.name
    return obj


@bpy.app.handlers.persistent
def on_depsgraph_update(_scene, depsgraph) -> None:
    """Count geometry edits of meshes (the object's, its colliders'): part of the signature
    (the request compares the meshes themselves, so a count too many sends nothing)."""
    state = _state
    if state is None:
        return
    for update in depsgraph.updates:
        if update.is_updated_geometry:
            state.edits += 1


@bpy.app.handlers.persistent
def on_load_pre(*_args) -> None:
    """Another file is loaded: the preview's object is gone with this one."""
    stop()


_HANDLERS = (
    (bpy.app.handlers.depsgraph_update_post, on_depsgraph_update),
    (bpy.app.handlers.load_pre, on_load_pre),
)


def _values(struct) -> tuple:
    """Every property of a PropertyGroup (nested groups read too) as a comparable tuple."""
    out = []
    for prop in struct.bl_rna.properties:
        key = prop.identifier
        if key == "rna_type":
            continue
        value = getattr(struct, key)
        if prop.type == "POINTER":
            if isinstance(value, bpy.types.PropertyGroup):
                value = _values(value)
            else:
                value = None if value is None else (value.name, value.session_uid)
        elif prop.type == "COLLECTION":
            value = tuple(_values(item) for item in value)
        elif getattr(prop, "is_array", False):
            value = tuple(value)
        out.append((key, value))
    return tuple(out)


def _matrix(obj) -> tuple:
    """Where ``obj`` is: its world matrix and its own transform (``matrix_basis``, current the
    moment a handle is moved, before the depsgraph updates the world matrix)."""
    return tuple(v for m in (obj.matrix_world, obj.matrix_basis) for row in m for v in row)


def signature(context, obj, edits: int) -> tuple:
    """What, when it changes, may change the request: read cheaply (no mesh is read)."""
    scene = context.scene
    try:
        colliders = tuple((o.name, _matrix(o)) for o in collider_objects(obj, scene))
    except GatherError as exc:
        colliders = str(exc)
    settings = engine_settings(context)
    return (
        _matrix(obj),
        len(obj.data.vertices),
        edits,
        obj.mode,
        tuple(group.name for group in obj.vertex_groups),
        (settings.python, settings.device, settings.checkpoint, settings.max_vertices),
        _values(obj.neurok.physics),
        _values(obj.neurok.structure),
        tuple((e.name, _matrix(e), _values(e.neurok.condition)) for e in conditions_of(obj)),
        frame_range(scene),
        scene_fps(scene),
        tuple(scene.gravity),
        scene.use_gravity,
        scene.neurok.preview_frames,
        colliders,
    )


def _same(a: SimulationRequest | None, b: SimulationRequest) -> bool:
    return (
        a is not None
        and a.conditions == b.conditions
        and (a.dynamics, a.checkpoint, a.device) == (b.dynamics, b.checkpoint, b.device)
        and np.array_equal(a.vertices, b.vertices)
        and np.array_equal(a.faces, b.faces)
    )


def tick(context) -> None:
    """One step of the preview (the operator's timer): take the engine's answers, send a
    preview if the inputs changed, pick what the viewport shows."""
    state = _state
    if state is None:
        return
    obj = previewed_object()
    if obj is None:
        stop()
        return
    _check_engine(state)
    sig = signature(context, obj, state.edits)
    if sig != state.signature:
        state.signature = sig
        _send(context, obj, state)
    _pick_shown(state)
    _forget_old_runs(state)
    if state.shown is not None:
        tag_redraw(context)


def _check_engine(state: _State) -> None:
    """Take the engine's answers; one that ended (a crash, its failure shown; or its idle exit)
    is stopped once, and a fresh one takes the next change (never one per tick)."""
    if state.engine is None:
        return
    state.engine.poll()
    if state.engine.gone:
        if state.engine.failure:
            state.error = state.engine.failure
        state.engine.stop()
        state.engine = state.request = None


def _send(context, obj, state: _State) -> None:
    settings = engine_settings(context)
    try:
        gathered = gather(context, obj, settings, edits=state.edits)
    except GatherError as exc:
        state.error = f"cannot preview: {exc}"
        return
    state.error = None
    if _same(state.request, gathered.request):
        return
    if state.engine is not None and not state.engine.alive:
        _check_engine(state)  # ended since this tick's look: its runs end with its failure
    try:
        if state.engine is None:
            command = engine_command(settings.python, deps_root())
            state.engine = PreviewEngine(command, engine_dir())
    except Exception as exc:  # noqa: BLE001  (an engine that cannot start is a status line)
        state.error = f"the preview engine cannot start: {exc}"
        return
    request = gathered.request
    run = state.engine.submit(request, context.scene.neurok.preview_frames)
    state.request = request
    state.error = run.error
    state.runs.append((run, np.asarray(request.faces), request.conditions.fps))


def _pick_shown(state: _State) -> None:
    """Show the newest run that finished, or that has moved past its first frame (the rest
    shape, the same for every change) as its frames come; a run a newer change stopped is
    never shown (the last finished preview stays until a newer one has motion)."""
    for run, faces, fps in reversed(state.runs):
        if run.state == "error":
            if state.shown is None or run.sent > state.shown.run.sent:
                state.error = run.error
            continue
        if run.state == "superseded" or run.frames_done < (1 if run.finished else 2):
            continue
        current = state.shown
        if current is not None and current.run is run and len(current.frames) == run.frames_done:
            return
        frames = run.frames()
        if frames is None:
            continue
        since = current.since if current is not None and current.run is run else time.monotonic()
        state.shown = Shown(run, frames, faces, fps, since)
        if run.state == "done":
            state.error = None
        return


def _forget_old_runs(state: _State) -> None:
    """Remove the files of finished runs beyond the last ``KEEP_RUNS`` (never the one shown)."""
    finished = [item for item in state.runs if item[0].finished]
    for item in finished[:-KEEP_RUNS]:
        run = item[0]
        if state.shown is not None and state.shown.run is run:
            continue
        run.cleanup()
        state.runs.remove(item)
