"""The base of every chain layer, and the layer protocol every layer type declares.

A layer is a real ``torch.Tensor`` (a wrapper subclass with no storage of its own) whose
data is ``child``, the next layer down (or, for a shared tensor, several children). The head
of a chain is simply its outermost layer: there is no empty wrapper above it, so ``nn``
layers, losses and optimizers take it as is. Ops reach a layer through
``__torch_dispatch__`` (backward ops too); plain tensors never pass through any syft code.

The protocol (each layer class declares these; ``tensors/registry.py`` registers the class,
and the wire format, workers, the inspection model and every renderer read only this)::

    kind: str                  # the ``kind`` of its inspection node: "logging", "pointer", ...
    wire_code: int | None      # its msgpack ext code (10-127); None: it never travels
    wire_schema: dict          # wire field name -> type(s) its decoded value must have
    remote_storable: bool      # may a worker store it (a shared tensor may not) ...
    remote_storable_reason: str  # ... and, when not, why (the refusal says it)
    node_actions: tuple[str]   # actions it offers when held in the notebook ("get", "move", ...)
    layer_children() -> list[torch.Tensor]     # the tensors below it, here
    node_fields() -> dict                      # extra JSON fields of its node (no secret values)
    child_fields(i) -> dict                    # what it tells child i: fields of that child's node
                                               # and world entries (a share's index, its secret's group)
    child_fields_below: tuple[str]             # keys of child_fields the nodes below child i carry too
    world_fields() -> dict                     # extra fields of its own world entry ("me" lane row)
    display() -> dict                          # {"label", "lines", "badge"}: what renderers draw
    stored_copy(copy_child) -> ChainLayer      # an independent, detached copy for a store
    wire_fields() -> dict                      # its fields as wire values (children travel apart)
    from_wire(fields, children) (classmethod)  # the layer again, from validated fields; data only

A layer's ``__torch_dispatch__`` hands an op on with ``forward_to_child(args, kwargs, unwrap)``
(below): the one rule for finding its instances (or any tensors) among an op's arguments and
putting what stands below them in their place (the shortest example: tests/tensors/note_layer.py).

The text form of a chain (``repr``) comes from the renderer registered with
``set_chain_repr`` (syft_lab.inspection registers its text renderer when imported); without
one, a plain fallback draws ``display()``.
"""
from __future__ import annotations

from typing import Callable

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


def _plain_repr(layer) -> str:
    """The repr of a layer when no renderer is registered: its display, then its children."""
    d = layer.display()
    text = d.get("label") or type(layer).__name__
    if d.get("lines"):
        text += f"[{'; '.join(d['lines'])}]"
    kids = layer.layer_children()
    if kids:
        inner = ", ".join(repr(k) if isinstance(k, ChainLayer) else torch.Tensor.__repr__(k) for k in kids)
        text += f">{inner}" if len(kids) == 1 else f">({inner})"
    return text


_chain_repr: Callable[[torch.Tensor], str] = _plain_repr


def tag_lines(t: torch.Tensor) -> str:
    """What PySyft 0.2 printed under a tagged tensor: its tags and description (or nothing)."""
    d = getattr(t, "__dict__", None) or {}
    tags, description = d.get("tags"), d.get("description")
    text = f"\n\tTags: {' '.join(sorted(tags))}" if tags else ""
    return text + (f"\n\tDescription: {description}" if description else "")


def set_chain_repr(fn: Callable[[torch.Tensor], str] | None) -> None:
    """Register the function that gives a layer its ``repr`` (the text renderer of chains).

    syft_lab.inspection registers its text renderer when imported, so layers never import a
    renderer; ``None`` restores the plain fallback."""
    global _chain_repr
    _chain_repr = _plain_repr if fn is None else fn


