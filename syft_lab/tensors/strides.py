"""What a pointer's wrapper says about its remote tensor: sizes, strides, storage offset, dtype.

Composite ops (``reshape``, ``matmul``, ``tensordot``, attention) read the wrapper's strides to
decide which aten ops to send (a ``view`` where the strides allow one), so the wrapper must
describe the remote tensor exactly, or the worker is sent a view its tensor cannot take. A
worker's reply names a new object's shape and dtype; its strides and storage offset come from
running the same op here on meta tensors with the inputs' exact metadata (meta kernels give the
strides the CPU kernels produce). That run is memoised on the op and its arguments' metadata,
so a repeated op costs one dict lookup; an op meta cannot run (data-dependent shapes such as
``nonzero``) gives a contiguous tensor, as those kernels do.

Objects that reach a worker by send or move are stored contiguous on every transport (the wire
format sends contiguous bytes; ``syft_lab/workers/virtual.py`` does the same in process), so a
pointer made for them (``PointerTensor(worker, id, shape, dtype)``) has contiguous strides.
"""
from __future__ import annotations

import torch

_Tensor = torch.Tensor
_META = torch.device("meta")
_seq = (list, tuple)
_device = torch.device

# (shape, stride, offset, dtype) -> its PointerKey, and back by index: a pointer's metadata is one
# object in the memo keys (hashing the nested tuples on every op would cost ~0.5 us)
_ids: dict = {}
_metas: list = []

MAX_ENTRIES = 20_000  # memo entries; past it the memo starts again (ops with ever-new scalars)
_memo: dict = {}


class PointerKey:
    """A pointer argument in a memo key: one interned object per distinct metadata, so it
    compares and hashes by identity (native speed) and equals no plain argument."""

    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self):
        return f"PointerKey({_metas[self.index]})"


def intern(shape, stride, offset: int, dtype) -> PointerKey:
    key = (tuple(shape), tuple(stride), offset, dtype)
    k = _ids.get(key)
    if k is None:
        k = _ids[key] = PointerKey(len(_metas))
        _metas.append(key)
    return k


def contiguous_strides(shape) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class TensorMeta:
    """One tensor result's metadata as the meta run gave it (``mkey``: its interned id)."""

    __slots__ = ("shape", "stride", "offset", "dtype", "mkey", "wrap_stride", "wrap_offset")

    def __init__(self, t: _Tensor):
        self.shape, self.stride, self.offset, self.dtype = tuple(t.shape), t.stride(), t.storage_offset(), t.dtype
        self.mkey = intern(self.shape, self.stride, self.offset, self.dtype)
        # what a wrapper is made with: None for a contiguous tensor at offset 0 (torch computes
        # those strides itself, ~0.4 us faster than parsing them on every op's result)
        plain = self.offset == 0 and self.stride == contiguous_strides(self.shape)
        self.wrap_stride = None if plain else self.stride
        self.wrap_offset = None if plain else self.offset


def meta_tensor(mkey: PointerKey) -> _Tensor:
    """A meta tensor with the interned metadata ``mkey``."""
    shape, stride, offset, dtype = _metas[mkey.index]
    if offset == 0:
        return torch.empty_strided(shape, stride, dtype=dtype, device=_META)
    extent = offset + (sum((n - 1) * s for n, s in zip(shape, stride)) + 1 if all(shape) else 0)
    return torch.empty(extent, dtype=dtype, device=_META).as_strided(shape, stride, offset)


class ConstantKey:
    """A 0-dim local tensor constant in a memo key: only its dtype matters to the metadata
    (one interned object per dtype, compared by identity)."""

    __slots__ = ("dtype",)

    def __init__(self, dtype):
        self.dtype = dtype


_constant_keys: dict = {}


def constant_key(dtype) -> ConstantKey:
    k = _constant_keys.get(dtype)
    if k is None:
        k = _constant_keys[dtype] = ConstantKey(dtype)
    return k


def _meta_arg(k, a):
    if type(k) is PointerKey:
        return meta_tensor(k)
    if type(k) is ConstantKey:
        return torch.empty((), dtype=k.dtype, device=_META)
    if type(a) is _device:
        return _META
    if type(a) in _seq:
        return [_meta_arg(kb, b) for kb, b in zip(k, a)]
    return a


def _describe(out, inputs):
    if isinstance(out, _Tensor):
        return TensorMeta(out)
    if type(out) in _seq:
        return tuple(_describe(o, inputs) for o in out)
    return None


class ColumnMajor:
    """The result of a data-dependent op whose CPU kernel writes it column-major (``nonzero``:
    an (n, ndim) result with strides (1, n)); meta cannot run it, the layout is known."""

    __slots__ = ()

    @staticmethod
    def stride(shape):
        return (1, shape[0]) if len(shape) == 2 else None


COLUMN_MAJOR = ColumnMajor()
_COLUMN_MAJOR_OPS = frozenset(id(op) for op in (torch.ops.aten.nonzero.default, torch.ops.aten.argwhere.default))


def infer(func, key: tuple, args, kwargs):
    """The outputs' metadata for ``func`` on arguments with the metadata in ``key`` (built by
    the pointer's dispatch: ``id(func)``, one entry per argument, then kwarg names and
    entries), memoised under ``key``; None where meta cannot tell."""
    n = len(args)
    try:
        margs = [_meta_arg(k, a) for k, a in zip(key[1:n + 1], args)]
        mkw = {}
        if kwargs:
            rest = key[n + 1:]
            for (name, k), v in zip(zip(rest[::2], rest[1::2]), kwargs.values()):
                mkw[name] = _meta_arg(k, v)
        with torch.no_grad():
            out = func(*margs, **mkw)
        desc = _describe(out, margs)
    except Exception:  # no meta kernel, or data-dependent: the worker's shape, contiguous
        desc = COLUMN_MAJOR if id(func) in _COLUMN_MAJOR_OPS else None
    if len(_memo) >= MAX_ENTRIES:
        _memo.clear()
    _memo[key] = desc
    return desc


memo_get = _memo.get
