"""Projected Newton on the incremental potential, with rigid bones on the rotation group.

A step of length h from (Q_n, V_n) is BDF2's with variable steps (w = h / h_{n-1}):
Q_{n+1} minimises the incremental potential (Kane et al. 2000; Li et al. 2020)

    Phi(Q) = 1/(2 k^2) |Q - Q_b - k V_b|_M^2 + 1/(2 k) |Q - Q_b|_{c M + D}^2 + V(Q) - f . Q,

with Q_b = a Q_n - b Q_{n-1}, V_b = a V_n - b V_{n-1}, k = c_w h (a = (1 + w)^2 / (1 + 2 w),
b = w^2 / (1 + 2 w), c_w = (1 + w) / (1 + 2 w)) and V_{n+1} = (Q_{n+1} - Q_b) / k; c the
user's damping rate, D the Rayleigh damping of the stiff energies, V every energy with the
step's viscous terms, f the loads. Backward Euler (Q_b = Q_n, V_b = V_n, k = h) starts the run
(ramped up: on h/8, then BDF2 on h/8, h/4 and h/2, so that a free fall's start lags 1/64 of
what one backward Euler step leaves), and follows an impulse or a BDF2 step that does not
converge. Both are L-stable: the stiff modes (glue, contact, rigidity) that a frame-rate step
cannot resolve are damped instead of ringing, so the iterations do not chase them.

**Coordinates.** A bone of a rigid part (one bone for the part) is a rotation and a centre,
exactly: its unknowns are a turn phi (3) and a shift (3), retracted as F <- exp([phi]x) F,
c <- c + shift (Rodrigues), so no rigidity energy holds it and a turn of any size costs Newton
nothing. Every other bone keeps its affine map (its seen directions, ``RigSpace.coordinates``)
and its rigidity energy. At an iterate the tangent basis T (12B, K) maps the unknowns to Q's
entries; the reduced Hessian is T^T (grad^2 Phi) T, with each energy's own PSD-projected
Hessian, plus, for each rigid bone, the curvature of the retraction: with
Gamma = dPhi/dF, S = sym(F Gamma^T), the second-order term of Phi(exp([phi]x) F) is
1/2 phi^T (S - tr(S) I) phi, projected to be positive semi-definite (Absil et al. 2008's
Riemannian Newton, made a descent method); it is kept over iterations while the gradient
halves. A backtracking line search on Phi along the retraction makes each iteration decrease
it, and never goes past the first state (swept at ``SWEEP`` object sizes) where a point not
in contact touches: a penalty's height is finite, and a long Newton step to a state beyond a
thin obstacle has the lower potential.

**Undamped runs** (``RigSettings(step="newton")`` with damping 0; the default takes the
midpoint step for them) get back what the steps take: after each step the velocities are
scaled so that the energy is the target, the energy after the first step plus the loads'
work (FEPR's energy constraint alone, Dinev et al. 2018), and where they cannot (a turning
point) the positions are lifted up the soft energies (``_lift``); a drag's spring, an
inelastic impulse and a contact that takes energy reset the target to the energy there.

Impacts are found on the solved step's path and on the free flight's (``_free_impact``);
cutting, bouncing, splitting steps and the stopping rules are the
:class:`~neurok_core.rigspace.integrator.Integrator`'s; a step's contact points may travel
``TRAVEL`` object sizes (5x the midpoint step's).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from .energies import Linear
from .integrator import Integrator, OutOfTime

RAMP = (0.125, 0.125, 0.25, 0.5)  # the run's first step's steps, in shares of it
CONVERGED = 1e-5  # a Newton step this small (radians; centres and axes in object sizes)
ACCEPTED = 1e-4  # the last step of a step that ran out of iterations may be this large
RESIDUAL = 1e-7  # or the reduced gradient has fallen by this factor
MAX_TURN = 0.5  # radians a rigid bone may turn in one Newton iteration
MAX_SHIFT = 0.2  # object sizes a centre (or an affine axis) may move in one iteration
MAX_RESTORE = 3.0  # the most an undamped step's velocities are scaled up by
LIFT_TOLERANCE = 1e-4  # the share of its energy an undamped step may miss before its lift
LIFTS = 3  # secant steps of a lift, at most
TRAVEL = 0.05  # object sizes a contact point may move in one step (the midpoint step's: 0.01)
CHORD = 4  # iterations per Hessian, at most, while a kept one serves
CHORD_RATE = 0.5  # a kept Hessian serves while the reduced gradient halves at each iteration


_SKEW = np.zeros((3, 3, 3))  # [e_a]x for a = 0, 1, 2
_SKEW[0, 1, 2], _SKEW[0, 2, 1] = -1.0, 1.0
_SKEW[1, 0, 2], _SKEW[1, 2, 0] = 1.0, -1.0
_SKEW[2, 0, 1], _SKEW[2, 1, 0] = -1.0, 1.0


def rodrigues(phi: np.ndarray) -> np.ndarray:
    """exp([phi]x) (L, 3, 3) of rotation vectors ``phi`` (L, 3)."""
    theta = np.linalg.norm(phi, axis=1)  # (L,)
    k = np.zeros((len(phi), 3, 3))
    k[:, 0, 1], k[:, 0, 2], k[:, 1, 2] = -phi[:, 2], phi[:, 1], -phi[:, 0]
    k = k - np.swapaxes(k, 1, 2)
    small = theta < 1e-8
    t = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - theta**2 / 6.0, np.sin(t) / t)
    b = np.where(small, 0.5 - theta**2 / 24.0, (1.0 - np.cos(t)) / t**2)
    return np.eye(3) + a[:, None, None] * k + b[:, None, None] * (k @ k)


class ProjectedNewton(Integrator):
    """BDF2 steps by projected Newton (module docstring); ``rigid`` (B,) bool: the
    bones moved as exact rigid motions (fixed bones are ignored). Otherwise the
    :class:`Integrator`'s interface: ``advance``, ``energy``, ``report``."""

    def __init__(self, space, energies, loads, *, rigid: np.ndarray, **kwargs):
        super().__init__(space, energies, loads, **kwargs)
        nb = space.num_bones
        rigid = np.asarray(rigid, dtype=bool) & ~space.fixed
        self.rigid_bones = np.flatnonzero(rigid)  # (L,)
        # the affine bones' constant columns: their seen entries (or all twelve)
        affine = (~space.fixed) & ~rigid
        full = space.moving_basis()
        owner = np.argmax(np.abs(full) > 0, axis=0) // 12  # (K0,) each column's bone
        self.affine_cols = full[:, affine[owner]]  # (12B, Ka)
        self.affine_weight = np.tile(np.array([1.0] * 9 + [1.0 / space.object_size] * 3), nb)
        self.travel = TRAVEL
        self.target = None  # the undamped run's energy to keep (None: not started)
        self._last = None  # (Q, V, h, Q_end) of the last step, for BDF2
        # a contact that takes energy (an inelastic bounce, friction, damped compression)
        self.lossy = self.bounciness < 1.0 or any(c.mu > 0 for c in self.contacts)
        self.dissipated = False  # whether one acted since the energy target was set
        self._started = False  # whether the run's first step was taken
        self.keep = self.damping == 0.0

    # -- coordinates -----------------------------------------------------------------------------
    def _tangent(self, y: np.ndarray) -> np.ndarray:
        """(12B, K) the unknowns' directions at ``y``: per rigid bone three turns
        (Q[b, :3] = F^T, dF = [e_a]x F) and three shifts, then the affine columns."""
        nb, rb = y.shape[0], self.rigid_bones
        if not len(rb):
            return self.affine_cols
        cols = np.zeros((len(rb), 6, nb, 4, 3))
        # ([e_a]x F)^T = F^T [e_a]x^T = -Q_b [e_a]x, Q_b = F^T: (L, 3, 3, 3) for a = 0, 1, 2
        turns = -np.einsum("lij,ajk->laik", y[rb, :3, :], _SKEW)
        every = np.arange(len(rb))
        cols[every, :3, rb, :3, :] = turns
        for a in range(3):
            cols[every, 3 + a, rb, 3, a] = 1.0
        rigid = cols.reshape(6 * len(rb), -1).T  # (12B, 6L)
        return np.concatenate([rigid, self.affine_cols], 1)

    def _retract(self, y: np.ndarray, step: np.ndarray) -> np.ndarray:
        """The state ``step`` (K,) away from ``y`` along the unknowns (rotations exactly)."""
        out = y.copy()
        rb = self.rigid_bones
        n = 6 * len(rb)
        if len(rb):
            phi = step[:n].reshape(-1, 6)  # (L, 6)
            turn = rodrigues(phi[:, :3])  # (L, 3, 3)
            f = np.swapaxes(y[rb, :3, :], 1, 2)  # (L, 3, 3)
            out[rb, :3, :] = np.swapaxes(turn @ f, 1, 2)
            out[rb, 3, :] += phi[:, 3:]
        if self.affine_cols.shape[1]:
            out += (self.affine_cols @ step[n:]).reshape(y.shape)
        return out

    def _rigidify(self, y: np.ndarray) -> np.ndarray:
        """``y`` with each rigid bone's F on its nearest rotation (polar decomposition)."""
        rb = self.rigid_bones
        if not len(rb):
            return y
        out = y.copy()
        u, _, vt = np.linalg.svd(np.swapaxes(y[rb, :3, :], 1, 2))
        d = np.sign(np.linalg.det(u @ vt))
        u[:, :, 2] *= d[:, None]
        out[rb, :3, :] = np.swapaxes(u @ vt, 1, 2)
        return out

    def _curvature(self, y: np.ndarray, grad: np.ndarray, project: bool = True) -> np.ndarray:
        """(L, 3, 3) each rigid bone's retraction curvature S - tr(S) I, S = sym(F Gamma^T),
        Gamma = dPhi/dF (module docstring), projected to be positive semi-definite when
        ``project``."""
        rb = self.rigid_bones
        f = np.swapaxes(y[rb, :3, :], 1, 2)  # (L, 3, 3)
        gamma = np.swapaxes(grad.reshape(y.shape)[rb, :3, :], 1, 2)  # dPhi/dF
        s = f @ np.swapaxes(gamma, 1, 2)
        s = 0.5 * (s + np.swapaxes(s, 1, 2))
        a = s - np.trace(s, axis1=1, axis2=2)[:, None, None] * np.eye(3)
        if not project:
            return a
        w, v = np.linalg.eigh(a)
        return (v * np.maximum(w, 0.0)[:, None, :]) @ np.swapaxes(v, 1, 2)

    def _extent(self, step: np.ndarray) -> tuple[float, float]:
        """(the largest turn, radians; the largest shift or affine change, object sizes) of
        a step (K,)."""
        n = 6 * len(self.rigid_bones)
        rigid = step[:n].reshape(-1, 6)
        turn = float(np.linalg.norm(rigid[:, :3], axis=1).max(initial=0.0))
        shift = float(np.abs(rigid[:, 3:]).max(initial=0.0)) / self.scale
        if n < len(step):
            affine = np.abs(self.affine_cols @ step[n:]) * self.affine_weight
            shift = max(shift, float(affine.max()))
        return turn, shift

    def _bound(self, step: np.ndarray) -> float:
        """The factor (<= 1) that keeps a step's turns within ``MAX_TURN`` radians and its
        shifts and affine changes within ``MAX_SHIFT`` object sizes."""
        turn, shift = self._extent(step)
        return min(1.0, MAX_TURN / max(turn, 1e-300), MAX_SHIFT / max(shift, 1e-300))

    def _size(self, step: np.ndarray) -> float:
        """The largest turn (radians), shift or affine change (object sizes) of a step (K,)."""
        return max(self._extent(step))

    def _reduced_mass(self, basis: np.ndarray) -> np.ndarray:
        """T^T M T (K, K) with the ridge: the metric on the unknowns at ``basis``."""
        mr = basis.T @ self.mass @ basis
        mr[np.diag_indices_from(mr)] += self.ridge
        return mr

    # -- the step --------------------------------------------------------------------------------
    def _step(self, q: np.ndarray, v: np.ndarray, t: float, h: float, depth: int = 0):
        """One BDF2 step (backward Euler where it does not continue the last step, or where
        BDF2 does not converge), or two halves where neither converges."""
        if time.monotonic() > self.deadline:
            raise OutOfTime
        for c in self.contacts:
            c.set_step(q, h)
        last = self._last  # BDF2 from the last step only where this one continues it
        history = last[:3] if last is not None and last[3] is q else None
        out = self._solve(q, v, t, h, history)
        if out is None and history is not None:  # backward Euler, the sturdier, before halving
            history = None
            out = self._solve(q, v, t, h, None)
        if out is None:
            return self._halves(q, v, t, h, depth)
        self.report.steps += 1
        self.report.backward_euler += int(history is None)
        self._last = (q, v, h, out[0])
        if self.keep and self.lossy and self.touching(out[0]):
            self.dissipated = True
        return out

    def _clear_share(self, y: np.ndarray, step: np.ndarray) -> float:
        """The share of a Newton step from ``y`` that its line search may try: up to the
        first of its states ``SWEEP`` object sizes of travel apart where a point not in
        contact at ``y`` is (a penalty has a finite height: a long step to a state beyond a
        thin obstacle has the lower potential, and Newton would take it)."""
        if not self.contacts:
            return 1.0
        end = self._retract(y, step)
        count = self._sweeps(y, end)
        if count <= 1:
            return 1.0
        touching = [c._active(y)[0] for c in self.contacts]
        k = self._entering(count - 1, lambda k: self._retract(y, (k / count) * step), touching)
        return 1.0 if k is None else k / count

    def _free_impact(self, q: np.ndarray, v: np.ndarray, h: float) -> float | None:
        """Where the free flight from (q, v) over ``h`` first meets an obstacle: the bones'
        velocities as turns and shifts (xi = (T^T M T)^-1 T^T M v), retracted along the path
        at ``SWEEP`` object sizes of travel apart (exact rotations: a spinning part's points
        do not leave its surface as a straight line in its F would make them). The solved
        step's end has the contact already pushing back, so its path meets the obstacle
        late, and a bounce timed late is too weak."""
        if not self.contacts:
            return None
        basis = self._tangent(q)
        momentum = basis.T @ (self.mass @ self._project(v).reshape(-1))
        try:
            xi = np.linalg.solve(self._reduced_mass(basis), momentum)
        except np.linalg.LinAlgError:
            return None
        end = self._retract(q, h * xi)
        count = self._sweeps(q, end)

        def path(k: int) -> np.ndarray:
            return q if k == 0 else end if k == count else self._retract(q, (k / count) * h * xi)

        k = self._entering(count, path)
        if k is None:
            return None
        return (k - 1 + self._entry_time(path(k - 1), path(k))) / count

    def _restitution(self, q1: np.ndarray, v1: np.ndarray) -> np.ndarray:
        out = super()._restitution(q1, v1)
        if out is not v1:
            self._last = None  # an impulse: the next step starts afresh (backward Euler)
            self.dissipated |= self.bounciness < 1.0
        return out

    def _solve(self, q, v, t, h, history=None):
        """Projected Newton on the step's incremental potential; None when it does not
        converge within ``iterations``. With ``history`` (Q_{n-1}, V_{n-1}, h_{n-1}) of the
        step before, BDF2's with variable steps (module docstring), else backward Euler's."""
        m = self.mass
        cm = self.damping
        v = self._project(v)
        if history is None:
            base, hh, drift = q, h, v
        else:  # x_{n+1} - a x_n + b x_{n-1} = c h v_{n+1} (and so for v), w = h_n / h_{n-1}
            qp, vp, hp = history
            w = h / hp
            a, b, c = (1 + w) ** 2 / (1 + 2 * w), w * w / (1 + 2 * w), (1 + w) / (1 + 2 * w)
            base, hh = a * q - b * qp, c * h
            drift = a * v - b * self._project(vp)
        inertia, dscale = 1.0 / hh**2, 1.0 / hh
        pull = base + hh * drift  # the momentum's predictor
        viscous = []
        for e in self.energies:
            if getattr(e, "stiff", False) and hasattr(e, "dissipation"):
                zeta = self.zeta if getattr(e, "zeta", None) is None else e.zeta
                if zeta > 0:
                    viscous.append(e.dissipation(base, dscale, zeta))
        free = self.free
        ridge = self.ridge
        damp = None

        def evaluate(yy, hessian):
            nonlocal damp
            value, grad, hess, dmat = self.potential(yy, t + h, hessian, viscous)
            if damp is None:
                damp = dmat if dmat is not None else np.zeros_like(m)
            d_in = (yy - pull).reshape(-1)
            d_q = (yy - base).reshape(-1)
            visc = cm * (m @ d_q) + damp @ d_q
            g = inertia * (m @ d_in) + dscale * visc + grad.reshape(-1)
            g[free] += inertia * ridge * d_in[free]
            merit = (
                0.5 * inertia * float(d_in @ m @ d_in)
                + 0.5 * inertia * ridge * float(d_in[free] @ d_in[free])
                + 0.5 * dscale * float(d_q @ visc)
                + value
            )
            return g, hess, merit

        y = self._rigidify(pull)
        first = previous = None
        moved = np.inf
        factor = None  # a factorised reduced Hessian of an earlier iterate, while it serves
        hessians = 0
        known = None  # (g, hess, merit) at y where the line search evaluated it there
        for _ in range(CHORD * self.iterations):
            if known is None or factor is None:
                g, hess, merit = evaluate(y, factor is None)
            else:  # a kept Hessian needs y's gradient and merit alone: the line search's
                g, hess, merit = known
            known = None
            basis = self._tangent(y)  # (12B, K)
            gr = basis.T @ g
            norm = float(np.linalg.norm(gr))
            first = norm if first is None else first
            if norm <= RESIDUAL * first or norm == 0.0:
                moved = 0.0
                break
            if factor is not None and norm > CHORD_RATE * previous:
                # the kept Hessian no longer halves the gradient: a fresh one at y
                factor = None
                g, hess, merit = evaluate(y, True)
            previous = norm
            fresh = factor is None
            if fresh:
                if hessians == self.iterations:
                    break
                hessians += 1
                self.report.jacobians += 1
                big = inertia * m + dscale * (cm * m + damp) + hess
                hr = basis.T @ big @ basis
                if len(self.rigid_bones):
                    curv = self._curvature(y, g)
                    for i in range(len(self.rigid_bones)):
                        hr[6 * i : 6 * i + 3, 6 * i : 6 * i + 3] += curv[i]
                hr[np.diag_indices_from(hr)] += inertia * ridge
                try:
                    factor = cho_factor(hr)
                except (LinAlgError, ValueError):
                    return None
            step = -cho_solve(factor, gr)
            if not np.isfinite(step).all():
                return None
            moved = self._size(step)
            if moved < CONVERGED:  # converged: a line search would only meet round-off
                break
            # bounded: a wild first iterate cannot throw the state away
            step *= self._bound(step)
            slope = float(gr @ step)
            alpha = self._clear_share(y, step)
            for _ in range(16):
                trial = self._retract(y, alpha * step)
                known = evaluate(trial, False)
                if known[2] <= merit + 1e-4 * alpha * slope:
                    break
                alpha *= 0.5
            else:  # no decrease along it: a kept Hessian is refreshed, a fresh one fails
                if fresh:
                    return None
                factor, known = None, None
                continue
            if alpha < 1.0:
                factor = None  # the model was off: a fresh Hessian next
            y = trial
            self.report.iterations += 1
            # the Newton step's own size: one the line search cut short has not converged
            moved = self._size(step)
            if moved < CONVERGED:
                break
        if moved > ACCEPTED or not np.isfinite(y).all():
            return None
        return y, (y - base) / hh

    # -- energy ------------------------------------------------------------------------------------
    def advance(self, q: np.ndarray, v: np.ndarray, t: float, h: float):
        """The :class:`Integrator`'s ``advance``; an undamped run's velocities then scaled back
        to the energy it keeps (module docstring)."""
        if self._started:
            q1, v1 = super().advance(q, v, t, h)
        else:
            # the run's first step: backward Euler on h/8, then BDF2 on h/8, h/4 and h/2, so
            # that its start's error (a free fall's position lags 1/2 h^2 g behind) is 1/64
            self._started = True
            q1, v1, done = q, v, t
            for share in RAMP:
                q1, v1 = super().advance(q1, v1, done, share * h)
                done += share * h
        if not self.keep:
            return q1, v1
        flat = v1.reshape(-1)
        kinetic = 0.5 * float(flat @ self.mass @ flat)
        energy = self.energy(q1, v1, t + h)
        loads = self.loads(t + 0.5 * h)
        if self.target is None or any(not isinstance(e, Linear) for e in loads) or self.dissipated:
            # the first step (backward Euler: under a steady load it takes 1/2 |h a|_M^2,
            # which given back would speed up a free fall), a drag's spring, or a contact that
            # took energy: the energy from here on
            self.target = energy
            self.dissipated = False
            return q1, v1
        self.target += sum(-(e(q1, False)[0] - e(q, False)[0]) for e in loads)
        want = kinetic + self.target - energy
        if kinetic > 0 and want > 0:
            scale = min(math.sqrt(want / kinetic), MAX_RESTORE)
            v1 = v1 * scale
            energy += (scale**2 - 1.0) * kinetic
        short = self.target - energy
        if short > LIFT_TOLERANCE * abs(self.target):
            q1 = self._lift(q1, v1, t + h, short)
        return q1, v1

    def _lift(self, q: np.ndarray, v: np.ndarray, t: float, short: float) -> np.ndarray:
        """``q`` moved up its soft energies (gravity, the user's stiffness: not the stiff
        ones, whose modes the step damps) by the least change in the metric M that gives
        back ``short`` J the velocities could not (near a turning point, where the kinetic
        energy is small): q + lambda T M_r^-1 T^T grad U, lambda by secant steps on the
        total energy (FEPR's energy constraint on the positions, Dinev et al. 2018)."""
        soft = [e for e in self.energies if not getattr(e, "stiff", False)]
        target = self.target
        for _ in range(LIFTS):
            grad = sum((e(q, False)[1] for e in soft), np.zeros_like(q)).reshape(-1)
            basis = self._tangent(q)
            g = basis.T @ grad
            mr = self._reduced_mass(basis)
            mr[np.diag_indices_from(mr)] += 1e-12 * max(float(np.trace(mr)), 1e-300)
            d = np.linalg.solve(mr, g)
            rate = float(g @ d)  # dU / dlambda
            if not rate > 0:
                return q
            q = self._retract(q, (short / rate) * d)
            short = target - self.energy(q, v, t)
            if abs(short) <= LIFT_TOLERANCE * abs(target):
                break
        return q
