# SPDX-License-Identifier: GPL-3.0-or-later
"""Operators: conditions, simulate/cancel/clear, live preview, structure, fit to target,
engine check, start and dependency install."""

from .conditions import (
    NEUROK_OT_add_drag,
    NEUROK_OT_add_force,
    NEUROK_OT_add_velocity,
    NEUROK_OT_remove_condition,
    NEUROK_OT_select_condition,
)
from .engine import (
    NEUROK_OT_check_engine,
    NEUROK_OT_install_dependencies,
    NEUROK_OT_start_engine,
)
from .fit import NEUROK_OT_fit_to_target
from .material import NEUROK_OT_apply_solid_preset
from .preview import NEUROK_OT_live_preview
from .simulate import NEUROK_OT_cancel, NEUROK_OT_clear_results, NEUROK_OT_simulate
from .structure import NEUROK_OT_clear_structure, NEUROK_OT_find_structure

CLASSES = (
    NEUROK_OT_add_force,
    NEUROK_OT_add_drag,
    NEUROK_OT_add_velocity,
    NEUROK_OT_remove_condition,
    NEUROK_OT_select_condition,
    NEUROK_OT_simulate,
    NEUROK_OT_live_preview,
    NEUROK_OT_cancel,
    NEUROK_OT_clear_results,
    NEUROK_OT_fit_to_target,
    NEUROK_OT_apply_solid_preset,
    NEUROK_OT_find_structure,
    NEUROK_OT_clear_structure,
    NEUROK_OT_check_engine,
    NEUROK_OT_start_engine,
    NEUROK_OT_install_dependencies,
)
