# SPDX-License-Identifier: GPL-3.0-or-later
"""The engine's status as one line for the panel and the preferences."""

from ..engine import registry


def engine_status_line() -> tuple[str, str]:
    """(icon, text) for the engine status shown in the panel and the preferences."""
    status = registry.engine_status()
    icon = {"ready": "CHECKMARK", "error": "ERROR", "checking": "SORTTIME"}.get(
        status.state, "QUESTION"
    )
    return icon, status.text
