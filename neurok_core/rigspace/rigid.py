"""Rigid bones as exact coordinates of an implicit step (design section 12, "rotations as exact
coordinates").

The state stays ``Q`` (B, 4, 3) (package docstring) and every energy is evaluated on it, but
each moving bone's F is kept a rotation: a step's unknowns are, per moving bone, a turn
phi (rad, about world axes u_a) and a shift tau (m),

    F <- exp([sum_a phi_a u_a]x) F,    c <- c + tau        (``retract``),

so no stiff energy holds the bones rigid and Newton sees no nonlinearity of a penalty. A bone
whose vertices lie on a line does not turn about it (that turn moves no vertex: it has no
mass); a bone of one vertex does not turn at all.

With ``q`` the flat state, the step's tangent map ``tangent(Q)`` (12B, K) gives dq/dxi at Q:
a turn about u moves F by [u]x F, so Q[b, :3, :] = F^T by -F^T [u]x. The equations of the
implicit midpoint step are tested against the directions ``tangent(Y, midpoint=True)``
F_m^-T [u]x, which annihilate the rigidity's constraint forces F_m Lambda (Lambda symmetric:
tr(A^T F_m^-1 F_m Lambda) = 0 for A skew), so the step keeps the energy exactly (Gonzalez
1999: the constraint F^T F = I is quadratic, its discrete derivative is its derivative at the
midpoint).
"""

from __future__ import annotations

import numpy as np


def hat(u: np.ndarray) -> np.ndarray:
    """[u]x (..., 3, 3) of vectors u (..., 3)."""
    out = np.zeros(u.shape[:-1] + (3, 3))
    out[..., 0, 1], out[..., 0, 2] = -u[..., 2], u[..., 1]
    out[..., 1, 0], out[..., 1, 2] = u[..., 2], -u[..., 0]
    out[..., 2, 0], out[..., 2, 1] = -u[..., 1], u[..., 0]
    return out


def exp_rotations(phi: np.ndarray) -> np.ndarray:
    """Rotations (n, 3, 3) by the rotation vectors ``phi`` (n, 3) (Rodrigues)."""
    angle = np.linalg.norm(phi, axis=1)
    k = hat(phi)
    small = angle < 1e-8
    safe = np.where(small, 1.0, angle)
    a = np.where(small, 1.0 - angle**2 / 6.0, np.sin(angle) / safe)
    b = np.where(small, 0.5 - angle**2 / 24.0, (1.0 - np.cos(angle)) / safe**2)
    return np.eye(3) + a[:, None, None] * k + b[:, None, None] * (k @ k)


