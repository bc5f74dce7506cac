"""tensors/registry.py: registering layer types, finding them, and copying objects into a store."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.tensors import ChainLayer, LoggingTensor, PointerTensor
from syft_lab.tensors.registry import (iter_chain, layer_for_code, layer_for_kind, register_layer,
                                       registered_layers, stored_copy)

from note_layer import NoteTensor


def test_the_built_in_layers_are_found_by_kind_and_code():
    assert layer_for_kind("logging") is LoggingTensor and layer_for_code(10) is LoggingTensor
    assert layer_for_kind("pointer") is PointerTensor and layer_for_code(11) is PointerTensor
    assert layer_for_code(3) is None  # a code of the wire format's own values, not a layer's
    assert {LoggingTensor, PointerTensor} <= set(registered_layers())
    with pytest.raises(SyftError, match="no layer type of kind 'nope'; known: .*logging"):
        layer_for_kind("nope")


def test_register_layer_refuses_what_the_wire_and_views_could_not_use():
    with pytest.raises(SyftError, match="takes a ChainLayer subclass"):
        register_layer(torch.Tensor)

    class NoKind(ChainLayer):
        pass

    with pytest.raises(SyftError, match="must declare its own kind"):
        register_layer(NoKind)

    class BadCode(ChainLayer):
        kind, wire_code = "bad_code", 3

    with pytest.raises(SyftError, match="wire_code must be an int in 10-127"):
        register_layer(BadCode)

    class SameKind(ChainLayer):
        kind, wire_code = "logging", 99

    with pytest.raises(SyftError, match="takes kind 'logging', already used by LoggingTensor"):
        register_layer(SameKind)

    class SameCode(ChainLayer):
        kind, wire_code = "same_code", 11

    with pytest.raises(SyftError, match="takes wire code 11, already used by PointerTensor"):
        register_layer(SameCode)
    assert layer_for_code(99) is None and layer_for_code(11) is PointerTensor  # nothing half-registered
    with pytest.raises(SyftError):
        layer_for_kind("same_code")


def test_stored_copy_of_a_tensor_is_independent_detached_and_keeps_tags():
    sy.hook()
    w = torch.ones(3, requires_grad=True)
    t = (w * 2).tag("#x").describe("doubled")
    c = stored_copy(t)
    assert type(c) is torch.Tensor and not c.requires_grad and c.grad_fn is None
    assert c.tags == {"#x"} and c.description == "doubled"
    c.add_(1)
    assert torch.equal(t, torch.full((3,), 2.0))
    p = stored_copy(torch.nn.Parameter(torch.zeros(2)))
    assert torch.equal(p, torch.zeros(2)) and not p.requires_grad


def test_stored_copy_of_layers_copies_the_whole_chain():
    lx = LoggingTensor(NoteTensor(torch.tensor([1.0, 2.0]), "n")) * 2
    c = stored_copy(lx)
    assert type(c) is LoggingTensor and type(c.child) is NoteTensor
    assert c.log.ops() == ["aten.mul.Tensor"] and c.child.notes == ["mul: n"]
    c.child.child.zero_()
    assert torch.equal(lx.child.child, torch.tensor([2.0, 4.0]))
    assert c.log is not lx.log and c.child.notes is not lx.child.notes


def test_stored_copy_refuses_meta_tensors_unknown_subclasses_and_unstorable_layers(monkeypatch):
    with pytest.raises(SyftError, match="on the meta device: workers hold CPU tensors"):
        stored_copy(torch.empty(2, device="meta"))

    class Sub(torch.Tensor):
        pass

    with pytest.raises(SyftError, match="cannot store a Sub: workers hold plain tensors and the registered "
                                        "layers .*LoggingTensor"):
        stored_copy(torch.ones(2).as_subclass(Sub))

    class MyLogging(LoggingTensor):  # an unregistered subclass: its own fields would be lost
        pass

    with pytest.raises(SyftError, match="cannot store a MyLogging"):
        stored_copy(MyLogging(torch.ones(2)))
    with pytest.raises(SyftError, match="cannot store a list: workers hold tensors"):
        stored_copy([1, 2])
    monkeypatch.setattr(NoteTensor, "remote_storable", False)
    monkeypatch.setattr(NoteTensor, "remote_storable_reason", "notes stay here")
    with pytest.raises(SyftError, match="a NoteTensor cannot be stored on a worker as one object: notes stay here"):
        stored_copy(LoggingTensor(NoteTensor(torch.ones(1), "n")))


def test_iter_chain_walks_the_tree_head_first(bob):
    p = torch.ones(2).send(bob)
    x = LoggingTensor(NoteTensor(torch.zeros(2), "n"))
    assert [type(t) for t in iter_chain(x)] == [LoggingTensor, NoteTensor, torch.Tensor]
    assert list(iter_chain(p)) == [p]  # a pointer's rest is on its worker