class ChainLayer(torch.Tensor):
    """Common behaviour of layers, and the defaults of the layer protocol (see the module doc).

    The defaults fit a layer with one ``child`` that never travels and offers no action."""

    # Layers decide everything in __torch_dispatch__; the torch_function layer would only
    # add Python work to every call.
    __torch_function__ = torch._C._disabled_torch_function_impl

    #: the ``kind`` field of this layer's node in the inspection model (each layer sets its own)
    kind: str = "layer"
    #: the msgpack ext code it travels as (see tensors/registry.py LAYER_CODES); None: never sent
    wire_code: int | None = None
    #: wire field name -> the type (or tuple of types) its decoded value must have
    wire_schema: dict = {}
    #: whether a worker may store it; when not, ``remote_storable_reason`` says why
    remote_storable: bool = True
    remote_storable_reason: str = ""
    #: actions this layer offers when held in the notebook; the node builder filters by context
    node_actions: tuple = ()

    def layer_children(self) -> list:
        """The tensors directly below this layer in this process, outermost first."""
        return [self.child]

    def node_fields(self) -> dict:
        """Extra JSON-ready fields of this layer's inspection node (never secret values)."""
        return {}

    #: keys of ``child_fields(i)`` that the nodes below child i carry too (a share pointer's
    #: remote root, the stored share, carries its secret's group)
    child_fields_below: tuple = ()

    def child_fields(self, i: int) -> dict:
        """What this layer tells its child ``layer_children()[i]``: JSON-ready fields (never
        values) that child's inspection node carries, and the world entries of the child (a
        pointer's row in "me") and of what it points to (the row on its worker's lane). A layer
        with several children says which part each is (a share: ``{"group", "share"}``); the
        inspection model also names the part by what the notebook calls this layer (``secret``)
        and offers no action on the part alone. Empty by default."""
        return {}

    def world_fields(self) -> dict:
        """Extra JSON-ready fields of this layer's world entry (a named local layer's row in
        "me"; a layer over it carries them too): a shared tensor's ``group``, ``crypto_provider``
        and the workers it is ``distributed`` over. Empty by default."""
        return {}

    def display(self) -> dict:
        """The renderer entry: ``{"label": str, "lines": [str, ...], "badge": str | None}``.

        Text, SVG and JS views draw every layer from this alone."""
        return {"label": type(self).__name__, "lines": [], "badge": None}

    def stored_copy(self, copy_child: Callable) -> "ChainLayer":
        """An independent copy for a worker's store, outside any autograd graph;
        ``copy_child(t)`` copies one child the same way (tags and description are copied
        by the registry's ``stored_copy``)."""
        raise SyftError(f"a {type(self).__name__} cannot be copied into a worker's store")

    def wire_fields(self) -> dict:
        """This layer's own fields as wire values (msgpack types, dtypes, tuples); its
        children travel beside them and tags/description are added by the wire format."""
        return {}

    @classmethod
    def from_wire(cls, fields: dict, children: list):
        """The layer from decoded ``fields`` (keys and value types already checked against
        ``wire_schema``) and ``children`` (decoded tensors). Checks the values (raising
        SyftError) and builds data only: never a live remote reference."""
        raise SyftError(f"a {cls.__name__} cannot be received from the wire")

    # --- shared behaviour -------------------------------------------------------------------
    def __repr__(self, *, tensor_contents=None):  # torch passes tensor_contents sometimes
        return _chain_repr(self) + tag_lines(self)

    __str__ = __repr__

    def __format__(self, spec):
        return repr(self)

    @property
    def id(self) -> int:
        """This layer's stable id (given on first ask: most op results are never inspected)."""
        return tensor_id(self)

    def __reduce_ex__(self, protocol):
        raise SyftError(f"{type(self).__name__} cannot be pickled")


_seq = (list, tuple)


def forward_to_child(args, kwargs, unwrap, types=_Tensor):
    """What an op on a layer passes on to the layer below: ``args`` (as a list) and ``kwargs``
    (a dict, or None when there are none) with every instance of ``types`` among them, at the
    top level and inside lists and tuples, replaced by ``unwrap(value)``; everything else as it
    is, lists and tuples as lists and tuples. The one unwrap rule of every layer: ``unwrap``
    says what a value becomes (a layer's child, a pointer's reference) and notes what the layer
    wants to know (its log, its inputs' shapes).

    Unrolled for what aten passes (values at the top level and in one list: a pytree walk costs
    ~3x per op); deeper lists recurse. Equal to
    ``tree_map_only(types, unwrap, (list(args), kwargs or None))``, which
    ``tests/tensors/test_forward_to_child.py`` holds it to on random nested arguments."""
    inner = []
    for a in args:
        if isinstance(a, types):
            a = unwrap(a)
        elif type(a) in _seq:
            a = _forward_seq(a, unwrap, types)
        inner.append(a)
    if not kwargs:
        return inner, None
    kw = {}
    for k, v in kwargs.items():
        if isinstance(v, types):
            v = unwrap(v)
        elif type(v) in _seq:
            v = _forward_seq(v, unwrap, types)
        kw[k] = v
    return inner, kw


def _forward_seq(seq, unwrap, types):
    """forward_to_child for one list or tuple argument."""
    inner = []
    for b in seq:
        if isinstance(b, types):
            b = unwrap(b)
        elif type(b) in _seq:
            b = _forward_seq(b, unwrap, types)
        inner.append(b)
    return inner if type(seq) is list else tuple(inner)


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
