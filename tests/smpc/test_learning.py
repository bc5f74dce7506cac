"""Encrypted inference and training: nn modules, losses and optimizers on shared tensors.

The layers sit below autograd (a FixedPrecisionTensor is a float32 tensor to autograd), so
``model(x)``, ``loss.backward()`` and ``optimizer.step()`` run unchanged on shared values."""
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy


def make_data(n=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    y = (x @ torch.tensor([[1.0], [-2.0], [0.5], [0.0]]) + 0.3)
    return x, y


def test_encrypted_inference_matches_plaintext(parties):
    ws, provider = parties
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x, _ = make_data(12)
    with torch.no_grad():
        want = model(x)
    model.fix_precision().share(*ws, crypto_provider=provider)
    sx = x.fix_precision().share(*ws, crypto_provider=provider)
    with torch.no_grad():
        out = model(sx)
    assert isinstance(out, sy.FixedPrecisionTensor) and out.shared
    pred = out.argmax(dim=1).get().float_precision().long()
    got = out.get().float_precision()
    assert (got - want).abs().max() < 0.05  # fixed-precision error through two layers
    assert torch.equal(pred, want.argmax(1))
    model.get().float_precision()  # the module's parameters come back as float Parameters
    assert all(type(p) is nn.Parameter for p in model.parameters())


def test_encrypted_training_follows_the_plaintext_run(parties2):
    alice, bob, carol = parties2
    x, y = make_data()
    torch.manual_seed(1)
    model = nn.Linear(4, 1)
    ref = nn.Linear(4, 1)
    ref.load_state_dict(model.state_dict())
    model.fix_precision().share(alice, bob, crypto_provider=carol)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    sy_ = y.fix_precision().share(alice, bob, crypto_provider=carol)
    losses, ref_losses = [], []
    for _ in range(6):
        opt.zero_grad()
        loss = F.mse_loss(model(sx), sy_)
        loss.backward()
        opt.step()
        losses.append(loss.get().float_precision().item())
        ref_opt.zero_grad()
        ref_loss = F.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
        ref_losses.append(ref_loss.item())
    assert losses[-1] < losses[0] / 3
    for a, b in zip(losses, ref_losses):
        assert abs(a - b) <= 0.02 * b + 0.01
    assert model.weight.grad is not None and model.weight.grad.shared
    model.get().float_precision()
    assert (model.weight - ref.weight).abs().max() < 0.02


def test_a_shared_module_keeps_its_optimizer(parties2):
    alice, bob, carol = parties2
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    ids = [id(p) for p in model.parameters()]
    model.fix_precision().share(alice, bob, crypto_provider=carol)
    assert [id(p) for p in model.parameters()] == ids
    assert all(isinstance(p, sy.FixedPrecisionTensor) and p.shared for p in model.parameters())
    x = torch.tensor([[1.0, 2.0]]).fix_precision().share(alice, bob, crypto_provider=carol)
    before = model.weight.clone().get().float_precision()
    model(x).sum().backward()
    opt.step()
    after = model.weight.clone().get().float_precision()
    assert torch.allclose(after, before - 0.5 * torch.tensor([[1.0, 2.0]]), atol=2e-3)
    model.get()
    assert all(isinstance(p, sy.FixedPrecisionTensor) and not p.shared for p in model.parameters())
    model.float_precision()
