"""A plain Adam step for the engine's small optimisations (rest state, inverse kinematics).

``torch.optim`` imports ``torch._dynamo`` on first use, about 2.5 s on these CPUs: more than
the whole kinematic space of a mesh otherwise takes. The update is Adam's (Kingma and Ba, 2015)
as ``torch.optim.Adam`` computes it with its defaults (no weight decay, no amsgrad), checked
against it in ``tests/test_optim.py``.
"""

from __future__ import annotations

import torch
from torch import Tensor


class Adam:
    """Adam on one tensor that requires grad: ``zero_grad()``, backward, ``step()``."""

    def __init__(
        self, param: Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps=1e-8
    ):
        if not param.requires_grad:
            raise ValueError("Adam: the parameter must require grad")
        self.param, self.lr, self.betas, self.eps = param, float(lr), betas, float(eps)
        self.m = torch.zeros_like(param)
        self.v = torch.zeros_like(param)
        self.t = 0

    def zero_grad(self) -> None:
        self.param.grad = None

    @torch.no_grad()
    def step(self) -> None:
        grad = self.param.grad
        if grad is None:
            return
        b1, b2 = self.betas
        self.t += 1
        self.m.mul_(b1).add_(grad, alpha=1.0 - b1)
        self.v.mul_(b2).addcmul_(grad, grad, value=1.0 - b2)
        step_size = self.lr / (1.0 - b1**self.t)
        denom = (self.v / (1.0 - b2**self.t)).sqrt_().add_(self.eps)
        self.param.addcdiv_(self.m, denom, value=-step_size)
