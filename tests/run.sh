#!/usr/bin/env bash
# Set up the project's environment (.venv) and run the test suite.
#   bash tests/run.sh            # everything
#   bash tests/run.sh -m 'not blender' tests/test_dualquat.py   # extra arguments go to pytest
# Installs the CPU build of torch (pinned: a bare `torch` could pull a multi-GB CUDA build),
# the project with its train and dev extras (MuJoCo, pybullet, Blender as the `bpy` module).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
exec .venv/bin/python -m pytest "$@"
