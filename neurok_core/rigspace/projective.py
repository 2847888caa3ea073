"""Projective dynamics in the rig space (design section 12, "the step's cost"): an experiment.

Bouaziz et al. 2014, "Projective dynamics", reduced to the bones' coordinates as hyper-reduced
projective dynamics does (Brandt et al. 2018). Every energy of the rig space is (or is replaced
by) a sum of constraint terms w / 2 |A Q - p|^2 whose matrix A^T W A does not change with the
state, and whose target p is the *projection* of A Q on the constraint's set:

- a bone's rigidity: its linear part F (rows 4b..4b+2 of Q, transposed) to its polar rotation
  (w = 2 kappa, the affine-body energy's stiffness at rest), completed along the directions its
  vertices do not extend along;
- a stretch spring: the edge's vector e^T Q to its rest length;
- glue, drag springs, the bending coupling: quadratic already (constant targets);
- a contact point against the world: its position to the obstacle's surface where it is inside
  its threshold, else to itself (always in the matrix: the fixed point is the same);
- gravity and forces: linear, on the right-hand side.

A step minimises the incremental potential of backward Euler (or, for the implicit midpoint
rule, that of the half step, Y, with Q_{n+1} = 2 Y - Q_n) by local-global iterations: project
every term at the iterate (local), solve the constant system for the three columns of Q
(global: one back-substitution of a factor computed once per run). The system is (4L x 4L), L
the moving bones: the three coordinate columns share it.

This module is measured against the Newton step (``integrator``) in docs/experiments/rig_speed.md;
the Newton step is the one that ships.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.linalg import cho_factor, cho_solve

from .contact import Contact, WorldObstacle
from .energies import Linear, Quadratic, Rigidity, Springs
from .integrator import OutOfTime, StepReport


class ProjectiveIntegrator:
    """Steps (Q, V) by projective dynamics; the :class:`~.integrator.Integrator`'s interface
    (``advance``, ``energy``, ``report``) for ``simulate_rig``.

    midpoint: the implicit midpoint rule (no numerical damping of the soft motion) instead of
    backward Euler; iterations: local-global iterations a step (at most); tolerance: they stop
    when no bone moves more than this (axes; centres in object sizes) in one iteration."""

    def __init__(
        self,
        space,
        energies,
        loads,
        *,
        damping: float,
        contacts=(),
        midpoint: bool = False,
        iterations: int = 20,
        tolerance: float = 1e-6,
        anderson: int = 5,
        deadline: float | None = None,
        complete=None,
    ):
        self.space = space
        self.energies = list(energies)
        self.loads = loads
        self.contacts = list(contacts)
        self.damping = damping
        self.midpoint = midpoint
        self.iterations = iterations
        self.tolerance = tolerance
        self.anderson = anderson  # how many past iterates Anderson acceleration mixes (0: none)
        self.deadline = math.inf if deadline is None else float(deadline)
        self.complete = complete  # F (B, 3, 3) -> F completed along unseen directions
        self.report = StepReport()
        self.scale = space.object_size
        nb = space.num_bones
        live = np.flatnonzero(~space.fixed)
        self.rows = (4 * live[:, None] + np.arange(4)).reshape(-1)  # (4L,) moving rows of Q
        self.fixed_rows = np.setdiff1d(np.arange(4 * nb), self.rows)
        self.mass = space.moments  # (4B, 4B): T = 1/2 tr(V^T M V)
        self._terms()
        self._factors: dict = {}

    # -- the constant part -------------------------------------------------------------------
    def _terms(self) -> None:
        """Sort the energies into the constant matrix and the projections."""
        n = self.mass.shape[0]
        self.stiffness = np.zeros((n, n))  # sum of A^T W A over every term
        self.constant_rhs = np.zeros((n, 3))  # sum of A^T W p over the constant targets
        self.rigid, self.springs, self.world, self.linear, self.other = None, [], [], [], []
        for e in self.energies:
            if isinstance(e, Rigidity):
                self.rigid = e
                w = np.zeros(n)
                for b in e.live:
                    w[4 * b : 4 * b + 3] = 2.0 * e.kappa[b]
                self.rigid_weight = w
                self.stiffness += np.diag(w)
            elif isinstance(e, Springs):
                self.springs.append(e)
                self.stiffness += (e.rows * e.k[:, None]).T @ e.rows
            elif isinstance(e, Quadratic):
                self.stiffness += e.matrix
                self.constant_rhs += (e.rows * e.k[:, None]).T @ e.targets
            elif isinstance(e, Linear):
                self.linear.append(e)
            elif isinstance(e, Contact) and isinstance(e.obstacle, WorldObstacle):
                self.world.append(e)
                rows, k = e.points.rows, e.points.stiffness
                self.stiffness += (rows * k[:, None]).T @ rows
            elif hasattr(e, "matrix") and hasattr(e, "hessian"):  # the bending coupling
                self.stiffness += e.matrix
            else:
                self.other.append(e)  # explicit: part-part contact (lagged at the step)

    def _factor(self, inertia: float, dscale: float, quadratic_loads: tuple):
        """The Cholesky factor of the moving rows' system for a step (cached by its key)."""
        key = (inertia, dscale, tuple(id(e) for e in quadratic_loads))
        if key not in self._factors:
            big = (inertia + dscale * self.damping) * self.mass + self.stiffness
            for e in quadratic_loads:
                big = big + e.matrix
            r = self.rows
            sub = big[np.ix_(r, r)]
            sub[np.diag_indices_from(sub)] += 1e-12 * float(np.trace(sub)) / len(sub)
            self._factors = {key: (cho_factor(sub), big)}  # one key at a time
            self.report.jacobians += 1
        return self._factors[key]

    # -- the projections ---------------------------------------------------------------------
    def _projected_rhs(self, x: np.ndarray, quadratic_loads) -> np.ndarray:
        """sum A^T W p (4B, 3) with every target p projected at the iterate ``x`` (4B, 3)."""
        rhs = self.constant_rhs.copy()
        nb = len(x) // 4
        if self.rigid is not None:
            f = np.swapaxes(x.reshape(nb, 4, 3)[:, :3, :], 1, 2)  # (B, 3, 3)
            if self.complete is not None:
                f = self.complete(f)
            u, _, vt = np.linalg.svd(f)
            d = np.sign(np.linalg.det(u @ vt))
            u[:, :, 2] *= d[:, None]
            r = u @ vt  # (B, 3, 3)
            target = np.zeros((nb, 4, 3))
            target[:, :3, :] = np.swapaxes(r, 1, 2)
            rhs += self.rigid_weight[:, None] * target.reshape(-1, 3)
        for s in self.springs:
            d = s.rows @ x  # (J, 3)
            length = np.maximum(np.linalg.norm(d, axis=1), 1e-300)
            p = d * (s.lengths / length)[:, None]
            rhs += s.rows.T @ (s.k[:, None] * p)
        for c in self.world:
            pos = c.points.rows @ x  # (P, 3)
            idx, dist, grad = c.obstacle.entries(None, pos, c.points.rows, c.reach)[:3]
            depth = c.points.threshold[idx] - dist
            inside = depth > 0
            p = pos.copy()
            if inside.any():
                g = grad[inside]
                n2 = np.maximum((g * g).sum(1), 1e-300)
                p[idx[inside]] += (depth[inside] / n2)[:, None] * g
            rhs += c.points.rows.T @ (c.points.stiffness[:, None] * p)
        for e in quadratic_loads:
            rhs += (e.rows * e.k[:, None]).T @ e.targets
        return rhs

    # -- steps ---------------------------------------------------------------------------------
    def energy(self, q: np.ndarray, v: np.ndarray, t: float) -> float:
        flat = v.reshape(-1, 3)
        kinetic = 0.5 * float((flat * (self.mass @ flat)).sum())
        return kinetic + sum(e(q, False)[0] for e in self.energies)

    def advance(self, q: np.ndarray, v: np.ndarray, t: float, h: float):
        return self.step(q, v, t, h)

    def step(self, q: np.ndarray, v: np.ndarray, t: float, h: float):
        if time.monotonic() > self.deadline:
            raise OutOfTime
        nb = q.shape[0]
        x0, v0 = q.reshape(-1, 3), v.reshape(-1, 3)
        if self.midpoint:
            inertia, pull, t_eval = 4.0 / h**2, x0 + 0.5 * h * v0, t + 0.5 * h
            dscale = 2.0 / h
        else:
            inertia, pull, t_eval = 1.0 / h**2, x0 + h * v0, t + h
            dscale = 1.0 / h
        loads = list(self.loads(t_eval))
        quadratic = tuple(e for e in loads if isinstance(e, Quadratic))
        factor, big = self._factor(inertia, dscale, quadratic)
        # what does not change within the step: inertia, damping, forces
        base = self.mass @ (inertia * pull + dscale * self.damping * x0)
        for e in [*self.linear, *(e for e in loads if isinstance(e, Linear))]:
            base += np.outer(e.moment, e.force)
        for e in self.other:  # explicit at the step's start
            base -= e(q, False)[1].reshape(-1, 3)
        r, fr = self.rows, self.fixed_rows
        y = pull.copy()
        y[fr] = x0[fr]
        coupling = big[np.ix_(r, fr)] @ y[fr]
        z = y[r].reshape(-1)  # the moving rows, flat
        history_g, history_f = [], []  # Anderson acceleration (Walker and Ni 2011)
        for _ in range(self.iterations):
            y[r] = z.reshape(-1, 3)
            rhs = base + self._projected_rhs(y, quadratic)
            g = cho_solve(factor, rhs[r] - coupling).reshape(-1)  # the local-global map G(z)
            f = g - z
            self.report.iterations += 1
            step = np.abs(f).reshape(-1, 4, 3)
            size = max(float(step[:, :3].max()), float(step[:, 3].max()) / self.scale)
            if size < self.tolerance:
                z = g
                break
            if self.anderson:
                history_g.append(g)
                history_f.append(f)
                if len(history_f) > self.anderson + 1:
                    history_g.pop(0)
                    history_f.pop(0)
                if len(history_f) > 1:
                    df = np.diff(np.stack(history_f), axis=0)  # (m, n)
                    dg = np.diff(np.stack(history_g), axis=0)
                    gamma = np.linalg.lstsq(df.T, f, rcond=1e-10)[0]
                    g = g - gamma @ dg
            z = g
        y[r] = z.reshape(-1, 3)
        self.report.steps += 1
        y = y.reshape(nb, 4, 3)
        if self.midpoint:
            return 2.0 * y - q, 4.0 * (y - q) / h - v
        return y, (y - q) / h
