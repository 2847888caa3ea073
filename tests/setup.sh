#!/usr/bin/env bash
# Set up the project's environment in .venv (idempotent: reruns only update it).
#   bash tests/setup.sh            # torch as this machine's pip serves it
#   bash tests/setup.sh --cpu      # or NEUROK_TORCH_INDEX=cpu: the CPU build of torch
# Installs torch (which build, CPU or CUDA, is pip's choice: on Linux PyPI's is the CUDA one,
# several GB of NVIDIA libraries more) and the project with its train and dev extras (MuJoCo,
# pybullet, Blender as the `bpy` module): about 2.6 GB with the CPU build. Every version comes
# from the lock, neurok_blender/engine/constraints.txt, and the last step checks the result
# against it (`python -m neurok_blender.engine.lock`).
# NEUROK_TORCH_INDEX=cpu (or an index URL) adds torch's CPU wheel index to pip's own indices, which
# stay (a machine whose pip already serves the CPU build installs the same), and replaces a CUDA
# build already in .venv. PYTHON=python3.11 picks the interpreter that creates the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_INDEX="${NEUROK_TORCH_INDEX:-}"
for arg in "$@"; do
    case "$arg" in
        --cpu) TORCH_INDEX=cpu ;;
        *) echo "tests/setup.sh: unknown option $arg (--cpu, or NEUROK_TORCH_INDEX=cpu)" >&2; exit 2 ;;
    esac
done
TORCH=(torch==2.13.0)
case "$TORCH_INDEX" in
    "") ;;
    cpu) TORCH+=(--extra-index-url https://download.pytorch.org/whl/cpu) ;;
    *://*) TORCH+=(--extra-index-url "$TORCH_INDEX") ;;
    *) echo "NEUROK_TORCH_INDEX: cpu or an index URL, not '$TORCH_INDEX'" >&2; exit 2 ;;
esac
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
if [ "$TORCH_INDEX" = cpu ] && .venv/bin/python -c 'import sys, torch; sys.exit(not torch.version.cuda)' 2>/dev/null; then
    TORCH+=(--force-reinstall --no-deps)  # a CUDA build satisfies the pin: replace it
fi
# every version from the lock (the stack the tests passed on), then a check that it is exactly that
LOCK=(--constraint neurok_blender/engine/constraints.txt)
.venv/bin/python -m pip install -q --disable-pip-version-check "${LOCK[@]}" --upgrade pip
.venv/bin/python -m pip install -q --disable-pip-version-check "${LOCK[@]}" "${TORCH[@]}"
.venv/bin/python -m pip install -q --disable-pip-version-check "${LOCK[@]}" -e ".[dev]"
.venv/bin/python -m neurok_blender.engine.lock
