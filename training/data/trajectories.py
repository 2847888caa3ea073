"""Smooth random joint trajectories within limits.

A trajectory is a chain of minimum-jerk moves (Flash and Hogan, "The coordination of arm
movements", J. Neurosci. 1985):

    q(t) = q0 + (q1 - q0) s(tau),   s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5,

which starts and ends at rest (zero velocity and acceleration). A convex combination of values
inside the limits stays inside, so every frame respects them. Each move drives one joint, several
or all, with their own start and end inside the move so that joints do not always move in step.
"""

from __future__ import annotations

import numpy as np

MAX_SPIN = 0.3  # rad per frame, on average over a move of a continuous joint


def min_jerk(tau: np.ndarray) -> np.ndarray:
    """s(tau) = 10 tau^3 - 15 tau^4 + 6 tau^5 on [0, 1], clipped outside."""
    t = np.clip(tau, 0.0, 1.0)
    return t**3 * (10.0 - 15.0 * t + 6.0 * t * t)


def _target(rng, current: float, lo: float, hi: float) -> float:
    """A target in [lo, hi], at least a quarter of the range from ``current`` where possible."""
    if not np.isfinite(lo) or not np.isfinite(hi):  # continuous joint: a turn or a few
        return current + rng.choice((-1.0, 1.0)) * rng.uniform(0.5 * np.pi, 4.0 * np.pi)
    span = hi - lo
    gap = 0.25 * span
    choices = [(lo, current - gap), (current + gap, hi)]
    choices = [(a, b) for a, b in choices if b > a]
    if not choices:
        return lo if current - lo > hi - current else hi
    widths = np.array([b - a for a, b in choices])
    a, b = choices[rng.choice(len(choices), p=widths / widths.sum())]
    return float(rng.uniform(a, b))


def joint_trajectory(
    rng: np.random.Generator, rest: np.ndarray, lower: np.ndarray, upper: np.ndarray, frames: int
) -> np.ndarray:
    """Random smooth trajectory starting exactly at ``rest``.

    rest, lower, upper: (J,) (infinite limits for continuous joints). Returns (frames, J) float64
    with row 0 equal to ``rest`` and every row inside [lower, upper]. At least one joint moves.
    """
    rest = np.asarray(rest, dtype=np.float64)
    n_joints = len(rest)
    q = np.tile(rest, (frames, 1))  # (T, J)
    n_moves = min(int(rng.choice((1, 2, 3), p=(0.35, 0.4, 0.25))), max(1, (frames - 1) // 8))
    min_len = (frames - 1) // n_moves if n_moves == 1 else 8  # moves last at least 8 frames
    extra = rng.multinomial(frames - 1 - n_moves * min_len, rng.dirichlet(np.ones(n_moves)))
    bounds = np.concatenate([[0], np.cumsum(min_len + extra)])  # (n_moves + 1,)
    current = rest.copy()
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        mode = rng.choice(("one", "some", "all"), p=(0.35, 0.35, 0.3))
        if mode == "one" or n_joints == 1:
            moving = rng.choice(n_joints, size=1)
        elif mode == "some":
            moving = rng.choice(n_joints, size=int(rng.integers(1, n_joints + 1)), replace=False)
        else:
            moving = np.arange(n_joints)
        t = np.arange(frames, dtype=np.float64)
        for j in moving:
            length = stop - start
            a = start + (rng.uniform(0.0, 0.3) * length if rng.random() < 0.5 else 0.0)
            b = stop - (rng.uniform(0.0, 0.3) * length if rng.random() < 0.5 else 0.0)
            target = _target(rng, current[j], lower[j], upper[j])
            if not np.isfinite(upper[j]):  # spin at most MAX_SPIN rad per frame on average
                delta = target - current[j]
                target = current[j] + np.sign(delta) * min(abs(delta), MAX_SPIN * (b - a))
            s = min_jerk((t - a) / max(b - a, 1e-9))  # (T,)
            seg = t >= start
            q[seg, j] = current[j] + (target - current[j]) * s[seg]
            current[j] = target
    q[0] = rest
    return np.clip(q, lower, upper)
