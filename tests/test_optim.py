"""The engine's own Adam step agrees with torch.optim.Adam."""

import pytest
import torch

from neurok_core.optim import Adam


def test_adam_matches_torch_optim():
    gen = torch.Generator().manual_seed(0)
    target = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    start = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    ours = start.clone().requires_grad_(True)
    ref = start.clone().requires_grad_(True)
    opt_ours, opt_ref = Adam(ours, lr=0.05), torch.optim.Adam([ref], lr=0.05)
    for _ in range(40):
        for p, opt in ((ours, opt_ours), (ref, opt_ref)):
            opt.zero_grad()
            (((p - target) ** 4).sum() + (p**2).sum()).backward()
            opt.step()
    assert torch.allclose(ours, ref, rtol=0, atol=1e-12)
    assert float((ours.detach() - start).abs().max()) > 0.5  # it moved


def test_adam_needs_a_trainable_tensor():
    with pytest.raises(ValueError, match="require grad"):
        Adam(torch.zeros(3), lr=0.1)
