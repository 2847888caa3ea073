# SPDX-License-Identifier: GPL-3.0-or-later
"""Drawing the live preview in the 3D viewport: the previewed motion played in a loop over the
object, as a translucent surface, with a few fainter ghosts of frames spread over it (onion
skinning). A draw handler only: it reads ``live_preview.shown()`` and writes nothing.
"""

from __future__ import annotations

import time

from . import live_preview
from .viewport import ViewportDrawing

COLOR = (0.25, 0.65, 1.0)
ALPHA, GHOST_ALPHA = 0.45, 0.12
GHOSTS = 3  # frames drawn faintly besides the one playing

BATCHES = GHOSTS + 6  # GPU batches kept (the ghosts and the last frames played)

_batches: dict = {}  # frame index -> GPU batch of the preview ``_shown``, oldest use first
_shown = None


def show() -> None:
    _drawing.add()


def hide() -> None:
    global _shown
    _drawing.remove()
    _batches.clear()
    _shown = None


def playing_frame(count: int, fps: float, since: float, now: float | None = None) -> int:
    """The frame of ``count`` the loop plays at ``now`` (monotonic), started at ``since``."""
    now = time.monotonic() if now is None else now
    return int(max(now - since, 0.0) * fps) % max(count, 1)


def ghost_frames(count: int) -> list[int]:
    """The frames drawn faintly: ``GHOSTS`` spread from the second to the last."""
    if count < 2:
        return []
    picks = {round(1 + k * (count - 2) / max(GHOSTS - 1, 1)) for k in range(GHOSTS)}
    return sorted(picks)


def _batch(shader, shown, index: int):
    global _shown
    from gpu_extras.batch import batch_for_shader

    if shown is not _shown:  # a new preview (or more of its frames): new batches
        _batches.clear()
        _shown = shown
    batch = _batches.pop(index, None)
    if batch is None:
        batch = batch_for_shader(shader, "TRIS", {"pos": shown.frames[index]}, indices=shown.faces)
    _batches[index] = batch
    while len(_batches) > BATCHES:
        del _batches[next(iter(_batches))]
    return batch


def _draw() -> None:
    shown = live_preview.shown()
    if shown is None or not len(shown.frames):
        return
    import gpu

    shader = gpu.shader.from_builtin("UNIFORM_COLOR")
    gpu.state.blend_set("ALPHA")
    gpu.state.depth_test_set("LESS_EQUAL")
    gpu.state.depth_mask_set(False)
    count = len(shown.frames)
    shader.bind()
    for index in ghost_frames(count):
        shader.uniform_float("color", (*COLOR, GHOST_ALPHA))
        _batch(shader, shown, index).draw(shader)
    shader.uniform_float("color", (*COLOR, ALPHA))
    _batch(shader, shown, playing_frame(count, shown.fps, shown.since)).draw(shader)
    gpu.state.depth_mask_set(True)
    gpu.state.depth_test_set("NONE")
    gpu.state.blend_set("NONE")


_drawing = ViewportDrawing(_draw)
