"""The NeuROK networks: config, shapes, identity at init, forward-mode AD, loss, training, prior."""

import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from bounds import assert_within
from torch.testing import assert_close

from neurok_core.dualquat import dq_apply, dq_from_rt
from neurok_core.model import PRESETS, LossConfig, ModelConfig, NeuROKModel, ShapeCode, build_model
from neurok_core.model.layers import Attention, LayerNorm, gaussian_kl
from neurok_core.model.losses import knn_indices, rigidity_error

D = torch.float64


def tiny_model(seed: int = 0, *, dtype=torch.float32, randomize_head: bool = False, **overrides):
    torch.manual_seed(seed)
    model = NeuROKModel(ModelConfig.preset("tiny", **overrides)).to(dtype)
    model.eval()  # training code calls .train() itself
    if randomize_head:  # the head starts at zero; derivative checks need a non-trivial map
        with torch.no_grad():
            model.decoder.head.weight.normal_(0.0, 0.3)
            model.decoder.head.bias.normal_(0.0, 0.05)
    return model


def random_points(batch: int, points: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(batch, points, 3, generator=gen) - 0.5).to(dtype)


def hinge_bar(batch: int, points: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A thin bar along x whose half x > 0 swings about the z axis through the origin."""
    gen = torch.Generator().manual_seed(seed)
    rest = (torch.rand(batch, points, 3, generator=gen) - 0.5) * torch.tensor([1.0, 0.1, 0.1])
    angle = torch.rand(batch, 1, generator=gen) * 1.2  # (B, 1) radians
    c, s = torch.cos(angle), torch.sin(angle)
    x, y, z = rest.unbind(-1)
    swung = torch.stack((c * x - s * y, s * x + c * y, z), dim=-1)
    deformed = torch.where((x > 0)[..., None], swung, rest)
    return rest, deformed


# ---------------------------------------------------------------------------------- config


def test_presets_and_parameter_budgets():
    assert set(PRESETS) >= {"tiny", "default"}
    assert build_model("tiny").num_parameters() < 50_000
    assert 1_000_000 <= build_model("default").num_parameters() <= 2_000_000
    cfg = ModelConfig.preset("default", latent_dim=8)
    assert cfg.latent_dim == 8 and cfg.width == PRESETS["default"].width
    with pytest.raises(ValueError, match="unknown model preset"):
        ModelConfig.preset("huge")


def test_config_round_trip_and_strictness():
    cfg = ModelConfig.preset("tiny", deformation="displacement")
    assert ModelConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown model config keys"):
        ModelConfig.from_dict({**cfg.to_dict(), "dropout": 0.1})
    with pytest.raises(TypeError):
        ModelConfig(96)  # keyword-only
    for bad in (
        {"width": 0},
        {"width": 30, "heads": 4},
        {"deformation": "quaternion"},
        {"encoder_layers": 1.5},
        {"bone_sigma": -1.0},
    ):
        with pytest.raises(ValueError):
            ModelConfig(**bad)
    # the loss's settings are the training's: their own config, checked against the model
    with pytest.raises(ValueError, match="kl_weight"):
        LossConfig(kl_weight=-1.0)
    with pytest.raises(ValueError, match="rigidity_neighbors"):
        LossConfig(rigidity_neighbors=400).check(ModelConfig(num_points=384))
    with pytest.raises(ValueError, match="dual quaternions"):
        LossConfig(prior_rigidity_weight=1.0).check(ModelConfig(deformation="displacement"))
    assert LossConfig.from_dict(LossConfig.preset("skinned").to_dict()) == LossConfig.preset(
        "skinned"
    )
    # a model config written when it also held the loss's settings still loads
    old = {**cfg.to_dict(), "kl_weight": 0.02, "rigidity_neighbors": 4}
    assert ModelConfig.from_dict(old) == cfg
    assert LossConfig.from_dict(old) == LossConfig(kl_weight=0.02, rigidity_neighbors=4)


# ---------------------------------------------------------------------------------- shapes


def test_output_shapes_tiny():
    model = tiny_model()
    cfg = model.config
    rest = random_points(3, cfg.num_points, 0)
    shape = model.encode_shape(rest)
    assert isinstance(shape, ShapeCode)
    assert shape.tokens.shape == (3, cfg.num_latents, cfg.width)
    assert shape.mu_cond.shape == (3, cfg.latent_dim)
    mu, logvar = model.encode_posterior(rest, rest + 0.1, shape)
    assert mu.shape == logvar.shape == (3, cfg.latent_dim)
    z = torch.randn(3, cfg.latent_dim)
    query = random_points(3, 50, 1)
    dqs = model.decode(z, shape, query)
    assert dqs.shape == (3, 50, 8)
    assert_close(dqs[..., :4].norm(dim=-1), torch.ones(3, 50))
    assert model.deform(z, shape, query).shape == (3, 50, 3)


def test_one_shape_code_decodes_a_batch_of_latents():
    model = tiny_model(randomize_head=True)
    shape = model.encode_shape(random_points(1, 64, 2))
    z = torch.randn(5, model.config.latent_dim)
    query = random_points(1, 20, 3)
    batched = model.deform(z, shape, query)  # (5, 20, 3)
    assert batched.shape == (5, 20, 3)
    for i in range(5):
        assert_close(batched[i], model.deform(z[i : i + 1], shape, query)[0])


def test_untrained_model_decodes_to_identity():
    model = tiny_model()
    rest = random_points(2, 64, 4)
    shape = model.encode_shape(rest)
    z = 3.0 * torch.randn(2, model.config.latent_dim)
    query = random_points(2, 30, 5)
    assert_close(model.deform(z, shape, query), query)
    # The loss then reduces to the squared size of the deformation, summed over the points.
    deformed = rest + torch.tensor([0.1, -0.2, 0.05])
    out = model.loss(rest, deformed)
    expected = ((deformed - rest) ** 2).sum(dim=(1, 2)).mean()
    assert_close(out["recon"], expected)
    assert_close(out["rigidity"], expected)  # each neighbour misses by the same translation


def test_attention_is_plain_softmax_attention():
    torch.manual_seed(0)
    attn = Attention(8, 6, heads=2, dim_head=4).to(D)
    x, ctx = torch.randn(3, 5, 8, dtype=D), torch.randn(3, 7, 6, dtype=D)
    q = attn.to_q(x).view(3, 5, 2, 4).transpose(1, 2)
    k, v = (t.view(3, 7, 2, 4).transpose(1, 2) for t in attn.to_kv(ctx).chunk(2, -1))
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert_close(attn(x, ctx), attn.to_out(ref.transpose(1, 2).reshape(3, 5, 8)))


# ---------------------------------------------------------------------- forward-mode AD


@pytest.mark.parametrize("training", [True, False])
def test_layer_norm_matches_torch_and_has_exact_second_derivatives(training):
    torch.manual_seed(0)
    norm = LayerNorm(6).to(D).train(training)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x, v = torch.randn(4, 6, dtype=D), torch.randn(4, 6, dtype=D)
    reference = torch.nn.LayerNorm(6).to(D)
    reference.load_state_dict(norm.state_dict())
    assert_close(norm(x), reference(x))

    def directional(y):
        return torch.func.jvp(norm, (y,), (v,))[1]

    _, second = torch.func.jvp(directional, (x,), (v,))
    h = 1e-4
    fd = (directional(x + h * v) - directional(x - h * v)) / (2 * h)
    assert_close(second, fd, rtol=1e-6, atol=1e-8)
    # The same through the plain forward-mode API.
    expected = directional(x)
    with fwAD.dual_level():
        tangent = fwAD.unpack_dual(norm(fwAD.make_dual(x, v))).tangent
    assert_close(tangent, expected)


def test_train_and_eval_modes_compute_the_same_deformation():
    model = tiny_model(randomize_head=True)
    shape = model.encode_shape(random_points(2, 64, 17))
    z, query = torch.randn(2, model.config.latent_dim), random_points(2, 9, 18)
    expected = model.deform(z, shape, query)
    model.train()
    assert_close(model.deform(z, model.encode_shape(random_points(2, 64, 17)), query), expected)


def _deform_fn(model):
    shape = model.encode_shape(random_points(2, 64, 6, D))
    query = random_points(2, 12, 7, D)
    return lambda z: model.deform(z, shape, query)


@pytest.mark.parametrize("deformation, training", [("dualquat", False), ("displacement", True)])
def test_forward_mode_derivatives_of_the_decoder(deformation, training):
    model = tiny_model(dtype=D, randomize_head=True, deformation=deformation).train(training)
    deform = _deform_fn(model)
    gen = torch.Generator().manual_seed(8)
    z = torch.randn(2, model.config.latent_dim, dtype=D, generator=gen)
    v = torch.randn(z.shape, dtype=D, generator=gen)
    with torch.no_grad():
        # First derivative DF[v] against central differences.
        _, first = torch.func.jvp(deform, (z,), (v,))
        h = 1e-5
        fd = (deform(z + h * v) - deform(z - h * v)) / (2 * h)
        assert_close(first, fd, rtol=1e-6, atol=1e-8)
        assert first.abs().max() > 1e-3  # the map really depends on z

        # Second directional derivative D^2F[v, v] by forward-over-forward.
        def directional(latent):
            return torch.func.jvp(deform, (latent,), (v,))[1]

        _, second = torch.func.jvp(directional, (z,), (v,))
        h2 = 1e-4
        fd2 = (deform(z + h2 * v) - 2 * deform(z) + deform(z - h2 * v)) / h2**2
        assert_close(second, fd2, rtol=1e-4, atol=1e-6)
        fd2_jvp = (directional(z + h2 * v) - directional(z - h2 * v)) / (2 * h2)
        assert_close(second, fd2_jvp, rtol=1e-6, atol=1e-8)
    # Full Jacobians: forward mode equals reverse mode.
    assert_close(torch.func.jacfwd(deform)(z), torch.func.jacrev(deform)(z))


# -------------------------------------------------------------------------------- the loss


def test_gaussian_kl_matches_torch_distributions():
    gen = torch.Generator().manual_seed(9)
    mu, logvar, prior = (torch.randn(4, 6, dtype=D, generator=gen) for _ in range(3))
    q = torch.distributions.Normal(mu, torch.exp(0.5 * logvar))
    p = torch.distributions.Normal(prior, torch.ones_like(prior))
    expected = torch.distributions.kl_divergence(q, p).sum(-1)
    assert_close(gaussian_kl(mu, logvar, prior), expected)


def test_knn_excludes_self_and_finds_nearest():
    pts = random_points(2, 40, 10, D)
    idx = knn_indices(pts, 5)
    assert idx.shape == (2, 40, 5)
    assert not (idx == torch.arange(40)[None, :, None]).any()
    dist = torch.cdist(pts, pts) + torch.eye(40, dtype=D) * 1e9
    assert_close(torch.gather(dist, -1, idx), dist.sort(dim=-1).values[..., :5])
    with pytest.raises(ValueError):
        knn_indices(pts, 40)


def test_rigidity_error_is_zero_for_the_true_rigid_motion():
    rest = random_points(2, 30, 11, D)
    angle = torch.tensor(0.7, dtype=D)
    rot = torch.stack(
        [torch.cos(angle / 2), torch.zeros_like(angle), torch.sin(angle / 2), angle * 0]
    )
    t = torch.tensor([0.2, -0.1, 0.3], dtype=D)
    dqs = dq_from_rt(rot, t).expand(2, 30, 8)
    deformed = dq_apply(dqs, rest)
    nb = knn_indices(rest, 4)
    assert_close(rigidity_error(dqs, rest, deformed, nb), torch.zeros(2, dtype=D))
    moved = rigidity_error(dqs, rest, deformed + 0.01, nb)
    assert_within(moved, above=0, strict=True, what="rigidity error of a non-rigid motion")


def test_loss_with_given_neighbours_equals_computed_and_is_differentiable():
    model = tiny_model(randomize_head=True)
    rest, deformed = hinge_bar(2, model.config.num_points, 12)
    cfg = LossConfig.preset("tiny")
    nb = knn_indices(rest, cfg.rigidity_neighbors)
    a = model.loss(rest, deformed, sample=False, loss_config=cfg)
    b = model.loss(rest, deformed, neighbors=nb, sample=False, loss_config=cfg)
    for key in ("loss", "recon", "rigidity", "kl"):
        assert_close(a[key], b[key])
    expected = a["recon"] + cfg.rigidity_weight * a["rigidity"] + cfg.kl_weight * a["kl"]
    assert_close(a["loss"], expected)
    a["loss"].backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    # forward() is the loss (the DistributedDataParallel entry point).
    assert_close(model(rest, deformed, sample=False, loss_config=cfg)["loss"], a["loss"])


def test_prior_rigidity_measures_the_decoded_field_at_prior_samples():
    """The prior term: zero for a field that moves every point by one rigid motion (the
    untrained head gives the identity everywhere), positive for a random field, off in
    validation (sample=False), in the loss with its weight, and its gradient reaches the
    decoder."""
    rest, deformed = hinge_bar(2, 64, 3)
    cfg = LossConfig.preset("tiny", prior_rigidity_weight=2.0)
    still = tiny_model()
    out = still.loss(rest, deformed, generator=torch.Generator().manual_seed(0), loss_config=cfg)
    assert out["prior_rigidity"].item() == 0.0

    model = tiny_model(randomize_head=True)
    gen = torch.Generator().manual_seed(1)
    out = model.loss(rest, deformed, generator=gen, loss_config=cfg)
    assert out["prior_rigidity"].item() > 0
    expected = (
        out["recon"]
        + cfg.rigidity_weight * out["rigidity"]
        + cfg.prior_rigidity_weight * out["prior_rigidity"]
        + cfg.kl_weight * out["kl"]
    )
    assert_close(out["loss"], expected)
    model.zero_grad()
    out["prior_rigidity"].backward()
    assert float(model.decoder.head.weight.grad.abs().sum()) > 0
    assert model.loss(rest, deformed, sample=False, loss_config=cfg)["prior_rigidity"].item() == 0
    off = tiny_model(randomize_head=True).loss(rest, deformed, generator=gen)
    assert off["prior_rigidity"].item() == 0.0


def _field_rigidity(field, rest, robust):
    neighbors = knn_indices(rest, 8)
    return rigidity_error(field, rest, dq_apply(field, rest), neighbors, robust=robust)[0]


def test_robust_prior_rigidity_tells_a_hinge_from_a_crumple():
    """The Charbonnier form sums sqrt(d^2 + c^2) - c over the neighbour misfits d. A field that
    turns half a bar rigidly about a hinge and one whose points turn a little each at random,
    scaled to the same squared-misfit sum, are equal under the squared form; the robust form
    charges the crumple far more (its misfits are many and small, the hinge's few and large)."""
    gen = torch.Generator().manual_seed(0)
    rest = (torch.rand(1, 256, 3, generator=gen, dtype=torch.float64) - 0.5) * torch.tensor(
        [1.0, 0.1, 0.02], dtype=torch.float64
    )
    x = rest[..., 0]
    half = torch.tensor(0.25, dtype=torch.float64)  # 30 degrees about z through the origin
    turn = torch.stack([half.cos(), 0 * half, 0 * half, half.sin()]).to(rest)
    hinge = dq_from_rt(turn.expand(1, 256, 4), torch.zeros_like(rest))
    identity = dq_from_rt(
        torch.tensor([1.0, 0, 0, 0], dtype=rest.dtype).expand(1, 256, 4), 0 * rest
    )
    hinge = torch.where((x > 0)[..., None], hinge, identity)  # (1, 256, 8)

    def crumple(scale):
        axis = torch.randn(1, 256, 3, generator=torch.Generator().manual_seed(1), dtype=rest.dtype)
        angle = scale * axis.norm(dim=-1, keepdim=True)
        vector = torch.sin(angle / 2) * axis / axis.norm(dim=-1, keepdim=True)
        return dq_from_rt(torch.cat([torch.cos(angle / 2), vector], -1), 0 * rest)

    target = float(_field_rigidity(hinge, rest, 0.0))
    low, high = 1e-4, 1.0  # the crumple's scale with the hinge's squared sum, by bisection
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (
            (mid, high) if float(_field_rigidity(crumple(mid), rest, 0.0)) < target else (low, mid)
        )
    crumpled = crumple(0.5 * (low + high))
    assert float(_field_rigidity(crumpled, rest, 0.0)) == pytest.approx(target, rel=1e-6)
    c = 0.002
    assert float(_field_rigidity(crumpled, rest, c)) > 3.0 * float(_field_rigidity(hinge, rest, c))
    # the formula, pair by pair
    nb = knn_indices(rest, 8)[0]  # (P, K)
    moved = dq_apply(crumpled[0][:, None, :], rest[0][nb])  # (P, K, 3) p's motion on j
    d2 = ((moved - dq_apply(crumpled, rest)[0][nb]) ** 2).sum(-1)  # (P, K)
    want = (torch.sqrt(d2 + c * c) - c).mean(-1).sum()
    assert_close(_field_rigidity(crumpled, rest, c), want)
    with pytest.raises(ValueError, match="prior_rigidity_robust"):
        LossConfig.preset("tiny", prior_rigidity_robust=-1.0)


def test_loss_decreases_on_a_bending_bar():
    model = tiny_model(seed=1).train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    rest, deformed = hinge_bar(8, model.config.num_points, 13)
    nb = knn_indices(rest, LossConfig.preset("tiny").rigidity_neighbors)
    gen = torch.Generator().manual_seed(14)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        out = model.loss(rest, deformed, neighbors=nb, generator=gen)
        out["loss"].backward()
        opt.step()
        losses.append(out["recon"].item())
    assert all(math.isfinite(x) for x in losses)
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0], losses


def test_displacement_ablation_runs_and_trains():
    model = tiny_model(seed=2, deformation="displacement")
    rest, deformed = hinge_bar(4, model.config.num_points, 15)
    shape = model.encode_shape(rest)
    z = torch.randn(4, model.config.latent_dim)
    assert model.decode(z, shape, rest).shape == (4, model.config.num_points, 3)
    assert_close(model.deform(z, shape, rest), rest)  # zero head: no displacement
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    first = None
    for _ in range(15):
        opt.zero_grad()
        out = model.loss(rest, deformed)
        assert out["rigidity"].item() == 0.0
        out["loss"].backward()
        opt.step()
        first = out["recon"].item() if first is None else first
    assert out["recon"].item() < first


# ----------------------------------------------------------------------------------- prior


def test_sample_prior_statistics_and_reproducibility():
    model = tiny_model()
    shape = model.encode_shape(random_points(2, 64, 16))
    z = model.sample_prior(shape, 4000, torch.Generator().manual_seed(0))
    assert z.shape == (2, 4000, model.config.latent_dim)
    with torch.no_grad():
        assert_close(z.mean(1), shape.mu_cond, atol=0.08, rtol=0)
        assert_close(z.std(1), torch.ones_like(shape.mu_cond), atol=0.06, rtol=0)
    again = model.sample_prior(shape, 4000, torch.Generator().manual_seed(0))
    assert torch.equal(z, again)
