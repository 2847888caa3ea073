# SPDX-License-Identifier: GPL-3.0-or-later
"""Where point caches (PC2 files) live and when they are removed.

Where: a saved file's caches sit beside it, in ``//<name>_neurok/`` (as Blender keeps its own
caches in ``//blendcache_<name>/``), and the Mesh Cache modifier stores that ``//`` relative
path; an unsaved file's caches sit in this Blender session's folder of the extension's user
folder (``point_caches/sessions/<pid>/``). Saving copies the caches a file uses into its folder
and points the modifiers there (``on_save_pre``): every bake writes a file of its own, so that
undoing a re-simulation plays the frames it brings back.

When they go: Clear and re-simulating remove only the modifier, because undo can bring it back
and Blender gives no way to look into its undo steps. A cache is removed once nothing can refer
to it any more: when the undo history ends (a file is opened or a new one started, or Blender
quits), every cache that this session's history could show (those it wrote, and those the file
used when it was opened or saved) and that the file on disk does not use is deleted, in the
session folder and in the saved file's folder. Files there that this session never saw are
left to the session that wrote them (another Blender may have the file open) unless they are
older than ``STALE_SECONDS`` (left by a crash); so are the session folders of other Blenders.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import bpy
from bpy.app.handlers import persistent

from .engine.server import remove_stale_folders
from .paths import user_dir

STALE_SECONDS = 7 * 86400.0  # another session's caches: kept a week (File > Recover needs them)
SESSION_START = time.time()

# This session's ledger (module state: a reloaded add-on starts a new, more cautious one).
_reachable: set[str] = set()  # caches this session's history could show
_kept: set[str] | None = None  # caches the file on disk uses (None: not known)
_blend = ""  # the file on disk ("" while unsaved)
_saving: list[tuple[str, str, str, str]] = []  # paths changed by on_save_pre, for a copy
_copied: dict[tuple[str, str], str] = {}  # (cache, folder) -> its copy there, this history
_session_folder: Path | None = None


def _real(path: str | Path) -> str:
    return os.path.realpath(os.fspath(path))


def blend_folder(blend: str) -> Path:
    """The caches' folder of the saved file ``blend``: ``<its folder>/<its name>_neurok``."""
    path = Path(blend)
    return path.parent / f"{path.stem}_neurok"


def session_folder() -> Path:
    """This Blender session's folder for the caches of an unsaved file."""
    global _session_folder
    if _session_folder is None:
        _session_folder = user_dir("point_caches", "sessions", str(os.getpid()))
    return _session_folder


def new_cache_path(obj) -> tuple[Path, str]:
    """A fresh PC2 path for ``obj``: beside the saved .blend, else in the session folder.

    Returns (absolute path, the path to store in the modifier: '//'-relative when saved).
    """
    safe = re.sub(r"[^\w.-]+", "_", obj.name) or "object"
    saved = bpy.data.filepath
    folder = blend_folder(saved) if saved else session_folder()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{safe}_{uuid.uuid4().hex[:8]}.pc2"
    _reachable.add(_real(path))
    return path, bpy.path.relpath(str(path)) if saved else str(path)


def _cache_modifiers():
    """(object, Mesh Cache modifier, its file's real path) of every such modifier in the file."""
    for obj in bpy.data.objects:
        for modifier in obj.modifiers:
            if modifier.type == "MESH_CACHE" and modifier.filepath:
                path = bpy.path.abspath(modifier.filepath, library=obj.library)
                yield obj, modifier, _real(path)


def referenced_caches() -> set[str]:
    """Real paths of the files every Mesh Cache modifier of the open file reads."""
    return {path for _, _, path in _cache_modifiers()}


def _inside(path: str, folder: Path) -> bool:
    return Path(path).parent == Path(_real(folder))


def _ours(path: str) -> bool:
    """A cache in one of the add-on's folders: the user folder's or the open file's."""
    roots = [Path(_real(user_dir("point_caches")))]
    if bpy.data.filepath:
        roots.append(Path(_real(blend_folder(bpy.data.filepath))))
    return any(root == Path(path).parent or root in Path(path).parents for root in roots)


def _copy_into(source: str, folder: Path) -> Path:
    """Copy ``source`` into ``folder`` under its own name (a fresh one if that is taken), or
    the copy made before (a cache is never rewritten: every bake writes a new file)."""
    key = (source, _real(folder))
    if key in _copied and os.path.isfile(_copied[key]):
        return Path(_copied[key])
    folder.mkdir(parents=True, exist_ok=True)
    name = Path(source)
    target = folder / name.name
    while target.exists():
        target = folder / f"{name.stem.rsplit('_', 1)[0]}_{uuid.uuid4().hex[:8]}{name.suffix}"
    shutil.copy2(source, target)
    _reachable.add(_real(target))
    _copied[key] = str(target)
    return target


