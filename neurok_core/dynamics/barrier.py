"""The prior barrier: a potential that keeps the latent state where the prior has its mass."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .system import LatentMap


def prior_radius(latent_dim: int, mass: float) -> float:
    """Radius of the ball centred on the mean that holds ``mass`` of N(mu, I) in k dimensions.

    |z - mu| follows the chi distribution with k degrees of freedom, so r^2 is the ``mass``
    quantile of chi-squared(k), 2 P^-1(k / 2, mass) with P the regularised lower incomplete
    gamma function (e.g. k = 16, mass 0.99: r = 5.0). ``scipy.special`` only: importing
    ``scipy.stats`` costs about a second.
    """
    from scipy.special import gammaincinv

    return float(math.sqrt(2.0 * gammaincinv(0.5 * latent_dim, mass)))


@dataclass(frozen=True)
class PriorBarrier:
    """V_b(q) = strength * max(0, |z(q) - mu| - radius)^3 with z(q) = z_rest + W q.

    Zero inside the ball, so it exerts no force near the rest state (``radius`` is at least
    |z_rest - mu|, making q = 0 an equilibrium even if the rest latent lies outside the 99% ball);
    cubic outside, so the force and its derivative are continuous (smooth for RK4). ``strength``
    is in joules per cubed latent unit. Tensors: rest (k,), basis (k, kq), mean (k,), float64 CPU.
    """

    rest: Tensor
    basis: Tensor
    mean: Tensor
    radius: float
    strength: float

    @classmethod
    def build(cls, latent: LatentMap, mass: float, strength: float) -> PriorBarrier:
        rest = latent.rest.detach().to("cpu", torch.float64)
        basis = latent.basis.detach().to("cpu", torch.float64)
        mean = latent.prior_mean.detach().to("cpu", torch.float64)
        radius = max(prior_radius(rest.shape[0], mass), float((rest - mean).norm()))
        return cls(rest=rest, basis=basis, mean=mean, radius=radius, strength=strength)

    def excess(self, q: Tensor) -> float:
        """How far z(q) lies outside the ball, in latent units (0 inside)."""
        return max(0.0, float((self.rest + self.basis @ q - self.mean).norm()) - self.radius)

    def energy_and_gradient(self, q: Tensor) -> tuple[float, Tensor]:
        """(V_b, dV_b/dq (kq,)): dV/dq = 3 strength s^2 W^T (z - mu) / |z - mu|."""
        d = self.rest + self.basis @ q - self.mean  # (k,)
        r = float(d.norm())
        s = r - self.radius
        if s <= 0.0:
            return 0.0, torch.zeros_like(q)
        grad = (3.0 * self.strength * s * s / r) * (self.basis.T @ d)  # (kq,)
        return self.strength * s**3, grad
