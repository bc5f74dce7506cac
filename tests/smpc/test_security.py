"""What secret sharing promises: a share alone looks uniform, nothing shows a share or the
secret, the crypto provider never holds a share of an input, bad input gets clear errors."""
import json
import logging
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab import events

N = 4096  # sharings per test (the elements of one tensor are shared independently)
Z_1E_6 = 4.753  # the standard normal quantile of 1 - 1e-6


def chi2_critical(df: int, z: float = Z_1E_6) -> float:
    """Wilson-Hilferty: the chi-square quantile with ``df`` degrees of freedom at normal quantile z."""
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def share_bytes(worker, shared) -> torch.Tensor:
    """The bytes of one party's share (read off its store: what that party sees), as uint8."""
    ptr = next(p for p in shared.child.shares if p.location is worker)
    return worker.core.objects[ptr.id_at_location].contiguous().view(torch.uint8).view(-1, 8)


def chi2_uniform(counts: torch.Tensor) -> float:
    expected = counts.sum() / counts.numel()
    return float(((counts - expected) ** 2 / expected).sum())


def test_a_share_is_uniform_bytes(parties2):
    alice, bob, carol = parties2
    secret = torch.full((N,), 12.345)
    sx = secret.fix_precision().share(alice, bob, crypto_provider=carol)
    for w in (alice, bob):
        b = share_bytes(w, sx)
        for pos in range(8):  # every byte position on its own: a biased top byte would show here
            counts = torch.bincount(b[:, pos].long(), minlength=256).double()
            assert chi2_uniform(counts) < chi2_critical(255), f"{w.id}'s byte {pos} is not uniform"


def test_shares_of_0_and_of_a_million_are_indistinguishable(parties2):
    alice, bob, carol = parties2
    s0 = torch.zeros(N).fix_precision().share(alice, bob, crypto_provider=carol)
    s1 = torch.full((N,), 1e6).fix_precision().share(alice, bob, crypto_provider=carol)
    for w in (alice, bob):
        b0, b1 = share_bytes(w, s0), share_bytes(w, s1)
        for pos in range(8):
            c0 = torch.bincount(b0[:, pos].long(), minlength=256).double()
            c1 = torch.bincount(b1[:, pos].long(), minlength=256).double()
            # two-sample chi-square (a 2 x 256 contingency table)
            total = c0 + c1
            e0, e1 = total * c0.sum() / total.sum(), total * c1.sum() / total.sum()
            stat = float(((c0 - e0) ** 2 / e0).sum() + ((c1 - e1) ** 2 / e1).sum())
            assert stat < chi2_critical(255), f"{w.id}: shares of 0 and 1e6 differ at byte {pos}"


def test_the_test_would_see_a_bad_sharing():
    """The statistic catches what a broken sharing would leak: shares x - r with r from 16 bits."""
    x = torch.full((N,), 12345, dtype=torch.int64)
    bad = x - torch.randint(0, 2**16, (N,))
    b = bad.view(torch.uint8).view(-1, 8)
    counts = torch.bincount(b[:, 7].long(), minlength=256).double()
    assert chi2_uniform(counts) > chi2_critical(255)


SECRET = 271828.182  # encodes as 271828182: easy to find in any text


def _texts_with(shared, parties):
    values = []
    for p in shared.child.shares:
        values.extend(str(v) for v in p.location.core.objects[p.id_at_location].reshape(-1).tolist())
    return values


