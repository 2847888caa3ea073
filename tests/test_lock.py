"""The lock (neurok_blender/engine/constraints.txt): it covers pyproject.toml, it is what this
environment holds, and the add-on's Install Dependencies installs from it."""

import sys
import tomllib

import pytest
from conftest import ROOT
from packaging.requirements import Requirement

from neurok_blender.engine import lock
from neurok_blender.engine.install import REQUIREMENTS, pip_argv


def project_requirements() -> tuple[list[Requirement], list[Requirement]]:
    """(the runtime dependencies, those of every extra) of pyproject.toml."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [r for reqs in project["optional-dependencies"].values() for r in reqs]
    runtime = [Requirement(r) for r in project["dependencies"]]
    return runtime, [Requirement(r) for r in extras if not r.startswith("neurok")]


@pytest.mark.parametrize("python", ["3.11", "3.13"])
def test_the_lock_pins_every_dependency_of_pyproject_within_its_range(python):
    runtime, extras = project_requirements()
    pins = lock.pins(python)
    # Python 3.13 is Blender 5.2's: the engine's runtime and the Blender side's test needs
    wanted = runtime + extras if python == "3.11" else runtime + [Requirement("bpy>=5.0.1")]
    for req in wanted:
        name = lock.normalise(req.name)
        assert name in pins, f"{req.name} is not pinned for Python {python}"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"{req.name}=={pins[name]} (Python {python}) is outside pyproject's {req.specifier}"
        )
    for req in map(Requirement, REQUIREMENTS):  # the add-on installs these
        assert lock.normalise(req.name) in pins, f"{req.name} is not pinned for Python {python}"


def test_this_environment_is_the_lock():
    """What tests/setup.sh installed is exactly the lock (pip freeze against it)."""
    found = lock.installed()
    locked = lock.pins()
    wrong = [
        line
        for line in lock.differences(locked, found, ignore=("neurok", "setuptools", "wheel"))
        if "not in the lock" not in line
    ]
    assert wrong == [], wrong


def test_the_lock_reader_refuses_what_it_cannot_read(tmp_path):
    bad = tmp_path / "constraints.txt"
    bad.write_text("numpy>=1.24\n")
    with pytest.raises(ValueError, match="constraints.txt:1"):
        lock.pins("3.11", bad)
    good = tmp_path / "good.txt"
    good.write_text(
        '# a comment\na==1.0\nb==2.0; python_version == "3.13"\nb==1.5; python_version == "3.11"\n'
    )
    assert lock.pins("3.11", good) == {"a": "1.0", "b": "1.5"}
    assert lock.pins("3.13", good) == {"a": "1.0", "b": "2.0"}
    assert lock.pinned_pythons(good) == {"3.11", "3.13"}
    assert lock.pinned_pythons() == {"3.11", "3.13"}
    assert lock.differences({"a": "1.0"}, {"a": "1.1", "c": "3"}) == [
        "a: 1.1 installed, locked 1.0",
        "c: 3 installed, not in the lock",
    ]


def test_install_dependencies_uses_the_lock():
    argv = pip_argv(sys.executable, "/deps", cpu_only=True, platform="linux")
    assert argv[argv.index("--constraint") + 1] == str(lock.LOCK)
    assert lock.LOCK.is_file()
