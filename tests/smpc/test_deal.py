"""The crypto provider's material is drawn on its own worker (the ``deal`` command, issue 29, 1).

A dealer program carries the shapes of its random words, never the words: the message a client
sends is the same size whatever the material's size, and the words come from the worker's
cryptographic generator, not torch's. The service validates a deal as it validates run_graph.
"""
import json

import pytest
import torch

from syft_lab.plans.graph import Node, PlanGraph, Value
from syft_lab.smpc import provider
from syft_lab.workers import randomness, service as service_module
from syft_lab.workers.limits import Limits
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService

aten = torch.ops.aten


class ProviderMessages:
    """Every command message a client sends its crypto provider (any worker kind)."""

    def __init__(self, worker):
        self.worker, self.sent = worker, []
        self._submit = worker.submit_request
        worker.submit_request = self.submit

    def submit(self, msg, **kw):
        self.sent.append(dict(msg))
        return self._submit(msg, **kw)

    def close(self):
        del self.worker.submit_request


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    if isinstance(v, dict):
        return [t for x in v.values() for t in _tensors(x)]
    return []


def _check_no_words(sent):
    deals = [m for m in sent if m["c"] == "deal"]
    assert deals and all(m["c"] == "deal" for m in sent)  # the provider is sent dealer programs only
    for m in deals:
        assert not _tensors(m)  # no tensor rides in the message
        assert all(not g["constants"] for g in json.loads(m["g"])["graphs"])
    return sum(len(m["g"]) for m in deals)


def test_in_process_provider_is_sent_shapes_not_words(parties2):
    """In process every random word is a deal the provider's service fills; the product is right."""
    alice, bob, carol = parties2
    x = torch.tensor([0.5, -1.25, 3.0])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    provider.clear_pool()
    rec = ProviderMessages(carol)
    try:
        got = (sx * sx).get().float_precision()
    finally:
        rec.close()
        provider.clear_pool()
    assert torch.allclose(got, x * x, atol=1e-3)
    deals = [m for m in rec.sent if m["c"] == "deal"]
    assert deals and all(not _tensors(m) for m in rec.sent)
    del sx


@pytest.mark.network
def test_remote_dealer_program_size_is_independent_of_the_material(remote_parties):
    """A worker process provider: a product of 4 and of 40,000 elements (pooled triples of
    ~2 MB of words per party row) send dealer programs of about the same few hundred bytes."""
    sizes = {}
    for n in (4, 40_000):
        x = torch.linspace(-3, 3, n)
        alice, bob, carol = remote_parties
        sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
        provider.clear_pool()
        rec = ProviderMessages(carol)
        try:
            got = (sx * sx).get().float_precision()
        finally:
            rec.close()
            provider.clear_pool()
        assert torch.allclose(got, x * x, atol=1e-2)
        sizes[n] = _check_no_words(rec.sent)
        del sx
    material = 3 * 2 * 40_000 * 8  # a, b, c of one triple, each shared in two: bytes the provider made
    assert sizes[40_000] < 4096 < material and abs(sizes[40_000] - sizes[4]) < 64


def test_the_providers_draws_come_from_the_csprng_not_torch(parties2, monkeypatch):
    """The words a deal fills are the cryptographic generator's (every drawn word counted), and
    torch's Mersenne Twister is never advanced by the dealer."""
    alice, bob, carol = parties2
    drawn = []

    def counted(shape, bits=64):
        out = randomness.random_words(shape) if bits == 64 else randomness.random_below(shape, bits)
        drawn.append((tuple(shape), bits))
        return out

    monkeypatch.setattr(service_module, "random_words", lambda shape: counted(shape))
    monkeypatch.setattr(service_module, "random_below", lambda shape, bits: counted(shape, bits))
    x = torch.tensor([[1.5, -2.0], [0.25, 4.0]])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    provider.clear_pool()
    state = torch.get_rng_state()
    try:
        product, relu = (sx * sx).get().float_precision(), sx.relu().get().float_precision()
    finally:
        provider.clear_pool()
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.allclose(product, x * x, atol=1e-3) and torch.allclose(relu, x.relu(), atol=1e-3)
    widths = {b for _, b in drawn}
    assert 64 in widths and 1 in widths  # ring elements (triples, masks) and relu's random bits
    assert sum(torch.Size(s).numel() for s, _ in drawn) >= 2 * 2 * 4  # at least one triple's a and b
    del sx


