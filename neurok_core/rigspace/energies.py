"""The rig space's energies: value, gradient and a positive semi-definite Hessian at a state.

Every energy works on the bones' state ``Q`` (B, 4, 3) (package docstring) and returns
``(value J, gradient (B, 4, 3), Hessian (12B, 12B) or None)`` in the flat order of ``q``. A point
with skinning row ``u`` (4B,) sits at ``u^T Q``; a difference of two rows ``e = u_a - u_b`` is
the vector between two points, so springs, glue and contact are all functions of ``e^T Q``,
and for a function psi(d) of such a vector d (3,) the Hessian is ``e e^T (x) grad^2 psi``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse


def flat_kron(matrix: np.ndarray) -> np.ndarray:
    """kron(matrix (4B, 4B), I_3): the Hessian of sum_k Q[:, k]^T matrix Q[:, k] / 2."""
    return np.kron(matrix, np.eye(3))


class Quadratic:
    """E = 1/2 sum_j k_j |e_j^T Q - target_j|^2: glue (targets zero, or the world's points),
    the user's stiffness between neighbouring bones, a drag's spring (targets that move).

    rows: (J, 4B) the e_j; stiffness: (J,) N/m; targets: (J, 3) metres (set per step for a
    drag). ``stiff``: whether its modes count as stiff (damped, ``RigSettings.stiff_damping``)
    and ``omega`` (rad/s) the frequency its scale was set for."""

    def __init__(self, rows, stiffness, targets=None, *, stiff: bool, omega: float, name: str):
        self.rows = np.asarray(rows, dtype=np.float64)
        self.k = np.asarray(stiffness, dtype=np.float64)
        self.targets = np.zeros((len(self.rows), 3)) if targets is None else np.asarray(targets)
        self.stiff, self.omega, self.name = stiff, omega, name
        self.matrix = (self.rows * self.k[:, None]).T @ self.rows  # (4B, 4B)
        self.hessian = flat_kron(self.matrix)

    def scaled(self, factor: float) -> Quadratic:
        """The same energy ``factor`` times as stiff (its modes sqrt(factor) x faster)."""
        return Quadratic(
            self.rows,
            self.k * factor,
            self.targets,
            stiff=self.stiff,
            omega=self.omega * math.sqrt(factor),
            name=self.name,
        )

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        d = self.rows @ q.reshape(4 * nb, 3) - self.targets  # (J, 3)
        value = 0.5 * float((self.k * (d * d).sum(1)).sum())
        grad = (self.rows.T @ (self.k[:, None] * d)).reshape(nb, 4, 3)
        return value, grad, (self.hessian if hessian else None)


class Linear:
    """E = -sum_k force_k . (moment^T Q[:, k]): gravity (moment = sum_i m_i u_i, force = g), a
    uniform wind, or a force f on a point (moment = its row u_p)."""

    def __init__(self, moment: np.ndarray, force: np.ndarray):
        self.moment = np.asarray(moment, dtype=np.float64)  # (4B,)
        self.force = np.asarray(force, dtype=np.float64)  # (3,)
        self.stiff = False

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        x = self.moment @ q.reshape(4 * nb, 3)  # (3,)
        grad = -np.outer(self.moment, self.force).reshape(nb, 4, 3)
        return -float(self.force @ x), grad, None


class Rigidity:
    """E = sum_b kappa_b / 4 |D_b (F_b^T F_b - I) D_b|^2 over the moving bones: keeps each bone
    a rotation (affine body dynamics; Lan et al. 2022) along the rest directions its vertices
    extend along, D_b the projector on them (``projectors`` (B, 3, 3), None: all; a flat
    bone's F along its normal moves no vertex and is not a coordinate). kappa: (B,) J, zero
    for fixed bones."""

    def __init__(
        self,
        kappa: np.ndarray,
        omega: float,
        strain: np.ndarray | None = None,
        zeta: float | None = None,
        projectors: np.ndarray | None = None,
    ):
        self.kappa = np.asarray(kappa, dtype=np.float64)
        self.live = np.flatnonzero(self.kappa > 0)
        self.stiff, self.omega, self.name = True, omega, "rigidity"
        self.strain = strain  # (L, 3, 3) the strain it pulls towards (None: zero)
        self.zeta = zeta  # its own damping ratio (None: the integrator's)
        self.projectors = projectors
        self._d = None if projectors is None else np.asarray(projectors)[self.live]  # (L, 3, 3)

    def _masked(self, s: np.ndarray) -> np.ndarray:
        return s if self._d is None else self._d @ s @ self._d

    def dissipation(self, q: np.ndarray, dscale: float, zeta: float) -> Rigidity:
        """The step's viscous term: kappa factor / 4 |S(F) - S(F_start)|^2, the rate of the
        bone's strain S = F^T F - I damped at the ratio ``zeta`` (objective: zero for any
        rotation of a strained bone), factor = beta dscale, beta = 2 zeta / omega, ``dscale``
        the step's 1 / dt."""
        factor = dscale * 2.0 * zeta / self.omega
        f = np.swapaxes(q[self.live, :3, :], 1, 2)
        strain = self._masked(np.swapaxes(f, 1, 2) @ f - np.eye(3))
        out = Rigidity(self.kappa * factor, self.omega, strain, projectors=self.projectors)
        out.stiff = False
        return out

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        b = self.live
        f = np.swapaxes(q[b, :3, :], 1, 2)  # (L, 3, 3): F[k, r] = Q[r, k]
        kap = self.kappa[b]
        s = self._masked(np.swapaxes(f, 1, 2) @ f - np.eye(3))  # (L, 3, 3)
        if self.strain is not None:
            s = s - self.strain
        value = 0.25 * float((kap * (s * s).sum((1, 2))).sum())
        gf = kap[:, None, None] * (f @ s)  # dE/dF (L, 3, 3)
        grad = np.zeros((nb, 4, 3))
        grad[b, :3, :] = np.swapaxes(gf, 1, 2)
        if not hessian:
            return value, grad, None
        blocks = _rigidity_blocks(f, f, s, kap, self._d, project=True)
        return value, grad, self._assemble(nb, blocks)

    def discrete_gradient(self, q0: np.ndarray, y: np.ndarray, hessian: bool = True):
        """The energy's discrete gradient across a midpoint step (Simo and Tarnow 1992), at the
        midpoint ``y`` of the step from ``q0`` to ``q1 = 2 y - q0``: kappa F_m (S_0 + S_1) / 2,
        so that E(q1) - E(q0) = grad . (q1 - q0) exactly (the energy is quadratic in S), and
        its Jacobian d grad / d y (not symmetric; (12B, 12B))."""
        nb = y.shape[0]
        b = self.live
        fm = np.swapaxes(y[b, :3, :], 1, 2)  # (L, 3, 3)
        f0 = np.swapaxes(q0[b, :3, :], 1, 2)
        f1 = 2.0 * fm - f0
        kap = self.kappa[b]
        eye = np.eye(3)
        s0 = self._masked(np.swapaxes(f0, 1, 2) @ f0 - eye)
        s1 = self._masked(np.swapaxes(f1, 1, 2) @ f1 - eye)
        if self.strain is not None:
            s0, s1 = s0 - self.strain, s1 - self.strain
        mean = 0.5 * (s0 + s1)  # (L, 3, 3)
        grad = np.zeros((nb, 4, 3))
        grad[b, :3, :] = np.swapaxes(kap[:, None, None] * (fm @ mean), 1, 2)
        if not hessian:
            return grad, None
        # d(F_m S)/dF_m with dS = dF_m^T F_1 + F_1^T dF_m
        return grad, self._assemble(nb, _rigidity_blocks(fm, f1, mean, kap, self._d, project=False))

    def _assemble(self, nb: int, blocks: np.ndarray) -> np.ndarray:
        """The (12B, 12B) matrix of per-bone (9, 9) blocks in F order."""
        # F (i, j) is Q[j, i]: flat index of Q[b, r=j, k=i] is (4 b + j) 3 + i
        out = np.zeros((12 * nb, 12 * nb))
        ij = np.array([(j * 3 + i) for i in range(3) for j in range(3)])  # F-order -> Q-order
        for n, bone in enumerate(self.live):
            idx = 12 * bone + ij
            out[np.ix_(idx, idx)] += blocks[n]
        return out


def _rigidity_blocks(fa, fb, s, kap, d=None, *, project: bool) -> np.ndarray:
    """(L, 9, 9) blocks kappa (delta_ik S_lj + (Fa D)_il (Fb D)_kj + (Fa D Fb^T)_ik D_lj), F
    index (i, j), D the projectors (L, 3, 3) (None: I) and S = D S D: the Hessian of kappa / 4
    |D (F^T F - I) D|^2 when Fa = Fb = F (PSD-projected when ``project``), the discrete
    gradient's Jacobian when Fa = F_m, Fb = F_1, S the mean strain."""
    eye = np.eye(3)
    dd = np.broadcast_to(eye, s.shape) if d is None else d
    fad, fbd = fa @ dd, fb @ dd
    fft = fad @ np.swapaxes(fb, 1, 2)
    h = (
        np.einsum("ik,blj->bijkl", eye, s)
        + np.einsum("bil,bkj->bijkl", fad, fbd)
        + np.einsum("bik,blj->bijkl", fft, dd)
    ) * kap[:, None, None, None, None]
    h = h.reshape(-1, 9, 9)
    if project:
        w, v = np.linalg.eigh(0.5 * (h + np.swapaxes(h, 1, 2)))
        h = (v * np.maximum(w, 0.0)[:, None, :]) @ np.swapaxes(v, 1, 2)
    return h


class RowPairs:
    """The pairs of coordinates that some row couples, for Hessians of the form
    sum_j (rows_j rows_j^T) (x) M_j, M_j (3, 3): a skinning row has a few bones' coordinates
    (a rope's edge 13 of 68), so the sum is over the pairs (p, q) that share a row,
    H[p, q] = sum_j A[(p, q), j] M_j with the constant sparse A[(p, q), j] = rows_jp rows_jq
    (built once per run; H[q, p] = H[p, q], so p <= q): about sum_j |nonzeros of row j|^2 / 2
    products instead of J (4B)^2."""

    DENSE = 0.6  # rows denser than this share of their entries: the dense products pay

    def __init__(self, rows: np.ndarray):
        j_of, col = np.nonzero(rows)  # row-major: the nonzeros grouped by row
        count = np.bincount(j_of, minlength=len(rows))
        start = np.cumsum(count) - count
        partners = count[j_of]  # (nnz,) each nonzero pairs with its row's
        a = np.repeat(np.arange(len(j_of)), partners)  # (Z,)
        offset = np.arange(len(a)) - np.repeat(np.cumsum(partners) - partners, partners)
        b = start[j_of[a]] + offset
        a, b = a[col[a] <= col[b]], b[col[a] <= col[b]]  # H's (q, p) block is its (p, q)
        n = rows.shape[1]
        key = col[a] * n + col[b]
        keys, pair = np.unique(key, return_inverse=True)
        self.p, self.q = keys // n, keys % n  # (P,)
        self.n = n
        values = rows[j_of[a], col[a]] * rows[j_of[a], col[b]]
        self.a = sparse.csr_matrix((values, (pair, j_of[a])), shape=(len(keys), len(rows)))

    @classmethod
    def of(cls, rows: np.ndarray) -> RowPairs | None:
        """The pairs of ``rows`` (J, 4B), or None where the rows are too dense to gain."""
        if rows.size == 0 or np.count_nonzero(rows) > cls.DENSE * rows.size:
            return None
        return cls(rows)

    def hessian(self, coeff: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """(12B, 12B) sum_j (rows_j rows_j^T) (x) (coeff_j I + left_j right_j^T); coeff (J,),
        left and right (J, 3)."""
        j = len(coeff)
        m = np.empty((j, 10))
        m[:, 0] = coeff
        m[:, 1:] = (left[:, :, None] * right[:, None, :]).reshape(j, 9)
        summed = self.a @ m  # (P, 10)
        blocks = summed[:, 1:].reshape(-1, 3, 3)
        blocks += summed[:, :1, None] * np.eye(3)
        out = np.zeros((self.n, 3, self.n, 3))
        pairs = out.transpose(0, 2, 1, 3)  # (n, n, 3, 3), a view
        pairs[self.q, self.p] = blocks
        pairs[self.p, self.q] = blocks
        return out.reshape(3 * self.n, 3 * self.n)


class Springs:
    """E = sum_j k_j / (8 l_j^2) (|e_j^T Q|^2 - l_j^2)^2: edges that keep their rest lengths
    l_j (J,) (Green-strain springs: k_j / 2 (|d| - l)^2 for small stretches), k_j (J,) N/m
    (stretching stiffness of cloth, rope and elastic parts). Quadratic in the squared length,
    so its discrete gradient is exact (``discrete_gradient``)."""

    def __init__(
        self, rows, lengths, stiffness, omega: float, zeta: float | None = None, pairs=None
    ):
        self.rows = np.asarray(rows, dtype=np.float64)
        self.lengths = np.asarray(lengths, dtype=np.float64)
        self.k = np.asarray(stiffness, dtype=np.float64)
        self.stiff, self.omega, self.name = True, omega, "stretch"
        self.zeta = zeta  # its own damping ratio (None: the integrator's)
        self.a = self.k / (8.0 * self.lengths**2)  # (J,) E = a (s - l^2)^2, s = |d|^2
        self.pairs = RowPairs.of(self.rows) if pairs is None else pairs
        self._start = None  # (q0, its edge vectors) of the last step's start

    def scaled(self, factor: float) -> Springs:
        """The same springs ``factor`` times as stiff (their modes sqrt(factor) x faster)."""
        out = Springs(
            self.rows,
            self.lengths,
            self.k * factor,
            self.omega * math.sqrt(factor),
            self.zeta,
            pairs=self.pairs,
        )
        out.stiff, out.name = self.stiff, self.name
        return out

    def dissipation(self, q: np.ndarray, dscale: float, zeta: float) -> Springs:
        """The step's viscous term: k factor / 2 (|d| - |d_start|)^2 (to second order), the
        rate of each edge's length damped at the ratio ``zeta`` (not its turning), factor =
        2 zeta / omega dscale."""
        factor = dscale * 2.0 * zeta / self.omega
        d = self.rows @ q.reshape(-1, 3)
        lengths = np.linalg.norm(d, axis=1)
        out = Springs(self.rows, lengths, self.k * factor, self.omega, pairs=self.pairs)
        out.stiff = False
        out.parent = self  # the same rows: a step evaluates the two together (``also``)
        return out

    def _blocks(self, d, coeff, other, hessian: bool, nb: int, a=None):
        """grad = sum_j rows_j (x) coeff_j d_j and, when ``hessian``, its Jacobian
        sum_j (rows_j rows_j^T) (x) (coeff_j I + 4 a_j d_j other_j^T) (``a`` (J,): this
        energy's, unless given)."""
        a = self.a if a is None else a
        grad = (self.rows.T @ (coeff[:, None] * d)).reshape(nb, 4, 3)
        if not hessian:
            return grad, None
        if self.pairs is not None:
            return grad, self.pairs.hessian(coeff, (4.0 * a)[:, None] * d, other)
        h = flat_kron((self.rows * coeff[:, None]).T @ self.rows)
        j = len(d)
        g = (self.rows[:, :, None] * d[:, None, :]).reshape(j, -1)  # (J, 12B)
        o = (self.rows[:, :, None] * other[:, None, :]).reshape(j, -1)
        h += (g * (4.0 * a)[:, None]).T @ o
        return grad, h

    def __call__(self, q: np.ndarray, hessian: bool = True):
        nb = q.shape[0]
        d = self.rows @ q.reshape(4 * nb, 3)  # (J, 3)
        excess = (d * d).sum(1) - self.lengths**2  # (J,) s - l^2
        value = float((self.a * excess**2).sum())
        # dE/dd = 4 a (s - l^2) d; Hessian 4 a ((s - l^2) I + 2 d d^T), the first term kept
        # only where stretched (PSD)
        grad, _ = self._blocks(d, 4.0 * self.a * excess, d, False, nb)
        if not hessian:
            return value, grad, None
        _, h = self._blocks(d, 4.0 * self.a * np.maximum(excess, 0.0), 2.0 * d, True, nb)
        return value, grad, h

    def _start_vectors(self, q0: np.ndarray) -> np.ndarray:
        """The edge vectors (J, 3) at a step's start ``q0`` (kept: a step asks for its start's
        at every iteration)."""
        last = self._start
        if last is None or not np.array_equal(last[0], q0):
            self._start = last = (q0.copy(), self.rows @ q0.reshape(-1, 3))
        return last[1]

    def discrete_gradient(self, q0: np.ndarray, y: np.ndarray, hessian: bool = True, also=None):
        """The discrete gradient across a midpoint step from ``q0`` to ``2 y - q0``:
        2 a (s_0 + s_1 - 2 l^2) d_m per edge (Gonzalez 1996; exact since E is quadratic in
        s = |d|^2), and its Jacobian in ``y`` (not symmetric). ``also``: springs on the same
        rows (the step's viscous term, ``dissipation``) summed in the same products."""
        nb = y.shape[0]
        dm = self.rows @ y.reshape(4 * nb, 3)  # (J, 3)
        d0 = self._start_vectors(q0)
        d1 = 2.0 * dm - d0
        s = (d0 * d0).sum(1) + (d1 * d1).sum(1)
        coeff = 2.0 * self.a * (s - 2.0 * self.lengths**2)
        a = self.a
        if also is not None:
            coeff = coeff + 2.0 * also.a * (s - 2.0 * also.lengths**2)
            a = self.a + also.a
        # d coeff / d dm = 2 a (2 d1 . 2) = 8 a d1: the term (x) 4 a d_m (2 d1)^T
        return self._blocks(dm, coeff, 2.0 * d1, hessian, nb, a)


class SliderGlue:
    """E = 1/2 sum_j k_j sum_{i=1,2} (n_ji(Q) . g_j(Q))^2: glue that holds a slider's point
    pairs together only across its axis, so the part slides along the axis and nothing else.

    g_j = e_j^T Q - target_j (3,) is the gap of pair j (``rows`` e_j (J, 4B), ``targets`` (J, 3):
    zero, or the world's points); n_ji (3,) the two unit normals of the axis, carried by the
    part that holds the axis: n_ji = r_ji^T Q + fixed_ji, with ``normal_rows`` r_ji (J, 2, 4B)
    the rows of the normal as a vector of that part (zero for the world) and ``normals``
    fixed_ji (J, 2, 3) the world's normals (zero for a moving part). Four points, two on the
    axis and two off it, leave one motion of the part against the other: the slide (design
    section 15).

    With c = n . g, grad c = r (x) g + e (x) n and grad^2 c = (r e^T + e r^T) (x) I_3, so
    grad E = sum k c grad c and grad^2 E = sum k (grad c grad c^T + c grad^2 c). Against the
    world the normals are constant and E is quadratic; against a moving part it is quartic in
    Q (the axis turns with that part), so the midpoint step takes Gonzalez's discrete gradient
    of it (``gonzalez``, as the contact's). Per term, grad c and grad^2 c live in span(r, e)
    (x) R^3, where the Hessian is k W (s s^T + c [[0, I], [I, 0]]) W^T, s = (g, n) (6,),
    W = [r, e] (x) I_3; the PSD-projected Hessian projects that 6 x 6 middle (the exact one:
    ``project=False``)."""

    gonzalez = True

    def __init__(self, rows, targets, normal_rows, normals, stiffness, *, omega: float):
        self.rows = np.asarray(rows, dtype=np.float64)  # (J, 4B)
        self.targets = np.asarray(targets, dtype=np.float64)  # (J, 3)
        self.normal_rows = np.asarray(normal_rows, dtype=np.float64)  # (J, 2, 4B)
        self.normals = np.asarray(normals, dtype=np.float64)  # (J, 2, 3)
        self.k = np.asarray(stiffness, dtype=np.float64)  # (J,)
        self.stiff, self.omega, self.name = True, omega, "slider"

    def _terms(self, q: np.ndarray):
        """(c (J, 2), gaps g (J, 3), normals n (J, 2, 3)) at ``q``."""
        flat = q.reshape(-1, 3)
        gap = self.rows @ flat - self.targets  # (J, 3)
        n = np.einsum("jiv,vk->jik", self.normal_rows, flat) + self.normals  # (J, 2, 3)
        return np.einsum("jik,jk->ji", n, gap), gap, n

    def joint_rows(self, q: np.ndarray) -> np.ndarray:
        """(2J, 12B) the rows grad c of the held gaps at ``q``: the velocities that keep every
        pair's gap across the axis are their null space."""
        _, gap, n = self._terms(q)
        r, e = self.normal_rows, self.rows[:, None, :]  # (J, 2, 4B), (J, 1, 4B)
        grad = r[..., :, None] * gap[:, None, None, :] + e[..., :, None] * n[:, :, None, :]
        return grad.reshape(-1, self.rows.shape[1] * 3)  # (J, 2, 4B, 3) -> (2J, 12B)

    def __call__(self, q: np.ndarray, hessian: bool = True, project: bool = True):
        c, gap, n = self._terms(q)
        value = 0.5 * float((self.k[:, None] * c * c).sum())
        rows = self.joint_rows(q)  # (2J, 12B)
        kc = (self.k[:, None] * c).reshape(-1)  # (2J,)
        grad = (kc @ rows).reshape(q.shape)
        if not hessian:
            return value, grad, None
        num = self.rows.shape[1]
        e = np.broadcast_to(self.rows[:, None], self.normal_rows.shape)
        w = np.stack([e, self.normal_rows], axis=2)  # (J, 2, 2, 4B): [e, r] per term
        s = np.concatenate([n, gap[:, None, :].repeat(2, 1)], axis=2)  # (J, 2, 6): (n, g)
        # middle (J, 2, 6, 6) in the basis [e (x) I, r (x) I]: k (s s^T + c swap)
        swap = np.kron(np.array([[0.0, 1.0], [1.0, 0.0]]), np.eye(3))
        middle = self.k[:, None, None, None] * (
            s[..., :, None] * s[..., None, :] + c[..., None, None] * swap
        )
        if project:
            val, vec = np.linalg.eigh(middle)
            middle = (vec * np.maximum(val, 0.0)[..., None, :]) @ np.swapaxes(vec, -1, -2)
        # W (J, 2, 6, 12B): row (a, k) is w_a (x) unit k, in Q's flat order (row v, column l)
        basis = np.einsum("jiav,kl->jiakvl", w, np.eye(3)).reshape(*w.shape[:2], 6, 3 * num)
        moved = (middle @ basis).reshape(-1, 3 * num)  # (12J, 12B)
        return value, grad, basis.reshape(-1, 3 * num).T @ moved
