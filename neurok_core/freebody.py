"""A free translation of the whole object added to the coordinates of a learned space.

A learned space holds the shapes of its object about where the object stands; it cannot carry
the object far away as a whole (a drop from a height, sliding across a floor). With contact and
no pins, the coordinates are extended by a translation t of every point, x(q, t) = y(q) + t,
exact and linear, so the object can fall onto the ground or a collider and rest there while
its learned coordinates keep the shape. Rotation of the whole object stays with the learned
coordinates (a tumbling object is beyond this).

:class:`TranslatedKinematics` wraps a kinematics hook (x, J, D^2x and the Hessians of the local
model) of coordinates q = (a, t) (``neurok_core.simulate`` names the layers) with the
translation t = T q: x' = x + T q, J' = J + T, D^2x' = D^2x and H' = H, because the translation
is linear in q. ``restricted`` keeps both in a subspace (the dynamics' coordinates r, q = B r).
"""

from __future__ import annotations

import torch
from torch import Tensor


class TranslatedKinematics:
    """The hook ``inner`` plus the translation T q of every point, for coordinates q (m,).

    translation: T (3, m); select: S (k, m), the inner hook's coordinates S q (None: the inner
    hook takes q itself). Unrestricted, S = [I | 0] keeps the decoder's pass at its own k
    tangents (a = S q); restricted to a basis B (q = B r), the inner hook is restricted to
    S B and this hook's coordinates are r, with T B as its translation."""

    def __init__(self, inner, translation: Tensor, select: Tensor | None = None) -> None:
        self.inner, self.translation, self.select = inner, translation, select

    @property
    def has_hessian(self) -> bool:
        return bool(getattr(self.inner, "has_hessian", False))

    def restricted(self, basis: Tensor) -> TranslatedKinematics:
        inner_basis = basis if self.select is None else self.select.to(basis) @ basis
        return TranslatedKinematics(
            self.inner.restricted(inner_basis), self.translation.to(basis) @ basis
        )

    def _inner(self, q: Tensor) -> Tensor:
        return q if self.select is None else self.select.to(q) @ q

    def __call__(self, q: Tensor, qdot: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, jac, bias = self.inner(self._inner(q), self._inner(qdot))
        t = self.translation.to(x)
        if self.select is not None:
            jac = jac @ self.select.to(x)
        return x + (t @ q.to(x)), jac + t, bias

    def hessian(self, q: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x, jac, hess = self.inner.hessian(self._inner(q))
        t = self.translation.to(x)
        if self.select is not None:
            sel = self.select.to(x)
            jac = jac @ sel
            hess = torch.einsum("sakl,km,ln->samn", hess, sel, sel)
        return x + (t @ q.to(x)), jac + t, hess


def translation_map(latent_coords: int, dtype=torch.float64, device="cpu") -> Tensor:
    """T (3, kq + 3) with t = T q: the last three coordinates of q are the translation."""
    t = torch.zeros(3, latent_coords + 3, dtype=dtype, device=device)
    t[:, latent_coords:] = torch.eye(3, dtype=dtype, device=device)
    return t
