"""Ops with a public index or a public condition on fixed precision tensors (issue 41, item 3):
``gather``, ``take``, ``scatter``/``scatter_add``, ``index_add``, ``index_copy``, ``index_put``,
``put`` (so the gradients of ``index_select``, ``gather`` and ``take`` run), ``where`` with a public
condition, ``cumsum``, ``trace``, ``clamp``/``hardtanh``/``relu6`` and ``neg_``; ``triu``/``tril`` (a public
mask), ``masked_select`` and ``masked_scatter`` by a public bool mask.

With a public index each op is linear in the values: every party applies it to its own share
(no round with the others). A write of ``src`` into ``self`` is ``self`` (kept where nothing is
written) plus the op applied to zeros and ``src`` (each party on its share of ``src``; a public
src is party 0's); the accumulating form of the op places it, so repeated indices add up as torch's
``scatter_add``/``index_add``/``accumulate=True`` do, and a non-accumulating write with a repeated
index (torch keeps one of the values, which one unspecified) is a SyftError. A shared index is
refused: which positions it names would have to be opened (``scatter`` by an encoded index, what
the gradient of max along a dim scatters, is the one-hot protocol of fixed_precision_compare.py).

``clamp(x, lo, hi)`` is lo + relu(x - lo) - relu(x - hi): two relus on one stacked sign-bit
circuit, exact; its gradient keeps g where lo < x < hi ([x > lo] + [x < hi] - 1, one circuit).
The handlers register themselves with the layer when syft_lab.smpc imports this module.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from .additive_sharing import engine
from .fixed_precision import (INT64, FixedPrecisionTensor, _add, _enc, _is_shared, _like, _mul, _scalar,
                              _wrap, check_fits, encode, register_handlers)
from .fixed_precision_compare import _scatter as _scatter_by_one_hot

aten = torch.ops.aten
FPT = FixedPrecisionTensor


def _public_index(index, op: str):
    if isinstance(index, FPT):
        raise SyftError(f"{op} on a fixed precision tensor takes a public index (an int64 tensor): a shared index "
                        f"would have to be opened to know which positions it names; multiply by a one-hot of it "
                        f"instead ((index == j) for each j, then a product)")
    return index


def _ring_tensor(value, t: FPT, shape) -> torch.Tensor:
    """A value written into ``t``: its child, or a public value's int64 encoding as a tensor."""
    enc = _enc(value, t.scale)
    if isinstance(enc, torch.Tensor):
        return enc
    return torch.full(tuple(shape), enc, dtype=INT64)


def _write(t: FPT, self, src, func, args_for, keep_rest: bool, op: str) -> FPT:
    """``self`` with ``src`` placed by ``func(*args_for(base, src))`` (an accumulating op, linear in
    src) added; with ``keep_rest`` the positions written are replaced, as a non-accumulating write does."""
    a = _ring_tensor(self, t, ())
    b = _ring_tensor(src, t, ())
    zeros = torch.zeros(tuple(a.shape), dtype=INT64)
    if keep_rest:
        written = func(*args_for(zeros, torch.ones(tuple(b.shape), dtype=INT64)))
        if bool((written > 1).any()):
            raise SyftError(f"{op} writes one position twice (a repeated index): torch keeps one of the values, which "
                            f"one unspecified; use the accumulating form (scatter_add, index_add, accumulate=True)")
        a = a * (1 - written)
    if _is_shared(b):
        placed = engine().each_share(func, b, lambda share: args_for(zeros, share))
    else:
        placed = func(*args_for(zeros, b))
    if not (_is_shared(a) or _is_shared(placed)):
        check_fits(a.double() + func(*args_for(zeros.double(), b.double())), f"{op} of fixed precision values",
                   t.scale)
    return _wrap(t, _add(a, placed))


def _scalar_arg(args, kwargs, pos, name, default=None):
    return args[pos] if len(args) > pos else kwargs.get(name, default)


def _scatter_add(func, args, kwargs):
    self, dim, index, src = args[:4]
    t = _like([self, src])
    index = _public_index(index, "scatter_add")
    return _write(t, self, src, aten.scatter_add.default, lambda base, s: (base, dim, index, s), False, "scatter_add")


