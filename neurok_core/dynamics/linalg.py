"""Small dense linear algebra in the reduced coordinates (kq x kq), float64 on the CPU."""

from __future__ import annotations

import torch
from torch import Tensor


def metric_solve(metric: Tensor, rhs: Tensor) -> Tensor:
    """Solve G x = b by Cholesky; G (kq, kq) symmetric positive definite, b (kq,) or (kq, m).

    A non-finite or indefinite G gives a NaN solution, which the integrator treats as a failed
    step (and retries smaller) instead of raising from deep inside a stage.
    """
    chol, info = torch.linalg.cholesky_ex(metric)
    if int(info) != 0 or not bool(torch.isfinite(chol).all()):
        return torch.full_like(rhs, float("nan"))
    col = rhs.unsqueeze(-1) if rhs.ndim == 1 else rhs
    out = torch.cholesky_solve(col, chol)
    return out.squeeze(-1) if rhs.ndim == 1 else out


def metric_lstsq(
    a: Tensor, b: Tensor, metric: Tensor, *, rcond: float = 1e-9, damping: float = 0.0
) -> Tensor:
    """The G-smallest least-squares solution of A x = b.

    x = argmin |A x - b|^2 + (damping s_max)^2 x^T G x, minimum x^T G x among the minimisers
    (Gauss's least-constraint / least-kinetic-energy choice). With G = L L^T and
    B = A L^-T = U S V^T: x = L^-T V diag(s / (s^2 + mu^2)) U^T b, singular values below
    rcond * s_max dropped.

    a: (m, kq); b: (m,); metric: (kq, kq). Returns (kq,).
    """
    kq = metric.shape[0]
    if kq == 0 or a.shape[0] == 0:
        return torch.zeros(kq, dtype=metric.dtype)
    chol, info = torch.linalg.cholesky_ex(0.5 * (metric + metric.T))
    if int(info) != 0:
        return torch.full((kq,), float("nan"), dtype=metric.dtype)
    # B = A L^-T  <=>  B^T = L^-1 A^T
    bt = torch.linalg.solve_triangular(chol, a.T, upper=False)  # (kq, m)
    u, s, vh = torch.linalg.svd(bt.T, full_matrices=False)  # (m, p), (p,), (p, kq)
    if s.numel() == 0 or float(s[0]) == 0.0:
        return torch.zeros(kq, dtype=metric.dtype)
    mu = damping * s[0]
    keep = s > rcond * s[0]
    gain = torch.where(keep, s / (s * s + mu * mu), torch.zeros_like(s))  # (p,)
    y = vh.T @ (gain * (u.T @ b))  # (kq,)
    return torch.linalg.solve_triangular(chol.T, y.unsqueeze(-1), upper=True).squeeze(-1)
