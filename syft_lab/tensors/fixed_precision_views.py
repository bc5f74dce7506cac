"""Writes through views of fixed precision tensors, and the in-place ops that keep a shared value shared.

In torch a view (``x[0]``, ``x[:, 1]``, ``x.t()``, ``x.view(...)``, ``x.squeeze()``, ``x.detach()``,
``x.data``) shares its base's memory: an in-place op on it (``x[0].mul_(2)``, ``x[:, 0] = v``, which
is a view then ``copy_``) changes the base. A FixedPrecisionTensor has no memory of its own: its
value is its ``child``, and a shared child lives on the parties as shares, which cannot be views of
another process's memory. So a view op here records on its result what it is a view of and by
which op (``viewed``: the op's arguments, no values); an in-place op on a view writes the view's
new child back into its base through the inverse of the recorded ops (``write_back``): the base
positions each view element stands for are the recorded ops replayed on a public tensor of
positions, and one ``index_put`` per share (or on a public child) puts the new values there. A
view of a view records the first base and all the ops from it, and holds that base weakly: a
record never keeps a tensor (or its shares on the parties) alive. Nothing is ignored: a write the inverse cannot express (an
expanded view, a shared value into part of a public tensor) is a SyftError.

Limits (docs/secure-computation.md): a view taken *before* a write to its base or to another view
keeps the values it had; take views after writing (torch's views would see the write). A write into
a ``detach()`` of a view stops at that view (autograd's gradients are such detaches, and torch gives
them their own memory).

An in-place op on a shared tensor keeps it shared: ``copy_``/``fill_`` of public values (what
``torch.nn.init``'s ``normal_``, ``uniform_``, ``trunc_normal_``, ``zeros_``, ``dirac_`` reach)
share them among the same parties, drawn here. Copying a fixed precision or shared value into a
plain tensor (``plain.copy_(shared)``, so ``plain_model.load_state_dict(shared_model.state_dict())``)
is refused: decoding it silently would reveal the secret; ``.get().float_precision()`` first.

Ordinary ops pay nothing: only view ops (one attribute) and in-place ops look here.
"""
from __future__ import annotations

import weakref

import torch

from ..errors import SyftError
from .additive_sharing import AdditiveSharingTensor, engine

# fixed_precision.py imports this module (one layer, two files by responsibility) and hands it
# what it needs of that module once defined (``bind``): an import back would be a cycle.
_fixed_precision = {}  # "tensor": FixedPrecisionTensor, "encode": encode, "like": _like


def bind(tensor_class, encode, like) -> None:
    _fixed_precision.update(tensor=tensor_class, encode=encode, like=like)

aten = torch.ops.aten
INT64 = torch.int64
_AST = AdditiveSharingTensor
# The ops whose result shares its input's memory in torch (aten's view ops that reach a layer).
VIEW_PACKETS = frozenset({aten.view, aten.t, aten.transpose, aten.permute, aten.expand, aten.unsqueeze,
                          aten.squeeze, aten.select, aten.slice, aten.unfold, aten.narrow, aten.alias, aten.detach,
                          aten.diagonal, aten.movedim})
_IDENTITY = frozenset({aten.alias, aten.detach, aten.lift_fresh})
# In-place ops that change a tensor's shape, not its values (``squeeze_``: matmul's 1-D @ 2-D).
INPLACE_VIEWS = frozenset({aten.squeeze_, aten.unsqueeze_, aten.t_, aten.transpose_})
_REDUCTIONS = frozenset({aten.max, aten.min, aten.argmax, aten.argmin, aten.mean, aten.amax, aten.amin})
_PYTHON_KEYS = (torch._C.DispatchKeySet(torch._C.DispatchKey.Python)
                | torch._C.DispatchKeySet(torch._C.DispatchKey.PythonTLSSnapshot))


class ViewRecord:
    """What a view is a view of: its base (held weakly) and the ops from the base to the view."""
    __slots__ = ("base", "ops")

    def __init__(self, base, ops):
        self.base, self.ops = base, ops

    def __deepcopy__(self, memo):
        # a deep copy of a view owns its values (as torch's): it must not write into this base
        return None


