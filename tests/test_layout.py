"""The architecture line: the engine never imports Blender, the add-on never imports torch."""

import ast
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, blender_ext_script

BLOCK = textwrap.dedent(
    """
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ImportError("blocked for this test: " + name)
    sys.meta_path.insert(0, Block())
    """
)


def run_blocked(blocked: set[str], code: str) -> subprocess.CompletedProcess:
    script = BLOCK.format(blocked=blocked) + textwrap.dedent(code)
    return subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_core_imports_without_blender():
    proc = run_blocked(
        {"bpy", "mathutils", "bmesh"},
        """
        import pkgutil, importlib, neurok_core
        for mod in pkgutil.walk_packages(neurok_core.__path__, "neurok_core."):
            if mod.name.endswith("__main__"):
                continue
            importlib.import_module(mod.name)
        print("ok")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def test_blender_side_imports_without_torch():
    """Blender's Python has neither torch nor numba: the add-on (and what it imports of the
    engine) needs neither."""
    proc = run_blocked(
        {"torch", "numba"},
        """
        import pkgutil, importlib, neurok_blender
        for mod in pkgutil.walk_packages(neurok_blender.__path__, "neurok_blender."):
            importlib.import_module(mod.name)
        import sys
        assert "torch" not in sys.modules and "numba" not in sys.modules
        print("ok")
        """,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ok" in proc.stdout


def imported_packages(path) -> set[str]:
    """The top-level packages a module imports by absolute name (anywhere in it, lazily too)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


# Who may not import whom: the add-on ships alone (Blender's Python has no torch, the zip no
# training or tools); the engine knows nothing of Blender; training runs without the add-on.
FORBIDDEN = {
    "neurok_blender": {"torch", "numba", "training", "tools"},
    "neurok_core": {"bpy", "bmesh", "mathutils", "neurok_blender", "training", "tools"},
    "training": {"neurok_blender"},
}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_packages_import_only_what_they_may(package):
    bad = {
        str(path.relative_to(ROOT)): sorted(imported_packages(path) & FORBIDDEN[package])
        for path in sorted((ROOT / package).rglob("*.py"))
    }
    assert not {k: v for k, v in bad.items() if v}


def test_import_scan_sees_lazy_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from training.eval import x\n    import torch.nn\n")
    assert imported_packages(module) == {"training", "torch"}


def test_blocker_really_blocks():
    proc = run_blocked({"torch"}, "import torch")
    assert proc.returncode != 0 and "blocked for this test" in proc.stderr


def test_manifest_passes_blenders_validator():
    proc = subprocess.run(
        [sys.executable, str(blender_ext_script()), "validate", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Success" in proc.stdout
