# SPDX-License-Identifier: GPL-3.0-or-later
"""A running child process seen as progress: a fraction, a status line, then a result or an error.

The operators poll a job from a modal timer (or in a loop in background mode); the job never
blocks. Subclasses turn the child's messages into progress (``handle``) and its exit into a
result or a plain message (``finish``).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from .process import ChildProcess, describe_exit

DRAIN_SECONDS = 2.0  # how long to wait for the last lines after the child exited


class Job:
    """Base class: ``poll`` until ``finished``; then ``result`` or ``error`` (or ``cancelled``)."""

    title = "NeuROK"

    def __init__(self, folder: str | Path | None = None):
        self.folder = Path(folder) if folder is not None else None
        self.process: ChildProcess | None = None
        self.fraction = 0.0
        self.status = "starting"
        self.result: dict | None = None
        self.error: str | None = None
        self.finished = False
        self.cancelled = False
        self.timed_out: float | None = None  # the time limit (s) that cancelled it, if one did
        self._cancel_requested = False
        self._exited_at: float | None = None
        self._text_seen = 0
        self._heard = False  # any protocol message from the child yet
        self.server = None  # the warm engine this job is a request of (``attach``)
        self._stderr_from = 0  # where this job's part of the child's stderr starts
        self._text_from = 0  # and of its non-protocol stdout lines

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self, argv, *, env=None, cwd=None) -> None:
        """Start the child; a missing interpreter becomes ``error`` (the job is then finished)."""
        assert self.folder is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.process = ChildProcess(
                argv, env=env, cwd=cwd, stderr_path=self.folder / "stderr.txt"
            )
        except OSError as exc:
            self.start_failed(f"cannot start {argv[0]!r}: {exc.strerror or exc}")

    def start_failed(self, message: str) -> None:
        """The child could not be started: the job is over with ``message``."""
        self._fail(message)

    def attach(self, server, request_path: str | Path) -> None:
        """Run as one request of a warm engine (:class:`~.server.EngineServer`) rather than a
        child of its own: the job ends at the request's ``done`` or ``error`` line; cancelling
        terminates the engine, as it would a one-shot child."""
        self.server = server
        self.process = server.process
        # what the engine printed since its last request (or its start) belongs to this job
        self._text_seen = self._text_from = server.text_mark
        self._stderr_from = server.stderr_mark
        server.submit(request_path)  # a gone engine shows as its exit at the next poll

    def request_cancel(self) -> None:
        """Ask the job to stop at its next poll (safe to call from any thread)."""
        self._cancel_requested = True

    def poll(self) -> bool:
        """Handle what the child printed since the last poll; True once the job is over."""
        if self.finished:
            return True
        assert self.process is not None
        if self._cancel_requested:
            self.process.terminate()
            self.cancelled = True
            self.status = "cancelled"
            self._end()
            return True
        self._read()
        if self.server is not None and (self.result is not None or self.error is not None):
            self._end()  # the warm engine answered; it stays for the next request
            return True
        code = self.process.poll()
        if code is None:
            return False
        if self._exited_at is None:
            self._exited_at = time.monotonic()
        if not self.process.drained and time.monotonic() - self._exited_at < DRAIN_SECONDS:
            return False
        self._read()
        self.finish(code)
        self._end()
        return True

    def wait(self, interval: float = 0.01, timeout: float | None = None) -> None:
        """Poll until the job is over (background mode and scripts); timeout (s) cancels, and
        ``timed_out`` then holds it."""
        start = time.monotonic()
        while not self.poll():
            if timeout is not None and self.timed_out is None:
                if time.monotonic() - start > timeout:
                    self.timed_out = timeout
                    self.request_cancel()
            time.sleep(interval)

    def cleanup(self) -> None:
        """Remove the job's folder (call once its results were read)."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- for subclasses ----------------------------------------------------------------------
    def handle_text(self, line: str) -> None:
        """React to one stdout line that is not a protocol message (ignored by default)."""

    def handle(self, message: dict) -> None:
        """React to one protocol message."""
        if message.get("type") == "error":
            self.error = str(message.get("message") or "the engine reported an error")

    def finish(self, code: int) -> None:
        """Set ``result`` or ``error`` from the exit status once every message was handled."""
        if self.error is None and self.result is None:
            self.error = self.crash_message(code)

    def crash_message(self, code: int) -> str:
        """A one-line reason for an exit without a protocol answer."""
        assert self.process is not None
        tail = (
            self.process.stderr_tail(since=self._stderr_from)
            + self.process.text_lines[self._text_from :]
        )
        last = tail[-1].strip() if tail else ""
        if any("No module named" in line and "neurok_core" in line for line in tail):
            return (
                f"the engine interpreter {self.process.argv[0]!r} cannot import neurok_core"
                " (does it ignore PYTHONPATH, e.g. run with -I or -E?)"
            )
        if code < 0 or code in (137, 143):  # a signal (143/137: a shell reporting one)
            return (
                f"the engine was stopped from outside ({describe_exit(code)}): out of memory,"
                " or the process was killed"
            )
        if not tail and not self._heard:  # not a word, not one protocol message
            return (
                f"the engine interpreter {self.process.argv[0]!r} exited at once"
                f" ({describe_exit(code)}) without a word: is it a Python with the engine's"
                " dependencies? Set Preferences > Add-ons > NeuROK > Engine Python (empty:"
                " Blender's own, after Install Dependencies)"
            )
        detail = f": {last[-300:]}" if last else ""
        return f"the engine stopped unexpectedly ({describe_exit(code)}){detail}"

    # -- internals ---------------------------------------------------------------------------
    def _read(self) -> None:
        assert self.process is not None
        for message in self.process.messages():
            self._heard = True
            self.handle(message)
        lines = self.process.text_lines
        for line in lines[self._text_seen :]:
            self.handle_text(line)
        self._text_seen = len(lines)

    def _fail(self, message: str) -> None:
        self.error = message
        self._end()

    def _end(self) -> None:
        self.finished = True
        if self.error is None and not self.cancelled:
            self.fraction = 1.0
        if self.server is not None:  # kept after an answer; a fresh one after trouble
            healthy = not self.cancelled and (self.result is not None or self.answered_error())
            self.server.release(healthy=healthy)

    def answered_error(self) -> bool:
        """Whether the engine answered with an error about the request (its inputs), which
        leaves it fit for the next one."""
        return False


