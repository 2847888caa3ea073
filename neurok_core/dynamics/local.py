"""Local quadratic kinematics: the decoder replaced, around an expansion point, by its
second-order Taylor model, re-expanded as the state moves away.

Every right-hand side of the dynamics needs x(q), J(q) and D^2x(q)[q', q'] at the tracked
points; with RK4 and the energy-balance control that is tens of decoder passes per frame. The
decoder is smooth, and over the distance the state travels in a frame or two it is very nearly
quadratic, so around an expansion point q0

    x(q)   ~ x0 + J0 d + H0[d, d] / 2,     d = q - q0,
    J(q)   ~ J0 + H0[d, .],
    D^2x(q)[v, v] ~ H0[v, v],

exact at q0 to second order, with H0 (S, 3, kq, kq) from one multi-direction Taylor-mode pass
(:meth:`~neurok_core.model.jets.DecoderKinematics.hessian`, about twice the cost of one
ordinary kinematics pass). These are the kinematics of a mechanical system in their own right
(J and D^2x are the exact derivatives of the model's x), so the Lagrangian structure and the
energy balance the integrator checks still hold exactly; what is approximated is the decoder,
and that error is measured.

Cubic term along the path: at a re-expansion at q1 after q0, the change of the Hessian along
the move, T = (H1 - H0) / |q1 - q0| with u = (q1 - q0) / |q1 - q0|, estimates the third
derivative with one index along u, T[a, b] = D^3x[u, a, b], for all a, b. Of the cubic Taylor
term D^3x[d, d, d] / 6 it gives every part with at least one u index: with s = u . d and
w = d - s u, the model at q1 adds

    C(d) / 6,   C(d) = s^3 T[u, u] + 3 s^2 T[u, w] + 3 s T[w, w]
                     = 3 s T[d, d] - 3 s^2 T[u, d] + s^3 T[u, u],

leaving out only D^3x[w, w, w] (and its exact derivatives, so the model stays a consistent
mechanical system; ``tests/test_local_model.py`` checks them by finite differences). The
motion mostly continues the way it was going (w small), so this cuts the position and
Jacobian errors for the same radius: about 1.6x fewer expansions than the cubic term along u
alone, D^3x[u, u, u] (measured on a pinned sheet falling for 120 frames).

Error control: at every re-expansion at q1 the old model's positions and Jacobian are compared
with the decoder's, err_x = max |x_model(q1) - x(q1)| / object size and err_J = max |J_model -
J| / max |J| (the forces and the metric see J, so it decides the motion's accuracy). The errors
grow as |d|^3 and |d|^2, so the radius r within which both stay under their tolerances is
estimated from the measured errors (r = distance * min((tol_x / err_x)^(1/3),
(tol_J / err_J)^(1/2)), never more than twice the last radius; the first one from probes along
each coordinate). The integrator (``integrator.Integrator``) re-expands at the start of any RK4
step whose state is farther than r from q0, and at a frame boundary at least every
``max_frames`` frames; its steps move q by at most about r / 2. A measured error above the
tolerance shrinks the radius for what follows (the frames already made are kept: their error
is reported). The model's energy at a state changes a little when it is re-expanded there; the
integrator books that jump with the work of the non-conservative forces, so its energy-balance
step control keeps measuring the integration alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from .fastrhs import as_float64
from .system import HessianKinematics


def supports_hessian(hook) -> bool:
    """Whether a kinematics hook can give x, J and the Hessian in one pass."""
    return isinstance(hook, HessianKinematics) and bool(hook.has_hessian)


@dataclass
class LocalStats:
    """Re-expansions and the model errors they measured (object sizes)."""

    expansions: int = 0
    reuses: int = 0  # kept expansions gone back to instead of new ones
    errors: list[float] = field(default_factory=list)
    jacobian_errors: list[float] = field(default_factory=list)
    energy_jumps: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Expansion:
    """One expansion point, float64 NumPy: q0 (kq,), x0 (S, 3), J0 (S, 3, kq),
    H0 (S, 3, kq, kq); u (kq,) the unit direction of the last move and t (S, 3, kq, kq) the
    third derivative of x with one index along it, D^3x[u, ., .], or None."""

    q0: np.ndarray
    x0: np.ndarray
    j0: np.ndarray
    h0: np.ndarray
    u: np.ndarray | None = None
    t: np.ndarray | None = None

    tu: np.ndarray | None = field(init=False, default=None)  # (3S, kq) D^3x[u, u, .]
    tuu: np.ndarray | None = field(init=False, default=None)  # (3S,) D^3x[u, u, u]

    def __post_init__(self):
        if self.t is not None:
            kq = self.u.shape[0]
            tu = self.t.reshape(-1, kq) @ self.u  # (3S kq,) D^3x[u, ., .] rows
            object.__setattr__(self, "tu", tu.reshape(-1, kq))
            object.__setattr__(self, "tuu", self.tu @ self.u)


class LocalQuadratic:
    """The quadratic model of a kinematics hook with ``hessian(q)`` (the system's dtype and
    device). ``model(q, v)`` evaluates it on float64 NumPy arrays (what the integrator's
    right-hand side uses, ``fastrhs``); called as a kinematics hook (q, qdot) -> (x, J,
    D^2x[qdot, qdot]) it takes and gives float64 CPU tensors.

    hook: the exact kinematics; dtype, device: what it expects for q; size: object size (m);
    tolerance: allowed position error of the model, in object sizes; jacobian_tolerance:
    allowed error of its Jacobian relative to the largest point speed |dx/dq| (what the forces
    and the metric see); max_frames: re-expand with a fresh decoder pass at least this often
    (which re-measures the model's error); reuse: a state that needs a new expansion takes a
    kept earlier one instead (as many recently used ones are kept as fit in ``KEEP_BYTES``,
    at least 16) when it lies within ``reuse`` times the trusted radius of that one's point
    (the motion often comes back to where it was: an expansion is a property of the decoder,
    not of the path; 0 turns this off).
    """

    def __init__(
        self,
        hook,
        *,
        dtype: torch.dtype,
        device: torch.device,
        size: float,
        tolerance: float = 1e-3,
        jacobian_tolerance: float = 1e-2,
        max_frames: int = 8,
        cubic: bool = True,
        reuse: float = 0.5,
    ) -> None:
        self.hook, self.dtype, self.device = hook, dtype, device
        self.size, self.tolerance, self.max_frames = float(size), float(tolerance), max_frames
        self.jacobian_tolerance = float(jacobian_tolerance)
        self.cubic = cubic
        self.radius = math.inf  # no error measured yet: the frame count decides
        self.stats = LocalStats()
        self.current: Expansion | None = None
        self.frames = 0
        self.reuse = float(reuse)
        self._kept: list[Expansion] = []  # expansions made, for ``reuse``, least recent first
        self._points = np.empty((0, 0))  # (n, kq) their q0

    KEEP_BYTES = 64e6  # memory for kept expansions (the least recently used go beyond it)

    def _reusable(self, q: np.ndarray) -> Expansion | None:
        """The kept expansion nearest to q when it lies within reuse * radius of q (it becomes
        the most recently used)."""
        if not self._kept or not (self.reuse > 0 and math.isfinite(self.radius)):
            return None
        dist = np.sqrt(((self._points - q) ** 2).sum(1))
        i = int(dist.argmin())
        if dist[i] > self.reuse * self.radius:
            return None
        near = self._kept.pop(i)
        self._keep(near)
        return near

    def _keep(self, expansion: Expansion) -> None:
        self._kept.append(expansion)
        size = expansion.h0.nbytes * (1 if expansion.t is None else 2)  # H0 and T dominate
        keep = max(16, int(self.KEEP_BYTES // max(size, 1)))
        del self._kept[:-keep]
        self._points = np.stack([e.q0 for e in self._kept])

    def _exact(self, q: np.ndarray, hessian: bool) -> tuple[np.ndarray, ...]:
        """The hook's x, J (and Hessian) at q as float64 NumPy arrays."""
        arg = torch.from_numpy(q).to(device=self.device, dtype=self.dtype)
        out = self.hook.hessian(arg) if hessian else self.hook(arg, torch.zeros_like(arg))[:2]
        return tuple(as_float64(t) for t in out)

    def expand(self, q: Tensor, fresh: bool = False) -> None:
        """Re-expand at q (kq,), measuring the current model's error there first; or, unless
        ``fresh``, go back to a kept expansion near q (``reuse``)."""
        q = np.array(as_float64(q))  # a copy: the expansion keeps it
        if not fresh:
            near = self._reusable(q)
            if near is not None:  # (the frame count runs on: a fresh one re-measures the error)
                self.stats.reuses += 1
                self.restore(near)
                return
        x, jac, hess = self._exact(q, hessian=True)
        if not all(math.isfinite(float(t.sum())) for t in (x, jac, hess)):
            raise FloatingPointError("the decoder gave NaN/inf kinematics")  # nothing changed
        first = self.current is None
        u = t = None
        if not first:
            d = q - self.current.q0
            dist = float(np.sqrt(d @ d))
            new = self._radius_from(q, x, jac, dist)
            if new is not None and math.isfinite(new) and new > 0:
                self.radius = min(new, 2.0 * self.radius) if math.isfinite(self.radius) else new
            # the Hessian's change along the last move: D^3x[u, ., .] (not from tiny moves,
            # where float rounding of the Hessians would dominate the difference)
            if self.cubic and dist > 0.1 * self.radius and dist > 0:
                u = d / dist
                t = (hess - self.current.h0) / dist  # (S, 3, kq, kq) D^3x[u, ., .]
        self.stats.expansions += 1
        made = Expansion(q, x, jac, hess, u, t)
        self.restore(made)
        self._keep(made)
        self.frames = 0
        if first:
            self.radius = self._probe()

    def restore(self, expansion: Expansion) -> None:
        """Go back to an earlier expansion (a step retried from a state made with it)."""
        self.current = expansion

    def _probe(self) -> float:
        """A first trusted radius, before any motion: along each coordinate, the step that
        moves the points by 5% of the object size is taken and the model's error there
        measured against the decoder (one pass per coordinate, once per simulation)."""
        e = self.current
        kq = e.q0.shape[0]
        radius = math.inf
        for i in range(kq):
            speed = float(np.sqrt((e.j0[..., i] ** 2).sum(1)).max())
            if speed <= 0:
                continue
            step = 0.05 * self.size / speed
            q = e.q0.copy()
            q[i] += step
            x, jac = self._exact(q, hessian=False)
            new = self._radius_from(q, x, jac, step)
            radius = min(radius, new if new is not None else math.inf)
        self.stats.errors.clear()  # probes, not errors of the motion
        self.stats.jacobian_errors.clear()
        return radius

    def _radius_from(
        self, q: np.ndarray, x: np.ndarray, jac: np.ndarray, dist: float
    ) -> float | None:
        """Record the model's errors at q against the decoder's x, J there and return the
        radius that would meet the tolerances (position error ~ d^3, Jacobian error ~ d^2)."""
        x_model, j_model, _ = self.model(q, None)
        err_x = float(np.sqrt(((x_model - x) ** 2).sum(1)).max()) / self.size
        scale = float(np.sqrt((jac**2).sum(1)).max()) + 1e-300
        err_j = float(np.sqrt(((j_model - jac) ** 2).sum(1)).max()) / scale
        self.stats.errors.append(err_x)
        self.stats.jacobian_errors.append(err_j)
        # Errors at the decoder's rounding level say nothing about the radius (they would
        # shrink it to almost nothing after a tiny move): keep it.
        eps = torch.finfo(self.dtype).eps
        reach = float(np.sqrt((x**2).sum(1)).max()) / self.size + 1.0
        if dist <= 0 or (err_x < 100 * eps * reach and err_j < 100 * eps):
            return None
        grow_x = (self.tolerance / max(err_x, 1e-300)) ** (1.0 / 3.0)
        grow_j = (self.jacobian_tolerance / max(err_j, 1e-300)) ** 0.5
        return 0.9 * dist * min(grow_x, grow_j)

    def needs_expansion(self, q: Tensor, within_frame: bool = False) -> bool:
        """Whether the state q is beyond the trusted radius, or (at frame boundaries) too many
        frames passed since the last expansion."""
        if self.current is None:
            return True
        d = as_float64(q) - self.current.q0
        far = float(np.sqrt(d @ d)) > self.radius
        if within_frame:
            return far
        if not math.isfinite(self.radius):  # no error measured yet: every frame
            return self.frames >= 1
        return far or self.frames >= self.max_frames

    def advance_frames(self, k: int) -> None:
        self.frames += k

    def model(
        self, q: np.ndarray, v: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """x, J and (for v) D^2x[v, v] of the model at q (float64 arrays): the quadratic
        Taylor model plus, when known, the cubic term C(d) / 6 (module docstring) from the
        third derivative along the last move's direction u."""
        e = self.current
        d = q - e.q0
        kq = d.shape[0]
        shape = e.j0.shape
        hf = e.h0.reshape(-1, kq)  # (3S kq, kq)
        j0 = e.j0.reshape(-1, kq)  # (3S, kq): 2-D products are far cheaper than stacked ones
        hd = (hf @ d).reshape(-1, kq)  # (3S, kq) H[d, .]
        x = e.x0.reshape(-1) + (j0 + 0.5 * hd) @ d
        jac = j0 + hd
        bias = None
        if v is not None:  # H[v, v] (3S,), as two matrix-vector products
            bias = (hf @ v).reshape(-1, kq) @ v
        if e.t is not None:  # the cubic term (module docstring), s = u . d, w = d - s u
            u, s = e.u, float(e.u @ d)
            tf = e.t.reshape(-1, kq)
            td = (tf @ d).reshape(-1, kq)  # (3S, kq) T[d, .]
            tdd, tud = td @ d, e.tu @ d
            tww = tdd - 2.0 * s * tud + s * s * e.tuu  # T[w, w]
            x = x + (0.5 * s * tdd - 0.5 * s * s * tud + (s**3 / 6.0) * e.tuu)
            jac = jac + (0.5 * np.outer(tww, u) + s * td - (0.5 * s * s) * e.tu)
            if v is not None:
                a = float(u @ v)
                tv = (tf @ v).reshape(-1, kq)
                tdv, tuv = td @ v, e.tu @ v
                bias = bias + (
                    a * (tdv - s * tuv)
                    - a * a * (tud - s * e.tuu)
                    + a * tdv
                    + s * (tv @ v)
                    - s * a * tuv
                )
        return (
            x.reshape(shape[:-1]),
            jac.reshape(shape),
            None if bias is None else bias.reshape(shape[:-1]),
        )

    def __call__(self, q: Tensor, qdot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, v = as_float64(q), as_float64(qdot)
        return tuple(torch.from_numpy(a) for a in self.model(q, v))
