"""Issue 30's "Done when", completed: `%` and `//` by a shared value on a grid; every op of test_op_grid.py's
grid on worker processes with 2 and 3 parties (the ops that file does not run there), dropout with
the dealer's mask, the losses and BatchNorm, and the gradient-aliasing fix on worker processes.

`%` by a shared m is exact to the encoding (the remainder of the encodings, torch's sign: the
divisor's) where its quotient estimate holds: |x / m| <= ~40 and 0.1 <= |m| <= ~300 (the
reciprocal's domain; docs/secure-computation.md). The grid takes |m| in [0.5, 10] of both signs,
x in [-20, 20] with zeros, and exact multiples of m (remainder 0, the floor's edge)."""
import copy
import gc
import json

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy
import test_op_grid as grid_tests  # the grid, its bounds and its runner (a module: nothing collected twice)
from syft_lab import events
from syft_lab.smpc import provider, runtime

sy.hook()
UNIT = 1e-3
grid, exact = grid_tests.grid, grid_tests.exact


def modulus():
    return grid(0.5, 10, seed=2) * torch.where(torch.arange(24).view(4, 6) % 2 == 0, 1.0, -1.0)


def dividend():
    x = grid_tests.general()
    x[2] = torch.round(modulus()[2] * torch.tensor([-3.0, -1.0, 0.0, 1.0, 2.0, 4.0]) * 1000) / 1000  # multiples
    return x