def _scatter(func, args, kwargs):
    """scatter with a public index (any shape, as torch's); with an encoded index or ``reduce``: the
    one-hot protocol (fixed_precision_compare.py) or a SyftError from it."""
    self, dim, index = args[:3]
    if isinstance(index, FPT) or kwargs.get("reduce") is not None or len(args) > 4:
        return _scatter_by_one_hot(func, args, kwargs)
    t = _like([a for a in (self, args[3]) if isinstance(a, FPT)])
    src = args[3]
    if func.overloadpacket is aten.scatter and func._overloadname == "value" or _scalar(src) is not None:
        src = torch.full(tuple(index.shape), float(_scalar(src)))
    elif not isinstance(src, FPT) or tuple(src.shape) != tuple(index.shape):
        src = _sliced(src, index.shape)
    return _write(t, self, src, aten.scatter_add.default, lambda base, s: (base, dim, index, s), True, "scatter")


def _sliced(src, shape):
    """scatter uses the first index.shape[d] entries of src along each dim (src may be larger)."""
    for d, n in enumerate(shape):
        if src.shape[d] != n:
            src = aten.slice.Tensor(src, d, 0, n)
    return src


def _index_add(func, args, kwargs):
    self, dim, index, source = args[:4]
    alpha = _scalar_arg(args, kwargs, 4, "alpha", 1)
    t = _like([self, source])
    index = _public_index(index, "index_add")
    if alpha != 1:
        source = _mul(None, (source if isinstance(source, FPT) else _wrap(t, encode(source, t.scale)), alpha), {})
    return _write(t, self, source, aten.index_add.default, lambda base, s: (base, dim, index, s), False, "index_add")


def _index_copy(func, args, kwargs):
    self, dim, index, source = args[:4]
    t = _like([self, source])
    index = _public_index(index, "index_copy")
    return _write(t, self, source, aten.index_add.default, lambda base, s: (base, dim, index, s), True, "index_copy")


def _index_put(func, args, kwargs):
    self, indices, values = args[:3]
    accumulate = _scalar_arg(args, kwargs, 3, "accumulate", False)
    t = _like([self, values])
    indices = [None if i is None else _public_index(i, "index_put") for i in indices]
    return _write(t, self, values, aten.index_put.default, lambda base, s: (base, indices, s, True), not accumulate,
                  "index_put")


def _put(func, args, kwargs):
    self, index, source = args[:3]
    accumulate = _scalar_arg(args, kwargs, 3, "accumulate", False)
    t = _like([self, source])
    index = _public_index(index, "put")
    return _write(t, self, source, aten.put.default, lambda base, s: (base, index, s, True), not accumulate, "put")


def _gather(func, args, kwargs):
    x, dim, index = args[:3]
    return _wrap(x, aten.gather.default(x.child, dim, _public_index(index, "gather")))


def _take(func, args, kwargs):
    x, index = args[:2]
    return _wrap(x, aten.take.default(x.child, _public_index(index, "take")))


def _where(func, args, kwargs):
    """where(cond, x, y): a public bool condition selects on each share (x·c + y·(1 - c), exact); a
    condition of 0/1 fixed precision bits (a comparison's result) is y + (x - y)·c, one product."""
    cond, x, y = args[:3]
    t = _like([a for a in (cond, x, y) if isinstance(a, FPT)])
    a, b = _enc(x, t.scale), _enc(y, t.scale)
    if isinstance(cond, FPT):
        diff = _wrap(t, a - b if isinstance(a, torch.Tensor) else -(b - a))
        return _wrap(t, _add(_mul(None, (cond, diff), {}).child, b))
    c = cond.to(INT64)
    shape = list(torch.broadcast_shapes(*[tuple(v.shape) for v in (cond, x, y) if isinstance(v, torch.Tensor)]))
    picked_a = a * c if isinstance(a, torch.Tensor) else c * a
    picked_b = b * (1 - c) if isinstance(b, torch.Tensor) else (1 - c) * b
    out = _add(picked_a, picked_b)
    if list(out.shape) != shape:
        out = aten.expand.default(out, shape)
    return _wrap(t, out)