class ProbeJob(Job):
    """``python -m neurok_core.worker --probe``: is torch there, which device, which model."""

    title = "Checking the engine"

    def handle(self, message: dict) -> None:
        super().handle(message)
        if message.get("type") == "probe":
            self.result = message

    def summary(self) -> str:
        """'ready: torch 2.13.0, cpu (2 threads)' or the error."""
        if self.result:
            return f"torch {self.result.get('torch', '?')}, {self.result.get('device', '?')}"
        return self.error or ("cancelled" if self.cancelled else "not checked")


# Errors about a request's inputs (``neurok_core.errors`` and the worker's RequestError): the
# engine that answered them is still fit to serve.
REQUEST_ERRORS = frozenset(
    {"RequestError", "MeshError", "CheckpointError", "ConditionError", "SimulationError"}
)

# Fraction of the whole run at which each stage of a simulation starts (then ends at the next).
STAGES = {
    "load": 0.0,
    "encode": 0.05,
    "rest": 0.15,
    "subspace": 0.25,
    "simulate": 0.35,
    "write": 0.97,
}
STAGE_END = {"load": 0.05, "encode": 0.15, "rest": 0.25, "subspace": 0.35, "simulate": 0.97}


class SimulationJob(Job):
    """``python -m neurok_core.worker --request REQUEST.json``; result = the ``done`` message."""

    title = "Simulating"
    stages, stage_end = STAGES, STAGE_END  # where each of the engine's stages starts and ends

    def __init__(self, folder: str | Path, frame_count: int):
        super().__init__(folder)
        self.frame_count = frame_count
        self.frames_done = 0
        self.stage = "load"
        self.error_kind: str | None = None
        self._first_frame: tuple[int, float] | None = None  # (frames done, time) at the first

    def _stage_fraction(self, stage: str, within: float) -> float:
        begin = self.stages.get(stage, self.fraction)
        end = self.stage_end.get(stage, 1.0)
        return begin + (end - begin) * min(max(within, 0.0), 1.0)

    def handle(self, message: dict) -> None:
        super().handle(message)
        kind = message.get("type")
        if kind == "status":
            self.stage = str(message.get("stage") or self.stage)
            self.status = str(message.get("message") or self.stage)
            self.fraction = max(self.fraction, self._stage_fraction(self.stage, 0.0))
        elif kind == "progress":
            stage = str(message.get("stage") or self.stage)
            within = float(message.get("fraction") or 0.0)
            self.fraction = max(self.fraction, self._stage_fraction(stage, within))
        elif kind == "frame":
            self.frames_done = int(message.get("index", 0)) + 1
            count = int(message.get("count") or self.frame_count) or 1
            self.stage = "simulate"
            self.status = f"frame {self.frames_done} of {count}" + self._estimate(count)
            self.fraction = max(
                self.fraction, self._stage_fraction("simulate", self.frames_done / count)
            )
        elif kind == "done":
            self.result = message
        elif kind == "error":
            self.error_kind = str(message.get("kind") or "")

    def _estimate(self, count: int, now: float | None = None) -> str:
        """', about N s left' from the frames' pace since the first frame came (empty until
        two frames have)."""
        now = time.monotonic() if now is None else now
        if self._first_frame is None:
            self._first_frame = (self.frames_done, now)
            return ""
        done, since = self._first_frame
        if self.frames_done <= done or now <= since:
            return ""
        left = (now - since) / (self.frames_done - done) * (count - self.frames_done)
        return f", about {left:.0f} s left" if left >= 1.0 else ", under a second left"

    def answered_error(self) -> bool:
        return self.error_kind in REQUEST_ERRORS and self.process.poll() is None

    def finish(self, code: int) -> None:
        if self.result is not None and code != 0:
            self.result = None
        if self.result is None and self.error is None and code == 0:
            self.error = "the engine finished without a result"
        super().finish(code)


