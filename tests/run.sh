#!/usr/bin/env bash
# Set up the project's environment (.venv, see tests/setup.sh) and run the test suite.
#   bash tests/run.sh            # everything
#   bash tests/run.sh -m 'not blender' tests/test_dualquat.py   # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/setup.sh
exec .venv/bin/python -m pytest "$@"
