"""Issue 39, item 4: ``sy.explain(x)`` after ``x.get()`` said "held by nobody" in its first line
and showed no numbers."""
import torch

import syft_lab as sy


def test_explain_after_a_get_says_the_value_was_reconstructed_and_what_each_party_sent():
    alice, bob, carol = (sy.VirtualWorker(f"h4x_{n}") for n in ("alice", "bob", "carol"))
    try:
        x = torch.tensor([0.1, -0.2, 0.3]).fix_precision().share(alice, bob, crypto_provider=carol)
        before = sy.explain(x)
        assert before["lines"][0].startswith("x is held by nobody") and before["held_by"] is None
        value = x.get()
        ex = sy.explain(x)
        first = ex["lines"][0]
        assert "is held by nobody" not in first and "reconstructed" in first and ex["held_by"] == "me", first
        assert ex["reconstructed"] and all(p["sent_bytes"] == 24 for p in ex["parties"])  # 3 int64 words each
        assert "h4x_alice sent share 1 (24 B)" in repr(ex) and "h4x_bob sent share 2 (24 B)" in repr(ex)
        assert torch.allclose(value.float_precision(), torch.tensor([0.1, -0.2, 0.3]))
        del x, value
    finally:
        for w in (alice, bob, carol):
            w.close()


def test_explain_after_a_get_shows_the_numbers_and_who_holds_the_value_now():
    """The first step says who holds the value now, with its numbers (never "held by nobody"):
    the sum of the shares in the ring, then the decoded value. Whatever ``.get()``'s result
    became afterwards (decoded, dropped), the explanation keeps the numbers it reconstructed."""
    alice, bob, carol = (sy.VirtualWorker(f"h4n_{n}") for n in ("alice", "bob", "carol"))
    try:
        x = torch.tensor([0.1, -0.2, 0.3]).fix_precision().share(alice, bob, crypto_provider=carol)
        assert "[0.1" not in repr(sy.explain(x))  # before: the secret is nobody's to show
        assert torch.allclose(x.get().float_precision(), torch.tensor([0.1, -0.2, 0.3]))  # the result is not kept
        lines = sy.explain(x)["lines"]
        assert lines[0] == ("x is held by me now: [0.1, -0.2, 0.3], reconstructed from the shares h4n_alice and h4n_bob "
                            "sent to me; no party holds a share of it any more."), lines
        assert lines[1] == ("x = (share 1 (from h4n_alice) + share 2 (from h4n_bob)) mod 2^64 = [100, -200, 300], "
                            "then / 1000 (fixed precision) = [0.1, -0.2, 0.3]"), lines
        assert not any("held by nobody" in line for line in lines[:2]), lines
    finally:
        for w in (alice, bob, carol):
            w.close()
