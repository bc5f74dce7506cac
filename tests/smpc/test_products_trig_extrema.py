"""Issue 41, item 3: prod (and cumprod), cos/sin, amax/amin over any dims, init.orthogonal_, triu/tril,
masked_select/masked_scatter by a public mask, logsumexp, softplus, elu/selu/celu and expm1 on shared
tensors, each against plain torch on 2 and 3 parties (VirtualWorkers) and on fixed precision tensors
that are not shared, forward and backward; what is refused says why; no result shows a share."""
import json

import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.tensors.additive_sharing import AdditiveSharingTensor

sy.hook()
UNIT = 1e-3
X = torch.tensor([[0.5, -1.25, 2.0, 1.5, 0.75], [3.0, 0.75, -1.5, 0.0, 1.25], [1.0, 1.0, -0.5, 2.0, -0.75]])
WIDE = torch.round(torch.linspace(-8, 8, 40) * 1000).view(4, 10) / 1000
ANGLES = torch.round(torch.linspace(-32, 32, 45) * 1000).view(9, 5) / 1000  # CrypTen's domain and beyond: 10 pi

# name: (input, op, absolute error bound); each one forward and backward of (op(x) * w).sum()
OPS = {
    "prod": (X, lambda t: t.prod(), 4 * UNIT),
    "prod of a row without zeros": (X, lambda t: t[2].prod(), 3 * UNIT),
    "prod(dim 1), odd length": (X, lambda t: t.prod(1), 4 * UNIT),
    "prod(dim 0, keepdim)": (X, lambda t: t.prod(0, keepdim=True) * t, 6 * UNIT),
    "cos": (ANGLES, torch.cos, 2 * UNIT),
    "sin": (ANGLES, torch.sin, 2 * UNIT),
    "amax(dim 1)": (X, lambda t: t.amax(1), 0),
    "amax over two dims": (X.view(3, 1, 5), lambda t: t.amax((0, 2)), 0),
    "amax(keepdim)": (X, lambda t: t.amax(0, keepdim=True) * t, 2 * UNIT),
    "amin(dims 0, 1), ties": (torch.tensor([[1.0, -2.0], [-2.0, 3.0]]), lambda t: t.amin((0, 1)), 0),
    "amin(dim -1)": (X, lambda t: t.amin(-1), 0),
    # exp, log and sigmoid's errors (docs: 'Nonlinear functions'), each kept in its domain
    "logsumexp(dim 1)": (WIDE, lambda t: torch.logsumexp(t, 1), 0.015),
    "logsumexp over all, keepdim": (WIDE, lambda t: torch.logsumexp(t, (0, 1), keepdim=True) * t, 0.1),
    "softplus": (WIDE, F.softplus, 8 * UNIT),
    "softplus(beta 2)": (WIDE, lambda t: F.softplus(t, beta=2.0), 8 * UNIT),
    "elu": (WIDE, F.elu, 6 * UNIT),
    "elu in place, selu, celu": (WIDE, lambda t: F.elu(t * 1, 0.5, inplace=True) + F.selu(t) + F.celu(t, 2.0), 0.012),
    "expm1": (WIDE / 8, torch.expm1, 0.016),  # exp's: relative x^2 / 256 + 5·10^-3
    "triu(1)": (X, lambda t: t.triu(1), 0),
    "tril(-1), in place": (X, lambda t: (t * 1).tril_(-1), 0),
    "masked_select, public mask": (X, lambda t: t.masked_select(X > 0.6), 0),
    "masked_scatter, public mask": (X, lambda t: t.masked_scatter(X < 0, t * 3), 0),
}


def _value(t):
    return t.get().float_precision() if t.shared else t.float_precision()


def _run(name, parties=None, provider=None):
    x, op, bound = OPS[name]
    xx = x.clone().requires_grad_(True)
    want = op(xx)
    weights = torch.linspace(0.5, 1.5, want.numel()).view(want.shape)
    (want * weights).sum().backward()
    if parties is None:
        sx = x.fix_precision().requires_grad_(True)
    else:
        sx = x.fix_precision().share(*parties, crypto_provider=provider, requires_grad=True)
    got = op(sx)
    assert isinstance(got.child, AdditiveSharingTensor) == (parties is not None)
    (got * weights).sum().backward()
    torch.testing.assert_close(_value(got), want.detach(), atol=bound + 1e-6, rtol=0)
    # a gradient passes one unit more per product on its way back (cos' is sin's, and the other way)
    torch.testing.assert_close(_value(sx.grad), xx.grad, atol=bound + 3 * UNIT, rtol=0)
    del sx, got


@pytest.mark.parametrize("name", list(OPS))
def test_products_trig_and_extrema_on_shared_tensors_are_torchs(parties, name):
    ws, provider = parties
    _run(name, ws, provider)


@pytest.mark.parametrize("name", list(OPS))
def test_products_trig_and_extrema_on_fixed_precision_tensors_are_torchs(name):
    _run(name)