def viewed(parent, func, args, kwargs, out):
    """``out``, the result of the view op ``func(parent, *args[1:])``, remembers it for write_back.

    The record names one base, held weakly, and every op from it: a view of a view records its
    parent's base and ops plus its own (``x.t()[0]``: ``x``, [t, select]), so a write reaches the
    base even when the views between are gone, and no view keeps another tensor alive (autograd
    saves detaches of outputs: a strong base once kept exp's output and through its graph the
    shared input, whose shares then stayed on the parties after ``del``). A detach of a view
    records that view as its base, and a write into it stops there (``_stops_at``)."""
    if func.overloadpacket not in VIEW_PACKETS:
        return out
    op = (func, tuple(args[1:]), dict(kwargs))
    record = parent.__dict__.get("_view_of")
    if record is None or (func.overloadpacket in _IDENTITY and _stops_at(record)):
        out._view_of = ViewRecord(weakref.ref(parent), [op])
    else:
        out._view_of = ViewRecord(record.base, [*record.ops, op])
    return out


def _stops_at(record) -> bool:
    """A detach of a tensor with this record stops at that tensor: it is a view by some op that
    moves elements (a detach or alias of a base is the base itself). Autograd's gradients are
    such detaches (AccumulateGrad keeps grad.detach(), and a grad is often a view of an op's
    output: expand for sum, t for linear); torch, seeing the wrapper's own strides, gives the
    gradient its own memory, so its writes never reach backward's intermediates."""
    return not all(f.overloadpacket in _IDENTITY for f, _, _ in record.ops)


def _replay(ops, t):
    for func, rest, kwargs in ops:
        packet = func.overloadpacket
        if packet in _IDENTITY:
            continue
        t = aten.reshape.default(t, *rest) if packet is aten.view else func(t, *rest, **kwargs)
    return t


def _positions(parent, ops) -> torch.Tensor:
    """The flat index in ``parent`` of each element of the view ``ops`` make of it (public)."""
    return _replay(ops, torch.arange(parent.numel(), dtype=INT64).reshape(tuple(parent.shape)))


def write_back(view) -> None:
    """After an in-place op changed ``view.child``: its base takes the new values (one step: the
    record names the base itself, not a chain). A base already gone has nobody to see them."""
    record = view.__dict__.get("_view_of")
    if record is None:
        return
    base, ops = record.base(), record.ops
    if base is None:
        return
    if all(f.overloadpacket in _IDENTITY for f, _, _ in ops):
        base.child = view.child
    else:
        base.child = _put(base.child, _positions(base, ops), view.child, tuple(base.shape))


def _put(base, positions, values, shape):
    flat = positions.reshape(-1)
    if flat.numel() != torch.unique(flat).numel():
        raise SyftError("an in-place write into an expanded view of a fixed precision tensor: several of its "
                        "elements are one element of the base (torch refuses it too); clone() it first")
    if not shape:  # a 0-dim base: the view holds its one element
        return aten.reshape.default(values, [])
    coords = list(torch.unravel_index(positions, shape))
    if isinstance(base, _AST) or isinstance(values, _AST):
        return engine().put(base, coords, values)
    return aten.index_put.default(base, coords, values)


def writes_through(handler):
    """An in-place op's handler that also writes into the base when its tensor is a view."""
    def handler_through_views(func, args, kwargs):
        out = handler(func, args, kwargs)
        self = args[0]
        if self.__dict__.get("_view_of") is not None:
            write_back(self)
        return out

    handler_through_views.writes_through = True
    return handler_through_views


def inplace_view(func, args, kwargs):
    """``squeeze_``, ``unsqueeze_``, ``t_``, ``transpose_``: the wrapper's shape changes (torch's own
    kernel, below the layers: it only sets sizes and strides) and its child takes the view."""
    self = args[0]
    out_of_place = getattr(getattr(aten, func.overloadpacket.__name__[:-1]), func._overloadname)
    child = out_of_place(self.child, *args[1:], **kwargs)
    with torch._C._ExcludeDispatchKeyGuard(_PYTHON_KEYS):
        func(self, *args[1:], **kwargs)
    self.child = child
    record = self.__dict__.get("_view_of")
    if record is not None:  # still a view of the same base: one more op on the way
        record.ops.append((out_of_place, tuple(args[1:]), dict(kwargs)))
    return self


