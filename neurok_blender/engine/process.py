# SPDX-License-Identifier: GPL-3.0-or-later
"""A child process whose stdout lines are read without ever blocking the caller.

Blender's UI thread polls a running engine from a timer, so it must never wait on a pipe. A small
daemon thread reads stdout line by line into a queue (portable, unlike non-blocking pipes on
Windows); stderr goes to a file, so a chatty child can never fill a pipe and stall, and its tail
explains a crash. Cancelling is terminate, a short grace period, then kill.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

GRACE_SECONDS = 3.0


class ChildProcess:
    """``argv`` run with ``env`` in ``cwd``; JSON lines from stdout via :meth:`messages`."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike | None = None,
        stderr_path: str | os.PathLike,
        stdin: bool = False,
    ):
        """stdin: give the child a pipe on stdin for :meth:`send` (else it reads nothing)."""
        self.argv = [str(a) for a in argv]
        self.stderr_path = Path(stderr_path)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.text_lines: list[str] = []  # stdout lines that were not JSON objects
        creationflags = subprocess.CREATE_NEW_PROCESS_GROUP if sys.platform == "win32" else 0
        with open(self.stderr_path, "wb") as err:
            self._proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=cwd,
                creationflags=creationflags,
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def send(self, line: str) -> bool:
        """Write one line to the child's stdin; False when the child is gone (a closed pipe)."""
        pipe = self._proc.stdin
        if pipe is None:
            raise RuntimeError("this child was started without a stdin pipe")
        try:
            pipe.write(line.encode("utf-8") + b"\n")
            pipe.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _read(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        try:
            for raw in iter(stream.readline, b""):
                self._lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        finally:
            stream.close()
            self._lines.put(None)

    def messages(self) -> list[dict]:
        """The JSON objects printed since the last call (never blocks)."""
        out = []
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                self._lines.put(None)  # keep the end marker for `drained`
                break
            try:
                message = json.loads(line)
            except json.JSONDecodeError:
                message = None
            if isinstance(message, dict):
                out.append(message)
            elif line.strip():
                self.text_lines.append(line)
        return out

    @property
    def drained(self) -> bool:
        """True once the child closed stdout and every line was handed out."""
        return not self._reader.is_alive() and self._lines.qsize() == 1

    def poll(self) -> int | None:
        """The exit status (negative: killed by that signal), or None while running."""
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._proc.wait(timeout)

    def terminate(self) -> None:
        """Stop the child: SIGTERM, then SIGKILL after a grace period."""
        if self._proc.stdin is not None:
            try:
                self._proc.stdin.close()
            except OSError:
                pass
        if self._proc.poll() is not None:
            return
        try:
            self._proc.terminate()
            self._proc.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        except ProcessLookupError:
            pass

    def stderr_size(self) -> int:
        """Bytes written on stderr so far (a mark for :meth:`stderr_tail`)."""
        try:
            return self.stderr_path.stat().st_size
        except OSError:
            return 0

    def stderr_tail(self, max_lines: int = 20, since: int = 0) -> list[str]:
        """The last non-empty lines the child wrote on stderr (after byte ``since``)."""
        try:
            with open(self.stderr_path, "rb") as fh:
                fh.seek(since)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError:
            return []
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-max_lines:]


def describe_exit(code: int) -> str:
    """'exit status 1' or 'killed by signal 9 (SIGKILL)'."""
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = "unknown"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"