class RigidCoordinates:
    """The turns and shifts of the moving bones of a space (module docstring).

    live: (L,) the moving bones; turns: (L,) how many turns each has (3, 2 for a bone along a
    line: none about the line, 0 for a bone of one vertex); line: (L, 3) the rest direction of
    a line bone (zeros otherwise); size: the object's size (m)."""

    def __init__(self, space):
        self.live = np.flatnonzero(~space.fixed)
        seen = (np.ones((space.num_bones, 3), dtype=bool) if space.seen is None else space.seen)[
            self.live
        ]
        count = seen.sum(1)
        self.turns = np.where(count >= 2, 3, np.where(count == 1, 2, 0))
        self.line = np.zeros((len(self.live), 3))
        for n, b in enumerate(self.live):
            if count[n] == 1:
                self.line[n] = space.axes[b][:, np.flatnonzero(seen[n])[0]]
        self.num_bones = space.num_bones
        self.size = space.object_size
        self.width = self.turns + 3  # (L,) unknowns of each moving bone
        self.offsets = np.concatenate([[0], np.cumsum(self.width)])
        self.dim = int(self.offsets[-1])
        # per unknown: 1 for a turn (its gradient is an energy), the size for a shift
        shift = [np.r_[np.zeros(t, dtype=bool), np.ones(3, dtype=bool)] for t in self.turns]
        self.shift = np.concatenate(shift) if shift else np.zeros(0, dtype=bool)
        self.weight = np.where(self.shift, self.size, 1.0)

    def axes(self, q: np.ndarray) -> list[np.ndarray]:
        """Per moving bone, its turn axes (t, 3) (world, orthonormal) at the state ``q``."""
        out = []
        eye = np.eye(3)
        for n, b in enumerate(self.live):
            t = self.turns[n]
            if t == 3:
                out.append(eye)
            elif t == 2:
                d = q[b, :3, :].T @ self.line[n]  # the line's direction now, F a
                d = d / max(float(np.linalg.norm(d)), 1e-300)
                a = np.cross(d, eye[int(np.argmin(np.abs(d)))])
                a /= np.linalg.norm(a)
                out.append(np.stack([a, np.cross(d, a)]))
            else:
                out.append(np.zeros((0, 3)))
        return out

    def tangent(self, q: np.ndarray, axes=None, midpoint: bool = False) -> np.ndarray:
        """(12B, K) dq/dxi at ``q`` (``midpoint``: the test directions F^-T [u]x of the
        midpoint step, ``q`` the midpoint); ``axes`` as :meth:`axes` gives them."""
        axes = self.axes(q) if axes is None else axes
        out = np.zeros((self.num_bones, 4, 3, self.dim))
        for n, b in enumerate(self.live):
            col = self.offsets[n]
            f = q[b, :3, :].T  # (3, 3)
            if len(axes[n]):
                u = hat(axes[n])  # (t, 3, 3)
                if midpoint:
                    finv = np.linalg.inv(f)
                    # (F^-T [u]x)^T = -[u]x F^-1
                    out[b, :3, :, col : col + len(u)] = np.moveaxis(-(u @ finv), 0, -1)
                else:
                    # ([u]x F)^T = -F^T [u]x
                    out[b, :3, :, col : col + len(u)] = np.moveaxis(-(f.T @ u), 0, -1)
            shift = col + len(axes[n])
            out[b, 3, :, shift : shift + 3] = np.eye(3)
        return out.reshape(12 * self.num_bones, self.dim)

    def curvature(self, q1, axes, g: np.ndarray, y=None) -> np.ndarray:
        """(K, K) the derivative of the test directions along the turns, contracted with the
        flat residual ``g`` (12B,): d(test_a . g)/d xi_c at fixed g, for the turns a, c of one
        bone (the constraint forces' share of the step's Jacobian). Backward Euler (``y``
        None): test_a = -F1^T [u_a]x, d/d xi_c = F1^T [u_c]x [u_a]x. The midpoint step
        (``y`` the midpoint): test_a = -[u_a]x F_m^-1, F_m = (F0 + F1) / 2, d/d xi_c =
        [u_a]x F_m^-1 ([u_c]x F1 / 2) F_m^-1."""
        out = np.zeros((self.dim, self.dim))
        blocks = g.reshape(self.num_bones, 4, 3)
        for n, b in enumerate(self.live):
            t = len(axes[n])
            if not t:
                continue
            u = hat(axes[n])  # (t, 3, 3)
            f1 = q1[b, :3, :].T
            gb = blocks[b, :3, :]
            if y is None:
                d = np.einsum("ij,cjk,akl->acil", f1.T, u, u)
            else:
                finv = np.linalg.inv(y[b, :3, :].T)
                right = 0.5 * (u @ f1) @ finv  # (t, 3, 3): [u_c]x F1 / 2 F_m^-1
                d = np.einsum("aij,jk,ckl->acil", u, finv, right)
            col = self.offsets[n]
            out[col : col + t, col : col + t] = np.einsum("acil,il->ac", d, gb)
        return out

    def retract(self, q: np.ndarray, xi: np.ndarray, axes) -> np.ndarray:
        """The state ``q`` moved by ``xi`` (K,): each moving bone turned and shifted."""
        out = q.copy()
        for n, b in enumerate(self.live):
            col = self.offsets[n]
            t = len(axes[n])
            if t:
                phi = xi[col : col + t] @ axes[n]
                rot = exp_rotations(phi[None])[0]
                out[b, :3, :] = (rot @ q[b, :3, :].T).T
            out[b, 3, :] += xi[col + t : col + t + 3]
        return out

    def size_of(self, xi: np.ndarray) -> float:
        """The largest turn (rad) or shift (object sizes) in ``xi``."""
        if not len(xi):
            return 0.0
        return float(np.max(np.abs(xi) / self.weight))

    def turned(self, q: np.ndarray, v: np.ndarray, h: float) -> np.ndarray:
        """Where the moving bones get in ``h`` seconds at the velocities ``v`` (tangent): each
        F turned by exp(h [w]x), w from the skew part of F' F^T, each centre moved by h c'."""
        out = q.copy()
        live = self.live
        if not len(live):
            return out
        f = np.swapaxes(q[live, :3, :], 1, 2)  # (L, 3, 3)
        fd = np.swapaxes(v[live, :3, :], 1, 2)
        w = fd @ np.swapaxes(f, 1, 2)
        w = 0.5 * (w - np.swapaxes(w, 1, 2))
        omega = np.stack([w[:, 2, 1], w[:, 0, 2], w[:, 1, 0]], 1) * h  # (L, 3)
        rot = exp_rotations(omega)
        out[live, :3, :] = np.swapaxes(rot @ f, 1, 2)
        out[live, 3, :] = q[live, 3, :] + h * v[live, 3, :]
        return out

    def project(self, q: np.ndarray, v: np.ndarray, mass: np.ndarray, ridge: float):
        """Velocities ``v`` (B, 4, 3) made tangent at ``q``: their M-orthogonal projection on
        the bones' rigid motions (turns and shifts)."""
        t = self.tangent(q)
        if not t.shape[1]:
            return np.zeros_like(v)
        mt = mass @ t
        g = t.T @ mt
        g[np.diag_indices_from(g)] += ridge
        coef = np.linalg.solve(g, mt.T @ v.reshape(-1))
        return (t @ coef).reshape(v.shape)
