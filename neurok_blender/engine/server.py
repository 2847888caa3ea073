# SPDX-License-Identifier: GPL-3.0-or-later
"""The warm engine: one ``python -m neurok_core.worker --serve`` child kept between Simulates.

Starting the engine means importing torch (a few seconds) and loading the model; a serving
worker does that once and then answers requests from its stdin, keeping the model and the last
kinematic spaces in memory (``neurok_core.worker``). The add-on starts one when the NeuROK tab is
first shown (so it is ready by the time Simulate is clicked) or at the first Simulate, and keeps
it while it answers, also after an error about a request's inputs (a bad mesh, checkpoint or
condition). It goes away when a run is cancelled (cancelling terminates it, as for a one-shot
worker), after any other failure (a fresh one serves the next run), when the engine's
interpreter setting changes, when the add-on is disabled, after ``IDLE_EXIT`` seconds without
a request (its own timer; Blender replaces one that is close to it rather than send it a
request), and with Blender (its stdin closes).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from .command import EngineCommand
from .process import ChildProcess

IDLE_EXIT = 600.0  # seconds a warm engine waits for a request before it ends itself
IDLE_MARGIN = 30.0  # an engine this close to its idle exit is replaced, not sent a request
STALE_SECONDS = 2 * 86400.0  # engine folders left by sessions that ended without cleaning up


class EngineServer:
    """A serving worker for ``command``, with its stderr in a folder of its own under ``root``
    (named after this Blender's process id)."""

    def __init__(self, command: EngineCommand, root: Path):
        self.command = command
        Path(root).mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        try:
            self.process = ChildProcess(
                command.argv("--serve", "--idle-exit", f"{IDLE_EXIT:g}"),
                env=command.env(),
                cwd=self.folder,
                stderr_path=self.folder / "stderr.txt",
                stdin=True,
            )
        except OSError:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self.busy = False
        self.last_used = time.monotonic()
        # where the output of the next request starts (what came before was another's)
        self.text_mark = self.stderr_mark = 0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def serves(self, command: EngineCommand) -> bool:
        """Whether this server can take a request for ``command`` now (not one about to end
        itself for being idle: a request sent then could go unanswered)."""
        idle = time.monotonic() - self.last_used
        return (
            self.command == command
            and self.alive
            and not self.busy
            and idle < IDLE_EXIT - IDLE_MARGIN
        )

    def submit(self, request_path: str | Path) -> bool:
        """Send one request; False when the child is gone."""
        self.busy = True
        return self.process.send(json.dumps({"request": str(Path(request_path).resolve())}))

    def release(self, healthy: bool) -> None:
        """A request is over: stay for the next one if ``healthy``, else stop."""
        self.busy = False
        self.last_used = time.monotonic()
        self.text_mark = len(self.process.text_lines)
        self.stderr_mark = self.process.stderr_size()
        if not healthy:
            self.stop()

    def stop(self) -> None:
        self.process.terminate()
        shutil.rmtree(self.folder, ignore_errors=True)


def remove_stale_folders(root: Path, older_than: float = STALE_SECONDS) -> None:
    """Remove engine folders under ``root`` untouched for ``older_than`` seconds (left by
    Blender sessions that ended without disabling the add-on)."""
    now = time.time()
    try:
        entries = list(Path(root).iterdir())
    except OSError:
        return
    for path in entries:
        try:
            if path.is_dir() and now - path.stat().st_mtime > older_than:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue
