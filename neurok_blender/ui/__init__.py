# SPDX-License-Identifier: GPL-3.0-or-later
"""The N-panel "NeuROK" of the 3D viewport and the preferences layout (thin: layout only)."""

from .panels import (
    NEUROK_PT_collision,
    NEUROK_PT_conditions,
    NEUROK_PT_fit,
    NEUROK_PT_main,
    NEUROK_PT_output,
    NEUROK_PT_physics,
    NEUROK_PT_structure,
)

# Parents before their sub-panels; the order is the order on screen.
CLASSES = (
    NEUROK_PT_main,
    NEUROK_PT_conditions,
    NEUROK_PT_physics,
    NEUROK_PT_structure,
    NEUROK_PT_collision,
    NEUROK_PT_output,
    NEUROK_PT_fit,
)
