"""The extension zip is the add-on as it is: its entry point, manifest, licence and the two
packages whole; no development tool, training code or test ships, and the check that says so
fails when one would."""

import fnmatch
import shutil
import tomllib
import zipfile

import pytest
from blender.harness import built_zip
from conftest import ROOT

from tools.build import addon_files, build, check_zip

NOT_SHIPPED = ("tools/", "training/", "tests/", "docs/", ".ci/")


def test_built_zip_is_exactly_the_addon(tmp_path_factory):
    with zipfile.ZipFile(built_zip(tmp_path_factory)) as archive:
        names = {n for n in archive.namelist() if not n.endswith("/")}
    assert names == addon_files()
    assert not [n for n in names if n.startswith(NOT_SHIPPED)]
    assert {"__init__.py", "blender_manifest.toml", "neurok_core/worker.py"} <= names
    assert "neurok_core/weights/default/config.json" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_every_folder_git_ignores_stays_out_of_the_zip():
    """A run folder that git ignores (results/, runs/, ...) is left out by the manifest too, so
    a checkout with one on disk still builds: the builder packs the disk, not git's files."""
    manifest = tomllib.loads((ROOT / "blender_manifest.toml").read_text(encoding="utf-8"))
    excluded = [p.strip("/") for p in manifest["build"]["paths_exclude_pattern"]]
    lines = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    folders = [line.strip().strip("/") for line in lines if line.strip().endswith("/")]
    assert folders  # the file was read
    missing = [f for f in folders if not any(fnmatch.fnmatch(f, p) for p in excluded)]
    assert not missing, f"git ignores {missing}, blender_manifest.toml ships them"


def _zip(path, names):
    with zipfile.ZipFile(path, "w") as archive:
        for name in names:
            archive.writestr(name, "")
    return path


def test_check_refuses_a_development_tool(tmp_path):
    addon = sorted(addon_files())
    assert check_zip(_zip(tmp_path / "ok.zip", addon)) == addon
    for extra in ("tools/demo.py", "neurok_blender/demo.py", "training/train.py"):
        with pytest.raises(SystemExit, match="not the add-on"):
            check_zip(_zip(tmp_path / "extra.zip", [*addon, extra]))
    with pytest.raises(SystemExit, match="lacks files of the add-on"):
        check_zip(_zip(tmp_path / "short.zip", [n for n in addon if n != "neurok_core/pc2.py"]))


@pytest.mark.blender
def test_build_fails_when_the_manifest_would_ship_the_tools(tmp_path):
    """Blender's builder on a copy whose manifest forgets the tools: the build is refused."""
    pytest.importorskip("bpy")
    root = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    root.mkdir()
    for name in ("__init__.py", "LICENSE", "blender_manifest.toml"):
        shutil.copy2(ROOT / name, root / name)
    for package in ("neurok_blender", "neurok_core", "tools"):
        shutil.copytree(ROOT / package, root / package, ignore=ignore)
    manifest = root / "blender_manifest.toml"
    text = manifest.read_text(encoding="utf-8")
    assert '"/tools/",\n' in text
    manifest.write_text(text.replace('"/tools/",\n', ""), encoding="utf-8")
    with pytest.raises(SystemExit, match="tools/build.py"):
        build(tmp_path / "dist", root=root)
