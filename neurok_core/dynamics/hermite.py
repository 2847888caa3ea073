"""Hermite interpolation on one interval (drag paths, frames inside multi-frame steps)."""

from __future__ import annotations

import torch
from torch import Tensor


def quintic_hermite(
    p0: Tensor,
    v0: Tensor,
    a0: Tensor,
    p1: Tensor,
    v1: Tensor,
    a1: Tensor,
    duration: float,
    s: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """The quintic with value, slope and curvature p, v, a at both ends of an interval.

    s in [0, 1] is the fraction of ``duration`` elapsed; returns (position, velocity,
    acceleration) at that time, shaped like p0. Basis: e.g. Farin, "Curves and Surfaces for
    CAGD", ch. 7. With v0 = a0 = v1 = a1 = 0 this is the minimum-jerk path.
    """
    t = duration
    s2, s3, s4, s5 = s * s, s**3, s**4, s**5
    h = (
        1 - 10 * s3 + 15 * s4 - 6 * s5,  # p0
        s - 6 * s3 + 8 * s4 - 3 * s5,  # v0 * t
        0.5 * (s2 - 3 * s3 + 3 * s4 - s5),  # a0 * t^2
        10 * s3 - 15 * s4 + 6 * s5,  # p1
        -4 * s3 + 7 * s4 - 3 * s5,  # v1 * t
        0.5 * (s3 - 2 * s4 + s5),  # a1 * t^2
    )
    dh = (
        -30 * s2 + 60 * s3 - 30 * s4,
        1 - 18 * s2 + 32 * s3 - 15 * s4,
        0.5 * (2 * s - 9 * s2 + 12 * s3 - 5 * s4),
        30 * s2 - 60 * s3 + 30 * s4,
        -12 * s2 + 28 * s3 - 15 * s4,
        0.5 * (3 * s2 - 8 * s3 + 5 * s4),
    )
    ddh = (
        -60 * s + 180 * s2 - 120 * s3,
        -36 * s + 96 * s2 - 60 * s3,
        0.5 * (2 - 18 * s + 36 * s2 - 20 * s3),
        60 * s - 180 * s2 + 120 * s3,
        -24 * s + 84 * s2 - 60 * s3,
        0.5 * (6 * s - 24 * s2 + 20 * s3),
    )
    terms = (p0, v0 * t, a0 * t * t, p1, v1 * t, a1 * t * t)
    pos = sum(c * x for c, x in zip(h, terms, strict=True))
    vel = sum(c * x for c, x in zip(dh, terms, strict=True)) / t
    acc = sum(c * x for c, x in zip(ddh, terms, strict=True)) / (t * t)
    return pos, vel, acc


def work_polynomial(w0: float, w1: float, power: list[float], span: float) -> list[float]:
    """W at the inner frames of a k-frame step: W0 plus the integral of the degree-k polynomial
    through the power at the k + 1 frames (Newton-Cotes), with the small mismatch to the RK4 end
    value W1 spread linearly over the step."""
    k = len(power) - 1
    deg = torch.arange(k + 1, dtype=torch.float64)  # exponents 0..k
    nodes = torch.arange(k + 1, dtype=torch.float64) / k  # (k+1,) fractions of the step
    coef = torch.linalg.solve(nodes[:, None] ** deg, torch.tensor(power, dtype=torch.float64))

    def integral(s: float) -> float:  # span * int_0^s p
        return span * float((coef * s ** (deg + 1) / (deg + 1)).sum())

    gap = w1 - w0 - integral(1.0)
    return [w0 + integral(j / k) + (j / k) * gap for j in range(1, k)]
