"""Scenarios run inside real Blender (the bpy module), one per fresh process.

    python tests/blender/scenarios.py <name> '<json params>'

Each installs the built extension zip into the temporary user folder of ``BLENDER_USER_RESOURCES``
(set by the harness), runs one scenario (``sc_*.py``) and writes what it observed to
``params["result"]``. Operators are called as scripts call them; in background mode they run
synchronously.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import bpy
import sc_api  # noqa: F401  (each module registers its scenarios)
import sc_bake  # noqa: F401
import sc_caches  # noqa: F401
import sc_collision  # noqa: F401
import sc_engine  # noqa: F401
import sc_extension  # noqa: F401
import sc_objects  # noqa: F401
import sc_panels  # noqa: F401
import sc_preview  # noqa: F401
import sc_rig  # noqa: F401
import sc_rig_space  # noqa: F401
import sc_simulate  # noqa: F401
import sc_structure  # noqa: F401
from bl_helpers import SCENARIOS, install


def main() -> int:
    name, params = sys.argv[1], json.loads(sys.argv[2])
    bpy.ops.ed.undo_push(message="start")
    install(params["zip"])
    out = SCENARIOS[name](params)
    Path(params["result"]).write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