def test_prod_takes_log_depth_rounds(parties2):
    """64 factors: 6 levels of products (about twice 8 factors' 3), not 63 products in a chain (a chain
    would take at least one protocol step per product)."""
    from syft_lab.smpc import runtime
    alice, bob, carol = parties2
    x = 1 + torch.round(torch.linspace(-0.05, 0.05, 64) * 1000) / 1000
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    steps = {}
    for n in (8, 64):
        before = runtime.totals["rounds"]
        out = sx[:n].prod()
        steps[n] = runtime.totals["rounds"] - before
        assert abs(out.get().float_precision().item() - x[:n].double().prod().item()) < 0.01
    assert steps[64] < 63 and steps[64] <= 2.5 * steps[8], steps
    del sx, out


def test_cumprod_is_torchs_and_its_gradient_is_refused_with_the_reason(parties):
    ws, provider = parties
    sx = X.fix_precision().share(*ws, crypto_provider=provider)
    torch.testing.assert_close(_value(sx.cumprod(1)), X.cumprod(1), atol=6 * UNIT, rtol=0)
    torch.testing.assert_close(_value(torch.cumprod(sx, 0)), X.cumprod(0), atol=6 * UNIT, rtol=0)
    sg = X.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    with pytest.raises(SyftError, match="cumprod .* no gradient.*exp\\(cumsum\\(log\\(x\\)\\)\\)"):
        sg.cumprod(1)
    with torch.no_grad():
        torch.testing.assert_close(_value(sg.cumprod(1)), X.cumprod(1), atol=6 * UNIT, rtol=0)
    del sx, sg


def test_amax_of_a_0_dim_tensor_and_refusals(parties):
    ws, provider = parties
    s0 = torch.tensor(2.5).fix_precision().share(*ws, crypto_provider=provider)
    assert _value(s0.amax()).item() == 2.5 and _value(s0.amin(0)).item() == 2.5
    assert _value(s0.prod(0)).item() == 2.5 and _value(s0.prod()).item() == 2.5
    for reduce in (lambda t: t.amax(1), lambda t: t.prod(1)):  # as torch: an IndexError
        with pytest.raises(IndexError, match="Dimension out of range"):
            reduce(s0)
        with pytest.raises(IndexError, match="Dimension out of range"):
            reduce(torch.tensor(2.5))
    with pytest.raises(SyftError, match="public bool mask: a shared mask would have to be opened"):
        X.fix_precision().share(*ws, crypto_provider=provider).masked_select(s0 > 0)
    with pytest.raises(SyftError, match="dtype"):
        X.fix_precision().share(*ws, crypto_provider=provider).prod(dtype=torch.float64)
    del s0


@pytest.mark.parametrize("shape, gain", [((3, 5), 1.0), ((6, 2, 2, 2), 2.0)])
def test_orthogonal_init_keeps_a_shared_weight_shared_with_torchs_values(parties, shape, gain):
    """Drawn here as torch draws it for the same seed (its QR runs on public values), then shared."""
    ws, provider = parties
    torch.manual_seed(7)
    want = torch.nn.init.orthogonal_(torch.empty(shape), gain=gain)
    layer = torch.nn.Linear(shape[1], shape[0]) if len(shape) == 2 else torch.nn.Conv2d(2, 6, 2)
    layer.fix_precision().share(*ws, crypto_provider=provider)
    torch.manual_seed(7)
    out = torch.nn.init.orthogonal_(layer.weight, gain=gain)
    assert out is layer.weight and layer.weight.shared and layer.weight.requires_grad
    got = _value(layer.weight)  # reconstructs it (the shares come here)
    torch.testing.assert_close(got, want, atol=0.51 * UNIT, rtol=0)
    flat = got.view(shape[0], -1)
    rows = flat @ flat.t() if shape[0] <= flat.shape[1] else flat.t() @ flat
    torch.testing.assert_close(rows, gain ** 2 * torch.eye(rows.shape[0]), atol=0.02, rtol=0)
    del layer, out


def test_no_share_shows_in_the_new_ops_results(parties2):
    """The results of the ops above: their reprs, chain nodes and the ledgers
    hold no share's value (each share a uniform 64-bit word: a number of 6 digits or more)."""
    alice, bob, carol = parties2
    sx = X.fix_precision().share(alice, bob, crypto_provider=carol)
    results = [sx.prod(), sx.prod(1), sx.cumprod(1), sx.cos(), sx.sin(), sx.amax((0, 1)), sx.amin(0, keepdim=True),
               sx.triu(), sx.masked_select(X > 0), torch.logsumexp(sx, 1), F.softplus(sx), F.elu(sx)]
    words = set()
    for r in results + [sx]:
        for p in r.child.shares:
            words |= {str(v) for v in p.location.core.objects[p.id_at_location].reshape(-1).tolist()}
    words = {w for w in words if len(w.lstrip("-")) >= 6}
    assert len(words) > 40
    texts = [repr(r) + str(r) + json.dumps(sy.chain(r).to_dict()) + repr(r.child) for r in results]
    texts += [json.dumps(w.ledger()) for w in (alice, bob, carol)]
    for text in texts:
        assert not any(w in text for w in words)
    del sx, results
