"""What the learned model brings to a rig-space fit: starts and a prior over the bones' motions.

The model's conditional prior p(z | M0) = N(mu_cond, I) and its posterior q(z | M0, Mt) decode
to shapes of M0 (:class:`~neurok_core.space.KinematicSpace`); each is turned into the rig
space's coordinates by fitting every bone's rigid motion to it (:func:`bone_fit`). Those are

- **starts**: the prior's draws that lie nearest the target, and the posterior of a target that
  shares M0's topology (its vertices correspond, so it can be encoded);
- **a prior**: a Gaussian over the fit's sample points, fitted to the draws (:class:`ShapePrior`),
  whose negative log-density is one more energy of the fit.

Everything here is in the normalised frame of M0 (object size 1), as the fit is.
"""

from __future__ import annotations

import numpy as np

from .space import RigSpace

PRIOR_DRAWS = 64
PRIOR_RANK = 16  # principal directions of the draws kept by the Gaussian
PRIOR_FLOOR = 0.02  # object sizes: the standard deviation of every other direction


def bone_fit(space: RigSpace, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each bone's rigid motion (rot (B, 3, 3), centre (B, 3)) that best moves the rest vertices
    it weighs onto ``vertices`` (N, 3): argmin sum_i m_i w_ib |R (X_i - h_b) + c - Y_i|^2
    (weighted Kabsch: Umeyama 1991 without scale). A bone with no vertices keeps the rest."""
    nb = space.num_bones
    rot = np.repeat(np.eye(3)[None], nb, 0)
    centre = space.heads.copy()
    bones, weights = space.vertex_bones, space.vertex_weights
    for b in range(nb):
        rows, cols = np.nonzero((bones == b) & (weights > 0))
        if not len(rows):
            continue
        w = weights[rows, cols] * space.masses[rows]  # (n,)
        if w.sum() <= 0:
            continue
        x, y = space.vertices[rows] - space.heads[b], vertices[rows]
        xm, ym = (w @ x) / w.sum(), (w @ y) / w.sum()
        cov = ((x - xm) * w[:, None]).T @ (y - ym)  # (3, 3) sum w x y^T
        u, _, vt = np.linalg.svd(cov)
        d = np.sign(np.linalg.det(vt.T @ u.T)) or 1.0
        r = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
        rot[b] = r
        centre[b] = ym - r @ xm
    return rot, centre


def prior_draws(kspace, count: int = PRIOR_DRAWS, seed: int = 0) -> np.ndarray:
    """(count, N, 3) shapes decoded from draws of the learned prior N(mu_cond, I), in the
    normalised frame of M0 (``kspace``: the object's learned KinematicSpace)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    eps = torch.randn((count, kspace.mu_cond.shape[0]), generator=gen)
    z = kspace.mu_cond[None] + eps.to(kspace.device, kspace.dtype)
    with torch.no_grad():
        verts = kspace.decode_vertices(z).double().cpu().numpy()  # (count, N, 3)
    return kspace.normalization.apply(verts.reshape(-1, 3)).reshape(verts.shape)


def posterior_shape(kspace, target_vertices: np.ndarray, points: int = 2048, seed: int = 0):
    """(N, 3) the shape decoded from the posterior mean of a target that shares M0's topology
    (``target_vertices`` (N, 3) in the caller's frame), normalised frame of M0."""
    import torch

    from ..geometry import locate, sample_surface

    rng = np.random.default_rng(seed)
    drawn = sample_surface(kspace.vertices, kspace.faces, points, rng)
    norm = kspace.normalization
    to = dict(dtype=kspace.dtype, device=kspace.device)
    rest = torch.as_tensor(norm.apply(locate(kspace.vertices, kspace.faces, drawn)), **to)[None]
    moved = torch.as_tensor(norm.apply(locate(target_vertices, kspace.faces, drawn)), **to)[None]
    with torch.no_grad():
        mu = kspace.model.encode_posterior(rest, moved, kspace.shape)[0]  # (1, k)
        verts = kspace.decode_vertices(mu)[0].double().cpu().numpy()
    return norm.apply(verts)


class ShapePrior:
    """A Gaussian over the fit's sample points x (P, 3), fitted to the draws' positions of those
    points ``draws`` (D, P, 3): mean m, the ``PRIOR_RANK`` leading principal directions U with
    their variances s^2, and ``PRIOR_FLOOR``^2 in every other direction.

    E_prior(x) = 1/(3P) [ sum_k (u_k . d)^2 / (s_k^2 + f^2) + |d - U U^T d|^2 / f^2 ],
    d = x - m (flattened): its residuals are linear in x, r = L d with L (R + 3P, 3P)."""

    def __init__(self, draws: np.ndarray):
        d, p, _ = draws.shape
        flat = draws.reshape(d, -1)  # (D, 3P)
        self.mean = flat.mean(0)
        centred = flat - self.mean
        _, s, vt = np.linalg.svd(centred, full_matrices=False)
        rank = min(PRIOR_RANK, len(s))
        self.basis = vt[:rank]  # (R, 3P)
        self.variance = s[:rank] ** 2 / max(d - 1, 1)  # (R,)
        self.scale = 1.0 / np.sqrt(3 * p)

    def residuals(self, x: np.ndarray) -> np.ndarray:
        """r (R + 3P,) with E_prior = |r|^2."""
        d = x.reshape(-1) - self.mean
        along = self.basis @ d  # (R,)
        rest = d - self.basis.T @ along
        f2 = PRIOR_FLOOR**2
        return self.scale * np.concatenate(
            [along / np.sqrt(self.variance + f2), rest / np.sqrt(f2)]
        )

    def matrix(self) -> np.ndarray:
        """L (R + 3P, 3P): r = L (x - m)."""
        f2 = PRIOR_FLOOR**2
        n = self.mean.shape[0]
        along = self.basis / np.sqrt(self.variance + f2)[:, None]
        rest = (np.eye(n) - self.basis.T @ self.basis) / np.sqrt(f2)
        return self.scale * np.concatenate([along, rest])
