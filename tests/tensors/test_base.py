"""tensors/base.py: the layer protocol's defaults and the registration point of the chain repr."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.inspection.text import chain_text
from syft_lab.tensors import base
from syft_lab.tensors.base import ChainLayer, set_chain_repr

from note_layer import NoteTensor


@pytest.fixture
def plain_repr():
    """The plain fallback repr for one test; the inspection renderer registered again after."""
    set_chain_repr(None)
    yield
    set_chain_repr(chain_text)


def test_layers_repr_through_the_registered_renderer():
    assert base._chain_repr is chain_text  # syft_lab.inspection registered it at import
    lx = sy.LoggingTensor(torch.tensor([1.0]))
    assert repr(lx) == chain_text(lx) == "LoggingTensor>tensor([1.])"


def test_without_a_renderer_a_layer_draws_its_display_and_children(plain_repr):
    lx = sy.LoggingTensor(NoteTensor(torch.tensor([1.0]), "n")) + 1
    assert repr(lx) == "LoggingTensor[1 op: add]>NoteTensor[1 op noted; add: n]>tensor([2.])"
    assert f"{lx}" == str(lx) == repr(lx)


def test_a_registered_renderer_replaces_the_repr(plain_repr):
    set_chain_repr(lambda layer: f"<{type(layer).kind}>")
    assert repr(NoteTensor(torch.ones(1), "n")) == "<note>"


def test_the_protocol_defaults_refuse_to_copy_or_decode_a_layer_that_says_nothing():
    class Bare(ChainLayer):
        kind = "bare"

        @classmethod
        def __torch_dispatch__(cls, func, types, args, kwargs=None):
            raise NotImplementedError

    t = torch.Tensor._make_wrapper_subclass(Bare, (1,))
    t.child = torch.ones(1)
    assert t.layer_children() == [t.child] and t.node_fields() == {} and t.wire_fields() == {}
    assert t.display() == {"label": "Bare", "lines": [], "badge": None} and Bare.node_actions == ()
    with pytest.raises(SyftError, match="a Bare cannot be copied into a worker's store"):
        t.stored_copy(lambda c: c)
    with pytest.raises(SyftError, match="a Bare cannot be received from the wire"):
        Bare.from_wire({}, [])
