"""Point cache files in real Blender: beside a saved file ('//'-relative, copied there on save),
kept while a modifier, an undo step or the saved file can refer to them, removed after."""

from pathlib import Path

import pytest
from blender.harness import built_zip, run_scenario

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def zip_path(tmp_path_factory):
    return built_zip(tmp_path_factory)


def test_point_caches_are_kept_while_referenced_and_removed_after(tmp_path, zip_path):
    out = run_scenario("cache_lifetime", tmp_path, zip_path)
    # unsaved: a file of its own per run, all kept while undo can bring their modifier back
    assert out["clears"] == ["FINISHED"] * 4
    assert len(set(out["unsaved_paths"])) == 4
    assert sorted(out["after_four_clears"]) == sorted(out["unsaved_paths"])
    assert out["undo_clear_plays"] and out["undo_clear_path"] == out["unsaved_paths"][-1]
    assert out["after_new_file"] == []  # the undo history ended: nothing refers to them
    # saved: copied beside the file, the modifier reads it through a '//' relative path
    (name,) = out["folder_after_save"]
    assert out["a_saved"] == f"//scene_neurok/{name}" == out["a_results_path"]
    assert out["session_copy_kept"]
    assert out["b_saved"].startswith("//scene_neurok/B_")
    # B cleared but the file not saved again: the saved file still plays it
    b_name = out["b_saved"].rsplit("/", 1)[1]
    assert sorted(out["folder_unsaved_clear"]) == sorted([name, b_name])
    assert out["user_after_saved"] == []
    assert out["reopened_plays"] == [True, True]
    # re-simulated, duplicated, cleared, saved: kept until the history ends, then only the
    # cache the saved file uses (the duplicate's) is left
    new_name = out["a_resaved"].rsplit("/", 1)[1]
    assert out["a_resaved"].startswith("//scene_neurok/A_") and new_name != name
    assert sorted(out["folder_before_save"]) == sorted([name, b_name, new_name])
    assert out["folder_after_clear_save"] == out["folder_before_save"]
    assert out["folder_after_close"] == [new_name]
    assert out["duplicate_plays"]
    # Save Copy: the copy has its own; Save As elsewhere: copied, then relative
    assert out["copy_kept_paths"] and out["copy_folder"] == [new_name]
    moved = Path(tmp_path) / "elsewhere" / "moved_neurok" / new_name
    assert Path(out["moved_first"]).resolve() == moved.resolve()
    assert out["moved_second"] == f"//moved_neurok/{new_name}"
    assert out["moved_folder"] == [new_name]
    assert out["saved_copies_play"] == [True, True]
    assert out["folder_at_end"] == [new_name]
    # Blender quit with an unsaved bake: its cache went with the session
    assert not Path(out["left_at_exit"]).exists()
    user = tmp_path / "blender_user"
    assert not list(user.rglob("*.pc2")), list(user.rglob("*.pc2"))
