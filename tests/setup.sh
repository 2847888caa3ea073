#!/usr/bin/env bash
# Set up the project's environment in .venv (idempotent: reruns only update it).
#   bash tests/setup.sh
# Installs the CPU build of torch (pinned: a bare `torch` could pull a multi-GB CUDA build),
# the project with its train and dev extras (MuJoCo, pybullet, Blender as the `bpy` module).
# PYTHON=python3.11 picks the interpreter that creates the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
