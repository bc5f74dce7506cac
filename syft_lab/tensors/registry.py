"""The registry of chain layer types: the one place the rest of syft_lab learns about layers.

Why it exists: knowledge of each layer type used to be spread over the wire format, three
store-copy functions and four renderers, so a new layer touched ten files. Now a layer class
declares what the others need (``syft_lab.tensors.base.ChainLayer``: kind, wire code, children,
node fields, display, actions, stored copy, wire codec) and registers itself here::

    @register_layer
    class NoteTensor(ChainLayer):
        kind, wire_code = "note", 40
        ...

The wire format encodes and decodes every registered layer by its code, workers copy objects
into their store with ``stored_copy``, the inspection model walks ``layer_children`` and every
renderer draws ``display()``. Adding a layer type is one file.
"""
from __future__ import annotations

import keyword

import torch

from ..errors import SyftError
from .base import ChainLayer

# msgpack ext codes 0-9 are the wire format's own types (refs, tensors, tuples, dtypes, ...);
# layers take theirs from 10-127.
LAYER_CODES = range(10, 128)

_by_kind: dict[str, type] = {}
_by_code: dict[int, type] = {}

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter


def register_layer(cls):
    """Class decorator: make ``cls`` (a ChainLayer subclass) a known layer type.

    Checks that it declares a ``kind`` and a free wire code (or ``wire_code = None`` for a
    layer that never travels). Registering a class of the same qualified name again (a module
    reloaded) replaces it; any other clash is an error."""
    if not (isinstance(cls, type) and issubclass(cls, ChainLayer)):
        raise SyftError(f"register_layer takes a ChainLayer subclass, got {cls!r}")
    kind = cls.__dict__.get("kind")
    if not isinstance(kind, str) or not kind.isidentifier() or keyword.iskeyword(kind):
        raise SyftError(f"{cls.__name__} must declare its own kind (a short identifier such as 'logging')")
    code = cls.wire_code
    if code is not None and (type(code) is not int or code not in LAYER_CODES):
        raise SyftError(f"{cls.__name__}.wire_code must be an int in {LAYER_CODES.start}-{LAYER_CODES.stop - 1} "
                        f"(or None: never sent), got {code!r}")
    if not isinstance(cls.wire_schema, dict) or not all(isinstance(k, str) for k in cls.wire_schema):
        raise SyftError(f"{cls.__name__}.wire_schema maps field names to the types of their wire values")
    for table, key, what in ((_by_kind, kind, "kind"), (_by_code, code, "wire code")):
        other = table.get(key)
        if key is not None and other is not None and other.__qualname__ != cls.__qualname__:
            raise SyftError(f"{cls.__name__} takes {what} {key!r}, already used by {other.__name__}")
    old = _by_kind.get(kind)
    if old is not None and old.wire_code is not None and _by_code.get(old.wire_code) is old:
        del _by_code[old.wire_code]
    _by_kind[kind] = cls
    if code is not None:
        _by_code[code] = cls
    return cls


def layer_for_kind(kind: str) -> type:
    """The registered layer class whose nodes have this ``kind``."""
    try:
        return _by_kind[kind]
    except (KeyError, TypeError):
        raise SyftError(f"no layer type of kind {kind!r}; known: {', '.join(sorted(_by_kind))}") from None


def layer_for_code(code: int) -> type | None:
    """The registered layer class with this wire code, or None (not a layer's code)."""
    return _by_code.get(code)


def registered_layers() -> list[type]:
    """Every registered layer class, in registration order."""
    return list(_by_kind.values())


def is_registered(obj) -> bool:
    """Whether ``obj`` is an instance of a registered layer class (not of an unknown subclass)."""
    tp = type(obj)
    return _by_kind.get(getattr(tp, "kind", None)) is tp