def test_no_share_or_secret_in_any_repr_node_world_ledger_explanation_or_log(parties2, caplog):
    alice, bob, carol = parties2
    got = []
    unsubscribe = events.subscribe(got.append)
    caplog.set_level(logging.DEBUG)
    try:
        x = torch.tensor([SECRET, -SECRET])
        sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
        sg = x.fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
        bn = torch.nn.BatchNorm2d(2).eval().fix_precision()
        y = sx * sx + sx  # protocol traffic, logged events
        z = sx.relu()
        # the ops of issue 30 too: each one's result and its repr
        more = [sx.abs(), sx == sx, sx != sx, sx.sign(), sx.min(), sx.argmin(), torch.chunk(sx, 2)[0], sx.roll(1),
                sx.var(), sx / torch.tensor([3.0]).fix_precision(), sx.refresh(), sx.copy(),
                sx.exp(), sx.sigmoid(), torch.softmax(sx, 0), sx.std(), sx / sx,
                sx.sqrt(), sx.rsqrt(), sx.log(), sx.reciprocal(), sx.tanh(), torch.log_softmax(sx, 0), sx % 7,
                sx > sx.roll(1), sx <= 0, sx.argmax(), *sx.unbind(), *torch.split(sx, 1),
                F.max_pool2d(sx.view(1, 1, 1, 2), (1, 2)), F.avg_pool2d(sx.view(1, 1, 1, 2), (1, 2)),
                F.cross_entropy(sx.view(1, 2), torch.tensor([1])), F.cross_entropy(sx.view(1, 2), sx.view(1, 2)),
                F.nll_loss(torch.log_softmax(sx.view(1, 2), 1), (sx[:1] * 0 + 1)),
                F.binary_cross_entropy(sx.sigmoid(), sx * 0 + 1), F.dropout(sx, 0.5),
                F.binary_cross_entropy_with_logits(sx, sx * 0 + 1), bn(sx.view(1, 2, 1, 1)),
                sx % torch.tensor([7.0, -3.0]).fix_precision().share(alice, bob, crypto_provider=carol),
                torch.remainder(5, sx), F.dropout(sg, 0.3).grad_fn._saved_other,  # the last: a shared mask
                # issue 41: a public index or condition, clamp
                sx.clamp(-1.0, 1.0), F.hardtanh(sx), sx.cumsum(0), sx.view(1, 2).trace(), sx.gather(0, torch.tensor([1])),
                torch.where(torch.tensor([True, False]), sx, -sx), sx.scatter_add(0, torch.tensor([1, 1]), sx),
                sx.index_put((torch.tensor([0]),), sx[1:]), sx.take(torch.tensor([1, 0])), sx ** 3, sx ** -0.5,
                torch.norm(sx),
                # issue 41: transposed convolutions, adaptive pooling, ceil_mode
                F.conv_transpose2d(sx.view(1, 2, 1, 1), sx.view(2, 1, 1, 1)),
                F.adaptive_avg_pool2d(sx.view(1, 1, 1, 2), (1, 1)),
                F.max_pool2d(sx.view(1, 1, 1, 2), (1, 2), ceil_mode=True)]
        forbidden = {"271828182", "271828.18", "271828.1"} | set(_texts_with(sx, (alice, bob)))
        forbidden |= set(_texts_with(y, (alice, bob))) | set(_texts_with(z, (alice, bob)))
        for m in more:
            forbidden |= set(_texts_with(m, (alice, bob)))
        more_texts = []
        for refused in (lambda: torch.fft.fft(sx), lambda: torch.native_dropout(sx, 0.5, True),
                        lambda: sx % torch.tensor([2.0, 3.0]),
                        lambda: F.nll_loss(sx.view(1, 2), sx.view(1, 2)), lambda: F.max_pool2d(sx, 2)):
            try:  # an op refused: its message names no value
                refused()
            except Exception as e:  # noqa: BLE001 the error's text is what is checked
                more_texts.append(str(e))
        assert len(more_texts) == 5
        texts = [repr(sx), str(sx), repr(y), repr(sx.child), repr(sx.child.shares[0]),
                 json.dumps(sy.chain(sx).to_dict()), json.dumps(sy.chain(y).to_dict()),
                 json.dumps(sy.world({"sx": sx, "y": y, "z": z}).to_dict()), repr(sy.world({"sx": sx})),
                 repr(sy.chain(sx)), json.dumps(got, default=str), caplog.text]
        texts += [repr(m) for m in more] + [json.dumps(sy.chain(m).to_dict()) for m in more] + more_texts
        # what each party saw (#26.8) and the reconstruction lesson (#26.9): names, sizes, cells only
        texts += [json.dumps(w.ledger()) for w in (alice, bob, carol)]
        texts += [repr(sy.explain(v, "sx")) + sy.explain(v)._repr_html_() + json.dumps(sy.explain(v).to_dict())
                  for v in (sx, y, z)]
    finally:
        unsubscribe()
    # a share is a uniform 64-bit word (about 19 digits); a public zero stays a zero on every party (a unit
    # dropout dropped, a one-hot's 0 times a share): such short words are no secret and occur in any text
    forbidden = {f for f in forbidden if len(f.lstrip("-")) >= 6}
    assert len(forbidden) > 100
    for text in texts:
        for f in forbidden:
            assert f not in text
    chain = sy.chain(sx).to_dict()["root"]
    shared = chain["children"][0]
    assert shared["kind"] == "shared" and len(shared["children"]) == 2
    for leaf in (c["children"][0] for c in shared["children"]):
        assert leaf.get("preview") is None  # the share's tensor node shows no values


