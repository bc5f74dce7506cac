"""What each party sees in a secure product (#26.8, #26.9), two parties and a dealer in process:
a party's ledger lists the masked values it opened and the dealer rows it received, the crypto
provider's its material by item; sy.explain says what reconstructing takes, never a value."""
import json

import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.errors import SyftError
from syft_lab.smpc import provider


@pytest.fixture
def cell():
    yield events.set_current_cell
    events.set_current_cell(None)


def _new(worker, since):
    return [r for r in worker.ledger() if r["seq"] >= since]


def _during(cell, number, workers, fn):
    """fn()'s result, run as cell ``number``, and each worker's ledger records made by it."""
    marks = {w.id: len(w.ledger()) for w in workers}
    cell(number)
    out = fn()
    return out, {w.id: _new(w, marks[w.id]) for w in workers}


def test_what_alice_saw_in_a_secure_product(parties2, cell):
    alice, bob, carol = parties2
    provider.clear_pool()  # this product's dealer round makes its triples
    x, w = torch.tensor([0.5, -1.25, 2.0]), torch.tensor([3.0, 0.25, -1.5])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    sw = w.fix_precision().share(alice, bob, crypto_provider=carol)
    y, seen = _during(cell, 5, (alice, carol), lambda: sx * sw)
    saw = seen["alice"]
    # the dealer's rows (a, b, c of one Beaver triple: 3 pieces of 3 words) came from carol
    dealer = [r for r in saw if r["kind"] == "dealer material"]
    assert [(r["direction"], r["peer"], r["peer_kind"], r["bytes"]) for r in dealer] == [
        ("in", "carol", "crypto provider", 72)]
    # she opened her masked shares of x - a and w - b (3 words each) and received their sums
    opened_out = [r for r in saw if (r["kind"], r["direction"]) == ("opened value", "out")]
    assert [r["bytes"] for r in opened_out] == [24, 24] and {r["peer"] for r in opened_out} == {"me"}
    opened_in = [r for r in saw if (r["kind"], r["direction"]) == ("opened value", "in")]
    assert [r["bytes"] for r in opened_in] == [48]
    assert {r["cell"] for r in saw} == {5}
    assert not any(r["kind"] == "fetched" for r in saw)  # no share of hers left her
    # carol's lane: the material she made, by item, and what left her (to the notebook, never a party's share)
    material = seen["carol"]
    assert all(r["direction"] == "in" or r["kind"] == "dealer material" for r in material)
    lanes = {w["id"]: w for w in sy.world({"sx": sx, "y": y}).to_dict()["workers"]}
    assert lanes["carol"]["ledger"]["material"] == {"Beaver triple (mul)": provider.POOL_MAX}
    assert lanes["carol"]["objects"] == []  # she keeps nothing: her record is where her part shows
    assert "material made: 16 Beaver triple (mul)" in repr(sy.world({"sx": sx}))
    assert torch.allclose(y.get().float_precision(), x * w, atol=2e-3)


def test_a_secure_square_opens_one_masked_value_and_takes_a_square_pair(parties2, cell):
    """x * x (exp's squarings) takes a square pair (a, a^2) from the dealer: each party opens
    x - a alone (CrypTen's Beaver square), half a product's words, and the result is x^2."""
    alice, bob, carol = parties2
    provider.clear_pool()
    x = torch.tensor([0.5, -1.25, 2.0])
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    y, seen = _during(cell, 6, (alice,), lambda: sx * sx)
    saw = seen["alice"]
    dealer = [r for r in saw if r["kind"] == "dealer material"]
    assert [(r["direction"], r["bytes"]) for r in dealer] == [("in", 48)]  # a and a^2: 2 pieces of 3 words
    opened_out = [r["bytes"] for r in saw if (r["kind"], r["direction"]) == ("opened value", "out")]
    opened_in = [r["bytes"] for r in saw if (r["kind"], r["direction"]) == ("opened value", "in")]
    assert (opened_out, opened_in) == ([24], [24])
    lanes = {w["id"]: w for w in sy.world({"sx": sx, "y": y}).to_dict()["workers"]}
    assert lanes["carol"]["ledger"]["material"] == {"Beaver square (mul)": provider.POOL_MAX}
    assert torch.allclose(y.get().float_precision(), x * x, atol=2e-3)
    # the same pool serves the next squares of that shape, each pair once, each square right
    for _ in range(provider.POOL_MAX + 1):
        assert torch.allclose((sx * sx).get().float_precision(), x * x, atol=2e-3)
    provider.clear_pool()


def test_what_left_bob_is_his_share_when_the_secret_is_reconstructed(parties2, cell):
    alice, bob, carol = parties2
    sx = torch.tensor([1.5, 2.5]).fix_precision().share(alice, bob, crypto_provider=carol)
    share_ids = {p.location.id: p.id_at_location for p in sx.child.shares}
    before = sy.explain(sx)
    assert before["reconstructed"] is False and [p["sent"] for p in before["parties"]] == [False, False]
    assert "alice and bob must each send theirs to me" in repr(before)
    assert "no lane holds sx" in repr(before) and "carol, the crypto provider, holds no share" in repr(before)
    cell(8)
    assert torch.allclose(sx.get().float_precision(), torch.tensor([1.5, 2.5]))
    for w in (alice, bob):
        [left] = [r for r in w.ledger() if r["direction"] == "out"]
        assert (left["kind"], left["id"], left["peer"], left["cell"]) == ("fetched", share_ids[w.id], "me", 8)
    after = sy.explain(sx)
    assert after["reconstructed"] is True
    assert [(p["worker"], p["sent"], p["sent_cell"]) for p in after["parties"]] == [("alice", True, 8), ("bob", True, 8)]
    # each share's size is said too (16 B: two int64 words)
    assert "Sent: alice sent share 1 (16 B) in cell [8], bob sent share 2 (16 B) in cell [8]" in repr(after)
    assert "Before the reconstruction no lane held sx" in repr(after)


def test_explain_says_the_sum_of_every_share_mod_2_64(parties3):
    alice, bob, dave, carol = parties3
    sx = torch.tensor([3.0]).fix_precision().share(alice, bob, dave, crypto_provider=carol)
    ex = sy.explain(sx)
    assert ex["lines"][1] == "sx = (share 1 (on alice) + share 2 (on bob) + share 3 (on dave)) mod 2^64, then / 1000 (fixed precision)"
    assert [p["worker"] for p in ex["parties"]] == ["alice", "bob", "dave"] and ex["crypto_provider"] == "carol"
    plain = torch.tensor([5]).share(alice, bob, crypto_provider=carol)  # no fixed precision: nothing to decode
    assert sy.explain(plain)["decode"] is None and "then /" not in sy.explain(plain)["lines"][1]
    world = sy.world({"sx": sx}).to_dict()
    [row] = [o for o in world["workers"][0]["objects"] if o.get("names") == ["sx"]]
    assert row["explain"]["lines"] == sy.explain(sx, "sx")["lines"][:4]  # the view's Explain shows the same
    assert 'data-worker="dave"' in ex._repr_html_()
    with pytest.raises(SyftError, match="secret-shared"):
        sy.explain(torch.ones(2))
