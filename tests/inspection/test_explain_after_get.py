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