def iter_chain(obj):
    """``obj`` and every tensor below it (depth first, head first): a chain is a tree whose
    inner nodes are layers (``layer_children``) and whose leaves are plain tensors or layers
    without children here (a pointer's rest is on its worker)."""
    stack = [obj]
    while stack:
        t = stack.pop()
        yield t
        if isinstance(t, ChainLayer):
            stack.extend(reversed(t.layer_children()))


def stored_copy(obj):
    """What a worker stores when it is sent ``obj``: an independent copy of the whole chain,
    outside any autograd graph, with the tags and description the object carried.

    A plain tensor (or Parameter) is ``detach().clone()``d; a registered layer copies itself
    with ``layer.stored_copy(stored_copy)``. Refused with a SyftError: meta (and other
    non-CPU) tensors, layers that are not ``remote_storable``, and tensor subclasses no layer
    registered (their data could not be copied faithfully)."""
    tp = type(obj)
    if tp is _Tensor or tp is _Parameter:
        if obj.device.type != "cpu":  # a meta tensor has no data: storing one would hide a bug
            raise SyftError(f"cannot store a tensor on the {obj.device.type} device: workers hold CPU tensors")
        new = obj.detach().clone()
    elif isinstance(obj, ChainLayer) and _by_kind.get(tp.kind) is tp:
        if not tp.remote_storable:
            raise SyftError(f"a {tp.__name__} cannot be stored on a worker as one object: "
                            f"{tp.remote_storable_reason}")
        new = obj.stored_copy(stored_copy)
    elif isinstance(obj, _Tensor):
        raise SyftError(f"cannot store a {tp.__name__}: workers hold plain tensors and the registered "
                        f"layers ({', '.join(c.__name__ for c in _by_kind.values())})")
    else:
        raise SyftError(f"cannot store a {tp.__name__}: workers hold tensors")
    d = obj.__dict__
    if "tags" in d:
        new.tags = set(d["tags"])
    if "description" in d:
        new.description = d["description"]
    return new


class LayerSpec:
    """A decoded layer whose chain reaches a pointer (a child is a PointerSpec or a LayerSpec):
    kept as data, never made live, so a receiver can refuse it with its own rule (a worker
    process stores no pointer) and keep the connection."""

    __slots__ = ("kind", "fields", "children", "tags", "description")

    def __init__(self, kind: str, fields: dict, children: list, tags=None, description=None):
        self.kind, self.fields, self.children = kind, fields, children
        self.tags, self.description = tags, description

    def pointer_specs(self) -> list:
        """The PointerSpecs this chain reaches, head first."""
        found = []
        for c in self.children:
            if isinstance(c, LayerSpec):
                found.extend(c.pointer_specs())
            elif not isinstance(c, _Tensor):
                found.append(c)
        return found

    def __repr__(self):
        return f"LayerSpec({self.kind!r}, {self.children!r})"


# --- checks a from_wire uses on decoded fields (errors become the wire format's WireError) ----

MAX_TEXT = 4096  # characters of one string field (an op name, a note)
MAX_DIMS = 64
MAX_DIM_SIZE = 2**40


def wire_text(x, what: str) -> str:
    if type(x) is not str or len(x) > MAX_TEXT:
        raise SyftError(f"{what} must be a string of at most {MAX_TEXT} characters")
    return x


def wire_int(x, what: str, lo: int = 0, hi: int = 2**64 - 1) -> int:
    if type(x) is not int or not lo <= x <= hi:
        raise SyftError(f"{what} must be an integer in [{lo}, {hi}], got {type(x).__name__}")
    return x


def wire_shape(shape) -> list:
    if type(shape) is not list or len(shape) > MAX_DIMS:
        raise SyftError(f"a shape is a list of at most {MAX_DIMS} sizes")
    for s in shape:
        wire_int(s, "a dimension size", 0, MAX_DIM_SIZE)
    return shape


def wire_list(x, what: str, max_len: int = 1_000_000) -> list:
    if type(x) is not list or len(x) > max_len:
        raise SyftError(f"{what} must be a list of at most {max_len} items")
    return x
