# SPDX-License-Identifier: GPL-3.0-or-later
"""The jobs running now (at most one per kind) and the last known engine status.

Module-level on purpose: this is runtime state of this Blender session (a child process, a probe
answer), not scene data, so it must not be saved in the .blend or travel with undo.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .command import EngineCommand
from .job import Job
from .server import EngineServer

SIMULATE, FIT, STRUCTURE = "simulate", "fit", "structure"
PROBE, INSTALL = "probe", "install"
ENGINE_JOBS = (SIMULATE, FIT, STRUCTURE)  # the kinds that run on the warm engine, one at a time

_jobs: dict[str, Job] = {}
_server: EngineServer | None = None  # the warm engine (``server``), at most one


def start(kind: str, job: Job) -> None:
    _jobs[kind] = job


def get(kind: str) -> Job | None:
    job = _jobs.get(kind)
    return job if job is not None and not job.finished else None


def engine_job() -> Job | None:
    """The running job of the warm engine (a simulation or a fit), if any."""
    return next((job for job in map(get, ENGINE_JOBS) if job is not None), None)


def end(kind: str, job: Job) -> None:
    if _jobs.get(kind) is job:
        del _jobs[kind]


def request_cancel(kind: str | None = None) -> bool:
    """Ask the running job of ``kind`` (any kind when None) to stop; True if one was running."""
    hit = False
    for name, job in list(_jobs.items()):
        if (kind is None or name == kind) and not job.finished:
            job.request_cancel()
            hit = True
    return hit


def cancel_all() -> None:
    """Stop every child now (unregister, quitting Blender)."""
    for job in list(_jobs.values()):
        if not job.finished and job.process is not None:
            job.process.terminate()
        job.cleanup()
    _jobs.clear()
    stop_server()


def engine_server(command: EngineCommand, root: Path) -> EngineServer:
    """The warm engine for ``command``, started now (its folder under ``root``) if there is
    none that can take a request; raises OSError when the interpreter cannot be started."""
    global _server
    if _server is not None and _server.serves(command):
        return _server
    if _server is not None and not _server.busy:
        stop_server()  # (a busy one belongs to its running job, which ends it)
    _server = EngineServer(command, root)
    return _server


def warm_server() -> EngineServer | None:
    """The warm engine if one is running (busy or not)."""
    return _server if _server is not None and _server.alive else None


def stop_server() -> None:
    global _server
    if _server is not None:
        _server.stop()
        _server = None


@dataclass(frozen=True)
class EngineStatus:
    """state: 'unknown' | 'checking' | 'ready' | 'error'; text: one line for the UI."""

    state: str = "unknown"
    text: str = "not checked yet"


_status = EngineStatus()


def engine_status() -> EngineStatus:
    return _status


def set_engine_status(state: str, text: str) -> None:
    global _status
    _status = EngineStatus(state, text)