def _deal_graph(op=aten.sum.dim_IntList, shape=(2, 3), dtype="int64", constants=()):
    return PlanGraph("deal", [{"name": "r0", "role": "input", "shape": list(shape), "dtype": dtype}],
                     list(constants), [Node(op, [Value("input", 0), [0]], {}, [((shape[1],), dtype)])],
                     [Value("node", 0)], False)


def _deal(service, graph_json, bits=(64,), o=(901,)):
    reply, then = ServiceConnection(service, Session()).answer({"c": "deal", "g": graph_json, "i": [], "o": list(o),
                                                                "ret": list(o), "bits": list(bits)})
    service.reply_done(then)  # the reply has gone out: what it held is free
    return reply


def test_deal_runs_its_program_on_fresh_words():
    """Two deals of one program give different sums of freshly drawn words; bits bound them."""
    service = WorkerService("carol", unlimited=True)
    g = _deal_graph().to_json()
    a, b = _deal(service, g)["ok"][0], _deal(service, g)["ok"][0]
    assert a.shape == (3,) and a.dtype == torch.int64 and not torch.equal(a, b)
    low = _deal(service, g, bits=[1])["ok"][0]
    assert int(low.min()) >= 0 and int(low.max()) <= 2  # the sum of two bits per column
    assert not service.core.objects  # the returned values were not kept


@pytest.mark.parametrize("case, error", [
    ("bits 0", "width of 1 to 64"), ("bits 65", "width of 1 to 64"), ("no bits", "width of 1 to 64"),
    ("float input", "int64 of a fixed shape"), ("constants", "carries no constants"),
    ("op not allowed", None), ("too many bits", "width of 1 to 64"),
])
def test_deal_refuses_what_run_graph_refuses_and_more(case, error):
    """A deal is a run_graph: the same allow-list; beyond it, only int64 draws of 1 to 64 bits,
    and no constants (the words are drawn on the worker). Nothing is stored."""
    service = WorkerService("carol", unlimited=True)
    g, bits = _deal_graph().to_json(), [64]
    if case == "bits 0":
        bits = [0]
    elif case == "bits 65":
        bits = [65]
    elif case == "no bits":
        bits = []
    elif case == "too many bits":
        bits = [64, 64]
    elif case == "float input":
        g = _deal_graph(dtype="float32").to_json()
    elif case == "constants":
        g = _deal_graph(constants=[torch.zeros(2, dtype=torch.int64)]).to_json()
    elif case == "op not allowed":
        g = g.replace("aten.sum.dim_IntList", "aten.set_.source_Tensor")
    err = _deal(service, g, bits)["err"]
    if error is None:
        assert err["t"] == "OpNotAllowedError" and "aten.set_.source_Tensor" in err["m"]
    else:
        assert err["t"] == "SyftError" and error in err["m"]
    assert not service.core.objects


def test_deal_draws_count_against_the_memory_budget():
    """Words beyond the worker's memory limit are refused before they are drawn."""
    service = WorkerService("carol", Limits(max_bytes=2**20))
    reply = _deal(service, _deal_graph(shape=(2, 2**17)).to_json())
    assert reply["err"]["t"] == "QuotaExceededError" and "random words" in reply["err"]["m"]
    assert _deal(service, _deal_graph(shape=(2, 8)).to_json())["ok"][0].shape == (8,)
    assert service.core.budget.reserved == 0  # nothing stays reserved after a deal