def _triangle(func, args, kwargs):
    """triu/tril: each share times the public 0/1 mask of the triangle (exact, local; its gradient the same op)."""
    x = args[0]
    diagonal = _scalar_arg(args, kwargs, 1, "diagonal", 0)
    keep = func(torch.ones(tuple(x.shape[-2:]), dtype=INT64), diagonal)
    return _wrap(x, x.child * keep)


def _public_mask(mask, op: str) -> torch.Tensor:
    if isinstance(mask, FPT) or not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
        raise SyftError(f"{op} on a fixed precision tensor takes a public bool mask: a shared mask would have to be "
                        f"opened (the result's length is the count of its ones); torch.where(mask, x, 0) keeps "
                        f"the shape with a shared condition")
    return mask


def _masked_positions(shape, mask) -> torch.Tensor:
    return aten.expand.default(mask, list(shape)).reshape(-1).nonzero().squeeze(1)


def _masked_select(func, args, kwargs):
    """masked_select(x, mask) for a public mask: the positions it names, taken from each share."""
    x, mask = args[0], _public_mask(args[1], "masked_select")
    shape = list(torch.broadcast_shapes(tuple(x.shape), tuple(mask.shape)))
    flat = aten.reshape.default(aten.expand.default(x.child, shape), [-1])
    return _wrap(x, aten.index_select.default(flat, 0, _masked_positions(shape, mask)))


def _masked_scatter(func, args, kwargs):
    """masked_scatter(self, mask, source) for a public mask (masked_select's gradient): source's first
    values written at the mask's positions, in order (an index_put of the flattened self)."""
    self, mask, source = args[0], _public_mask(args[1], "masked_scatter"), args[2]
    positions = _masked_positions(self.shape, mask)
    values = source.reshape(-1)[:positions.numel()]
    out = _index_put(aten.index_put.default, (self.reshape(-1), [positions], values), {})
    return out.reshape(list(self.shape))


def _masked_scatter_backward(func, args, kwargs):
    """The source's gradient: the incoming gradient at the mask's positions, zeros after them."""
    grad, mask, sizes = args[0], _public_mask(args[1], "masked_scatter"), args[2]
    picked = _masked_select(aten.masked_select.default, (grad, mask), {}).child
    total = 1
    for n in sizes:
        total *= n
    return _wrap(grad, aten.constant_pad_nd.default(picked, [0, total - picked.shape[0]]).reshape(list(sizes)))


def _cumsum(func, args, kwargs):
    x, dim = args[0], args[1]
    if not x.shared:
        check_fits(torch.cumsum(x.child.double(), dim), "a cumulative sum of fixed precision values", x.scale)
    return _wrap(x, aten.cumsum.default(x.child, dim))


def _trace(func, args, kwargs):
    x = args[0]
    if not x.shared:
        check_fits(torch.trace(x.child.double()), "a trace of fixed precision values", x.scale)
    return _wrap(x, aten.trace.default(x.child))


def _bounds(x: FPT, lo, hi):
    """The clamp bounds as ring operands (numbers or public tensors); None stays None."""
    def enc(v):
        if v is None:
            return None
        if isinstance(v, FPT):
            if v.shared:
                raise SyftError("clamp on a fixed precision tensor takes public bounds (numbers or tensors)")
            return v.child
        return _enc(v, x.scale)
    return enc(lo), enc(hi)


