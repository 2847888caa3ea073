# SPDX-License-Identifier: GPL-3.0-or-later
"""Draw a running job: a progress bar with its status and a cancel button."""

from ..engine import registry


def draw_job(layout, kind: str) -> bool:
    """Draw the running job of ``kind``; False when none runs."""
    job = registry.get(kind)
    if job is None:
        return False
    row = layout.row(align=True)
    row.progress(factor=job.fraction, type="BAR", text=f"{job.title}: {job.status}")
    op = row.operator("neurok.cancel", text="", icon="CANCEL")
    op.kind = kind
    return True
