"""Dropout and BatchNorm on shared fixed precision tensors against plain torch (2 and 3 parties),
with their gradients, and the issue's CNN block (conv, BatchNorm, relu, max-pool, dropout, linear).

Tolerances (precision 3, unit 10^-3): dropout one unit plus |x| * 5·10^-4 (1 / 0.7 is encoded as
1.429; a shared input's mask comes from the crypto provider, so the tests compare with plaintext
through the mask itself, reconstructed from autograd's saved copy); BatchNorm's outputs 5 units, input gradients 1% + 10 units; reductions over n values
(weight and bias gradients) n units, as each of the n products is within one unit or two."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy

sy.hook()
UNIT = 1e-3


def _close(got, want, rel, units):
    return torch.allclose(got, want, rtol=rel, atol=units * UNIT)


def dropout_mask(out):
    """The mask a training-mode dropout multiplied ``out``'s input by (0 or 1 / (1 - p)), reconstructed
    here for the test from the copy autograd saved (its own shares: the graph keeps the original)."""
    return out.grad_fn._saved_other.copy().get().float_precision()


def test_dropout_mask_comes_from_the_dealer(parties):
    """A shared input's mask is the crypto provider's, shared: the kept fraction is 1 - p, kept units are
    x / (1 - p) (1 / 0.7 encoded as 1.429: one unit + |x|·5·10^-4), dropped ones exactly 0, and the
    gradient is taken with the same mask."""
    ws, provider = parties
    g = torch.Generator().manual_seed(0)
    n = 20000  # the kept fraction's standard deviation: sqrt(0.21 / n) = 0.0032; the bound 0.02 is 6 of them
    x = torch.round((torch.rand(n, generator=g) * 1.95 + 0.05) * torch.where(torch.rand(n, generator=g) < 0.5, 1, -1)
                    * 1000) / 1000  # |x| in [0.05, 2]: a kept unit is never 0
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    out = F.dropout(sx, 0.3, training=True)
    (out * out).sum().backward()
    got, grad = out.get().float_precision(), sx.grad.get().float_precision()
    kept = got != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.02
    assert bool(((got[kept] - x[kept] / 0.7).abs() <= UNIT + x[kept].abs() * 5e-4).all())
    assert torch.equal(grad != 0, kept)  # the backward product used the same mask
    want = 2 * x / 0.49  # d/dx (x / 0.7)^2
    assert bool(((grad[kept] - want[kept]).abs() <= 5 * UNIT + x[kept].abs() * 3e-3).all())
    assert torch.equal(nn.Dropout(0.5).eval()(sx).get().float_precision(), x)  # eval: the identity
    del sx, out


def test_the_seed_governs_a_plain_mask_not_a_shared_one(parties2):
    """torch.manual_seed gives plain torch's mask on a fixed precision tensor that is not shared; a shared
    tensor's mask comes from the dealer's generator (keyed from the OS), which no seed reaches."""
    alice, bob, carol = parties2
    p = torch.round(torch.randn(4000) * 1000) / 1000
    torch.manual_seed(5)
    half = nn.Dropout(0.5)(p.fix_precision()).float_precision()  # 1 / (1 - 0.5) = 2: exact
    torch.manual_seed(5)
    assert torch.allclose(half, nn.Dropout(0.5)(p))
    masks = []
    for _ in range(2):
        sp = p.fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
        torch.manual_seed(5)
        masks.append(dropout_mask(F.dropout(sp, 0.5)))
        del sp
    torch.manual_seed(5)
    seeded = F.dropout(torch.ones(4000), 0.5)
    assert set(masks[0].unique().tolist()) == {0.0, 2.0}
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[0], seeded)
    sp = p.fix_precision().share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="cannot seed it"):
        torch.empty_like(sp).bernoulli_(0.5, generator=torch.Generator())
    with pytest.raises(sy.SyftError, match="use F.dropout"):
        torch.native_dropout(sp, 0.5, True)
    del sp


def test_feature_dropout_and_in_place_ops_on_a_shared_mask(parties2):
    """F.dropout2d drops whole channels with the dealer's mask (one bit per channel); a mask changed in
    place after bernoulli_ is divided as any value is."""
    alice, bob, carol = parties2
    x = torch.round((torch.rand(2, 8, 3, 3) + 0.1) * 1000) / 1000
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    got = F.dropout2d(sx, 0.5, training=True).get().float_precision()
    kept = got.flatten(2).ne(0)
    assert torch.equal(kept.all(2), kept.any(2))  # a channel is kept or dropped whole
    assert 0 < kept.all(2).sum() < 16
    assert torch.allclose(got[kept.all(2)], 2 * x[kept.all(2)])  # 1 / (1 - 0.5) = 2: exact
    m = torch.empty_like(sx).bernoulli_(0.5)
    m.mul_(3)
    bits = (m / 1).get().float_precision()
    m.div_(0.5)
    assert torch.allclose(m.get().float_precision(), bits * 2)  # 6 where kept: the in-place product counted
    assert set(bits.unique().tolist()) <= {0.0, 3.0}
    del sx, m


def _bn(seed=0):
    torch.manual_seed(seed)
    bn = nn.BatchNorm2d(3)
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 1.5)
        bn.bias.uniform_(-1, 1)
    return bn


@pytest.mark.parametrize("stats", ["public", "shared"])
def test_batch_norm_eval(parties, stats):
    ws, provider = parties
    bn = _bn().eval()
    x = torch.round(torch.randn(2, 3, 3, 3) * 1000) / 1000
    xx = x.clone().requires_grad_(True)
    want = bn(xx)
    (want * want).sum().backward()
    fixed = copy.deepcopy(bn).fix_precision()
    if stats == "shared":
        fixed.share(*ws, crypto_provider=provider)
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    out = fixed(sx)
    (out * out).sum().backward()
    assert _close(out.get().float_precision(), want.detach(), 0, 5)
    assert _close(sx.grad.get().float_precision(), xx.grad, 1e-2, 10)
    if stats == "shared":
        assert _close(fixed.weight.grad.get().float_precision(), bn.weight.grad, 1e-2, 2 * 18)
        assert _close(fixed.bias.grad.get().float_precision(), bn.bias.grad, 1e-2, 2 * 18)
    del sx, out


def test_batch_norm_training_updates_running_stats(parties):
    ws, provider = parties
    bn = _bn(1).train()
    x = torch.round(torch.randn(4, 3, 2, 2) * 1500) / 1000
    fixed = copy.deepcopy(bn).fix_precision().share(*ws, crypto_provider=provider)
    xx = x.clone().requires_grad_(True)
    want = bn(xx)
    (want * want * 0.5).sum().backward()
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    out = fixed(sx)
    (out * out * 0.5).sum().backward()
    assert _close(out.get().float_precision(), want.detach(), 1e-2, 5)
    assert _close(sx.grad.get().float_precision(), xx.grad, 2e-2, 10)
    assert _close(fixed.weight.grad.get().float_precision(), bn.weight.grad, 2e-2, 2 * 16)
    assert _close(fixed.bias.grad.get().float_precision(), bn.bias.grad, 0, 2 * 16)
    assert _close(fixed.running_mean.get().float_precision(), bn.running_mean, 0, 2)
    assert _close(fixed.running_var.get().float_precision(), bn.running_var, 1e-2, 2)
    assert fixed.num_batches_tracked.get().float_precision().item() == 1
    del sx, out


def test_batch_norm_refusals(parties2):
    alice, bob, carol = parties2
    plain = _bn().train()
    with pytest.raises(sy.SyftError, match=r"call .fix_precision\(\) on the module"):
        plain(torch.randn(2, 3, 2, 2).fix_precision().share(alice, bob, crypto_provider=carol))
    assert torch.equal(plain.running_mean, _bn().running_mean)  # nothing changed


def test_the_issues_cnn_block_trains_as_plaintext(parties2):
    """conv -> BatchNorm -> relu -> max-pool -> dropout -> linear, training mode, one SGD step."""
    alice, bob, carol = parties2
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Dropout(0.5), nn.Flatten(), nn.Linear(8, 3))
    x = torch.round(torch.randn(3, 1, 4, 4) * 1000) / 1000
    target = torch.tensor([0, 2, 1])
    secure = copy.deepcopy(model).fix_precision().share(alice, bob, crypto_provider=carol)
    masks = []  # the dealer's dropout mask, reconstructed for the test: plaintext applies the same one
    secure[4].register_forward_hook(lambda module, inputs, out: masks.append(dropout_mask(out)))
    model[4].register_forward_hook(lambda module, inputs, out: inputs[0] * masks[0])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    sloss = F.cross_entropy(secure(sx), target)
    sloss.backward()
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    assert abs(sloss.get().float_precision().item() - loss.item()) < 0.02 + 0.01 * loss.item()
    for (name, p), q in zip(model.named_parameters(), secure.parameters()):
        # through BatchNorm's backward (a difference of means, times 1/std = 2.5 here) the errors grow: within
        # 3% of the largest gradient plus 4 units per value summed (the conv's: 3·4·4 values; measured up to 105
        # units on its bias, whose exact gradient is 0)
        summed = 48 if name.startswith("0.") else 3
        err = (q.grad.get().float_precision() - p.grad).abs().max().item()
        assert err <= 0.03 * p.grad.abs().max().item() + 4 * summed * UNIT, name
    del sx, sloss


@pytest.mark.parametrize("kernel, stride, padding, dilation", [(3, 1, 1, 1), (3, 2, 1, 1), (2, 2, 0, 1), (3, 1, 0, 2)])
def test_convolution_gradients(parties2, kernel, stride, padding, dilation):
    """The input's, weight's and bias's gradients. A weight or bias gradient sums N·Ho·Wo products (up
    to 98 here), each within 4 units: g = 2y, and y is within ~2 units (the weights' encoding error,
    5·10^-4, times up to 18 inputs, plus one truncation); measured up to 1.06 times 2 units each."""
    alice, bob, carol = parties2
    torch.manual_seed(kernel + stride + padding + dilation)
    conv = nn.Conv2d(2, 3, kernel, stride=stride, padding=padding, dilation=dilation)
    x = torch.round(torch.randn(2, 2, 7, 7) * 1000) / 1000
    secure = copy.deepcopy(conv).fix_precision().share(alice, bob, crypto_provider=carol)
    xx = x.clone().requires_grad_(True)
    y = conv(xx)
    (y ** 2).sum().backward()
    summed = y.shape[0] * y.shape[2] * y.shape[3]
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
    (secure(sx) ** 2).sum().backward()
    assert _close(sx.grad.get().float_precision(), xx.grad, 1e-3, 10)
    assert _close(secure.weight.grad.get().float_precision(), conv.weight.grad, 1e-2, 4 * summed)
    assert _close(secure.bias.grad.get().float_precision(), conv.bias.grad, 1e-3, 4 * summed)
    del sx

