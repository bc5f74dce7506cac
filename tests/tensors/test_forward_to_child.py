"""One unwrap rule for every layer: base.py's forward_to_child, unrolled for what aten passes,
equals the one-line pytree version (subclass_zoo's ``tree_map(unwrap, args)``) on random nested
arguments: the same values in the same structure, ``unwrap`` called on the same values in the
same order. The layers that use it (LoggingTensor, the NoteTensor example) log and note exactly
the inputs that rule finds."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._pytree import tree_map_only

from syft_lab.tensors.base import forward_to_child
from syft_lab.tensors.logging import LoggingTensor

from note_layer import NoteTensor

aten = torch.ops.aten
LAYERS = [LoggingTensor(torch.arange(3.0)), LoggingTensor(torch.ones(2, 2))]
PLAIN = [torch.zeros(1), torch.tensor(5)]
leaves = st.one_of(st.sampled_from(LAYERS + PLAIN), st.integers(), st.floats(allow_nan=False), st.none(),
                   st.text(max_size=3), st.booleans(), st.just(torch.device("cpu")), st.just(torch.float32))
nested = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=4).map(tuple),
                      max_leaves=20)
arguments = st.lists(nested, max_size=6)
keywords = st.none() | st.dictionaries(st.sampled_from(["alpha", "dim", "out", "other", "x"]), nested, max_size=3)


def same(a, b) -> bool:
    """Equal structure (list, tuple, dict kept apart) with the very same leaves."""
    if type(a) is not type(b):
        return False
    if type(a) in (list, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a is b


def recorder():
    seen = []

    def unwrap(t):
        seen.append(t)
        return t.child if isinstance(t, LoggingTensor) else t

    return seen, unwrap


@settings(max_examples=500, deadline=None)
@given(args=arguments, kwargs=keywords, types=st.sampled_from([torch.Tensor, LoggingTensor, (torch.Tensor, torch.device)]),
       as_tuple=st.booleans())
def test_forward_to_child_is_the_pytree_map(args, kwargs, types, as_tuple):
    seen_ref, unwrap_ref = recorder()
    seen, unwrap = recorder()
    want_args, want_kwargs = tree_map_only(types, unwrap_ref, (list(args), kwargs or None))
    got_args, got_kwargs = forward_to_child(tuple(args) if as_tuple else args, kwargs, unwrap, types)
    assert type(got_args) is list
    assert same(got_args, want_args)
    assert same(got_kwargs, want_kwargs)
    assert len(seen) == len(seen_ref) and all(a is b for a, b in zip(seen, seen_ref))


def test_a_logging_op_logs_every_tensor_input_in_the_order_the_rule_finds_them():
    x, y, z = LoggingTensor(torch.ones(2)), LoggingTensor(torch.zeros(3)), torch.full((4,), 2.0)
    out = torch.cat([x, z, y])
    assert torch.equal(out.child, torch.tensor([1.0, 1, 2, 2, 2, 2, 0, 0, 0]))
    record = out.log[-1]
    assert [tuple(s) for s, _ in record.inputs] == [(2,), (4,), (3,)]
    w = LoggingTensor(torch.ones(2))
    w.add_(x, alpha=3)  # a keyword and an in-place op: the caller's own object back
    assert torch.equal(w.child, torch.full((2,), 4.0)) and type(w) is LoggingTensor


def test_the_note_layer_notes_an_op_on_layers_inside_a_list():
    a, b = NoteTensor(torch.ones(2), "a"), NoteTensor(torch.zeros(2), "b")
    out = torch.stack((a, b))
    assert type(out) is NoteTensor and torch.equal(out.child, torch.tensor([[1.0, 1], [0, 0]]))
    assert out.notes == ["stack: a"]
