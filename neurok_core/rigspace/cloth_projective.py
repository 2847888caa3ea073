"""A cloth's backward-Euler step by projective dynamics: one constant matrix, a few cheap
iterations a step; approximate, for the live preview (``worker.PREVIEW_RIG_SETTINGS``).

The step aims at the minimiser of the incremental potential of :class:`~.cloth.ClothStep`,

    Phi(x) = a |x - z|_M^2 + sum_e k_e / 2 (|d_e| - l_e)^2 + 1/2 x^T B Q x - f . x
             (+ the viscous stretching and bending, the drags' springs),

writing each spring as a distance to a projection (Bouaziz et al. 2014, "Projective dynamics:
fusing constraint projections for fast simulation"): w_e / 2 |d_e - p_e|^2 with p_e on the
edge's direction. Every other term (inertia, bending, its viscous part, the drags, the loads)
is quadratic already. The global step's matrix

    S = 2 a M + sum_e w_e G_e^T G_e + (1 + tau / h) B Q + the drags'

is the same for the three axes (an n x n matrix, its three columns solved at once) and
constant while the step length and the drags stay the same: it is factorised as a band once
for many steps (:class:`~.band.NodeSystem`), and an iteration is a few vectorised projections
and one back-substitution. Anderson acceleration (Peng et al. 2018) combines the last
iterates. The projection of a spring whose energy E(|d|) is not a plain spring's (shortened
at a ``compression`` share of its stiffness, its viscous term on the length's rate) is
p = (|d| - E'(|d|) / w) d / |d|, exact at the fixed point: w (d - p) is E's gradient there.

**Why only for previews.** The iterations contract slowly where the step turns edges fast,
so an iteration that moves little is not near the minimiser: a sheet kicked at 24 fps, damped
at 0.5/s, stopped after 4-7 iterations 1-4 mm off the exact step, and gained energy where the
exact step loses it (1.24x its start at frame 30 against 0.22x). A stricter stop (the residual
over one minus the contraction, 1e-5 of the size, the quasi-Newton step finishing an
unconverged step) still gained energy and cost as much as the quasi-Newton step. For a 12-frame
preview its speed is what counts (a 20k flag's preview 0.16 s against 0.33 s); Simulate's bake
keeps the quasi-Newton step. The steps it does not take go to the quasi-Newton step: an
undamped run's (its energy must be kept), a step with a node near an obstacle (with the contact
as projections a thin pole's nodes went through it between two iterations: 6 mm deep against
0.4 mm) and a step not done in ``ITERATIONS`` (finished from where it got to).

Shapes: nodes (n, 3) float64 metres; the state x, v (n, 3).
"""

from __future__ import annotations

import numpy as np

from .band import NodeSystem
from .cloth import ClothStep

ITERATIONS = 30  # local-global iterations a step, at most (then the quasi-Newton step ends it)
CONVERGED = 1e-5  # an iteration that moves no node farther than this (object sizes) ends a step
HISTORY = 5  # iterates Anderson acceleration combines


