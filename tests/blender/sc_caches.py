"""Scenario: point cache files: where they are written, copied on save, and removed once nothing
(no modifier, no undo step, no saved file) can refer to them."""

from __future__ import annotations

import os
from pathlib import Path

import bpy
import numpy as np
from bl_helpers import (
    PACKAGE,
    activate,
    add_grid,
    addon,
    call,
    empty_scene,
    evaluated_positions,
    scenario,
    synthetic_frames,
)


def _user_caches() -> list[str]:
    """Every PC2 file under the extension's user folder."""
    root = Path(bpy.utils.extension_path_user(PACKAGE, path="point_caches", create=True))
    return sorted(str(p) for p in root.rglob("*.pc2"))


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.pc2")) if folder.is_dir() else []


def _bake(obj, amplitude=0.3) -> str:
    """Bake synthetic frames as a point cache; the modifier's path as stored."""
    bake = addon("neurok_blender.bake")
    scene = bpy.context.scene
    count = scene.frame_end - scene.frame_start + 1
    bake.bake(obj, synthetic_frames(obj, count, amplitude), scene.frame_start, "POINT_CACHE")
    return obj.modifiers["NeuROK Cache"].filepath


def _clear(obj) -> tuple[str, str]:
    activate(obj)
    bpy.ops.ed.undo_push(message="before clear")
    return call(bpy.ops.neurok.clear_results, undo=True)


def _cache_of(name: str) -> str:
    obj = bpy.data.objects[name]
    (modifier,) = [m for m in obj.modifiers if m.type == "MESH_CACHE"]
    return modifier.filepath


def _plays(name: str) -> bool:
    obj = bpy.data.objects[name]
    moved = evaluated_positions(obj, 12) - evaluated_positions(obj, 1)
    return bool(np.abs(moved).max() > 0.05)


def _new_file() -> None:
    bpy.ops.wm.read_homefile(use_empty=True)
    empty_scene()


@scenario
def cache_lifetime(params) -> dict:
    tmp = Path(params["tmp"])
    out = {}
    # -- an unsaved file: four runs, each cleared; undo still plays; a new file removes them
    empty_scene()
    sheet = add_grid("Sheet", 6, 4, 2.0)
    paths = []
    for run in range(4):
        paths.append(_bake(sheet, 0.2 + 0.1 * run))
        out.setdefault("clears", []).append(_clear(sheet)[0])
    out["unsaved_paths"] = paths
    out["after_four_clears"] = _user_caches()
    bpy.ops.ed.undo()
    out["undo_clear_plays"] = _plays("Sheet")
    out["undo_clear_path"] = _cache_of("Sheet")
    _new_file()
    out["after_new_file"] = _user_caches()

    # -- baked unsaved, then saved: the cache goes beside the file, '//'-relative
    blend = tmp / "shot" / "scene.blend"
    blend.parent.mkdir()
    folder = blend.parent / "scene_neurok"
    a = add_grid("A", 6, 4, 2.0)
    out["a_unsaved"] = _bake(a)
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    out["a_saved"] = _cache_of("A")
    out["a_results_path"] = bpy.data.objects["A"].neurok.results.cache_path
    out["folder_after_save"] = _files(folder)
    out["session_copy_kept"] = os.path.isfile(out["a_unsaved"])  # undo may go back to it
    # a new cache of a saved file goes beside it directly
    b = add_grid("B", 6, 4, 2.0)
    b.location.x = 3.0
    out["b_saved"] = _bake(b)
    bpy.ops.wm.save_mainfile()
    # cleared but not saved: the file on disk still plays it, so it stays
    _clear(bpy.data.objects["B"])
    _new_file()
    out["folder_unsaved_clear"] = _files(folder)
    out["user_after_saved"] = _user_caches()

    # -- reopened: re-simulate A, a duplicate shares its new cache, A and B cleared, saved
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    out["reopened_plays"] = [_plays("A"), _plays("B")]
    out["a_resaved"] = _bake(bpy.data.objects["A"], 0.5)
    activate(bpy.data.objects["A"])
    bpy.ops.object.duplicate()
    out["duplicate"] = bpy.context.active_object.name
    _clear(bpy.data.objects["A"])
    _clear(bpy.data.objects["B"])
    out["folder_before_save"] = _files(folder)  # all still there: undo may bring them back
    bpy.ops.wm.save_mainfile()
    out["folder_after_clear_save"] = _files(folder)
    _new_file()
    out["folder_after_close"] = _files(folder)  # only what the saved file uses
    bpy.ops.wm.open_mainfile(filepath=str(blend))
    out["duplicate_plays"] = _plays(out["duplicate"])

    # -- Save Copy: the copy gets its own caches, the open file keeps its paths
    copy = blend.parent / "copy.blend"
    before = _cache_of(out["duplicate"])
    bpy.ops.wm.save_as_mainfile(filepath=str(copy), copy=True)
    out["copy_kept_paths"] = _cache_of(out["duplicate"]) == before
    out["copy_folder"] = _files(blend.parent / "copy_neurok")
    # -- Save As into another folder: copied there, absolute for that save, then relative
    moved = tmp / "elsewhere" / "moved.blend"
    moved.parent.mkdir()
    bpy.ops.wm.save_as_mainfile(filepath=str(moved))
    out["moved_first"] = _cache_of(out["duplicate"])
    bpy.ops.wm.save_mainfile()
    out["moved_second"] = _cache_of(out["duplicate"])
    out["moved_folder"] = _files(moved.parent / "moved_neurok")
    for path in (copy, moved):
        bpy.ops.wm.open_mainfile(filepath=str(path))
        out.setdefault("saved_copies_play", []).append(_plays(out["duplicate"]))
    out["folder_at_end"] = _files(folder)

    # -- an unsaved bake left when the process ends (checked by the test afterwards)
    _new_file()
    out["left_at_exit"] = _bake(add_grid("Last", 6, 4, 2.0))
    return out