def _pattern_texts(bits: torch.Tensor) -> set:
    """The first 24 bits of a mask as a list would print them (ints, floats, bools)."""
    head = bits[:24].tolist()
    return {", ".join(str(int(b)) for b in head), ", ".join(str(float(b)) for b in head),
            ", ".join(str(bool(b)) for b in head), "".join(str(int(b)) for b in head)}


def test_no_party_sees_a_dropout_mask_and_nothing_shows_it(parties2, caplog):
    """The mask of a shared dropout is the crypto provider's: each party stores a uniform share of it
    and nothing else like it (no stored tensor is mostly mask values), and no repr, view, event, log or
    ledger shows its shares or its bits; the provider's lane counts it as material."""
    alice, bob, carol = parties2
    got, stored = [], {"alice": [], "bob": []}

    def spy(event):
        got.append(event)
        if event["type"] == "stored" and event["worker"] in stored:
            w = alice if event["worker"] == "alice" else bob
            stored[event["worker"]].append(w.core.objects[event["id"]].clone())

    unsubscribe = events.subscribe(spy)
    caplog.set_level(logging.DEBUG)
    try:
        sx = torch.full((N,), 1.5).fix_precision().share(alice, bob, crypto_provider=carol, requires_grad=True)
        out = F.dropout(sx, 0.5)
        noise = out.grad_fn._saved_other  # the shared mask (0 or 2 per unit) autograd keeps for backward
        (out * 3).sum().backward()
        world = sy.world({"sx": sx, "out": out, "noise": noise})
        texts = [repr(out), repr(noise), repr(noise.child), json.dumps(sy.chain(noise).to_dict()),
                 json.dumps(sy.chain(out).to_dict()), json.dumps(world.to_dict()), repr(world),
                 json.dumps(got, default=str), caplog.text, repr(sx.grad)]
        texts += [json.dumps(w.ledger()) for w in (alice, bob, carol)]
        lanes = {w["id"]: w for w in world.to_dict()["workers"]}
    finally:
        unsubscribe()
    assert lanes["carol"]["ledger"]["material"]["dropout mask (Bernoulli)"] >= 1  # counted, as a triple is
    # a party's share of the dealer's bits looks uniform (the mask's shares are those times 2000 = 2^4 · 125:
    # their low 4 bits are 0 whatever the mask, so the bits' own shares are the ones to count)
    drawn = torch.empty_like(sx).bernoulli_(0.5)
    assert drawn.mask_bits is not None and drawn.shared
    for w in (alice, bob):
        b = share_bytes(w, SimpleNamespace(child=drawn.mask_bits[0]))
        for pos in range(8):
            counts = torch.bincount(b[:, pos].long(), minlength=256).double()
            assert chi2_uniform(counts) < chi2_critical(255), f"{w.id}'s share of the mask, byte {pos}"
    del drawn
    forbidden = set(_texts_with(noise, (alice, bob)))
    mask = noise.copy().get().float_precision()  # reconstructed here, by the test, after every text was taken
    bits = mask > 0
    assert 0.45 < bits.float().mean().item() < 0.55 and set(mask.unique().tolist()) == {0.0, 2.0}
    forbidden = {f for f in forbidden if len(f.lstrip("-")) >= 6} | _pattern_texts(bits)
    assert len(forbidden) > 1000
    for text in texts:
        for f in forbidden:
            assert f not in text
    mask_words = {0, 1, 1000, 2000, 3000, 6000}  # the bits, their encodings, the mask, the gradient's factors
    assert stored["alice"] and stored["bob"]
    for who, tensors in stored.items():
        for t in tensors:
            if t.dtype == torch.int64 and t.numel() == N:
                near = sum(int((t == v).sum()) for v in mask_words)
                assert near < N // 100, f"{who} stored a tensor of mask values"
    del sx, out, noise


