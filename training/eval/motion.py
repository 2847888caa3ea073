"""Plausibility of generated motion under a fixed, standard set of conditions (design section 6).

Every condition is derived from the ground-truth sequence in the same way, so the numbers compare
across checkpoints. Let v* be the vertex that moves farthest in the ground truth
(max_t |x_t(v*) - x_0(v*)|), t* the frame where it is farthest, u the unit direction of that
displacement (+Z when nothing moves) and L the object size (longest side of the rest box). Every
run: mass 1 kg, 24 fps, ``frames`` frames (frame 0 = rest), no pins, stiffness 0 unless stated.

- ``force``: gravity (0, 0, -9.81) m/s^2 and a 10 N force (about the object's weight) on v*
  along u during the first half of the animation, damping 0.5 /s. Scored by the **part rigidity
  error** (articulated and multibody objects with part labels; mean and max over frames, in
  object sizes) and the **edge strain** (cloth; mean and max over frames of mean |l/l0 - 1|).
- ``undamped``: no gravity, no damping, stiffness 1 Hz (a restoring potential, so the motion
  oscillates and trades kinetic for potential energy), an initial velocity of 1 L/s of v* along
  u. Scored by the **energy drift** max_t |E_t - E_0| / E_0 (E_0: the initial kinetic energy).
- ``damped``: the undamped run with damping 1 /s (drawn beside it in the energy figure only;
  skipped when the undamped run did not finish).
- ``drag``: no gravity, damping 0.5 /s, a drag handle taking v* to its ground-truth position at
  t* by frame F = round(2/3 (frames - 1)), released after. Scored by the **drag alignment**
  |x_F(v*) - target| / L; ``drag_distance`` = |target - x_0(v*)| / L says how far the point had
  to go (the target is reachable: the object itself went there in the ground truth).

Every run also reports ``extent``, the largest displacement of any vertex over the run in object
sizes, so that a run in which nothing moves (and whose rigidity and strain are trivially 0) shows
as such. No vertex is pinned: pinning the vertices the ground truth holds still froze the whole
object in the kinematic spaces tried (no direction of the subspace leaves them exactly still).
A run is stopped after ``timeout`` seconds (between frames, and where the platform allows also
inside a frame) and scored on the frames it made (``timed_out``); a run that fails is reported
with its error. The shape metrics of the ground-truth sequence are reported beside the model's
(``ground_truth``).
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from typing import Any

import numpy as np

from neurok_core.dynamics import Drag, Force, InitialVelocity, SimulationConditions
from neurok_core.errors import NeuROKError
from neurok_core.metrics import drag_alignment, edge_strain, energy_drift, part_rigidity_error
from neurok_core.results import SimulationResult
from neurok_core.sequence import Sequence4D
from neurok_core.simulate import simulate

RIGID_CATEGORIES = ("articulated", "multibody")
FORCE_NEWTONS = 10.0
GRAVITY = (0.0, 0.0, -9.81)
NO_GRAVITY = (0.0, 0.0, 0.0)
FPS = 24.0
RUNS = ("force", "undamped", "drag")


def key_vertex(seq: Sequence4D) -> tuple[int, int, np.ndarray]:
    """(v*, t*, u): the farthest-moving vertex, its farthest frame and the unit direction."""
    x = seq.vertices.astype(np.float64)
    dist = np.linalg.norm(x - x[0], axis=-1)  # (T, N)
    vertex = int(dist.max(0).argmax())
    frame = int(dist[:, vertex].argmax())
    step = x[frame, vertex] - x[0, vertex]
    norm = float(np.linalg.norm(step))
    direction = step / norm if norm > 0 else np.array([0.0, 0.0, 1.0])
    return vertex, frame, direction


def standard_conditions(seq: Sequence4D, frames: int) -> dict[str, SimulationConditions]:
    """The runs of the module docstring for ``seq`` (name -> conditions)."""
    vertex, frame, u = key_vertex(seq)
    rest = seq.vertices[0].astype(np.float64)
    size = float((rest.max(0) - rest.min(0)).max())
    common = dict(mass=1.0, fps=FPS, frames=frames, device="cpu")
    push = Force(
        direction=tuple(u), strength=FORCE_NEWTONS, vertex=vertex, end_frame=max(1, frames // 2)
    )
    kick = InitialVelocity(velocity=tuple(size * u), vertex=vertex)
    free = dict(velocities=(kick,), gravity=NO_GRAVITY, stiffness=1.0, **common)
    target = tuple(seq.vertices[frame, vertex].astype(np.float64))
    arrive = max(1, round(2 * (frames - 1) / 3))
    hand = Drag(target=target, frame=arrive, vertex=vertex)
    return {
        "force": SimulationConditions(forces=(push,), gravity=GRAVITY, damping=0.5, **common),
        "undamped": SimulationConditions(damping=0.0, **free),
        "damped": SimulationConditions(damping=1.0, **free),
        "drag": SimulationConditions(drags=(hand,), gravity=NO_GRAVITY, damping=0.5, **common),
    }


def _frame_stats(values: np.ndarray) -> dict[str, float]:
    """Mean and max over frames 1.. (frame 0 is the rest shape, where every error is 0)."""
    v = np.asarray(values, dtype=np.float64)[1:]
    if len(v) == 0:
        return {"mean": 0.0, "max": 0.0}
    return {"mean": float(v.mean()), "max": float(v.max())}


def shape_scores(seq: Sequence4D, positions: np.ndarray) -> dict[str, Any]:
    """Part rigidity (rigid categories with labels) and edge strain (cloth) of a motion."""
    out: dict[str, Any] = {}
    rest = seq.vertices[0]
    if seq.category in RIGID_CATEGORIES and (seq.parts >= 0).any():
        out["part_rigidity"] = _frame_stats(part_rigidity_error(rest, positions, seq.parts))
    if seq.category == "cloth":
        out["edge_strain"] = _frame_stats(edge_strain(rest, positions, seq.faces))
    return out


def ground_truth_scores(seq: Sequence4D) -> dict[str, Any]:
    """The shape scores of the ground-truth sequence itself (the reference)."""
    return shape_scores(seq, seq.vertices)


class _OutOfTime(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Raise _OutOfTime in the main thread after ``seconds`` (a no-op where there is no SIGALRM
    or off the main thread; the caller's per-frame check still applies)."""
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if not usable:
        yield
        return

    def expire(signum, frame):
        raise _OutOfTime

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_simulation(
    space, conditions: SimulationConditions, timeout: float, settings=None, method: str = "latent"
):
    """(SimulationResult of the frames made, or None; JSON info: seconds, frames, timed_out,
    decoder evaluations or the error). settings: the DynamicsSettings (None: the defaults).
    method "rig": the rig space of the space's mesh (``space`` needs only ``vertices`` and
    ``faces``; settings: a ``RigSettings``), whose result and rig are returned whole."""
    if method == "rig":
        return _run_rig(space, conditions, timeout, settings)
    started = time.perf_counter()
    frames: list[np.ndarray] = []
    energy: list[float] = []

    def on_frame(index, positions, e):
        frames.append(positions)
        energy.append(float(e))
        return time.perf_counter() - started < timeout

    info: dict[str, Any] = {}
    try:
        with _time_limit(timeout + 1.0):  # the per-frame check comes first when it can
            extra = {} if settings is None else {"settings": settings}
            done = simulate(space, conditions, on_frame=on_frame, **extra)
        info["decoder_evaluations"] = done.info["decoder_evaluations"]
        info["timed_out"] = bool(done.info["cancelled"])
        # frames pressed against the limits of the learned shapes (Simulate warns on them)
        info["frames_on_barrier"] = int(done.info["frames_on_barrier"])
        info["edge_strain_max"] = round(float(done.info["edge_strain_max"]), 5)
        info["max_latent_excess"] = round(
            float(done.info["max_latent_distance"])
            - max(float(done.info["prior_radius"]), float(done.info["rest_latent_distance"])),
            4,
        )
    except _OutOfTime:
        info["timed_out"] = True
    except NeuROKError as exc:
        info["error"] = str(exc)
    info["seconds"] = round(time.perf_counter() - started, 3)
    info["frames"] = len(frames)
    if not frames or "error" in info:
        return None, info
    result = SimulationResult(
        positions=np.stack(frames),
        times=np.arange(len(frames)) / conditions.fps,
        energy=np.asarray(energy),
        conditions=conditions.to_dict(),
    )
    return result, info


