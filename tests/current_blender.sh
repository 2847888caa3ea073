#!/usr/bin/env bash
# The current Blender's stack as well: Blender 5.2 (the bpy 5.2.3 module, Python 3.13, numpy 2)
# with the engine (torch 2.13.0) in .venv-current, every version from the lock. Runs the Blender
# tests (the scenarios install and run the extension there) and the engine's CLI, worker and
# version checks. PyPI's torch for Python 3.13 on Linux is its CUDA build, which this installs
# (about 4 GB with NVIDIA's libraries; it runs on the CPU here).
#   bash tests/current_blender.sh                               # the tests below
#   bash tests/current_blender.sh tests/test_blender_simulate.py    # extra arguments: pytest
# PYTHON313=... picks the Python 3.13 interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
is313() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; }
PY="${PYTHON313:-}"
for candidate in "$(command -v python3.13 || true)" \
        $(command -v pyenv >/dev/null && ls -d "$(pyenv root)"/versions/3.13*/bin/python3.13 2>/dev/null); do
    [ -z "$PY" ] && is313 "$candidate" && PY="$candidate"
done
if [ -n "${PYTHON313:-}" ] && ! is313 "$PYTHON313"; then
    echo "tests/current_blender.sh: PYTHON313=$PYTHON313 is not a Python 3.13" >&2
    exit 2
fi
if ! is313 "$PY"; then  # say so loudly, but a machine without it can still run the suite
    echo "tests/current_blender.sh: SKIPPED: no Python 3.13 (Blender 5.2's) here; set PYTHON313=..." >&2
    exit 0
fi
if [ ! -x .venv-current/bin/python ]; then
    "$PY" -m venv .venv-current
fi
PIP=(.venv-current/bin/python -m pip install -q --disable-pip-version-check
     --constraint neurok_blender/engine/constraints.txt)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" torch==2.13.0
"${PIP[@]}" -e . bpy pytest
.venv-current/bin/python -m neurok_blender.engine.lock
.venv-current/bin/python -c 'import bpy, numpy, torch
print("Blender", bpy.app.version_string, "numpy", numpy.__version__, "torch", torch.__version__)'
if [ "$#" -eq 0 ]; then
    set -- tests/test_blender_*.py tests/test_cli.py tests/test_cli_usage.py \
        tests/test_worker.py tests/test_blas.py tests/test_lock.py
fi
exec .venv-current/bin/python -m pytest "$@"