def test_the_crypto_provider_never_holds_a_share_of_an_input(parties2):
    alice, bob, carol = parties2
    x = torch.randn(6, 6)
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    sw = torch.randn(6, 6).fix_precision().share(alice, bob, crypto_provider=carol)
    input_shares = set()
    for s in (sx, sw):
        for p in s.child.shares:
            input_shares |= set(p.location.core.objects[p.id_at_location].reshape(-1).tolist())
    seen_at_carol = []

    def spy(event):
        if event["type"] == "stored" and event["worker"] == "carol":
            seen_at_carol.append(carol.core.objects[event["id"]].clone())

    unsubscribe = events.subscribe(spy)
    try:
        for result in (sx * sw, sx @ sw, sx.relu(), sx > sw, sx.max(), sx.argmax(dim=1)):
            del result
    finally:
        unsubscribe()
    assert seen_at_carol, "the provider made its triples"
    for t in seen_at_carol:
        assert not (set(t.reshape(-1).tolist()) & input_shares)
    assert carol.core.objects == {}  # its material is gone once an op is done


def test_bad_input_gets_clear_errors(parties2):
    alice, bob, carol = parties2
    x = torch.tensor([1.0, 2.0])
    with pytest.raises(sy.SyftError, match="at least two workers"):
        x.fix_precision().share(alice, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="crypto provider 'bob' is also a party"):
        x.fix_precision().share(alice, bob, crypto_provider=bob)
    with pytest.raises(sy.SyftError, match="its own worker"):
        x.fix_precision().share(alice, alice, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="fix_precision"):
        x.share(alice, bob, crypto_provider=carol)  # a float tensor
    with pytest.raises(sy.SyftError, match="takes workers"):
        x.fix_precision().share(alice, "bob")
    a = x.fix_precision().share(alice, bob, crypto_provider=carol)
    b = x.fix_precision().share(bob, alice, crypto_provider=carol)  # other order: other parties
    with pytest.raises(sy.SyftError, match="same workers"):
        a + b
    dave = sy.VirtualWorker("dave")
    try:
        c = x.fix_precision().share(alice, dave, crypto_provider=carol)
        with pytest.raises(sy.SyftError, match="same workers"):
            a * c
        del c
    finally:
        dave.close()
    p4 = x.fix_precision(precision=4).share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="mixes fixed precision base 10 precision 3 with base 10 precision 4"):
        a + p4
    with pytest.raises(sy.SyftError, match="mixes fixed precision"):
        x.fix_precision() * x.fix_precision(base=2, precision=10)
    no_provider = x.fix_precision().share(alice, bob)
    with pytest.raises(sy.SyftError, match="crypto provider"):
        no_provider * no_provider
    assert torch.equal((no_provider + no_provider).get().float_precision(), 2 * x)  # linear ops need none
    assert torch.allclose((a / a).get().float_precision(), torch.ones(2), atol=1e-2)  # a reciprocal, no error
    with pytest.raises(sy.SyftError, match="one class index per row"):
        torch.nn.functional.nll_loss(a.view(1, 2), a.view(1, 2))
    with pytest.raises(sy.SyftError, match="is shared: reconstruct it with .get"):
        a.float_precision()
    with pytest.raises(sy.SyftError, match="cannot be stored on a worker"):
        carol.send(a)
    with pytest.raises(sy.SyftError, match="cannot be pickled"):
        import pickle

        pickle.dumps(a)
    with pytest.raises(sy.SyftError, match="base"):
        x.fix_precision(base=1)
    with pytest.raises(sy.SyftError, match="too large"):
        x.fix_precision(precision=12)
    # every worker still works after the errors
    assert torch.allclose((a * a).get().float_precision(), x * x)
    del a, b, p4, no_provider


def test_shifts_on_workers_take_amounts_in_range(parties2):
    """The allow-list's shifts (the sign bit's adder) refuse a shift amount outside 0..63 clearly."""
    from syft_lab.wire.allowlist import OpNotAllowedError, check_call

    aten = torch.ops.aten
    t = torch.tensor([1, -8])
    check_call(aten.bitwise_left_shift.Tensor_Scalar, [t, 63], None)
    check_call(aten.bitwise_right_shift.Tensor, [t, torch.tensor([1, 2])], None)
    for bad in (64, -1, 2**70, 1.5):
        with pytest.raises(OpNotAllowedError, match="0..63"):
            check_call(aten.bitwise_left_shift.Tensor_Scalar, [t, bad], None)
    with pytest.raises(OpNotAllowedError, match="an integer"):
        check_call(aten.bitwise_right_shift.Tensor, [t, torch.tensor([1.0, 2.0])], None)
    alice = parties2[0]
    p = torch.tensor([1, 2]).send(alice)
    with pytest.raises(sy.SyftError, match="0..63"):
        p << 64
    assert torch.equal((p << 2).get(), torch.tensor([4, 8]))  # and the worker still works
    del p