def _run_rig(space, conditions: SimulationConditions, timeout: float, settings=None):
    """:func:`run_simulation` in the rig space."""
    from neurok_core.rigspace import simulate_rig

    started = time.perf_counter()
    info: dict[str, Any] = {}
    result = None
    try:
        with _time_limit(timeout + 1.0):
            result = simulate_rig(
                space.vertices, space.faces, conditions, settings=settings, time_limit=timeout
            )
        info["timed_out"] = bool(result.info["cancelled"])
        info["rig"] = {k: v for k, v in result.info.items() if k not in ("cancelled",)}
    except _OutOfTime:
        info["timed_out"] = True
    except NeuROKError as exc:
        info["error"] = str(exc)
    info["seconds"] = round(time.perf_counter() - started, 3)
    info["frames"] = 0 if result is None else len(result.positions)
    return result, info


def evaluate_motion(
    space,
    seq: Sequence4D,
    frames: int,
    *,
    runs: tuple[str, ...] = RUNS,
    timeout: float = 60.0,
    damped: bool = False,
) -> tuple[dict[str, Any], dict[str, SimulationResult]]:
    """Run the standard conditions ``runs`` in ``space`` (the kinematic space of ``seq``'s rest
    mesh); ``damped`` adds the damped run; ``timeout``: seconds per run.

    Returns (scores, results): scores is JSON data per run (metrics, timings, errors); results
    maps run name -> SimulationResult for the figures.
    """
    wanted = set(runs) | ({"damped"} if damped else set())
    runs = {k: v for k, v in standard_conditions(seq, frames).items() if k in wanted}
    vertex = key_vertex(seq)[0]
    size = space.object_size
    scores: dict[str, Any] = {"key_vertex": vertex}
    results = {}
    finished: set[str] = set()
    for name, cond in runs.items():
        if name == "damped" and "undamped" in runs and "undamped" not in finished:
            scores[name] = {"skipped": "the undamped run did not finish"}
            continue
        result, info = run_simulation(space, cond, timeout)
        if result is not None and not info["timed_out"]:
            finished.add(name)
        scores[name] = info
        if result is None:
            continue
        results[name] = result
        moved = np.linalg.norm(result.positions - result.positions[0], axis=-1)  # (T, N)
        info["extent"] = float(moved.max() / size)
        if name == "force":
            info.update(shape_scores(seq, result.positions))
        elif name in ("undamped", "damped"):
            info["energy_drift"] = energy_drift(result.energy)
        elif name == "drag":
            drag = cond.drags[0]
            start = space.vertices[vertex]
            info["drag_distance"] = float(np.linalg.norm(np.subtract(drag.target, start)) / size)
            if drag.frame < len(result.positions):
                path = result.positions[:, vertex]
                info["drag_alignment"] = drag_alignment(path, drag.target, drag.frame, size)
    return scores, results