SHARED_MOD = {
    "remainder shared": ((dividend, modulus), lambda a, b: torch.remainder(a, b), exact),
    "remainder shared, % operator": ((dividend, modulus), lambda a, b: a % b, exact),
    "remainder shared, public dividend": ((modulus,), lambda b: torch.remainder(dividend(), b), exact),
    "floor divide shared": ((dividend, modulus), lambda a, b: a // b, exact),
    "floor divide -0.7": ((dividend,), lambda a: torch.div(a, -0.7, rounding_mode="floor"), exact),
}
# into the grid's table, so that its runner knows them (test_op_grid.py's own lists were made when it was imported)
grid_tests.OPS.update(SHARED_MOD)


@pytest.mark.parametrize("name", list(SHARED_MOD))
def test_remainder_by_a_shared_value_on_a_grid(parties, name):
    ws, provider_ = parties
    grid_tests.run(name, ws, provider_)


@pytest.mark.parametrize("name", ["floor divide -0.7"])
def test_floor_division_by_a_public_number_not_shared(name):
    grid_tests.run(name, None, None)


def test_the_gradient_of_remainder_with_respect_to_a_shared_modulus(parties):
    """d(x % m)/dx = 1, d(x % m)/dm = -floor(x / m): the floor division of the same protocol."""
    ws, provider_ = parties
    x = torch.tensor([7.5, -7.5, 3.0, -0.25, 19.9, 0.0])
    m = torch.tensor([2.0, 2.0, -1.5, 0.7, -3.0, 1.1])
    sx = x.fix_precision().share(*ws, crypto_provider=provider_, requires_grad=True)
    sm = m.fix_precision().share(*ws, crypto_provider=provider_, requires_grad=True)
    (sx % sm * 2).sum().backward()
    xx, mm = x.clone().requires_grad_(True), m.clone().requires_grad_(True)
    (xx % mm * 2).sum().backward()
    assert torch.equal(sx.grad.float_precision(), xx.grad)  # public: the incoming gradient itself
    assert torch.equal(sm.grad.get().float_precision(), mm.grad)
    with pytest.raises(sy.SyftError, match="rounding_mode='floor' only"):
        torch.div(sx, 2, rounding_mode="trunc")
    del sx, sm


def test_remainder_by_a_shared_value_at_its_domains_edge(parties2):
    """The quotient's estimate bounds the domain (a shared m cannot be checked): at its edge, |x / m| of
    40 and |m| of 0.1, every remainder is still exact."""
    alice, bob, carol = parties2
    m = torch.tensor([0.5, -0.5, 0.1, 7.0])
    x = torch.tensor([19.999, 19.75, 3.999, -279.5])  # |x / m| up to 40
    got = (x.fix_precision().share(alice, bob, crypto_provider=carol)
           % m.fix_precision().share(alice, bob, crypto_provider=carol)).get().float_precision()
    assert torch.allclose(got.double(), torch.remainder(x.double(), m.double()), atol=1e-5)


def _params(test):
    return next(mark.args[1] for mark in test.pytestmark if mark.name == "parametrize")


ON_PROCESSES_2 = [n for n in grid_tests.OPS if n not in grid_tests.REMOTE]
ON_PROCESSES_3 = [n for n in grid_tests.OPS if n not in _params(grid_tests.test_op_on_worker_processes_3_parties)]


@pytest.mark.network
@pytest.mark.parametrize("name", ON_PROCESSES_2)
def test_the_rest_of_the_grid_on_worker_processes_2_parties(remote_parties, name):
    alice, bob, carol = remote_parties
    grid_tests.run(name, (alice, bob), carol)


@pytest.mark.network
@pytest.mark.parametrize("name", ON_PROCESSES_3)
def test_the_rest_of_the_grid_on_worker_processes_3_parties(remote_parties3, name):
    alice, bob, dave, carol = remote_parties3
    grid_tests.run(name, (alice, bob, dave), carol)


def _released(workers):
    provider.clear_pool()
    for w in workers:
        w.flush()
        assert w.objects == {}


@pytest.mark.network
@pytest.mark.parametrize("n", [2, 3])
def test_dropout_with_the_dealers_mask_on_worker_processes(remote_parties3, n):
    """The dealer's mask on worker processes: the kept fraction, kept units x / (1 - p), dropped ones 0,
    the gradient with the same mask; the provider's ledger counts the mask as material and no record,
    view or event shows its bits."""
    alice, bob, dave, carol = remote_parties3
    ws = (alice, bob, dave)[:n]
    got_events = []
    unsubscribe = events.subscribe(got_events.append)
    g = torch.Generator().manual_seed(n)
    size = 4000  # the kept fraction's standard deviation: sqrt(0.21 / 4000) = 0.0072; the bound is 7 of them
    x = torch.round((torch.rand(size, generator=g) * 1.95 + 0.05) * 1000) / 1000
    try:
        sx = x.fix_precision().share(*ws, crypto_provider=carol, requires_grad=True)
        out = F.dropout(sx, 0.3)
        noise = out.grad_fn._saved_other
        (out * out).sum().backward()
        world = sy.world({"out": out, "noise": noise}).to_dict()
        texts = [json.dumps(w.ledger()) for w in (*ws, carol)] + [
            json.dumps(world), json.dumps(sy.chain(noise).to_dict()), repr(noise), json.dumps(got_events, default=str)]
    finally:
        unsubscribe()
    lanes = {w["id"]: w for w in world["workers"]}
    assert lanes["carol"]["ledger"]["material"]["dropout mask (Bernoulli)"] >= 1
    got, grad = out.get().float_precision(), sx.grad.get().float_precision()
    kept = got != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.05
    assert bool(((got[kept] - x[kept] / 0.7).abs() <= UNIT + x[kept] * 5e-4).all())
    assert torch.equal(grad != 0, kept)
    assert bool(((grad[kept] - 2 * x[kept] / 0.49).abs() <= 5 * UNIT + x[kept] * 3e-3).all())
    head = kept[:24].tolist()
    for pattern in (", ".join(str(int(b)) for b in head), ", ".join(str(b) for b in head)):
        assert not any(pattern in t for t in texts)
    del sx, out, noise
    _released((*ws, carol))


@pytest.mark.network
def test_each_gradient_owns_its_shares_on_worker_processes(remote_parties):
    alice, bob, carol = remote_parties
    a = torch.tensor([1.0, 2.0]).fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
    b = torch.tensor([3.0, -4.0]).fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
    (a + b).backward(torch.tensor([0.5, -1.0]).fix_precision().share(alice, bob, crypto_provider=carol))
    assert torch.allclose(a.grad.get().float_precision(), torch.tensor([0.5, -1.0]))
    assert torch.allclose(b.grad.get().float_precision(), torch.tensor([0.5, -1.0]))  # not ObjectNotFoundError
    del a, b
    _released((alice, bob, carol))


@pytest.mark.network
@pytest.mark.parametrize("n", [2, 3])
def test_losses_and_batch_norm_on_worker_processes(remote_parties3, n):
    """cross-entropy (public indices) and nll_loss of log_softmax (shared indices), binary cross-entropy,
    BatchNorm in eval mode with shared running statistics: forward and input gradient, within the
    bounds test_digits.py and test_layers.py assert in process."""
    alice, bob, dave, carol = remote_parties3
    ws = (alice, bob, dave)[:n]
    logits = torch.tensor([[1.5, -0.5, 0.25], [-1.0, 2.0, 0.5]])
    target = torch.tensor([2, 1])
    ll = logits.clone().requires_grad_(True)
    want = F.cross_entropy(ll, target)
    want.backward()
    shared_idx = target.float().fix_precision().share(*ws, crypto_provider=carol)
    for tgt, fn in ((target, F.cross_entropy), (shared_idx, lambda x, t: F.nll_loss(F.log_softmax(x, 1), t))):
        sl = logits.fix_precision().share(*ws, crypto_provider=carol, requires_grad=True)
        loss = fn(sl, tgt)
        loss.backward()
        assert abs(loss.get().float_precision().item() - want.item()) <= 0.01 * want.item() + 1e-2
        assert torch.allclose(sl.grad.get().float_precision(), ll.grad, atol=3e-3)
        del sl, loss
    p = torch.tensor([0.1, 0.6, 0.9, 0.35])
    t = torch.tensor([0.0, 1.0, 1.0, 0.0])
    pp = p.clone().requires_grad_(True)
    bce = F.binary_cross_entropy(pp, t)
    bce.backward()
    sp = p.fix_precision().share(*ws, crypto_provider=carol, requires_grad=True)
    sloss = F.binary_cross_entropy(sp, t.fix_precision().share(*ws, crypto_provider=carol))
    sloss.backward()
    assert abs(sloss.get().float_precision().item() - bce.item()) <= 0.02 * bce.item() + 1e-2
    assert torch.allclose(sp.grad.get().float_precision(), pp.grad, rtol=0.02, atol=5e-3)
    torch.manual_seed(0)
    bn = nn.BatchNorm2d(2).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
    x = torch.round(torch.randn(1, 2, 2, 2) * 1000) / 1000
    xx = x.clone().requires_grad_(True)
    (bn(xx) ** 2).sum().backward()
    secure = copy.deepcopy(bn).fix_precision().share(*ws, crypto_provider=carol)
    sx = x.fix_precision().share(*ws, crypto_provider=carol, requires_grad=True)
    out = secure(sx)
    (out * out).sum().backward()
    assert torch.allclose(out.get().float_precision(), bn(x).detach(), atol=5 * UNIT)
    assert torch.allclose(sx.grad.get().float_precision(), xx.grad, rtol=1e-2, atol=10 * UNIT)
    del shared_idx, tgt, sp, sloss, sx, out, secure
    gc.collect()  # autograd's graph of a module holds cycles
    _released((*ws, carol))


def test_remainder_by_a_shared_value_records_its_rounds(parties2):
    """Its protocol steps are on its result's node (last_op), as every op's are."""
    alice, bob, carol = parties2
    sx = torch.randn(3, 4).fix_precision().share(alice, bob, crypto_provider=carol)
    sm = (torch.rand(3, 4) + 0.5).fix_precision().share(alice, bob, crypto_provider=carol)
    before = runtime.totals["rounds"]
    r = sx % sm
    assert r.child.last_op["op"] == "remainder" and r.child.last_op["rounds"] == runtime.totals["rounds"] - before
    del sx, sm, r
