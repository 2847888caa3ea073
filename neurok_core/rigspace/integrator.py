"""Implicit steps of the rig space's equations of motion, M Q'' = -grad V + f (design section 12).

With the bones' affine maps as coordinates the metric kron(M, I_3) is constant, so a step is a
Newton solve of small dense systems:

- **the midpoint step** while no contact presses: with Y the midpoint, Q_{n+1} = 2 Y - Q_n,
  V_{n+1} = 4 (Y - Q_n) / h - V_n, and the force the *discrete gradient* of each energy across
  the step (its own for the rigidity and the springs, Gonzalez's for the contact, the plain
  gradient at Y for the quadratic and linear ones), so that an undamped step keeps the energy
  exactly; Newton on its residual (the Jacobians are not symmetric) with a line search on the
  residual's norm;
- **backward Euler** where a contact presses at the step's start or its end (unless the contact
  is perfectly elastic): Q_{n+1} minimises 1/(2 h^2) |Q - Q_n - h V_n|_M^2 + 1/(2h) |Q -
  Q_n|_{c M + D}^2 + V(Q) - f . Q (PSD-projected Hessians, a line search on it), so that a
  sustained contact settles;
- **impacts**: a step in which a point enters a contact is cut at the moment it gets there,
  where an impulse gives it ``bounciness`` times its approach speed (``_restitution``). The
  step's path is swept for them (its states at every ``SWEEP`` object sizes of the fastest
  point's travel), so that no point passes through a thin obstacle, or a part, within a step
  however long the step is; a step's length is then set by its accuracy (``travel``: the
  interpolated moment of an impact within a step whose end the contact already pushes back
  is late by a share of the step, and its bounce with it, so these steps stay short).

c is the user's damping rate (kinetic energy decays as exp(-2 c t)); the stiff energies damp
their own modes at the ratio ``zeta``: rigidity, stretching and contact compression through
their strain rates (viscous terms of the step), glue and drags by D = sum_e 2 zeta / omega_e
grad^2 E_e (Rayleigh), which leaves the motions they do not resist (a hinge's swing, a cloth's
bending) undamped. A step whose Newton iterations do not converge is split in two, at most
``max_halvings`` times, then the run stops with an error.

The Jacobian (its factorisation) is computed at an iterate and kept for the next ones, and for
the next step of the same length and loads, while the residual halves at every iteration
(a chord step: the same solution, at a fraction of the cost where the Hessians of many springs
dominate); where it does not, it is computed afresh at that iterate.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy.linalg import LinAlgError, cho_factor, cho_solve, lu_factor, lu_solve, solve_triangular

from ..errors import SimulationError
from .energies import flat_kron

CONVERGED = 1e-7  # a Newton step this small (axes; centres in object sizes) has converged
ACCEPTED = 1e-4  # the last step of a step that ran out of iterations may be this large
RESIDUAL = 1e-6  # or the step's equations' residual has fallen by this factor
CHORD = 4  # iterations per Jacobian computed, at most, when a kept Jacobian serves
CHORD_RATE = 0.5  # a kept Jacobian serves while the residual falls by this at each iteration
TRAVEL = 0.01  # object sizes a contact point may move in one step (``Integrator.travel``)
MAX_SPLIT = 64  # most steps a substep is split into for that
SWEEP = 0.01  # object sizes a contact point moves between the states a step's path is swept at
MAX_SWEEP = 64  # most states a step's path is swept at
SWEEP_BATCH = 8  # states of a sweep whose contacts are found in one query
TOI_PASSES = 3  # interpolations of the moment an impact happens within a step
SHORTEST_CUT = 1e-6  # a step's share shorter than this is not cut off (impacts, ``step``)
MAX_IMPACTS = 8  # impacts a step is cut at
IMPACT_DEPTH = 0.25  # in contact margins: how close a point that bounces is to its contact
IMPULSE_PASSES = 4  # solves of an impact's impulse, each with the points it drove in


def impulse(jac, lower, xi, bounciness: float, rest_speed: float, passes: int = IMPULSE_PASSES):
    """The change of the joints' velocities xi (K,) at an impact (``Integrator._restitution``),
    or None where no point approaches faster than ``rest_speed``. ``jac`` (R, K): the near
    points' normal speeds on xi; ``lower``: the Cholesky factor L of the metric T^T M T.
    Every point approaching faster than ``rest_speed`` leaves at ``bounciness`` times its
    approach speed, by the least change in the metric (|L^T dxi|): dxi = L^-T y, y the
    least-squares (least-norm) solution of (J L^-T) y = need - speed. The impulse is passed
    on (``passes`` solves at most; one for bounciness 1, whose energy stopping the driven
    points would take): a point it makes approach faster than ``rest_speed`` joins it,
    stopped (normal speed 0), unless that would leave more kinetic energy than the last solve
    (a bouncy hit on a body moving away: its target speed was taken against that motion)."""
    speed = jac @ xi  # (R,) normal speeds (< 0: approaching)
    hit = speed < -rest_speed
    if not hit.any():
        return None
    need = np.where(hit, -bounciness * speed, 0.0)  # the speeds they leave at
    scaled = solve_triangular(lower, jac.T, lower=True).T  # (R, K) J L^-T
    change = None
    for _ in range(passes if bounciness < 1.0 else 1):
        sel = np.flatnonzero(hit)
        y = np.linalg.lstsq(scaled[sel], need[sel] - speed[sel], rcond=1e-10)[0]
        passed = solve_triangular(lower.T, y, lower=False)
        if change is not None and _norm(lower, xi + passed) > _norm(lower, xi + change):
            break
        change = passed
        pushed = (speed + jac @ change < -rest_speed) & ~hit
        if not pushed.any():
            break
        hit |= pushed
    return change


def _norm(lower: np.ndarray, xi: np.ndarray) -> float:
    """|L^T xi|: the kinetic energy's square root (x sqrt 2) of the joints' velocities xi
    (T^T M T = L L^T)."""
    return float(np.linalg.norm(lower.T @ xi))


class OutOfTime(Exception):
    """The run's deadline passed before an implicit step (caught by the simulation, which
    stops there with the frames so far)."""


@dataclass
class StepReport:
    iterations: int = 0
    halvings: int = 0
    backward_euler: int = 0
    steps: int = 0
    jacobians: int = 0


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
        deadline: float | None = None,
    ):
        self.space = space
        self.energies = list(energies)
        self.loads = loads
        self.contacts = list(contacts)
        for c in self.contacts:  # its queries also serve the impacts' (``_restitution``)
            wide = max(c.wide, c.reach * (1.0 + IMPACT_DEPTH))
            if wide != c.wide:
                c.wide, c._recent = wide, []  # answers kept at the narrower reach go
        self.damping = damping
        self.zeta = zeta
        self.bounciness = bounciness
        self.rest_speed = rest_speed
        self.iterations = iterations
        self.halvings = halvings
        # a ``time.monotonic()`` instant checked before every implicit step (halves too)
        self.deadline = math.inf if deadline is None else float(deadline)
        nb = space.num_bones
        free = np.repeat(~space.fixed, 12)  # (12B,)
        self.free = np.flatnonzero(free)
        # the coordinates that move: the moving bones' entries, or (where a bone's vertices
        # do not extend along some direction) an orthonormal basis of those that move a vertex
        self.basis = space.coordinates()  # (12B, K) or None
        flat_weight = np.tile(np.array([1.0] * 9 + [space.object_size] * 3), nb)
        if self.basis is None:
            self.weight = flat_weight[self.free]
        else:
            self.weight = np.abs(self.basis).T @ flat_weight / np.abs(self.basis).sum(0)
        self.mass = flat_kron(space.moments)
        # a tiny extra mass on every coordinate: a bone no vertex follows keeps its place
        self.ridge = 1e-9 * max(float(np.trace(space.moments)) / max(4 * nb, 1), 1e-300)
        self._start_values: dict[int, float] = {}  # V(Q_n) of the ``gonzalez`` energies
        self._factor = None  # (step key, factorised Jacobian, damping matrix) of the last step
        self.report = StepReport()
        self.scale = space.object_size
        self.travel = TRAVEL

    # -- the moving coordinates ----------------------------------------------------------------
    def _reduce(self, flat: np.ndarray) -> np.ndarray:
        """A flat gradient (12B,) on the moving coordinates (K,)."""
        return flat[self.free] if self.basis is None else self.basis.T @ flat

    def _reduce_matrix(self, matrix: np.ndarray) -> np.ndarray:
        """A (12B, 12B) matrix on the moving coordinates (K, K)."""
        if self.basis is None:
            return matrix[np.ix_(self.free, self.free)]
        return self.basis.T @ matrix @ self.basis

    def _expand(self, step: np.ndarray) -> np.ndarray:
        """A step (K,) of the moving coordinates as a flat step (12B,)."""
        if self.basis is not None:
            return self.basis @ step
        full = np.zeros(12 * self.space.num_bones)
        full[self.free] = step
        return full

    def _project(self, v: np.ndarray) -> np.ndarray:
        """Velocities (B, 4, 3) on the moving coordinates."""
        if self.basis is None:
            return v
        return (self.basis @ (self.basis.T @ v.reshape(-1))).reshape(v.shape)

    # -- energy --------------------------------------------------------------------------------
    def potential(self, q: np.ndarray, t: float, hessian: bool, extra=(), start=None):
        """(V, grad (B, 4, 3), H (12B, 12B), D (12B, 12B)) of every energy at ``q`` (and the
        step's viscous terms ``extra``); D is the Rayleigh damping matrix of the stiff
        energies that have no viscous term of their own (glue, drags). With the step's
        ``start``, ``q`` is a midpoint and every energy gives its discrete gradient across the
        step: its own (``discrete_gradient``), or, for the contact (``gonzalez``), the
        midpoint gradient corrected along the step (Gonzalez 1996, in the metric M):
        grad V(y) + (V(q1) - V(q0) - grad V(y) . d) / (d^T M d) M d, d = q1 - q0; H is then
        the energies' Jacobian (the contact's without the correction's) and V is left out."""
        n = 12 * q.shape[0]
        value, grad = 0.0, np.zeros_like(q)
        hess = np.zeros((n, n)) if hessian else None
        damp = np.zeros((n, n)) if hessian else None
        # a viscous term on its energy's own rows goes with it (one set of products)
        partners = {id(e.parent): e for e in extra if getattr(e, "parent", None) is not None}
        merged = set()
        for energy in [*self.energies, *self.loads(t), *extra]:
            if id(energy) in merged:
                continue
            partner = partners.get(id(energy)) if start is not None else None
            if partner is not None:
                g, h = energy.discrete_gradient(start, q, hessian, also=partner)
                merged.add(id(partner))
            elif start is not None and hasattr(energy, "discrete_gradient"):
                g, h = energy.discrete_gradient(start, q, hessian)
            else:
                v, g, h = energy(q, hessian)
                value += v
                if start is not None and getattr(energy, "gonzalez", False):
                    fix, jac = self._correction(energy, start, q, v, g, h if hessian else None)
                    g = g + fix
                    if hessian:
                        h = h + jac
            grad += g
            if hessian and h is not None:
                hess += h
                if getattr(energy, "stiff", False) and not hasattr(energy, "dissipation"):
                    damp += (2.0 * self.zeta / energy.omega) * h
        return value, grad, hess, damp

    def _correction(self, energy, start, y, value, grad, hess=None):
        """The Gonzalez correction (``potential``) c M d of ``energy`` across the step
        ``start`` -> q1 = 2 y - start (d = q1 - start), whose midpoint value and gradient are
        ``value`` and ``grad``, c = (V(q1) - V(q0) - grad . d) / (d^T M d); with the midpoint
        Hessian ``hess``, also its Jacobian in y: M d (x) dc/dy + 2 c M, where
        dc/dy = (2 grad V(q1) - H d - 2 grad - 4 c M d) / (d^T M d)."""
        d = 2.0 * (y - start)
        flat = d.reshape(-1)
        md = self.mass @ flat
        norm = float(flat @ md)
        if norm <= 1e-300:
            return np.zeros_like(d), (np.zeros_like(self.mass) if hess is not None else None)
        v1, g1, _ = energy(2.0 * y - start, False)
        v0 = self._start_values.get(id(energy))
        if v0 is None:  # once per step (the step's start does not move)
            v0 = self._start_values[id(energy)] = energy(start, False)[0]
        c = (v1 - v0 - float((grad * d).sum())) / norm
        fix = (c * md).reshape(d.shape)
        if hess is None:
            return fix, None
        dc = (2.0 * g1.reshape(-1) - hess @ flat - 2.0 * grad.reshape(-1) - 4.0 * c * md) / norm
        return fix, np.outer(md, dc) + 2.0 * c * self.mass

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

    # -- steps ---------------------------------------------------------------------------------
    def touching(self, q: np.ndarray, v: np.ndarray | None = None) -> bool:
        """Whether a contact acts at ``q`` (with velocities ``v``: one that is not clearly
        leaving, faster than ``rest_speed``, as after a bounce)."""
        return any(c.touching(q, v, self.rest_speed) for c in self.contacts)

    def advance(self, q: np.ndarray, v: np.ndarray, t: float, h: float):
        """(Q, V) after ``h`` seconds from time ``t``, in as many equal steps as keep every
        contact point's motion per step under ``travel`` object sizes (the step's accuracy;
        impacts within a step are found by sweeping its path: ``step``). The count comes from
        the points' speeds at the start; a step in which they move more than twice that (an
        object at rest that the load accelerates) is taken again in shorter steps, down to
        ``h / MAX_SPLIT``."""
        speed = max((c.speed(v) for c in self.contacts), default=0.0)
        count = int(min(np.ceil(speed * h / (self.travel * self.scale)), MAX_SPLIT)) or 1
        dt, shortest = h / count, h / MAX_SPLIT
        done = 0.0
        while h - done > 1e-9 * h:
            dt = min(dt, h - done)
            q1, v1 = self.step(q, v, t + done, dt)
            moved = max((c.travel(q, q1) for c in self.contacts), default=0.0)
            if moved > 2.0 * self.travel * self.scale and dt > shortest * (1.0 + 1e-9):
                dt = max(dt * self.travel * self.scale / moved, shortest)
                continue
            q, v = q1, v1
            done += dt
        return q, v

    def step(self, q: np.ndarray, v: np.ndarray, t: float, h: float, impacts: int = 0):
        """(Q, V) after a step of ``h`` seconds from time ``t``. A step in which points hit an
        obstacle is cut at the moment they reach it (linearly interpolated, ``TOI_PASSES``
        times), where they bounce (``_restitution``); the rest of the step follows."""
        q1, v1 = self._step(q, v, t, h)
        if not self.contacts:
            return q1, v1
        cut = 1.0
        for n in range(TOI_PASSES):
            frac = self._impact_time(q, q1)
            free = self._free_impact(q, v, h) if n == 0 else None
            if free is not None and (frac is None or free < frac):
                frac = free  # the free flight meets the obstacle first
            # an impact at the step's start, or a cut within rounding of it, is no cut: a
            # step of 1e-16 s turns the rounding of its positions into velocities (the
            # gripper's fingers gained 31% of their energy in two such steps)
            if frac is None or cut * frac < SHORTEST_CUT:
                break
            cut *= frac
            q1, v1 = self._step(q, v, t, cut * h)
        v1 = self._restitution(q1, v1)
        if 1.0 - cut < SHORTEST_CUT:  # what is left of the step is rounding
            return q1, v1
        if impacts < MAX_IMPACTS:
            return self.step(q1, v1, t + cut * h, (1.0 - cut) * h, impacts + 1)
        # too many impacts in one step: finish it without cutting
        q1, v1 = self._step(q1, v1, t + cut * h, (1.0 - cut) * h)
        return q1, self._restitution(q1, v1)

    def _free_impact(self, q: np.ndarray, v: np.ndarray, h: float) -> float | None:
        """The share of a step of ``h`` from (q, v) at which a point meets an obstacle in
        free flight (None: not found, or not known for this step; ``newton_step``'s)."""
        return None

    def _impact_time(self, q0: np.ndarray, q1: np.ndarray) -> float | None:
        """The share of the step from ``q0`` to ``q1`` at which the first point that enters
        an obstacle's contact, having not touched it at the start, comes within half
        ``IMPACT_DEPTH`` margins of it (None: no such point). The path is swept at states
        ``SWEEP`` object sizes of the fastest point's travel apart (linear in Q), so that a
        point that goes in and out again within the step (through a thin floor) is found;
        where a point is in at the first of them, the moment is linearly interpolated
        (``_entry_time``), else it is the last state clear of the obstacle."""
        count = self._sweeps(q0, q1)

        def path(k: int) -> np.ndarray:
            return q0 if k == 0 else q1 if k == count else q0 + (k / count) * (q1 - q0)

        k = self._entering(count, path)
        if k is None:
            return None
        if k > 1:
            # the step's end state had the contact acting: its path is no free flight,
            # so the step stops at the last state clear of the obstacle, from where the
            # rest of it finds the moment within one sweep's travel
            return (k - 1) / count
        return self._entry_time(q0, path(1)) / count

    def _entering(self, count: int, state, known=None) -> int | None:
        """The first k of 1..``count`` at whose state ``state(k)`` (B, 4, 3) a point not
        among those each contact has in ``known`` (its points in contact at the step's start
        by default) is in contact; None where there is none. ``SWEEP_BATCH`` states at a
        time, each batch's points in one query per contact (``Contact.entering``)."""
        if known is None:
            known = [c.start_active for c in self.contacts]
        for first in range(1, count + 1, SWEEP_BATCH):
            states = np.stack([state(k) for k in range(first, min(first + SWEEP_BATCH, count + 1))])
            found = [c.entering(states, kn) for c, kn in zip(self.contacts, known, strict=True)]
            found = [i for i in found if i is not None]
            if found:
                return first + min(found)
        return None

    def _sweeps(self, q0: np.ndarray, q1: np.ndarray) -> int:
        """How many states (at least one) sweep the path from ``q0`` to ``q1``: one every
        ``SWEEP`` object sizes of the contact point that moves most, at most ``MAX_SWEEP``."""
        travel = max((c.travel(q0, q1) for c in self.contacts), default=0.0)
        return int(min(np.ceil(travel / (SWEEP * self.scale)), MAX_SWEEP)) or 1

    def _entry_time(self, q0: np.ndarray, q1: np.ndarray) -> float | None:
        """``_impact_time`` between two states of a step, by linear interpolation of the
        distances of the points in contact at ``q1`` that were not at the step's start."""
        first = None
        for c in self.contacts:
            idx, depth, _, _ = c._active(q1)
            new = ~np.isin(idx, c.start_active)
            if not new.any():
                continue
            idx, depth = idx[new], depth[new]
            aim = 0.5 * IMPACT_DEPTH * c.reach  # above the threshold
            rows = c.points.rows[idx]
            x0 = rows @ q0.reshape(-1, 3)
            found, d0, _, _ = c.obstacle.entries(q0, x0, rows, c.reach + 1e3 * self.scale)
            before = np.full(len(idx), np.inf)
            before[found] = d0
            gap = before - c.points.threshold[idx] - aim  # > 0: farther at the start
            ahead = np.isfinite(gap) & (gap > 0)
            frac = np.zeros(len(gap))
            frac[ahead] = gap[ahead] / (gap[ahead] + depth[ahead] + aim)
            frac = float(frac.min())
            first = frac if first is None else min(first, frac)
        return first

    def _step(self, q: np.ndarray, v: np.ndarray, t: float, h: float, depth: int = 0):
        """One implicit step: the midpoint step while nothing touches, backward Euler where
        a contact acts at its start or end (it stops what it meets instead of reflecting it)
        unless the contact is perfectly elastic (bounciness 1: the midpoint step with the
        contact's discrete gradient keeps the energy), or, where Newton's iterations do not
        converge, two halves. Raises OutOfTime once the deadline has passed."""
        if time.monotonic() > self.deadline:
            raise OutOfTime
        for c in self.contacts:
            c.set_step(q, h)
        elastic = self.bounciness >= 1.0  # nothing may damp: the midpoint step throughout
        euler = not elastic and self.touching(q, v)
        out = self._solve(q, v, t, h, euler)
        if out is not None and not euler and not elastic and self.touching(out[0]):
            euler = True
            out = self._solve(q, v, t, h, euler)
        if out is None:
            return self._halves(q, v, t, h, depth)
        self.report.steps += 1
        self.report.backward_euler += int(euler)
        return out

    def _halves(self, q: np.ndarray, v: np.ndarray, t: float, h: float, depth: int):
        """A step that did not converge, taken again as two halves (``_step``); after
        ``halvings`` of them, a SimulationError."""
        if depth >= self.halvings:
            raise SimulationError(
                f"the motion could not be integrated at t = {t:.3f} s (the implicit step "
                "did not converge after halving it); lower the forces or the speeds"
            )
        self.report.halvings += 1
        q1, v1 = self._step(q, v, t, h / 2, depth + 1)
        return self._step(q1, v1, t + h / 2, h / 2, depth + 1)

    def _restitution(self, q1: np.ndarray, v1: np.ndarray) -> np.ndarray:
        """Velocities after the impacts at ``q1``. The bones' motion is split into what the
        joints allow of rigid motion, V_r = T (T^T M T)^-1 T^T M V (``_joint_velocities``),
        and the rest (vibrations of the stiff energies), which the impacts leave alone. Every
        point within ``IMPACT_DEPTH`` margins of its contact (or in it) that V_r brings closer
        faster than ``rest_speed`` leaves at ``bounciness`` times that speed, by the least
        impulse in the metric M that gives all of them their normal speeds:
        V += T (T^T M T)^-1 (J T)^T lambda (with bounciness 1 it keeps the energy of V_r).
        The impulse travels on through the contacts it drives (a box landing on a stack
        pushes the one below into the ground): a point that the impulse makes approach
        faster than ``rest_speed`` joins, stopped (normal speed 0), and the impulse is solved
        again with it, ``IMPULSE_PASSES`` times at most (shock propagation)."""
        rows, normals = [], []
        for c in self.contacts:
            tol = IMPACT_DEPTH * c.reach
            idx, d, g, e = c.within(q1, c.reach * (1.0 + IMPACT_DEPTH))  # (the step's query)
            near = d < c.points.threshold[idx] + tol
            if near.any():
                rows.append(e[near])
                normals.append(
                    g[near] / np.maximum(np.linalg.norm(g[near], axis=1), 1e-12)[:, None]
                )
        if not rows:
            return v1
        basis = self._joint_velocities(q1)  # (12B, K)
        if basis.shape[1] == 0:
            return v1
        # every near point's normal velocity as a row on the joints' velocities: (R, K)
        e, n = np.concatenate(rows), np.concatenate(normals)
        jac = (e[:, :, None] * n[:, None, :]).reshape(len(e), -1) @ basis
        mr = basis.T @ self.mass @ basis
        mr += 1e-12 * np.trace(mr) / len(mr) * np.eye(len(mr))
        lower = np.linalg.cholesky(mr)  # T^T M T = L L^T
        xi = cho_solve((lower, True), basis.T @ (self.mass @ v1.reshape(-1)))  # V_r = T xi
        change = impulse(jac, lower, xi, self.bounciness, self.rest_speed)
        if change is None:
            return v1
        return (v1.reshape(-1) + basis @ change).reshape(v1.shape)

    def _joint_velocities(self, q: np.ndarray) -> np.ndarray:
        """(12B, K) a basis of the rigid bone velocities (``_rigid_velocities``) that the
        joints allow: those that do not move any glue point's pair apart, nor a slider's
        across its axis (the null space of the glue's rows and of the sliders' ``joint_rows``
        at ``q``)."""
        basis = self._rigid_velocities(q)
        if self.basis is not None:  # what the moving coordinates hold of them
            basis = self.basis @ (self.basis.T @ basis)
        # velocity rows (C, 12B) of the glue points' gaps, and of the sliders' held gaps
        flat = [
            np.kron(e.rows, np.eye(3)) for e in self.energies if getattr(e, "name", "") == "glue"
        ]
        flat += [e.joint_rows(q) for e in self.energies if hasattr(e, "joint_rows")]
        if not flat:
            return basis
        cons = np.concatenate(flat) @ basis
        _, sv, vt = np.linalg.svd(cons, full_matrices=True)
        rank = int((sv > 1e-8 * max(float(sv.max(initial=0.0)), 1e-300)).sum())
        return basis @ vt[rank:].T

    def _rigid_velocities(self, q: np.ndarray) -> np.ndarray:
        """(12B, 6G) the velocities that keep the moving bones rigid at ``q``, by groups that
        move as one: each bone alone, except the bones of a part that bends (an elastic part
        of several bones: a jelly ball), which turn and translate together, so that an impact
        on a few of them changes the part's motion, not their turns against each other (which
        its stiff energies carry). For each group, the three turns F' = [e_a]x F,
        c' = e_a x c of its bones and the three translations c' = e_a."""
        live = np.flatnonzero(~self.space.fixed)
        layout = self.space.layout
        parts = self.space.bone_parts[live]
        together = np.array(
            [layout.part_info[p].kind == "elastic" for p in range(len(layout.part_info))]
        )
        key = np.where(together[parts], -1 - parts, live)  # a shared key per bending part
        groups = [live[key == k] for k in dict.fromkeys(key.tolist())]
        out = np.zeros((q.size, 6 * len(groups)))
        eye = np.eye(3)
        for n, bones in enumerate(groups):
            for a in range(3):
                turn = np.zeros((q.shape[0], 4, 3))
                for b in bones:
                    turn[b, :3, :] = np.cross(eye[a][:, None], q[b, :3, :].T, axis=0).T
                    turn[b, 3, :] = np.cross(eye[a], q[b, 3, :]) if len(bones) > 1 else 0.0
                out[:, 6 * n + a] = turn.reshape(-1)
                move = np.zeros((q.shape[0], 4, 3))
                move[bones, 3, a] = 1.0
                out[:, 6 * n + 3 + a] = move.reshape(-1)
        return out

    def _solve(self, q, v, t, h, euler: bool):
        """Newton on the step's equations; None when it does not converge.

        Backward Euler minimises its incremental potential (a line search on it); the midpoint
        step solves its equations with the discrete gradients (not a minimisation: a line
        search on the residual's norm)."""
        free = self.free
        m = self.mass
        v = self._project(v)
        if euler:
            inertia, pull, t_eval = 1.0 / h**2, q + h * v, t + h
            dscale = 1.0 / h
        else:
            inertia, pull, t_eval = 4.0 / h**2, q + 0.5 * h * v, t + 0.5 * h
            dscale = 2.0 / h
        start = None if euler else q
        self._start_values = {}
        y = pull.copy()  # the predictor (momentum); fixed bones have no velocity
        cm = self.damping
        # viscous terms of the stiff energies that damp their own strain rates (objective)
        viscous = []
        for e in self.energies:
            if getattr(e, "stiff", False) and hasattr(e, "dissipation"):
                zeta = self.zeta if getattr(e, "zeta", None) is None else e.zeta
                if zeta > 0:
                    viscous.append(e.dissipation(q, dscale, zeta))
        weight = self.weight

        def residual(yy, damp, hessian):
            value, grad, hess, dmat = self.potential(yy, t_eval, hessian, viscous, start)
            damp = dmat if damp is None else damp  # held over the step: a fixed merit
            d_in = (yy - pull).reshape(-1)
            d_q = (yy - q).reshape(-1)
            g = inertia * (m @ d_in) + dscale * (cm * (m @ d_q) + damp @ d_q) + grad.reshape(-1)
            g[free] += inertia * self.ridge * d_in[free]  # the ridge's own inertia
            if euler:
                merit = (
                    0.5 * inertia * float(d_in @ m @ d_in)
                    + 0.5 * inertia * self.ridge * float(d_in[free] @ d_in[free])
                    + 0.5 * dscale * float(d_q @ (cm * (m @ d_q) + damp @ d_q))
                    + value
                )
            else:
                merit = 0.5 * float(np.sum((self._reduce(g) * weight) ** 2))
            return g, hess, damp, merit

        moved = np.inf
        damp = None
        first = None  # the residual's norm at the predictor
        # the last step's Jacobian serves while it keeps the iterations converging fast
        key = (h, euler, tuple(id(e) for e in self.loads(t_eval)))
        factor = None
        if self._factor is not None and self._factor[0] == key:
            _, factor, damp = self._factor
        jacobians = 0
        known = None  # (g, merit) at y, when the last iteration evaluated it
        for _ in range(self.iterations * CHORD):
            fresh = factor is None  # the Jacobian computed at this iterate
            if known is not None and not fresh:
                (g, m0), hess = known, None
            else:
                g, hess, damp, m0 = residual(y, damp, fresh)
            known = None
            gf = self._reduce(g)
            # converged too when the equations' residual has fallen by RESIDUAL (a direction
            # that nothing resists, such as a bone few vertices follow, may keep stepping)
            norm = float(np.linalg.norm(gf * weight))
            if first is None:
                first = norm
            if norm <= RESIDUAL * first:
                moved = 0.0
                break
            if fresh:
                if jacobians == self.iterations:
                    break
                jacobians += 1
                self.report.jacobians += 1
                big = inertia * m + dscale * (cm * m + damp) + hess
                hf = self._reduce_matrix(big)
                hf[np.diag_indices_from(hf)] += inertia * self.ridge
                try:
                    factor = cho_factor(hf) if euler else lu_factor(hf, check_finite=True)
                except (LinAlgError, ValueError):
                    return None
            step = -(cho_solve(factor, gf) if euler else lu_solve(factor, gf))
            if not np.isfinite(step).all():
                return None
            full = self._expand(step)
            # bounded: a Newton step moves no bone by more than a fifth of the object (or turns
            # its axes by more than 0.2), so that a wild first iterate cannot throw the state away
            size = self._step_size(full)
            if size > 0.2:
                full *= 0.2 / size
            alpha = 1.0
            if fresh:
                # Armijo: along a Newton direction the residual's squared norm falls at rate
                # 2 m0 (the midpoint step), the incremental potential at its slope (Euler)
                slope = float(self._reduce(full) @ gf) if euler else -2.0 * m0
                for _ in range(12):
                    trial = y + alpha * full.reshape(y.shape)
                    if residual(trial, damp, False)[3] <= m0 + 1e-4 * alpha * slope:
                        break
                    alpha *= 0.5
                else:
                    trial = y + alpha * full.reshape(y.shape)
            else:
                # a Jacobian of earlier iterates serves while the residual halves at each
                # iteration; else it is computed afresh at y
                trial = y + full.reshape(y.shape)
                gt, _, _, mt = residual(trial, damp, False)
                if float(np.linalg.norm(self._reduce(gt) * weight)) > CHORD_RATE * norm:
                    factor = None
                    continue
                known = (gt, mt)
            y = trial
            self.report.iterations += 1
            # the Newton step's own size: a step the line search cut short has not converged
            # (a push far beyond what the steps can carry gave tiny steps that looked so)
            moved = self._step_size(full)
            if moved < CONVERGED:
                break
        if moved > CONVERGED and norm > RESIDUAL * first:
            # a midpoint step through a contact must have converged, or the contact's energy
            # jumps; elsewhere a last step this small is as good
            if moved > ACCEPTED or (not euler and self.touching(y)):
                self._factor = None
                return None
        self._factor = (key, factor, damp) if factor is not None else None
        if not np.isfinite(y).all():
            return None
        if euler:
            return y, (y - q) / h
        return 2.0 * y - q, 4.0 * (y - q) / h - v
