"""Beaver's formula on every layout (#38 item 3): ``protocols.beaver`` is the formula, its layouts
(a pooled triple or a dealer round of its own, a square's pair, mm stacked in two ring products,
a share computed here or on the party, a product divided in the same message) live in
``provider.BeaverTriple``. A plain reference beaver, the formula on plain tensors, is held equal
to it on each: both give f(x, y) mod 2^64 exactly (divided: within 1 of f(x, y) / div)."""
import gc

import pytest
import torch

import syft_lab as sy
from syft_lab.smpc import protocols, provider, ring
from syft_lab.tensors.additive_sharing import AdditiveSharingTensor

aten = torch.ops.aten
WORDS = (-2**63, 2**63 - 1)


def split(v, n, g):
    """n additive shares of v over Z_2^64."""
    rest = [torch.randint(*WORDS, v.shape, generator=g, dtype=torch.int64) for _ in range(n - 1)]
    return rest + [v - sum(rest, torch.zeros_like(v))]


def reference_beaver(f, x, y, n, g, extra=()):
    """Beaver's formula on plain shares: a triple (a, b, c = f(a, b)) split into n shares, e = x - a
    and d = y - b opened, z_i = c_i + f(e, b_i) + f(x_i, d). Returns the sum of the z_i."""
    a = torch.randint(*WORDS, x.shape, generator=g, dtype=torch.int64)
    b = torch.randint(*WORDS, y.shape, generator=g, dtype=torch.int64)
    xs, ys = split(x, n, g), split(y, n, g)
    As, Bs, Cs = split(a, n, g), split(b, n, g), split(f(a, b, *extra), n, g)
    e = sum(xi - ai for xi, ai in zip(xs, As))
    d = sum(yi - bi for yi, bi in zip(ys, Bs))
    z = [Cs[i] + f(e, Bs[i], *extra) + f(xs[i], d, *extra) for i in range(n)]
    return sum(z[1:], z[0])


def ring_mm(a, b):
    return ring.matmul(a, b)  # int64 mm mod 2^64 (torch's int64 kernel wraps too)


def conv(a, b, *extra):
    return aten.convolution.default(a, b, *extra)


CONV_EXTRA = (None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)  # bias, stride, padding, dilation, ...


@pytest.fixture
def workers(request):
    n = request.param
    ws = [sy.VirtualWorker(name) for name in ("alice", "bob", "dave")[:n]]
    carol = sy.VirtualWorker("carol")
    provider.clear_pool()
    yield ws, carol
    provider.clear_pool()
    gc.collect()
    for w in ws + [carol]:
        w.close()


def shared(v, parties, carol, g):
    return AdditiveSharingTensor([s.send(w) for s, w in zip(split(v, len(parties), g), parties)], carol)


def opened(z):
    return sum((s.get() for s in z.shares[1:]), z.shares[0].get())


LAYOUTS = [  # (name, f, plain f, x shape, y shape, extra, the same tensor twice, div)
    ("mul, pooled, computed here", aten.mul.Tensor, torch.mul, (3, 4), (3, 4), (), False, 1),
    ("mul of a broadcast", aten.mul.Tensor, torch.mul, (3, 4), (4,), (), False, 1),
    ("square pair", aten.mul.Tensor, torch.mul, (5,), (5,), (), True, 1),
    ("mm stacked, one ring product per party", aten.mm.default, ring_mm, (4, 6), (6, 3), (), False, 1),
    ("mm stacked, two ring products", aten.mm.default, ring_mm, (3, 200), (200, 2), (), False, 1),
    ("conv2d, a dealer round, f on the party", aten.convolution.default, conv, (1, 1, 4, 4), (2, 1, 3, 3),
     CONV_EXTRA, False, 1),
    ("mul divided in the same message", aten.mul.Tensor, torch.mul, (6,), (6,), (), False, 1000),
    ("mm divided in the same message", aten.mm.default, ring_mm, (2, 5), (5, 2), (), False, 1000),
]


@pytest.mark.parametrize("workers", [2, 3], ids=["2 parties", "3 parties"], indirect=True)
@pytest.mark.parametrize("name,f,plain,sx,sy,extra,same,div", LAYOUTS, ids=[row[0] for row in LAYOUTS])
def test_beaver_equals_the_reference_formula_on_every_layout(workers, name, f, plain, sx, sy, extra, same, div):
    parties, carol = workers
    g = torch.Generator().manual_seed(len(parties) * 100 + len(name))
    x = torch.randint(-10**6, 10**6, sx, generator=g, dtype=torch.int64)
    y = x if same else torch.randint(-10**6, 10**6, sy, generator=g, dtype=torch.int64)
    want = reference_beaver(plain, x, y, len(parties), g, extra)
    assert torch.equal(want, plain(x, y, *extra))  # the reference is Beaver's formula, exact
    xs = shared(x, parties, carol, g)
    ys = xs if same else shared(y, parties, carol, g)
    for _ in range(2):  # the second takes a triple made ahead (a pooled op's next one)
        got = opened(protocols.beaver(f, xs, ys, extra, div))
        if div == 1:
            assert torch.equal(got, want), name
        else:  # SecureML's truncation (2 parties) or the dealer's pair (3): off by at most 1
            exact = torch.div(want, div, rounding_mode="floor")
            assert (got - exact).abs().max() <= 1, (name, got, exact)
    del xs, ys


@pytest.mark.network
@pytest.mark.parametrize("name,f,plain,sx,sy,extra,same,div", [LAYOUTS[0], LAYOUTS[3], LAYOUTS[5], LAYOUTS[6]],
                         ids=[LAYOUTS[k][0] for k in (0, 3, 5, 6)])
def test_beaver_with_the_pieces_stored_on_worker_processes(remote_parties, monkeypatch, name, f, plain, sx, sy,
                                                           extra, same, div):
    """The dealer's rows stored on the parties (every row, however small): each share is computed
    on its party, mm and mul in two fused ops (addmm, addcmul), other ops f twice."""
    alice, bob, carol = remote_parties
    monkeypatch.setattr(provider, "DELIVER_BYTES", 0)
    provider.clear_pool()
    try:
        g = torch.Generator().manual_seed(7)
        x = torch.randint(-10**6, 10**6, sx, generator=g, dtype=torch.int64)
        y = torch.randint(-10**6, 10**6, sy, generator=g, dtype=torch.int64)
        want = reference_beaver(plain, x, y, 2, g, extra)
        got = opened(protocols.beaver(f, shared(x, [alice, bob], carol, g), shared(y, [alice, bob], carol, g),
                                      extra, div))
        if div == 1:
            assert torch.equal(got, want), name
        else:
            assert (got - torch.div(want, div, rounding_mode="floor")).abs().max() <= 1
    finally:
        provider.clear_pool()
