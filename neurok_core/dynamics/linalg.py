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
    a: Tensor,
    b: Tensor,
    metric: Tensor,
    basis: Tensor | None = None,
    *,
    rcond: float = 1e-9,
    damping: float = 0.0,
) -> Tensor:
    """The G-smallest least-squares solution of A x = b, with x restricted to span(N).

    x = argmin |A x - b|^2 + (damping s_max)^2 x^T G x over x in span(N), minimum x^T G x among
    the minimisers (Gauss's least-constraint / least-kinetic-energy choice). With N^T G N = L L^T
    and B = A N L^-T = U S V^T: x = N L^-T V diag(s / (s^2 + mu^2)) U^T b, singular values below
    rcond * s_max dropped.

    a: (m, kq); b: (m,); metric: (kq, kq); basis: (kq, r) or None for all of R^kq. Returns (kq,).
    """
    kq = metric.shape[0]
    n = torch.eye(kq, dtype=metric.dtype) if basis is None else basis  # (kq, r)
    if n.shape[1] == 0 or a.shape[0] == 0:
        return torch.zeros(kq, dtype=metric.dtype)
    g = n.T @ metric @ n  # (r, r)
    chol, info = torch.linalg.cholesky_ex(0.5 * (g + g.T))
    if int(info) != 0:
        return torch.full((kq,), float("nan"), dtype=metric.dtype)
    # B = A N L^-T  <=>  B^T = L^-1 (A N)^T
    bt = torch.linalg.solve_triangular(chol, (a @ n).T, upper=False)  # (r, m)
    u, s, vh = torch.linalg.svd(bt.T, full_matrices=False)  # (m, p), (p,), (p, r)
    if s.numel() == 0 or float(s[0]) == 0.0:
        return torch.zeros(kq, dtype=metric.dtype)
    mu = damping * s[0]
    keep = s > rcond * s[0]
    gain = torch.where(keep, s / (s * s + mu * mu), torch.zeros_like(s))  # (p,)
    y = vh.T @ (gain * (u.T @ b))  # (r,)
    z = torch.linalg.solve_triangular(chol.T, y.unsqueeze(-1), upper=True).squeeze(-1)  # (r,)
    return n @ z


def null_directions(rows: Tensor, metric: Tensor, threshold: float) -> Tensor:
    """Directions of q that (to first order) leave the given rows still: a (kq, r) basis.

    rows: (m, kq) a Jacobian; directions whose velocity per unit kinetic energy,
    |rows v| / sqrt(v^T G v), is below ``threshold`` are kept. Returns (kq, r), r may be 0.
    """
    kq = metric.shape[0]
    chol = torch.linalg.cholesky(0.5 * (metric + metric.T))
    bt = torch.linalg.solve_triangular(chol, rows.T, upper=False)  # (kq, m) = L^-1 A^T
    u, s, _ = torch.linalg.svd(bt, full_matrices=True)  # u (kq, kq)
    sv = torch.zeros(kq, dtype=metric.dtype)
    sv[: s.numel()] = s
    free = u[:, sv < threshold]  # (kq, r) in the L^T q coordinates
    return torch.linalg.solve_triangular(chol.T, free, upper=True)  # (kq, r)