def _stored_path(target: Path, base: str, relative: bool) -> str:
    """The modifier's path of ``target`` in a file saved in ``base``."""
    if relative:
        try:
            return "//" + Path(os.path.relpath(target, base)).as_posix()
        except ValueError:  # another drive (Windows): no relative path
            pass
    return str(target)


@persistent
def on_save_pre(filepath, *_args) -> None:
    """Put the caches the file uses into its folder, pointing the modifiers there.

    The path goes in relative to the file where Blender keeps it so; on a Save As of a saved
    file into another folder Blender rebases relative paths from the old folder (unless told
    not to), so there the new path goes in absolute and the next save makes it relative."""
    _saving.clear()
    if not filepath:
        return
    folder = blend_folder(filepath)
    base = os.path.dirname(os.path.abspath(filepath))
    current = bpy.data.filepath
    relative = not current or _real(os.path.dirname(current)) == _real(base)
    for obj, modifier, path in list(_cache_modifiers()):
        if obj.library is not None or not _ours(path) or not os.path.isfile(path):
            continue
        if _inside(path, folder):
            target = Path(path)
        else:
            try:
                target = _copy_into(path, folder)
            except OSError as exc:
                print(f"NeuROK: could not copy the point cache {path} beside the file: {exc}")
                continue
        stored = _stored_path(target, base, relative)
        if modifier.filepath == stored:
            continue
        results = obj.neurok.results
        ours = results.modifier_name == modifier.name
        _saving.append((obj.name, modifier.name, modifier.filepath, results.cache_path))
        modifier.filepath = stored
        if ours:
            results.cache_path = stored


@persistent
def on_save_post(filepath, *_args) -> None:
    """Record what the file on disk uses; after Save Copy, point the modifiers back."""
    global _kept, _blend
    saved = bpy.data.filepath
    if filepath and (not saved or _real(saved) != _real(filepath)):  # Save Copy
        for obj_name, modifier_name, path, cache_path in _saving:
            obj = bpy.data.objects.get(obj_name)
            modifier = obj.modifiers.get(modifier_name) if obj else None
            if modifier is not None:
                modifier.filepath = path
                if obj.neurok.results.modifier_name == modifier_name:
                    obj.neurok.results.cache_path = cache_path
    else:
        _kept = referenced_caches()
        _reachable.update(_kept)
        _blend = saved
    _saving.clear()


@persistent
def on_load_pre(*_args) -> None:
    """The undo history ends: remove what only it could bring back."""
    collect_garbage()


@persistent
def on_load_post(*_args) -> None:
    """A new history starts with what the opened file uses."""
    _start_ledger()


def _start_ledger() -> None:
    global _kept, _blend
    _kept = referenced_caches()
    _reachable.clear()
    _reachable.update(_kept)
    _copied.clear()
    _blend = bpy.data.filepath


def collect_garbage() -> list[str]:
    """Delete the caches nothing can refer to once the undo history ends; returns them.

    Uses only the ledger and the file system (it runs at exit too, without Blender's data)."""
    kept = _kept or set()
    removed = []
    folders = [(_session_folder, True)] if _session_folder is not None else []
    if _blend and _kept is not None:
        folders.append((blend_folder(_blend), False))
    now = time.time()
    for folder, session in folders:
        try:
            files = sorted(Path(folder).glob("*.pc2"))
        except OSError:
            continue
        for path in files:
            real = _real(path)
            if real in kept:
                continue
            try:
                stale = now - path.stat().st_mtime > STALE_SECONDS
                if session or real in _reachable or stale:
                    path.unlink()
                    removed.append(real)
            except OSError:
                continue
        try:
            Path(folder).rmdir()  # only when empty
        except OSError:
            pass
    _reachable.clear()
    _reachable.update(kept)
    _copied.clear()
    return removed


def register() -> None:
    sessions = user_dir("point_caches", "sessions")
    own = sessions / str(os.getpid())
    if own.is_dir():
        os.utime(own)  # this session's own folder is never stale
    remove_stale_folders(sessions, STALE_SECONDS)  # other sessions' leftovers (crashes)
    try:  # enabled on an open file: start from what it uses (restricted while Blender starts)
        _start_ledger()
    except AttributeError:
        pass
    for handlers, handler in _HANDLERS:
        if handler not in handlers:
            handlers.append(handler)
    atexit.register(collect_garbage)


def unregister() -> None:
    """The caches stay: undo can still bring back a modifier that plays one."""
    atexit.unregister(collect_garbage)
    for handlers, handler in _HANDLERS:
        if handler in handlers:
            handlers.remove(handler)


_HANDLERS = (
    (bpy.app.handlers.save_pre, on_save_pre),
    (bpy.app.handlers.save_post, on_save_post),
    (bpy.app.handlers.load_pre, on_load_pre),
    (bpy.app.handlers.load_post, on_load_post),
)
