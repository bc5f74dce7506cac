"""Comparisons, extrema, sign, |x|, relu, % and // on fixed precision tensors, and the selections
made by their 0/1 results (scatter by an index, masked_fill, logical_or): the ops built on the sign
bit of a difference (``engine().compare``/``msb``: a circuit on a shared child, torch's own
comparison on a public one). Part of the fixed precision layer (tensors/fixed_precision.py, which
holds the class, the encoding and the arithmetic); the handlers register themselves with it when
syft_lab.smpc imports this module, as the approximations do.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from .additive_sharing import engine
from .fixed_precision import (_FUNCTIONS, INT64, FixedPrecisionTensor, _enc, _is_shared, _like, _mul, _scalar,
                              _wrap, encode, register_handlers, truncate)

aten = torch.ops.aten
FPT = FixedPrecisionTensor


def _compare(func, args, kwargs):
    t = _like(args)
    a, b = _enc(args[0], t.scale), _enc(args[1], t.scale)
    name = func.overloadpacket.__name__  # gt lt ge le
    if not isinstance(a, torch.Tensor):
        a, b = b, a
        name = {"gt": "lt", "lt": "gt", "ge": "le", "le": "ge", "eq": "eq", "ne": "ne"}[name]
    if _is_shared(a) or _is_shared(b):
        bits = engine().compare(name, a, b)
    else:
        bits = getattr(torch, name)(a, b).to(INT64)
    return _wrap(t, bits * t.scale)


def _diff(a, b):
    """a - b for ring operands (at least one a tensor)."""
    return a - b if isinstance(a, torch.Tensor) else (-b) + a


def _sign_bits(d):
    """([d < 0], [d > 0]) as 0/1 ring values: one sign-bit circuit on the stacked [d, -d] when shared."""
    if _is_shared(d):
        m = engine().msb(aten.stack.default([d, -d]))
        return aten.select.int(m, 0, 0), aten.select.int(m, 0, 1)
    return (d < 0).to(INT64), (d > 0).to(INT64)


def _equal(func, args, kwargs):
    """a == b is 1 - [a < b] - [a > b], a != b their sum: both signs in one circuit."""
    t = _like(args)
    a, b = _enc(args[0], t.scale), _enc(args[1], t.scale)
    if not isinstance(a, torch.Tensor):  # symmetric: the tensor first
        a, b = b, a
    if not (_is_shared(a) or _is_shared(b)):
        bits = getattr(torch, func.overloadpacket.__name__)(a, b).to(INT64)
        return _wrap(t, bits * t.scale)
    neg, pos = _sign_bits(_diff(a, b))
    bits = neg + pos
    if func.overloadpacket is aten.eq:
        bits = 1 - bits
    return _wrap(t, bits * t.scale)


def _sign(func, args, kwargs):
    """sign(x) = [x > 0] - [x < 0] (0 at 0, as torch's)."""
    x = args[0]
    neg, pos = _sign_bits(x.child)
    return _wrap(x, (pos - neg) * x.scale)


def _abs(func, args, kwargs):
    """|x| = 2 relu(x) - x: relu's rounds, exact."""
    x = args[0]
    if x.shared:
        return _wrap(x, engine().relu(x.child) * 2 - x.child)
    return _wrap(x, x.child.abs())


def _negated(x: FPT) -> FPT:
    return _wrap(x, -x.child)


def _min(func, args, kwargs):
    """min, amin, min(dim): -max(-x) (ties: the lowest index, as max)."""
    x = args[0]
    if func is aten.min.dim:
        v, i = _max(aten.max.dim, (_negated(x), *args[1:]), kwargs)
        return _negated(v), i
    if func is aten.min.default:
        return _negated(_max(aten.max.default, (_negated(x),), {}))
    if func is aten.amin.default:
        return _negated(_max(aten.amax.default, (_negated(x), *args[1:]), kwargs))
    raise SyftError(f"{func} is not supported on fixed precision tensors (min, min(dim), amin are)")


def _argmin(func, args, kwargs):
    return _argmax(aten.argmax.default, (_negated(args[0]), *args[1:]), kwargs)


def _relu(func, args, kwargs):
    x = args[0]
    if x.shared:
        return _wrap(x, engine().relu(x.child))
    return _wrap(x, torch.relu(x.child))


def _threshold_backward(func, args, kwargs):
    grad, x, threshold = args
    t = _like(args)
    thr = int(round(threshold * t.scale))
    if x.shared:
        bits = engine().compare("gt", x.child, thr)
    else:
        bits = (x.child > thr).to(INT64)
    return _wrap(t, _enc(grad, t.scale) * bits)


def _max(func, args, kwargs):
    x = args[0]
    if func is aten.amax.default:
        dims = args[1] if len(args) > 1 else kwargs.get("dim", [])
        return _amax(x, [dims] if isinstance(dims, int) else list(dims),
                     args[2] if len(args) > 2 else kwargs.get("keepdim", False))
    if func is aten.max.default:
        if x.shared:
            return _wrap(x, engine().max(x.child))
        return _wrap(x, x.child.max())
    if func is aten.max.dim:
        dim = args[1]
        keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
        if x.shared:
            values, idx = _shared_max_index(x.child, dim, keepdim)
            return _wrap(x, values), _wrap(x, idx * x.scale)
        v, i = x.child.max(dim, keepdim)
        return _wrap(x, v), i
    raise SyftError(f"{func} is not supported on fixed precision tensors")


def _amax(x: FPT, dims: list, keepdim: bool) -> FPT:
    """amax over ``dims`` (none: every dim; issue 41: it took no dim or one): the reduced dims moved
    last and flattened into one, then one max along it (ties give the value once, as torch)."""
    n = x.dim()
    if n == 0:
        if any(d not in (0, -1) for d in dims):
            raise SyftError(f"amax/amin of a 0-dim tensor take dim 0 or -1, got {dims}")
        return _wrap(x, aten.clone.default(x.child))
    reduced = sorted({d % n for d in dims}) if dims else list(range(n))
    kept = [d for d in range(n) if d not in reduced]
    if any(x.shape[d] == 0 for d in reduced):
        raise SyftError("amax/amin over an empty dim has no value (torch refuses it too)")
    if not kept and not keepdim:
        return _max(aten.max.default, (x,), {})
    moved = x.permute(kept + reduced).reshape([x.shape[d] for d in kept] + [-1])
    values = _max(aten.max.dim, (moved, -1, False), {})[0]
    return values.reshape([1 if d in reduced else x.shape[d] for d in range(n)]) if keepdim else values


def _argmax(func, args, kwargs):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if not x.shared:
        return x.child.argmax(dim, keepdim)
    child = x.child
    if dim is None:
        child, dim, keepdim = aten.reshape.default(child, [-1]), 0, False
    return _wrap(x, _shared_max_index(child, dim, keepdim, values=False)[1] * x.scale)


def _shared_max_index(child, dim, keepdim, values=True):
    """(max, index) along ``dim``: the engine picks the tournament's levels (Engine.reduction_plan)."""
    return engine().max_index(child, dim, keepdim, values=values)


def _floor_mod(child, d: int):
    """child mod d (in [0, d)) for a public positive integer d, exactly: on a shared child the
    truncation gives floor(child / d) or one more, and one sign-bit circuit on the stacked
    [r, r - d] puts r = child - d q back in [0, d)."""
    return _floor_div_mod(child, d)[1]


def _floor_div_mod(child, d: int):
    """(floor(child / d), child mod d) as ring integers, for a public positive integer d (exact)."""
    if not _is_shared(child):
        return torch.div(child, d, rounding_mode="floor"), torch.remainder(child, d)
    q = truncate(child, d)
    r = child - q * d
    bits = engine().msb(aten.stack.default([r, r - d]))
    below, inside = aten.select.int(bits, 0, 0), aten.select.int(bits, 0, 1)  # [r < 0], [r < d]
    fix = below - (1 - inside)
    return q - fix, r + fix * d


def _remainder(func, args, kwargs):
    """x % m (torch.remainder: the sign of the divisor) for a public m: the remainder of the
    encodings, round(x * scale) mod round(m * scale). Exact to the encoding."""
    x, m = args[0], args[1]
    if isinstance(m, FPT) and m.shared:
        if not isinstance(x, FPT):  # a public dividend (5 % m)
            xe = _enc(x, m.scale)
            x = _wrap(m, xe if isinstance(xe, torch.Tensor) else torch.tensor(xe, dtype=INT64))
        return _wrap(x, _remainder_shared(x, m)[1])
    if not isinstance(x, FPT):
        raise SyftError("% on fixed precision tensors takes a fixed precision dividend and a public or shared "
                        "fixed precision modulus")
    d = _modulus_encoding(x, m)
    if d > 0:
        return _wrap(x, _floor_mod(x.child, d))
    return _wrap(x, -_floor_mod(-x.child, -d))


def _ring_mul(a, b):
    """a * b of ring values, no truncation (a Beaver product when both are shared): exact."""
    if _is_shared(a) and _is_shared(b):
        return engine().product(aten.mul.Tensor, a, b, (), 1)
    return a * b if isinstance(a, torch.Tensor) else b * a


def _remainder_shared(x: FPT, m: FPT) -> FPT:
    """x % m for a shared m (torch's sign: the divisor's): the remainder of the encodings,
    x_e - m_e * floor(x_e / m_e), exact to the encoding while the quotient's estimate is within
    one half of x / m (|x / m| · 1% + |x| · 2·10^-3 < 0.5: |x / m| <= ~40; 0.1 <= |m| <= ~300,
    the reciprocal's domain; docs/secure-computation.md).

    s = sign(m) (one sign-bit circuit) makes the divisor positive: x % m = s ((s x) % |m|). The
    quotient q = (s x) · reciprocal(|m|) (the division by a shared value, at the working
    precision) is floored to k = floor(q - 1/2) or one more (a truncation): floor(x / m) - 1, + 0
    or + 1. r = s x - |m| k is exact (integer products), in [-|m|, 2|m|); one sign-bit circuit on the
    stacked [r, r - |m|] and one product put it back in [0, |m|)."""
    reciprocal, up = _FUNCTIONS["reciprocal"], _FUNCTIONS["up"]  # syft_lab/smpc/approximations.py's

    shape = list(torch.broadcast_shapes(tuple(x.shape), tuple(m.shape)))
    xc, mc = x.child, m.child
    if list(xc.shape) != shape:
        xc = aten.expand.default(xc, shape)
    if list(mc.shape) != shape:
        mc = aten.expand.default(mc, shape)
    s = 1 - engine().msb(mc) * 2  # sign(m) as the ring integers 1 and -1 (sign(0) = 1)
    if _is_shared(xc):  # |m| and s x in one product
        both = _ring_mul(aten.stack.default([mc, xc]), aten.unsqueeze.default(s, 0))
        am, sx = aten.select.int(both, 0, 0), aten.select.int(both, 0, 1)
    else:
        am, sx = _ring_mul(mc, s), _ring_mul(xc, s)
    q = up(_wrap(x, sx)) * reciprocal(up(_wrap(m, am)), positive=True)  # s x / |m| at the working scale
    k = truncate(q.child - q.scale // 2, q.scale)
    r = sx - _ring_mul(am, k)
    bits = engine().msb(aten.stack.default([r, r - am]))
    below, inside = aten.select.int(bits, 0, 0), aten.select.int(bits, 0, 1)  # [r < 0], [r < |m|]
    fix = below + inside - 1
    return k - fix, _ring_mul(r + _ring_mul(am, fix), s)  # floor(x / m) (either sign of m), x % m


def _floor_divide(func, args, kwargs):
    """x.div(m, rounding_mode="floor"), x // m: floor(x_e / m_e) of the encodings (an integer, encoded)
    for a public number m or a shared m, from the same protocols as x % m (so the gradient of x % m
    with respect to a shared m, -g · floor(x / m), runs too); rounding_mode=None is the division."""
    mode = kwargs.get("rounding_mode", args[2] if len(args) > 2 else None)
    if func.overloadpacket is aten.floor_divide:
        mode = "floor"
    if mode is None:
        return FPT.__torch_dispatch__(aten.div.Tensor, (), args[:2], {})
    if mode != "floor":
        raise SyftError(f"fixed precision division takes rounding_mode='floor' only, got {mode!r}")
    x, m = args[0], args[1]
    if isinstance(m, FPT) and m.shared:
        if not isinstance(x, FPT):
            xe = _enc(x, m.scale)
            x = _wrap(m, xe if isinstance(xe, torch.Tensor) else torch.tensor(xe, dtype=INT64))
        return _wrap(x, _remainder_shared(x, m)[0] * x.scale)
    if not isinstance(x, FPT):
        raise SyftError("// on fixed precision tensors takes a fixed precision dividend")
    d = _modulus_encoding(x, m)
    q = _floor_div_mod(x.child, d)[0] if d > 0 else _floor_div_mod(-x.child, -d)[0]
    return _wrap(x, q * x.scale)


def _modulus_encoding(x: FPT, m) -> int:
    """round(m * scale) for one public modulus or divisor m (a number, or a tensor of one value)."""
    if isinstance(m, FPT):
        m = m.float_precision()
    s = _scalar(m)
    if s is None and isinstance(m, torch.Tensor) and m.numel() and bool((m == m.reshape(-1)[0]).all()):
        s = m.reshape(-1)[0].item()
    if s is None:
        raise SyftError("% and // on fixed precision tensors take one public number (or a shared value), not a "
                        "public tensor of several")
    d = int(round(s * x.scale))
    if d == 0:
        raise SyftError(f"% or // by {s}: it encodes as 0 at precision {x.precision}")
    return d


def _scatter(func, args, kwargs):
    """scatter(self, dim, index, src) with one index along ``dim`` per position (what the gradients of
    max and min along a dim scatter): src where the index points, self elsewhere. A public index
    (int64) is a public one-hot (exact products with 0/1 integers); a fixed precision index (the
    encoded indices a shared max(dim) returns) gives its one-hot by the equality circuit,
    (index == j) for each j along the dim, then one product with src (exact: the one-hot is 0 or 1)."""
    if func is not aten.scatter.src:
        raise SyftError(f"{func} is not supported on fixed precision tensors (scatter with a tensor src is)")
    self, dim, index, src = args[0], args[1], args[2], args[3]
    t = _like([a for a in (self, index, src) if isinstance(a, FPT)])
    dim = dim % max(self.dim(), 1)
    if (index.dim() != self.dim() or index.shape[dim] != 1 or tuple(src.shape) != tuple(index.shape)
            or any(index.shape[d] != self.shape[d] for d in range(self.dim()) if d != dim)):
        raise SyftError("scatter on fixed precision tensors takes one index along the dim per position and a src "
                        "of the index's shape (the gradient of max/min along a dim)")
    src = src if isinstance(src, FPT) else _wrap(t, encode(src, t.scale))
    self = self if isinstance(self, FPT) else _wrap(t, encode(self, t.scale))
    zero_self = not self.shared and not bool(self.child.any())
    if not isinstance(index, FPT):
        index = index.to(INT64)
        if not self.shared and not src.shared:
            return _wrap(t, aten.scatter.src(self.child, dim, index, src.child))
        onehot = torch.zeros(tuple(self.shape), dtype=INT64).scatter_(dim, index, 1)
        out = aten.expand.default(src.child, list(self.shape)) * onehot
        return _wrap(t, out if zero_self else out + self.child * (1 - onehot))
    shape = [1] * self.dim()
    shape[dim] = self.shape[dim]
    positions = torch.arange(self.shape[dim], dtype=INT64).view(shape)
    onehot = _equal(aten.eq.Tensor, (index, positions), {})  # 0/1 encodings, shaped like self
    out = _mul(None, (onehot, src), {})
    return out if zero_self else _wrap(t, out.child + self.child - _mul(None, (self, onehot), {}).child)


def _masked_fill(func, args, kwargs):
    """x.masked_fill(mask, v): a public bool mask selects on each share; a mask of 0/1 fixed precision
    bits (a comparison on shares: std's gradient masks where std == 0) is x (1 - mask) + v mask, one
    product (exact: the mask is 0 or 1)."""
    self, mask = args[0], args[1]
    value = _scalar(args[2] if len(args) > 2 else kwargs["value"])
    if value is None:
        raise SyftError("masked_fill on fixed precision tensors takes one public number as its value")
    v = int(round(value * self.scale))
    if isinstance(mask, FPT):
        kept = _mul(None, (self, _wrap(mask, self.scale - mask.child)), {}).child
        child = kept + mask.child * value if float(value).is_integer() else kept + truncate(mask.child * v, self.scale)
    else:
        m = mask.to(INT64)
        child = self.child.masked_fill(mask, v) if not self.shared else self.child * (1 - m) + m * v
    if func.overloadpacket is aten.masked_fill_:
        self.child = child
        return self
    return _wrap(self, child)


def _isnan(func, args, kwargs):
    """A fixed precision value is never NaN (fix_precision refuses NaN): all False, public."""
    return torch.zeros(tuple(args[0].shape), dtype=torch.bool)


def _logical_and(func, args, kwargs):
    """a & b of 0/1 fixed precision bits (comparisons' results: clamp's gradient keeps g where
    x >= min and x <= max): [a + b > 1.5] by one sign-bit circuit when shared, exact (a product of
    the encodings would truncate: one unit off); with a public bool tensor, a product by its 0/1."""
    a, b = args[0], args[1]
    if not isinstance(a, FPT):
        a, b = b, a
    if not isinstance(b, FPT):
        if not isinstance(b, torch.Tensor) or b.dtype != torch.bool or isinstance(a, FPT) and not isinstance(
                a.child, torch.Tensor):
            raise SyftError("& on fixed precision tensors takes 0/1 fixed precision bits and a public bool tensor")
        out = a.child * b.to(INT64)
        if func.overloadpacket is aten.logical_and_:
            args[0].child = out
            return args[0]
        return _wrap(a, out)
    t = _like([a, b])
    total = a.child + b.child
    threshold = t.scale + t.scale // 2
    if _is_shared(total):
        bits = engine().compare("gt", total, threshold)
    else:
        bits = (total > threshold).to(INT64)
    if func.overloadpacket is aten.logical_and_:
        args[0].child = bits * t.scale
        return args[0]
    return _wrap(t, bits * t.scale)


def _logical_or(func, args, kwargs):
    """bits | other for 0/1 fixed precision bits (a comparison's result) and a public bool tensor:
    1 where other is True, the bits elsewhere (what max()'s gradient asks of its NaN mask)."""
    self, other = args[0], args[1]
    if not isinstance(self, FPT) or isinstance(other, FPT) or not isinstance(other, torch.Tensor) \
            or other.dtype != torch.bool:
        raise SyftError("logical_or on fixed precision tensors takes 0/1 fixed precision bits and a public bool "
                        "tensor")
    o = other.to(INT64)
    child = self.child if not bool(o.any()) else self.child * (1 - o) + o * self.scale
    if func.overloadpacket is aten.logical_or_:
        self.child = child
        return self
    return _wrap(self, child)


register_handlers({
    aten.gt: _compare, aten.lt: _compare, aten.ge: _compare, aten.le: _compare,
    aten.relu: _relu, aten.threshold_backward: _threshold_backward,
    aten.max: _max, aten.amax: _max, aten.argmax: _argmax,
    aten.min: _min, aten.amin: _min, aten.argmin: _argmin,
    aten.eq: _equal, aten.ne: _equal, aten.sign: _sign, aten.sgn: _sign, aten.abs: _abs,
    aten.remainder: _remainder,
    aten.div.Tensor_mode: _floor_divide, aten.div.Scalar_mode: _floor_divide, aten.floor_divide: _floor_divide,
    aten.scatter: _scatter, aten.isnan: _isnan, aten.masked_fill: _masked_fill, aten.masked_fill_: _masked_fill,
    aten.logical_or: _logical_or, aten.logical_or_: _logical_or,
    aten.logical_and: _logical_and, aten.logical_and_: _logical_and, aten.bitwise_and: _logical_and, aten.__and__: _logical_and,
})
