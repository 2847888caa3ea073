# SPDX-License-Identifier: GPL-3.0-or-later
"""The live preview's engine: a serving worker of its own, sent a preview request per change.

It is apart from the warm engine that Simulate and Fit use, so that a preview never waits for
a bake, a bake never waits for a preview, and stopping the preview (terminating its worker)
leaves the warm engine alone. Requests are never queued on the client: each change is sent at
once, and the worker stops the preview it is running at its next frame when a newer request
is waiting (``{"type": "error", "kind": "Superseded"}``). Answers come in the order requests
were sent, one ``done`` or ``error`` line each, so the runs in flight are a queue whose head
owns every ``frame`` line.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
import time
from collections import deque
from pathlib import Path

import numpy as np

from ..request import SimulationRequest
from .command import EngineCommand
from .process import describe_exit
from .server import EngineServer


class PreviewRun:
    """One preview request: ``count`` frames of ``num_vertices`` vertices, written by the
    worker into ``folder``/frames.npy; ``state`` "running", "done", "superseded" or "error"
    (``error`` the message); times from ``time.monotonic()``: ``sent``, and ``first_frame_at``
    / ``done_at`` when they came (None before)."""

    def __init__(self, folder: Path, count: int, num_vertices: int, sent: float):
        self.folder = folder
        self.count = count
        self.num_vertices = num_vertices
        self.sent = sent
        self.frames_done = 0
        self.state = "running"
        self.error: str | None = None
        self.first_frame_at: float | None = None
        self.done_at: float | None = None
        self.info: dict = {}

    @property
    def finished(self) -> bool:
        return self.state != "running"

    def frames(self) -> np.ndarray | None:
        """The frames written so far, (T, N, 3) float32 world space (a copy), or None when
        there are none (yet) or the file is unreadable or not finite."""
        if self.frames_done < 1:
            return None
        try:
            data = np.load(self.folder / "frames.npy", mmap_mode="r", allow_pickle=False)
            frames = np.array(data[: self.frames_done], dtype=np.float32)
        except (OSError, ValueError):
            return None
        if frames.ndim != 3 or frames.shape[1:] != (self.num_vertices, 3):
            return None
        return frames if np.isfinite(frames).all() else None

    def handle(self, message: dict) -> bool:
        """Take one protocol line of this run; True when it ends the run."""
        kind = message.get("type")
        now = time.monotonic()
        if kind == "frame":
            self.frames_done = max(self.frames_done, int(message.get("index", 0)) + 1)
            if self.first_frame_at is None:
                self.first_frame_at = now
        elif kind == "done":
            self.frames_done = int(message.get("count") or self.frames_done)
            self.info = message.get("info") if isinstance(message.get("info"), dict) else {}
            self.state, self.done_at = "done", now
            return True
        elif kind == "error":
            superseded = message.get("kind") == "Superseded"
            self.state = "superseded" if superseded else "error"
            self.error = None if superseded else str(message.get("message") or "engine error")
            self.done_at = now
            return True
        return False

    def cleanup(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class PreviewEngine:
    """A serving worker for ``command`` (its folder under ``root``) and the previews sent to
    it. Once its process has ended, ``gone`` is True and ``failure`` says why, unless it ended
    by itself with nothing in flight (its idle exit); every run in flight then ends with it."""

    def __init__(self, command: EngineCommand, root: Path):
        self.server = EngineServer(command, root)
        self.runs: deque[PreviewRun] = deque()  # in flight, oldest first
        self.ready = False
        self.gone = False
        self.failure: str | None = None

    @property
    def alive(self) -> bool:
        return self.server.alive

    def submit(self, request: SimulationRequest, frames: int) -> PreviewRun:
        """Send a preview of the first ``frames`` frames of ``request``."""
        folder = Path(tempfile.mkdtemp(prefix="preview-", dir=self.server.folder))
        request = dataclasses.replace(
            request, preview_frames=int(frames), want_frames=True, want_rig=False
        )
        path = request.write(folder)
        count = min(int(frames), request.conditions.frames)
        run = PreviewRun(folder, count, len(request.vertices), time.monotonic())
        if not self.server.process.send(json.dumps({"request": str(path.resolve())})):
            self._check_exit()  # why: its exit status and the last line it wrote
            run.state, run.error = "error", self.failure or "the preview engine is gone"
            run.done_at = time.monotonic()
            run.cleanup()
            return run
        self.server.last_used = time.monotonic()
        self.runs.append(run)
        return run

    def poll(self) -> None:
        """Hand the lines printed since the last poll to their runs; notice the process's end
        (waiting at most 0.2 s for its last lines once it has ended)."""
        self.poll_messages()
        self._check_exit()

    def poll_messages(self) -> None:
        for message in self.server.process.messages():
            if message.get("type") == "ready":
                self.ready = True
            elif self.runs and self.runs[0].handle(message):
                self.runs.popleft()

    def _check_exit(self) -> None:
        code = self.server.process.poll()
        if code is not None and not self.gone:
            if not self.server.process.drained:
                deadline = time.monotonic() + 0.2  # its last lines are on their way
                while not self.server.process.drained and time.monotonic() < deadline:
                    time.sleep(0.005)
                self.poll_messages()
            self.gone = True
            if code != 0 or self.runs:
                tail = self.server.process.stderr_tail(max_lines=1)
                detail = f": {tail[-1][-200:]}" if tail else ""
                self.failure = f"the preview engine stopped ({describe_exit(code)}){detail}"
            while self.runs:
                run = self.runs.popleft()
                run.state, run.error, run.done_at = "error", self.failure, time.monotonic()

    def stop(self) -> None:
        """Terminate the worker; its folder (every run's files) goes with it."""
        self.server.stop()
        self.runs.clear()