# The stages of an inverse-kinematics request: the model's (load to subspace) only with the
# learned prior or space; a rig-space fit goes straight to "fit".
FIT_STAGES = {
    "load": 0.0,
    "encode": 0.02,
    "rest": 0.04,
    "subspace": 0.06,
    "fit": 0.08,
    "write": 0.95,
}
FIT_STAGE_END = {"load": 0.02, "encode": 0.04, "rest": 0.06, "subspace": 0.08, "fit": 0.95}


class FitJob(SimulationJob):
    """An inverse-kinematics request (``"task": "ik"``); result = the ``done`` message, whose
    ``info`` holds the fit's figures (chamfer, bones, seconds)."""

    title = "Fitting"
    stages, stage_end = FIT_STAGES, FIT_STAGE_END

    def __init__(self, folder: str | Path):
        super().__init__(folder, 1)

    def handle(self, message: dict) -> None:
        if message.get("type") == "frame":
            return  # the fitted shape is written: not a frame of a motion
        super().handle(message)


class StructureJob(SimulationJob):
    """A structure request (``"task": "structure"``); result = the ``done`` message, whose
    ``structure`` is the JSON file and ``info`` the counts of parts and joints."""

    title = "Finding the structure"
    stages, stage_end = {"structure": 0.0, "write": 0.95}, {"structure": 0.95}

    def __init__(self, folder: str | Path):
        super().__init__(folder, 1)
