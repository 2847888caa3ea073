# SPDX-License-Identifier: GPL-3.0-or-later
"""The parts of the engine the add-on uses directly: plain Python and numpy, never torch.

The engine's conditions schema (``neurok_core.dynamics.conditions``) is the one boundary type
between the two sides: the add-on builds ``SimulationConditions`` itself (so bad values are
refused in Blender, before any engine starts, with the engine's own messages) and the request
carries its ``to_dict``; ``DYNAMICS`` names the coordinates a motion can be integrated in (the
request's ``dynamics``, the Physics panel's choice), ``DEFAULT_DYNAMICS`` the default of both,
``CLOTH_MATERIALS`` a cloth's presets (the panel's Cloth Material), ``SOLID_MATERIALS`` and
``solid_fields`` a solid's (Apply Solid Preset), ``has_cloth`` which meshes
have cloth (Automatic bakes them as shape keys); the engine's rule for a likely implausible
result (``neurok_core.doubts``) words Simulate's warning as it words the CLI's. ``write_pc2``
writes point caches; a rig bake reads the engine's rig and poses it with ``neurok_core.rig``
(``BoneRig``, the quaternion helpers). Installed, ``neurok_core`` ships beside
``neurok_blender`` in the extension's package; in a development checkout it is a top-level
package. ``tests/test_layout.py`` proves that importing the add-on never imports torch.
"""

try:  # the installed extension: bl_ext.<repository>.neurok.neurok_core
    from ..neurok_core.doubts import (
        edge_strain,
        frames_on_barrier,
        penetration,
        short_warning,
        warning,
    )
    from ..neurok_core.dynamics.conditions import (
        CLOTH_MATERIALS,
        DEFAULT_DYNAMICS,
        DYNAMICS,
        Collider,
        Drag,
        Force,
        InitialVelocity,
        SimulationConditions,
    )
    from ..neurok_core.errors import ConditionError
    from ..neurok_core.pc2 import write_pc2
    from ..neurok_core.rig import (
        BoneRig,
        quat_from_matrix,
        quat_mul,
        quat_to_matrix,
        quats_from_matrices,
    )
    from ..neurok_core.sheets import has_cloth
    from ..neurok_core.solids import SOLID_MATERIALS, is_closed, solid_fields
except ImportError:  # a development checkout, where neurok_core is top level
    from neurok_core.doubts import (
        edge_strain,
        frames_on_barrier,
        penetration,
        short_warning,
        warning,
    )
    from neurok_core.dynamics.conditions import (
        CLOTH_MATERIALS,
        DEFAULT_DYNAMICS,
        DYNAMICS,
        Collider,
        Drag,
        Force,
        InitialVelocity,
        SimulationConditions,
    )
    from neurok_core.errors import ConditionError
    from neurok_core.pc2 import write_pc2
    from neurok_core.rig import (
        BoneRig,
        quat_from_matrix,
        quat_mul,
        quat_to_matrix,
        quats_from_matrices,
    )
    from neurok_core.sheets import has_cloth
    from neurok_core.solids import SOLID_MATERIALS, is_closed, solid_fields

__all__ = [
    "CLOTH_MATERIALS",
    "SOLID_MATERIALS",
    "DEFAULT_DYNAMICS",
    "DYNAMICS",
    "BoneRig",
    "Collider",
    "ConditionError",
    "Drag",
    "Force",
    "InitialVelocity",
    "SimulationConditions",
    "quat_from_matrix",
    "quats_from_matrices",
    "quat_mul",
    "quat_to_matrix",
    "edge_strain",
    "frames_on_barrier",
    "has_cloth",
    "is_closed",
    "penetration",
    "short_warning",
    "solid_fields",
    "warning",
    "write_pc2",
]
