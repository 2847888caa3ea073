"""Implicit steps of the rig space's equations of motion, M Q'' = -grad V + f (design section 12).

With the bones' affine maps as coordinates the metric kron(M, I_3) is constant, so a step is
the minimisation of an incremental potential, solved by Newton's method with a backtracking
line search on exact gradients and PSD-projected Hessians:

- **implicit midpoint** (symplectic: no energy drift of the free motion) while nothing touches:
  the midpoint Y minimises
  Phi(Y) = 2/h^2 |Y - Q_n - h/2 V_n|_M^2 + 1/h |Y - Q_n|_{c M + D}^2 + V(Y) - f . Y,
  then Q_{n+1} = 2 Y - Q_n, V_{n+1} = 4 (Y - Q_n) / h - V_n;
- **backward Euler** where contact acts (at the step's start or its end): Q_{n+1} minimises
  1/(2 h^2) |Q - Q_n - h V_n|_M^2 + 1/(2h) |Q - Q_n|_{c M + D}^2 + V(Q) - f . Q, so a stiff
  contact takes the approaching speed away instead of reflecting it (the midpoint rule turns
  an infinitely stiff contact into a perfectly elastic one).

c is the user's damping rate (kinetic energy decays as exp(-2 c t)); D = sum_e beta_e grad^2 E_e
over the stiff energies (rigidity, stretching, glue, contact), beta_e = 2 zeta / omega_e:
Rayleigh damping of their own modes at the damping ratio zeta, which leaves the motions they do
not resist (a hinge's swing, a cloth's bending) undamped. A step whose Newton iterations do not
converge is split in two, at most ``max_halvings`` times, then the run stops with an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, lu_factor, lu_solve

from ..errors import SimulationError
from .energies import flat_kron

CONVERGED = 1e-7  # a Newton step this small (axes; centres in object sizes) has converged
ACCEPTED = 1e-4  # the last step of a step that ran out of iterations may be this large
TRAVEL = 0.01  # object sizes a contact point may move in one step
MAX_SPLIT = 64  # most steps a substep is split into for that


@dataclass
class StepReport:
    iterations: int = 0
    halvings: int = 0
    backward_euler: int = 0
    steps: int = 0


class Integrator:
    """Steps a state (Q, V) of a :class:`~neurok_core.rigspace.space.RigSpace` under
    ``energies`` (each called as ``energy(Q, hessian)``) and ``loads(t)`` (the time-dependent
    linear energies: forces, drags)."""

    def __init__(
        self,
        space,
        energies,
        loads,
        *,
        damping: float,
        zeta: float,
        contacts=(),
        bounciness: float = 0.0,
        rest_speed: float = 0.0,
        iterations: int = 12,
        halvings: int = 6,
    ):
        self.space = space
        self.energies = list(energies)
        self.loads = loads
        self.contacts = list(contacts)
        self.damping = damping
        self.zeta = zeta
        self.bounciness = bounciness
        self.rest_speed = rest_speed
        self.iterations = iterations
        self.halvings = halvings
        nb = space.num_bones
        free = np.repeat(~space.fixed, 12)  # (12B,)
        self.free = np.flatnonzero(free)
        self.mass = flat_kron(space.moments)
        ridge = 1e-9 * max(float(np.trace(space.moments)) / max(4 * nb, 1), 1e-300)
        self.ridge = ridge * np.eye(len(self.free))  # a bone no vertex follows keeps its place
        self.report = StepReport()
        self.scale = space.object_size

    # -- energy --------------------------------------------------------------------------------
    def potential(self, q: np.ndarray, t: float, hessian: bool, extra=(), start=None):
        """(V, grad (B, 4, 3), H (12B, 12B), D (12B, 12B)) of every energy at ``q`` (and the
        step's viscous terms ``extra``); D is the Rayleigh damping matrix of the stiff
        energies that have no viscous term of their own (glue, contact, drags). With the
        step's ``start``, ``q`` is a midpoint and the energies that have one give their
        discrete gradient across the step (H then their Jacobian, V is left out)."""
        n = 12 * q.shape[0]
        value, grad = 0.0, np.zeros_like(q)
        hess = np.zeros((n, n)) if hessian else None
        damp = np.zeros((n, n)) if hessian else None
        for energy in [*self.energies, *self.loads(t), *extra]:
            if start is not None and hasattr(energy, "discrete_gradient"):
                g, h = energy.discrete_gradient(start, q, hessian)
            else:
                v, g, h = energy(q, hessian)
                value += v
            grad += g
            if hessian and h is not None:
                hess += h
                if getattr(energy, "stiff", False) and not hasattr(energy, "dissipation"):
                    zeta = getattr(energy, "zeta", None)
                    zeta = self.zeta if zeta is None else zeta
                    damp += (2.0 * zeta / energy.omega) * h
        return value, grad, hess, damp

    def energy(self, q: np.ndarray, v: np.ndarray, t: float) -> float:
        """Kinetic + potential energy (J) of the state, without the time-dependent loads."""
        flat = v.reshape(-1)
        kinetic = 0.5 * float(flat @ self.mass @ flat)
        return kinetic + sum(e(q, False)[0] for e in self.energies)

    def _step_size(self, flat: np.ndarray) -> float:
        """The largest change of a bone's axes (dimensionless) or of its centre (in object
        sizes) in a flat step (12B,)."""
        step = flat.reshape(-1, 4, 3)
        return max(float(np.abs(step[:, :3]).max()), float(np.abs(step[:, 3]).max()) / self.scale)

    def _rigid_velocities(self, q: np.ndarray) -> np.ndarray:
        """(12B, 6L) the velocities of the moving bones that keep them rigid at ``q``: for
        each, the three turns F' = [e_a]x F and the three translations c' = e_a."""
        live = np.flatnonzero(~self.space.fixed)
        out = np.zeros((q.size, 6 * len(live)))
        eye = np.eye(3)
        for n, b in enumerate(live):
            f = q[b, :3, :].T
            for a in range(3):
                turn = np.cross(eye[a][:, None], f, axis=0)  # [e_a]x F, column by column
                col = np.zeros((q.shape[0], 4, 3))
                col[b, :3, :] = turn.T
                out[:, 6 * n + a] = col.reshape(-1)
                col = np.zeros((q.shape[0], 4, 3))
                col[b, 3, a] = 1.0
                out[:, 6 * n + 3 + a] = col.reshape(-1)
        return out

    # -- steps ---------------------------------------------------------------------------------
    def touching(self, q: np.ndarray) -> bool:
        return any(c.touching(q) for c in self.contacts)

    def advance(self, q: np.ndarray, v: np.ndarray, t: float, h: float):
        """(Q, V) after ``h`` seconds from time ``t``, in as many equal steps as keep every
        contact point's motion per step under ``TRAVEL`` object sizes (no point passes
        through a thin obstacle, or a part, within one step)."""
        speed = max((c.speed(v) for c in self.contacts), default=0.0)
        count = int(min(np.ceil(speed * h / (TRAVEL * self.scale)), MAX_SPLIT)) or 1
        for i in range(count):
            q, v = self.step(q, v, t + i * h / count, h / count)
        return q, v

    def step(self, q: np.ndarray, v: np.ndarray, t: float, h: float, depth: int = 0):
        """(Q, V) after a step of ``h`` seconds from time ``t``."""
        for c in self.contacts:
            c.set_step(q, h)
        euler = self.touching(q)
        out = self._solve(q, v, t, h, euler)
        if out is not None and not euler and self.touching(out[0]):
            euler = True
            out = self._solve(q, v, t, h, euler)
        if out is None:
            if depth >= self.halvings:
                raise SimulationError(
                    f"the motion could not be integrated at t = {t:.3f} s (the implicit step "
                    "did not converge after halving it); lower the forces or the speeds"
                )
            self.report.halvings += 1
            q1, v1 = self.step(q, v, t, h / 2, depth + 1)
            return self.step(q1, v1, t + h / 2, h / 2, depth + 1)
        self.report.steps += 1
        self.report.backward_euler += int(euler)
        if euler:
            out = out[0], self._restitution(v, *out)
        return out

    def _restitution(self, v0: np.ndarray, q1: np.ndarray, v1: np.ndarray) -> np.ndarray:
        """Velocities after the impacts of a backward Euler step (which stops what it meets):
        every contact that began in the step, approaching faster than ``rest_speed``, leaves
        at ``bounciness`` times its approach speed, by the least impulse (in the metric M) that
        gives all of them their normal speeds, V1 += M^-1 J^T lambda."""
        rows, need = [], []
        flat0, flat1 = v0.reshape(-1, 3), v1.reshape(-1, 3)
        for c in self.contacts:
            idx, _, g, e = c._active(q1)
            new = ~np.isin(idx, c.start_active)
            if not new.any():
                continue
            g, e = g[new], e[new]
            n = g / np.maximum(np.linalg.norm(g, axis=1), 1e-12)[:, None]
            before = ((e @ flat0) * n).sum(1)  # (R,) normal speeds at the step's start
            after = ((e @ flat1) * n).sum(1)
            impact = before < -self.rest_speed
            want = -self.bounciness * before - after
            hit = impact & (want > 0)
            if hit.any():
                rows.append((e[hit][:, :, None] * n[hit][:, None, :]).reshape(int(hit.sum()), -1))
                need.append(want[hit])
        if not rows:
            return v1
        basis = self._rigid_velocities(q1)  # (12B, 6L): impulses move bones rigidly
        jac = np.concatenate(rows) @ basis  # (R, 6L)
        mr = basis.T @ self.mass @ basis
        mr += 1e-12 * np.trace(mr) / len(mr) * np.eye(len(mr))
        minv_jt = cho_solve(cho_factor(mr), jac.T)  # (6L, R)
        lam = np.linalg.lstsq(jac @ minv_jt, np.concatenate(need), rcond=1e-10)[0]
        out = v1.reshape(-1) + basis @ (minv_jt @ lam)
        return out.reshape(v1.shape)

    def _solve(self, q, v, t, h, euler: bool):
        """Newton on the step's equations; None when it does not converge.

        Backward Euler minimises its incremental potential (a line search on it); the midpoint
        step solves its equations with the discrete gradients (not a minimisation: a line
        search on the residual's norm)."""
        free = self.free
        m = self.mass
        if euler:
            inertia, pull, t_eval = 1.0 / h**2, q + h * v, t + h
            dscale = 1.0 / h
        else:
            inertia, pull, t_eval = 4.0 / h**2, q + 0.5 * h * v, t + 0.5 * h
            dscale = 2.0 / h
        start = None if euler else q
        y = pull.copy()  # the predictor (momentum); fixed bones have no velocity
        cm = self.damping
        # viscous terms of the stiff energies that damp their own strain rates (objective)
        viscous = []
        for e in self.energies:
            if getattr(e, "stiff", False) and hasattr(e, "dissipation"):
                zeta = self.zeta if getattr(e, "zeta", None) is None else e.zeta
                if zeta > 0:
                    viscous.append(e.dissipation(q, dscale * 2.0 * zeta / e.omega))
        weight = np.tile(np.array([1.0] * 9 + [self.scale] * 3), q.shape[0])[free]

        def residual(yy, damp, hessian):
            value, grad, hess, dmat = self.potential(yy, t_eval, hessian, viscous, start)
            damp = dmat if damp is None else damp  # held over the step: a fixed merit
            d_in = (yy - pull).reshape(-1)
            d_q = (yy - q).reshape(-1)
            g = inertia * (m @ d_in) + dscale * (cm * (m @ d_q) + damp @ d_q) + grad.reshape(-1)
            if euler:
                merit = (
                    0.5 * inertia * float(d_in @ m @ d_in)
                    + 0.5 * dscale * float(d_q @ (cm * (m @ d_q) + damp @ d_q))
                    + value
                )
            else:
                merit = 0.5 * float(np.sum((g[free] * weight) ** 2))
            return g, hess, damp, merit

        moved = np.inf
        damp = None
        for _ in range(self.iterations):
            g, hess, damp, m0 = residual(y, damp, True)
            big = inertia * m + dscale * (cm * m + damp) + hess
            gf = g[free]
            hf = big[np.ix_(free, free)] + inertia * self.ridge
            try:
                if euler:
                    step = -cho_solve(cho_factor(hf), gf)
                else:
                    step = -lu_solve(lu_factor(hf, check_finite=True), gf)
            except (LinAlgError, ValueError):
                return None
            if not np.isfinite(step).all():
                return None
            full = np.zeros(y.size)
            full[free] = step
            # bounded: a Newton step moves no bone by more than a fifth of the object (or turns
            # its axes by more than 0.2), so that a wild first iterate cannot throw the state away
            size = self._step_size(full)
            if size > 0.2:
                full *= 0.2 / size
            # Armijo: along a Newton direction the residual's squared norm falls at rate 2 m0
            slope = float(full[free] @ gf) if euler else -2.0 * m0
            alpha = 1.0
            for _ in range(12):
                trial = y + alpha * full.reshape(y.shape)
                if residual(trial, damp, False)[3] <= m0 + 1e-4 * alpha * slope:
                    break
                alpha *= 0.5
            else:
                trial = y + alpha * full.reshape(y.shape)
            y = trial
            self.report.iterations += 1
            moved = self._step_size(alpha * full)
            if moved < CONVERGED:
                break
        else:
            if moved > ACCEPTED:
                return None
        if not np.isfinite(y).all():
            return None
        if euler:
            return y, (y - q) / h
        return 2.0 * y - q, 4.0 * (y - q) / h - v
