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

    damping_ratio: the barrier as an inelastic stop (0: elastic). With s = |z(q) - mu| - radius
    the penetration and n = ds/dq, the dissipative force -c s' n acts while s > 0, with
    c = 2 damping_ratio sqrt(K m_s): K = V_b''(s) = 6 strength s the barrier's stiffness along
    n and m_s = 1 / (n^T G^-1 n) the inertia the motion along n has (G the mass metric), i.e.
    the contact is damped at this share of critical damping. c grows from 0 with the
    penetration, so the force is continuous, and since the cubic barrier has no length scale the
    share of the normal kinetic energy a contact takes is the same at every impact speed: the
    motion meets the limits of the learned shapes like a door its stop instead of bouncing off.
    """

    rest: Tensor
    basis: Tensor
    mean: Tensor
    radius: float
    strength: float
    damping_ratio: float = 0.0

    @classmethod
    def build(
        cls, latent: LatentMap, mass: float, strength: float, damping_ratio: float = 0.0
    ) -> PriorBarrier:
        rest = latent.rest.detach().to("cpu", torch.float64)
        basis = latent.basis.detach().to("cpu", torch.float64)
        mean = latent.prior_mean.detach().to("cpu", torch.float64)
        radius = max(prior_radius(rest.shape[0], mass), float((rest - mean).norm()))
        return cls(rest, basis, mean, radius, strength, damping_ratio)

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

    def contact(self, q: Tensor) -> tuple[float, Tensor] | None:
        """(s, n = ds/dq (kq,)) while the state is beyond the ball (s > 0) and the barrier
        damps (``damping_ratio`` > 0); None otherwise."""
        if self.damping_ratio <= 0.0:
            return None
        d = self.rest + self.basis @ q - self.mean
        r = float(d.norm())
        s = r - self.radius
        if s <= 0.0:
            return None
        return s, (self.basis.T @ d) / r

    def damping(self, s: float, n: Tensor, metric_inverse_n: Tensor) -> float:
        """c of the class docstring at penetration s, from n and G^-1 n."""
        return stop_damping(self.damping_ratio, self.strength, s, float(n @ metric_inverse_n))


def stop_damping(ratio: float, strength: float, s: float, inverse_inertia: float) -> float:
    """The contact damping c = 2 ratio sqrt(K m_s) of :class:`PriorBarrier` at penetration s,
    K = 6 strength s, from inverse_inertia = 1 / m_s = n^T G^-1 n."""
    return 2.0 * ratio * math.sqrt(6.0 * strength * s / inverse_inertia)
