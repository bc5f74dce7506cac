"""The base of every chain layer.

A layer is a real ``torch.Tensor`` (a wrapper subclass with no storage of its own) whose
data is ``child``, the next layer down. The head of a chain is simply its outermost layer:
there is no empty wrapper above it, so ``nn`` layers, losses and optimizers take it as is.
Ops reach a layer through ``__torch_dispatch__`` (backward ops too); plain tensors never
pass through any syft code.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..ids import tensor_id

_make_wrapper = torch.Tensor._make_wrapper_subclass
_Tensor = torch.Tensor
_strided = torch.strided


def make_layer(cls, shape, dtype, device, requires_grad=False):
    """A new, empty wrapper instance of ``cls`` with the given tensor metadata."""
    if device.type == "cpu":  # the default: skipping the argument saves a parse per op
        return _make_wrapper(cls, shape, dtype=dtype, requires_grad=requires_grad)
    return _make_wrapper(cls, shape, dtype=dtype, device=device, requires_grad=requires_grad)


def layer_like(cls, t: torch.Tensor, requires_grad=False):
    """A new, empty wrapper instance of ``cls`` with ``t``'s size, strides, storage offset,
    dtype, layout and device: composite ops (``reshape``, attention's ``view``s) decide on
    the wrapper's strides what they then do to the child, so the two must agree."""
    if t.layout is _strided:
        strides, offset = t.stride(), t.storage_offset()
    else:  # sparse, mkldnn, ...: no strides to mirror
        strides = offset = None
    return _make_wrapper(cls, t.shape, strides, offset, None, t.dtype, t.layout, t.device, False, requires_grad)


def require_tensor(layer_name: str, obj) -> torch.Tensor:
    if not isinstance(obj, torch.Tensor):
        raise TypeError(f"{layer_name} wraps a torch.Tensor, got {type(obj).__name__} ({obj!r:.60})")
    return obj


class ChainLayer(torch.Tensor):
    """Common behaviour of layers: metadata from the child, chain-shaped repr, safe copies."""

    # Layers decide everything in __torch_dispatch__; the torch_function layer would only
    # add Python work to every call.
    __torch_function__ = torch._C._disabled_torch_function_impl

    #: the ``kind`` field of this layer's node in the inspection model
    kind = "layer"

    def __repr__(self, *, tensor_contents=None):  # torch passes tensor_contents sometimes
        from ..inspection.text import chain_text

        return chain_text(self)

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self)

    @property
    def id(self) -> int:
        """This layer's stable id (given on first ask: most op results are never inspected)."""
        return tensor_id(self)

    # Layer-specific node fields for the inspection model; subclasses extend this.
    def _node_fields(self) -> dict:
        return {}

    def _chain_rest(self, owner: str, with_values: bool) -> list:
        """The nodes below this layer (a pointer overrides this to continue on its worker)."""
        from ..inspection.model import chain_nodes

        return chain_nodes(self.child, owner, with_values)

    def __reduce_ex__(self, protocol):
        raise SyftError(f"{type(self).__name__} cannot be pickled")


def flat_layers(cls, args):
    """The instances of ``cls`` among ``args`` and one level of lists/tuples inside them.

    Dispatch args are flat in the common case; a pytree walk would cost ~3x per op.
    """
    found = []
    for a in args:
        if isinstance(a, cls):
            found.append(a)
        elif type(a) in (list, tuple):
            for b in a:
                if isinstance(b, cls):
                    found.append(b)
    return found