class ProjectiveClothStep(ClothStep):
    """Approximate backward-Euler steps of a cloth by projective dynamics where the run is
    damped and no node is near an obstacle, else by :class:`~.cloth.ClothStep`'s own step
    (module docstring: for previews); the arguments as :class:`~.cloth.ClothStep`'s, and
    ``projective_iterations`` (default ``ITERATIONS``) at most a projective step."""

    def __init__(self, *args, projective_iterations: int | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        energy = self.energy
        self.projective_iterations = int(
            ITERATIONS if projective_iterations is None else projective_iterations
        )
        bending = energy.bending.tocoo()
        self._bending = (bending.row, bending.col, bending.data)
        pairs = np.concatenate([energy.edges, np.stack([bending.row, bending.col], 1)])
        self._pd_system = NodeSystem(self.free, pairs, dims=1)
        self._pd_key = None  # what the factorised matrix was built for
        self._pinned_rhs = None  # (m, 3): S_fp x_p, the pinned nodes' share of the right side
        self._weights = None  # (E,) the springs' weights in S
        self._k_short = energy.k * energy.compression  # (E,) a shortened spring's stiffness
        self._rows = self.idx[self._pd_system.order]  # the node of each of the system's rows

    # -- the global step's matrix -----------------------------------------------------------
    def _factor(self, x, inertia: float, h: float, drags) -> None:
        e = self.energy
        n = len(self.m)
        w = e.k * (max(1.0, e.compression) + self.beta / h)  # (E,)
        i, j = e.edges[:, 0], e.edges[:, 1]
        b_rows, b_cols, b_vals = self._bending
        rows = [np.arange(n), i, j, i, j, b_rows]
        cols = [np.arange(n), i, j, j, i, b_cols]
        vals = [2.0 * inertia * self.m, w, w, -w, -w, b_vals * (1.0 + self.tau / h)]
        for nodes, weights, k, _ in drags:
            rows.append(np.repeat(nodes, len(nodes)))
            cols.append(np.tile(nodes, len(nodes)))
            vals.append(k * np.outer(weights, weights).ravel())
        rows, cols, vals = np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)
        self._pd_system.factor(rows, cols, vals)
        self.report.factorisations += 1
        self._weights = w
        # the pinned nodes' columns, moved to the right side (they stay where they are)
        pinned = ~self.free
        self._pinned_rhs = np.zeros((len(self.idx), 3))
        if pinned.any():
            local = np.full(n, -1)
            local[self._rows] = np.arange(len(self._rows))
            keep = (local[rows] >= 0) & pinned[cols]
            np.add.at(self._pinned_rhs, local[rows[keep]], vals[keep, None] * x[cols[keep]])

    # -- one step -----------------------------------------------------------------------------
    def advance(self, x, v, h: float, forces, drags) -> tuple:
        """One step of length ``h`` from (x, v) (n, 3) under ``forces`` (n, 3) N and ``drags``
        [(nodes, weights, k, target (3,))]; returns (x, v)."""
        if self.c == 0.0 or not len(self.idx):
            return super().advance(x, v, h, forces, drags)
        contact = self.contact
        plan = self._plan(x, v, h, lambda hat: True if contact and contact.near(x, hat) else None)
        if plan.touch is not None:
            return super().advance(x, v, h, forces, drags)
        base_x, k, z, inertia, hat = plan[:5]
        key = (k, tuple((n.tobytes(), w.tobytes(), kd) for n, w, kd, _ in drags))
        if key != self._pd_key:
            self._factor(x, inertia, k, drags)
            self._pd_key = key
        e, w, rows = self.energy, self._weights, self._rows
        start_len = plan.lengths
        viscous = e.k * self.beta / k  # (E,)
        # the right side's parts that do not change within the step
        base = 2.0 * inertia * self.m[:, None] * z + forces
        if self.tau > 0:
            base += (self.tau / k) * (e.bending @ base_x)
        for nodes, weights, kd, target in drags:
            base[nodes] += kd * weights[:, None] * np.asarray(target)[None]
        base = base[rows] - self._pinned_rhs
        # the start: the prediction (an extrapolation of the velocity's last change, tried,
        # doubled the iterations: a start off the springs' lengths converges slowly)
        y = hat.copy()
        y[~self.free] = x[~self.free]
        tol = CONVERGED * self.size
        converged = False
        mixing = _Anderson(HISTORY)
        for _ in range(self.projective_iterations):
            d = e.g @ y  # (E, 3)
            length = np.sqrt(np.einsum("ij,ij->i", d, d))
            stretch = length - e.lengths
            slope = np.where(stretch > 0, e.k, self._k_short) * stretch
            if self.beta > 0:
                slope += viscous * (length - start_len)  # E'(|d|)
            scale = w - slope / np.maximum(length, 1e-300)  # w p = scale d
            rhs = e.gt @ (scale[:, None] * d)
            current = y[rows]
            image = self._pd_system.solve_ordered(base + rhs[rows])  # (m, 3)
            new = mixing(current, image)
            moved = float(np.abs(new - current).max())
            y[rows] = new
            self.report.iterations += 1
            if moved < tol:
                converged = True
                break
        self.report.steps += 1
        if not converged:  # the exact step finishes it, from here
            self.report.handed += 1
            self.report.steps -= 1
            return super().advance(x, v, h, forces, drags, start=y)
        return self._finish(plan, x, v, y)


class _Anderson:
    """Anderson acceleration of a fixed-point iteration x <- G(x) (Walker & Ni 2011; Peng et
    al. 2018, "Anderson acceleration for geometry optimization and physics simulation"): the
    next iterate is the combination of the last ``history`` + 1 images whose residuals
    G(x) - x cancel best (a least-squares problem of ``history`` unknowns; its Gram matrix
    kept from iteration to iteration, one row new each)."""

    def __init__(self, history: int):
        self.history = int(history)
        self.image = self.residual = None  # the last ones, flat
        self.d_image = self.d_residual = None  # (history, size) ring buffers
        self.gram = np.zeros((self.history, self.history))
        self.count = 0  # differences stored

    def __call__(self, current: np.ndarray, image: np.ndarray) -> np.ndarray:
        g = image.ravel()
        f = g - current.ravel()
        if self.history == 0:
            return image
        if self.image is None:
            self.image, self.residual = g, f
            self.d_image = np.empty((self.history, len(g)))
            self.d_residual = np.empty((self.history, len(g)))
            return image
        slot = self.count % self.history
        np.subtract(g, self.image, out=self.d_image[slot])
        np.subtract(f, self.residual, out=self.d_residual[slot])
        self.count += 1
        k = min(self.count, self.history)
        row = self.d_residual[:k] @ self.d_residual[slot]
        self.gram[slot, :k] = row
        self.gram[:k, slot] = row
        self.image, self.residual = g, f
        gram = self.gram[:k, :k].copy()
        gram.flat[:: k + 1] *= 1.0 + 1e-10
        try:
            gamma = np.linalg.solve(gram, self.d_residual[:k] @ f)
        except np.linalg.LinAlgError:  # dependent residuals: start the history again
            self.count = 0
            return image
        return (g - gamma @ self.d_image[:k]).reshape(image.shape)
