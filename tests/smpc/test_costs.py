"""What the last op on a shared value cost, on its inspection node (``last_op``): its rounds and
the random words drawn on workers for it (the dealer's material), as counts, never values."""
import torch
import torch.nn.functional as F

import syft_lab as sy
from syft_lab.smpc import provider

sy.hook()


def _last_op(t):
    [shared] = sy.chain(t).to_dict()["root"]["children"]
    return shared.get("last_op")


def test_the_node_says_what_the_last_op_cost(parties2):
    alice, bob, carol = parties2
    x = torch.randn(3, 4).fix_precision().share(alice, bob, crypto_provider=carol)
    assert _last_op(x) is None  # shared, not computed
    provider.clear_pool()
    first, again = x * x, x * x
    assert _last_op(first) == {"op": "mul", "rounds": 3, "random_words": _last_op(first)["random_words"]}
    assert _last_op(first)["random_words"] > 0  # the pool's refill: triples for this product and the next
    assert _last_op(again) == {"op": "mul", "rounds": 2, "random_words": 0}  # served from the pool
    assert _last_op(x + x) == {"op": "add", "rounds": 1, "random_words": 0}
    r = x.reciprocal()
    cost = _last_op(r)
    assert cost["op"] == "reciprocal" and cost["rounds"] > 20 and cost["random_words"] > 0
    assert _last_op(x.relu())["op"] == "relu"
    rendered = repr(sy.chain(r).to_dict())
    for share in r.child.shares:  # counts only: no share's value anywhere in the node
        assert str(share.get().reshape(-1)[0].item()) not in rendered
    del x, first, again, r


def test_an_approximation_says_its_method_and_iterations_on_its_node(parties2):
    """Issue 30: the chain view shows what an approximation ran (name, iterations, rounds); the
    display lines every view draws say it too, in counts."""
    alice, bob, carol = parties2
    x = (torch.rand(2, 3) + 0.5).fix_precision().share(alice, bob, crypto_provider=carol)
    for out, op, iterations in ((x.exp(), "exp", 8), (x.reciprocal(), "reciprocal", 10), (x.rsqrt(), "rsqrt", 4),
                                (x.log(), "log", 2), (torch.softmax(x, 1), "_softmax", 10), (x / x, "div", 10),
                                (x.cos(), "cos", 8), (torch.logsumexp(x, 1), "logsumexp", 2),
                                (F.softplus(x), "softplus", 2), (F.elu(x), "elu", 8)):
        cost = _last_op(out)
        assert cost["op"] == op and cost["approximation"]["iterations"] == iterations, op
        assert cost["rounds"] > 5
        [shared] = sy.chain(out).to_dict()["root"]["children"]
        line = shared["display"]["lines"][-1]
        assert line.startswith(f"made by {op}: {cost['rounds']} rounds, {cost['random_words']} random words")
        assert line.endswith(f"{iterations} iterations"), line
        del out
    assert "approximation" not in _last_op(x * x) and "approximation" not in _last_op(x / 4)
    assert _last_op(x * x)["op"] == "mul"
    del x