def _clamped(x: FPT, lo, hi) -> FPT:
    """lo + relu(x - lo) - relu(x - hi) (hi - relu(hi - x) without lo, lo + relu(x - lo) without hi)."""
    child = x.child
    if not x.shared:
        out = child
        if lo is not None:
            out = torch.maximum(out, lo if isinstance(lo, torch.Tensor) else torch.tensor(lo, dtype=INT64))
        if hi is not None:
            out = torch.minimum(out, hi if isinstance(hi, torch.Tensor) else torch.tensor(hi, dtype=INT64))
        return _wrap(x, out)
    if lo is not None and hi is not None:
        shape = list(torch.broadcast_shapes(tuple(child.shape), *[tuple(v.shape) for v in (lo, hi)
                                                                     if isinstance(v, torch.Tensor)]))
        below, above = child - lo, child - hi
        below, above = (v if list(v.shape) == shape else aten.expand.default(v, shape) for v in (below, above))
        r = engine().relu(aten.stack.default([below, above]))  # one sign-bit circuit for both
        return _wrap(x, _add(aten.select.int(r, 0, 0) - aten.select.int(r, 0, 1), lo))
    if lo is not None:
        return _wrap(x, _add(engine().relu(child - lo), lo))
    if hi is not None:
        return _wrap(x, _add(-engine().relu(-(child - hi)), hi))
    raise SyftError("clamp takes at least one of min and max")


def _clamp(func, args, kwargs):
    x = args[0]
    name = func.overloadpacket.__name__
    if name.startswith("clamp_min"):
        lo, hi = _scalar_arg(args, kwargs, 1, "min"), None
    elif name.startswith("clamp_max"):
        lo, hi = None, _scalar_arg(args, kwargs, 1, "max")
    else:
        lo, hi = _scalar_arg(args, kwargs, 1, "min"), _scalar_arg(args, kwargs, 2, "max")
    return _clamped(x, *_bounds(x, lo, hi))


def _hardtanh(func, args, kwargs):
    x = args[0]
    lo, hi = _scalar_arg(args, kwargs, 1, "min_val", -1.0), _scalar_arg(args, kwargs, 2, "max_val", 1.0)
    return _clamped(x, *_bounds(x, lo, hi))


def _hardtanh_backward(func, args, kwargs):
    """g where lo < x < hi, else 0: [x > lo] + [x < hi] - 1 (lo < hi), both signs in one circuit."""
    grad, x, lo, hi = args[:4]
    t = _like([grad, x])
    lo_e, hi_e = int(round(lo * t.scale)), int(round(hi * t.scale))
    if x.shared:
        bits = engine().compare("gt", aten.stack.default([x.child - lo_e, -(x.child - hi_e)]), 0)
        inside = aten.select.int(bits, 0, 0) + aten.select.int(bits, 0, 1) - 1
    else:
        inside = ((x.child > lo_e) & (x.child < hi_e)).to(INT64)
    g = _enc(grad, t.scale)
    return _wrap(t, g * inside if isinstance(g, torch.Tensor) else inside * g)


def _in_place(func, args, kwargs):
    """scatter_, index_add_, index_put_, clamp_, neg_, ...: the op, then this very tensor takes the
    result's child (and, through a view, its base: fixed_precision_views.py wraps this handler)."""
    self = args[0]
    out_of_place = getattr(getattr(aten, func.overloadpacket.__name__[:-1]), func._overloadname)
    self.child = FPT.__torch_dispatch__(out_of_place, (), args, kwargs).child
    return self


_OPS = {
    aten.scatter_add: _scatter_add, aten.scatter: _scatter, aten.index_add: _index_add, aten.index_copy: _index_copy,
    aten.index_put: _index_put, aten.put: _put, aten.gather: _gather, aten.take: _take, aten.where.self: _where,
    aten.cumsum: _cumsum, aten.trace: _trace, aten.clamp: _clamp, aten.clamp_min: _clamp, aten.clamp_max: _clamp,
    aten.hardtanh: _hardtanh, aten.hardtanh_backward: _hardtanh_backward,
    aten.triu: _triangle, aten.tril: _triangle, aten.masked_select: _masked_select, aten.masked_scatter: _masked_scatter,
    aten.masked_scatter_backward: _masked_scatter_backward,
}
register_handlers({**_OPS, **{getattr(aten, packet.__name__ + "_"): _in_place for packet in
                              (aten.scatter_add, aten.scatter, aten.index_add, aten.index_copy, aten.index_put, aten.put,
                               aten.clamp, aten.clamp_min, aten.clamp_max, aten.hardtanh, aten.neg, aten.triu,
                               aten.tril, aten.masked_scatter)}})
