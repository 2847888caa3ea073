# SPDX-License-Identifier: GPL-3.0-or-later
"""The warm engine: one ``python -m neurok_core.worker --serve`` child kept between Simulates.

Starting the engine means importing torch (a few seconds) and loading the model; a serving
worker does that once and then answers requests from its stdin, keeping the model and the last
kinematic spaces in memory (``neurok_core.worker``). The add-on starts one when the NeuROK tab is
first shown (so it is ready by the time Simulate is clicked) or at the first Simulate, and keeps
it while it answers. It goes away when a run is cancelled (cancelling terminates it, as for a
one-shot worker), after a run that failed (a fresh one serves the next), when the engine
settings change, when the add-on is disabled, after ``IDLE_EXIT`` seconds without a request
(its own timer), and with Blender (its stdin closes).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from .command import EngineCommand
from .process import ChildProcess

IDLE_EXIT = 600.0  # seconds a warm engine waits for a request before it ends itself


class EngineServer:
    """A serving worker for ``command``, with its stderr in ``folder``."""

    def __init__(self, command: EngineCommand, folder: Path):
        self.command = command
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.process = ChildProcess(
            command.argv("--serve", "--idle-exit", f"{IDLE_EXIT:g}"),
            env=command.env(),
            cwd=self.folder,
            stderr_path=self.folder / "stderr.txt",
            stdin=True,
        )
        self.busy = False

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def serves(self, command: EngineCommand) -> bool:
        """Whether this server can take a request for ``command`` now."""
        return self.command == command and self.alive and not self.busy

    def submit(self, request_path: str | Path) -> bool:
        """Send one request; False when the child is gone."""
        self.busy = True
        return self.process.send(json.dumps({"request": str(Path(request_path).resolve())}))

    def release(self, healthy: bool) -> None:
        """A request is over: stay for the next one if ``healthy``, else stop."""
        self.busy = False
        if not healthy:
            self.stop()

    def stop(self) -> None:
        self.process.terminate()
        shutil.rmtree(self.folder, ignore_errors=True)