def _public_encoding(src, shape, scale) -> torch.Tensor:
    """A public value (number or plain tensor) as an int64 encoding of ``shape`` (broadcast, owned)."""
    if not isinstance(src, torch.Tensor):
        src = torch.tensor(src)
    return _fixed_precision["encode"](src, scale).expand(shape).clone()


def _keep_sharing(self, child):
    """A public encoding written into a shared tensor is shared among its parties (drawn here)."""
    if not isinstance(self.child, _AST) or isinstance(child, _AST):
        return child
    return engine().share(child, self.child.parties, self.child.crypto_provider)


def copy_(func, args, kwargs):
    """self.copy_(src). A copy owns its child: autograd accumulates one gradient into several
    leaves by copy_ (``(a + b).backward()``), and a shared child's shares must not be the same
    pointers twice (a.grad.get() would consume b.grad's shares)."""
    FixedPrecisionTensor = _fixed_precision["tensor"]
    self, src = args[0], args[1]
    if not isinstance(self, FixedPrecisionTensor):
        raise SyftError("copying a fixed precision or shared value into a plain tensor is refused (its values "
                        "would be decoded, a secret revealed, without asking): bring it here and decode it first, "
                        "plain.copy_(x.get().float_precision()) (x.float_precision() when not shared)")
    shape = list(self.shape)
    if isinstance(src, FixedPrecisionTensor):
        t = _fixed_precision["like"]([self, src])
        child = src.child if list(src.shape) == shape else aten.expand.default(src.child, shape)
        self.child = aten.clone.default(child)
    else:
        self.child = _keep_sharing(self, _public_encoding(src, shape, self.scale))
    return self


def fill_(value):
    """zero_, fill_: the value everywhere (shared among the parties when the tensor is shared)."""
    def handler(func, args, kwargs):
        self = args[0]
        v = value if value is not None else args[1]
        if isinstance(v, torch.Tensor):
            if v.dim() != 0 or v.__class__ is not torch.Tensor:
                raise SyftError("fill_ on a fixed precision tensor takes one public number")
            v = v.item()
        child = torch.full(tuple(self.shape), int(round(v * self.scale)), dtype=INT64)
        self.child = _keep_sharing(self, child)
        return self

    return handler


def zero_dim_reduction(handler):
    """max/min/argmax/argmin/mean along dim 0 (or -1) of a 0-dim tensor: torch's value, by the same op
    over its one element (``x.unsqueeze(0)``), so the result is what a 1-element dim gives."""
    def handler_for_zero_dim(func, args, kwargs):
        x = args[0]
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if x.dim() or dim is None or dim == []:
            return handler(func, args, kwargs)
        dims = dim if isinstance(dim, (list, tuple)) else [dim]
        if any(d not in (0, -1) for d in dims):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dims})")
        rest = {k: v for k, v in kwargs.items() if k not in ("dim", "keepdim")}
        one = aten.unsqueeze.default(x, 0)
        new_dim = [0] * len(dims) if isinstance(dim, (list, tuple)) else 0
        return handler(func, (one, new_dim, False, *args[3:]), rest)

    handler_for_zero_dim.zero_dim = True
    return handler_for_zero_dim


def install(handlers: dict) -> dict:
    """``handlers`` (aten op or packet -> handler) with every in-place op's handler writing through
    views, and the reductions taking a dim of a 0-dim tensor; the in-place view ops added."""
    for op in list(handlers):
        packet = getattr(op, "overloadpacket", op)
        name = packet.__name__
        handler = handlers[op]
        if getattr(handler, "writes_through", False) or getattr(handler, "zero_dim", False):
            continue
        if name.endswith("_") and not name.startswith("_") and packet not in INPLACE_VIEWS:
            handlers[op] = writes_through(handler)
        elif packet in _REDUCTIONS:
            handlers[op] = zero_dim_reduction(handler)
    for op in INPLACE_VIEWS:
        handlers[op] = inplace_view
    return handlers
