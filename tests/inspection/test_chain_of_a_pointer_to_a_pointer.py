"""Issue 39, item 5: ``sy.chain(pp)`` of a pointer to a pointer (notebook 02) printed one run-on
line of text instead of the chain."""
import torch

import syft_lab as sy


def test_a_pointer_to_a_pointer_shows_as_a_chain_one_layer_a_line():
    alice, bob, carol = (sy.VirtualWorker(f"h4c_{n}") for n in ("alice", "bob", "carol"))
    try:
        pp = torch.tensor([4., 5.]).send(bob).send(alice)
        c = sy.chain(pp)
        lines = repr(c).splitlines()
        assert len(lines) == 3, lines
        assert lines[0].startswith("[PointerTensor | me:") and "-> h4c_alice:" in lines[0] and lines[0].endswith("on me")
        assert lines[1].startswith("└─ [PointerTensor | h4c_alice:") and "-> h4c_bob:" in lines[1]
        assert lines[1].endswith("on h4c_alice")
        assert lines[2].strip() == "└─ tensor<float32 [2] on h4c_bob>"
        html = c._repr_html_()
        assert html.count("\n") == 2 and "h4c_bob" in html and "<pre" in html
        assert c.subject is pp  # a view of the chain can act on the pointer itself
        sx = torch.tensor([1., 2.]).fix_precision().share(alice, bob, crypto_provider=carol)
        first = repr(sy.chain(sx)).splitlines()[0]
        assert first.endswith("held by nobody (pieces on h4c_alice, h4c_bob)"), first
        del pp, sx, c
    finally:
        for w in (alice, bob, carol):
            w.close()
