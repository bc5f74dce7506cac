"""FixedPrecisionTensor: real numbers as integers, x -> round(x * base**precision), in Z_2^64.

    FixedPrecisionTensor>tensor([ 100, -200,  300])      # 0.1, -0.2, 0.3 at base 10, precision 3

The layer is a float32 tensor to the outside (so autograd, ``nn`` layers, losses and optimizers
take it: gradients are FixedPrecisionTensors too) over an int64 ``child``: a plain tensor, or
an AdditiveSharingTensor when the value is secret-shared (``x.fix_precision().share(...)``).
Ops reach it through ``__torch_dispatch__`` and become ring ops on the child: sums need
nothing; a product of two encodings carries the scale twice and is divided by the scale
once (truncation: exact floor division here, a protocol on a shared child); division by a
public integer is the same truncation. The error of each product is at most one unit of the
last place (10^-3 by default); docs/secure-computation.md gives the bounds.
"""
from __future__ import annotations

import math

import torch

from ..errors import NotSupportedError, SyftError
from .additive_sharing import AdditiveSharingTensor, engine
from .base import ChainLayer, flat_layers, make_layer
from .pointer import PointerTensor
from .registry import register_layer
from .fixed_precision_views import bind as _bind_views, copy_ as _copy_, fill_ as _fill_, install as _install, viewed

aten = torch.ops.aten
_CPU = torch.device("cpu")
INT64 = torch.int64
RING_MAX = 2**63 - 1
RING = 2**63  # an encoding (and every product before its truncation) lies strictly within (-2^63, 2^63)
DEFAULT_BASE, DEFAULT_PRECISION = 10, 3
# A product of two encodings carries the scale twice: |x * y| * scale^2 < 2^63. The largest scale
# accepted leaves products up to 2^16 in magnitude (base 10: precision <= 7; base 2: <= 23).
MIN_PRODUCT_RANGE = 2**16
MAX_SCALE = math.isqrt(RING // MIN_PRODUCT_RANGE)


def product_bound(scale: int) -> float:
    """The exact bound on |x * y| for a product of two encodings at ``scale``: 2^63 / scale^2."""
    return RING / scale ** 2


def check_precision(base, precision) -> int:
    """The scale base**precision, after checking both (integers; products keep a range of 2^16)."""
    if type(base) is not int or base < 2:
        raise SyftError(f"fix_precision takes an integer base >= 2, got {base!r}")
    if type(precision) is not int or precision < 0:
        raise SyftError(f"fix_precision takes an integer precision >= 0, got {precision!r}")
    if precision > 64 or base ** precision > MAX_SCALE:
        scale = base ** min(precision, 64)
        raise SyftError(f"base**precision = {base}**{precision} is too large: a product of two encodings carries "
                        f"the scale twice and must fit the 64-bit ring (|x * y| < 2^63 / scale^2 = "
                        f"{product_bound(scale):.3g}); keep base**precision <= {MAX_SCALE} (products up to "
                        f"{MIN_PRODUCT_RANGE}): base 10 up to precision 7, base 2 up to 23")
    return base ** precision


def encode(x, scale: int) -> torch.Tensor:
    """round(x * scale) as int64, with a clear error for values the ring cannot hold:
    |round(x * scale)| < 2^63 (so -x is an encoding too)."""
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x)
    if x.is_complex():
        raise SyftError("fix_precision encodes real tensors, not complex ones")
    bound = RING_MAX // scale
    if x.dtype == torch.bool or not x.is_floating_point():
        x = x.detach().to(INT64)
        if x.numel():
            lo, hi = int(x.min()), int(x.max())  # not abs(): abs(-2^63) wraps to -2^63
            if lo < -bound or hi > bound:
                raise SyftError(f"a value of {lo if lo < -bound else hi} does not fit fixed precision with scale "
                                f"{scale}: the ring holds |x| <= {bound}")
        return x * scale  # exact for integers beyond 2^53
    xd = x.detach().to(torch.float64)
    if not xd.numel():
        return xd.to(INT64)
    if not torch.isfinite(xd).all():
        raise SyftError("fix_precision cannot encode NaN or infinite values")
    y = torch.round(xd * scale)
    big = y.abs().max().item()
    if big >= RING:  # float64 rounding of x * scale checked after it happens: 2^63 itself does not fit
        raise SyftError(f"a value of magnitude {xd.abs().max().item():.3g} does not fit fixed precision with scale "
                        f"{scale}: the ring holds |x| < {RING / scale:.4g}")
    return y.to(INT64)


def check_fits(value: torch.Tensor, what: str, scale: int) -> None:
    """A ring result computed exactly in float64 from public operands (``value``) must lie within
    (-2^63, 2^63), or the int64 result has wrapped: a SyftError instead of a wrong number."""
    if value.numel() and value.abs().max().item() >= RING:
        raise SyftError(f"{what} overflows the 64-bit ring at scale {scale}: a product of two encodings needs "
                        f"|x * y| < 2^63 / scale^2 = {product_bound(scale):.4g}, a product with an integer k "
                        f"|x * k| < 2^63 / scale = {RING / scale:.4g}, a sum |x + y| < {RING / scale:.4g} (docs/secure-computation.md, 'Fixed-precision "
                        f"error'); shared operands cannot be checked")


def decode(v: torch.Tensor, scale: int, dtype=torch.float32) -> torch.Tensor:
    """The real numbers the int64 ring elements ``v`` encode."""
    if scale == 1:
        return v.to(dtype)
    q = torch.div(v, scale, rounding_mode="floor")
    r = v - q * scale  # split, so values beyond 2^53 keep their low digits
    return (q.to(torch.float64) + r.to(torch.float64) / scale).to(dtype)


def truncate(child, d: int):
    """``child / d`` for a public positive integer ``d``: rounded to nearest on a plain child,
    the truncation protocol on a shared one (off by at most one unit)."""
    if d == 1:
        return aten.clone.default(child)  # a new value: a shared one gets its own shares
    if isinstance(child, AdditiveSharingTensor):
        return engine().truncate(child, d)
    return torch.div(child + d // 2, d, rounding_mode="floor")


def _is_shared(child) -> bool:
    return isinstance(child, AdditiveSharingTensor)


def _exact(v):
    return v.double() if isinstance(v, torch.Tensor) else float(v)


def product(op, a, b, d: int, extra=()):
    """op(a, b, *extra) / d for a bilinear op (mul, mm, conv): on shared operands the division
    travels in the product's own last message. Public operands are checked for ring overflow
    (the product in float64 beside the int64 one: cheap next to the op)."""
    if _is_shared(a) or _is_shared(b):
        return engine().product(op, a, b, extra, d)
    out = op(a, b, *extra)
    check_fits(op(_exact(a), _exact(b), *extra) if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor)
               else torch.tensor(float(a) * float(b)), f"{op.overloadpacket.__name__} of fixed precision values",
               d)
    return truncate(out, d)


def scale_by(child, k: int, scale: int):
    """child * k for a public integer k (exact: no truncation), checked on a public child."""
    if not _is_shared(child):
        check_fits(child.double() * float(k), f"a fixed precision value times {k}", scale)
    return child * k



# PySyft 0.2 keywords syft_lab leaves out by design (docs/pysyft.md), each with what to use instead
_LEFT_OUT = {
    "protocol": "one protocol: additive sharing with a crypto provider (Beaver triples, CrypTen-style "
                "comparisons; docs/secure-computation.md); PySyft's FSS protocol is left out",
    "dtype": "one ring, Z_2^64 (int64): 32-bit rings are left out; choose the encoding with precision=",
    "field": "one ring, Z_2^64 (int64): 32-bit rings and other fields are left out; choose the encoding with precision=",
}


def refuse_left_out(kwargs: dict, method: str) -> None:
    """A one-line error for a PySyft keyword left out by design, a TypeError for any other."""
    for name in kwargs:
        if name in _LEFT_OUT:
            raise NotSupportedError(f"{method}({name}=...) is PySyft 0.2's: syft_lab has {_LEFT_OUT[name]} "
                                    f"(docs/pysyft.md)")
        raise TypeError(f"{method}() got an unexpected keyword argument {name!r}")

@register_layer
class FixedPrecisionTensor(ChainLayer):
    kind = "fixed_precision"
    wire_code = None
    remote_storable = False
    remote_storable_reason = "send its child (the int64 encoding) or share it among workers instead"
    node_actions = ("get", "float_precision")  # get: reconstruct a shared value; float_precision: decode

    @staticmethod
    def __new__(cls, child, base: int = DEFAULT_BASE, precision: int = DEFAULT_PRECISION, requires_grad=False):
        if not isinstance(child, torch.Tensor) or child.dtype != INT64:
            raise SyftError(f"a FixedPrecisionTensor wraps an int64 encoding, got "
                            f"{getattr(child, 'dtype', type(child).__name__)}")
        r = make_layer(cls, child.shape, torch.float32, _CPU, requires_grad)
        r.child = child
        r.base, r.precision = base, precision
        r.scale = check_precision(base, precision)
        return r

    def __init__(self, *args, **kwargs):
        pass

    @property
    def shared(self) -> bool:
        return _is_shared(self.child)

    # --- what users call ----------------------------------------------------------------------
    def float_precision(self) -> torch.Tensor:
        """The real values (a plain float tensor). A shared value is reconstructed first: call
        ``.get()`` for that (it brings every share here)."""
        if self.shared:
            raise SyftError("this fixed precision tensor is shared: reconstruct it with .get() first, then "
                            ".float_precision()")
        child = self.child
        if self.on_worker:
            raise SyftError(f"this fixed precision tensor is encoded on {child.location.id!r}: bring it here with "
                            f".get() first, then .float_precision()")
        if not isinstance(child, torch.Tensor) or isinstance(child, ChainLayer):
            raise SyftError(f"float_precision needs a local child, got {type(child).__name__}")
        return decode(child, self.scale)

    def get(self) -> "FixedPrecisionTensor":
        """Reconstruct a shared value here: a FixedPrecisionTensor over a plain int64 tensor."""
        if not self.shared and not self.on_worker:
            raise SyftError("this fixed precision tensor is not shared: .float_precision() decodes it")
        return self._like(self.child.get(), requires_grad=self.requires_grad)

    @property
    def on_worker(self) -> bool:
        """Encoded on a worker (``ptr.fix_precision()``): it shares from there or comes back with .get()."""
        return type(self.child) is PointerTensor

    def share(self, *workers, crypto_provider=None, requires_grad=None, **pysyft) -> "FixedPrecisionTensor":
        """Split the encoding into additive shares, one per worker (at least two).
        ``requires_grad``: PySyft's spelling; the shared tensor is then an autograd leaf."""
        refuse_left_out(pysyft, "share")
        if self.shared:
            raise SyftError("this tensor is shared already; .refresh() gives it new shares")
        rg = self.requires_grad if requires_grad is None else bool(requires_grad)
        return self._like(engine().share(self.child, workers, crypto_provider), requires_grad=rg)

    def refresh(self) -> "FixedPrecisionTensor":
        """New shares of the same value. Inside autograd it is the identity: the refreshed
        tensor's gradient flows back to this one (PySyft's tutorials call it on a loss)."""
        if not self.shared:
            raise SyftError("refresh() gives new shares to a shared tensor; this one is not shared")
        if self.requires_grad and torch.is_grad_enabled():
            return _Refresh.apply(self)
        return self._like(self.child.refresh(), requires_grad=self.requires_grad)

    def copy(self) -> "FixedPrecisionTensor":
        """A copy that stays where this one is (PySyft's ``.copy()``): a shared value gets new
        shares on the same parties, in autograd's graph like ``clone()``."""
        return self.clone()

    def _like(self, child, requires_grad=False):
        return FixedPrecisionTensor(child, self.base, self.precision, requires_grad=requires_grad)

    def __reduce_ex__(self, protocol):
        raise SyftError("a FixedPrecisionTensor cannot be pickled; .float_precision() (after .get() when "
                        "shared) gives a plain tensor")

    # --- ops ------------------------------------------------------------------------------------
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func) or _HANDLERS.get(func.overloadpacket)
        if handler is not _alias and any(type(a) is FixedPrecisionTensor and type(a.child) is PointerTensor
                                         for a in args):
            raise SyftError(f"{func} on a fixed precision tensor encoded on a worker (ptr.fix_precision()): share it "
                            f"from there (.share(alice, bob, crypto_provider=...)) or bring it here (.get()) first")
        if handler is not None:
            return handler(func, args, kwargs)
        decomposition = torch._decomp.decomposition_table.get(func)
        if decomposition is not None:
            return decomposition(*args, **kwargs)
        raise SyftError(f"{func} is not supported on fixed precision tensors (supported: arithmetic, matmul, "
                        f"convolutions (conv_transpose too), pooling, sums and means, var, comparisons (== and != "
                        f"too), abs, sign, relu, max/argmax, min/argmin, views, split/chunk/unbind/roll, % by a "
                        f"public number or a shared value, gather/scatter/index_add/index_put/take by a public index, "
                        f"where, clamp, cumsum, trace, prod, cos/sin, exp/log/sqrt/reciprocal/sigmoid/tanh, pow; "
                        f"docs/secure-computation.md lists each)")

    # --- the layer protocol ------------------------------------------------------------------
    def layer_children(self) -> list:
        return [self.child]

    def node_fields(self) -> dict:
        return {"base": self.base, "precision": self.precision, "scale": self.scale}

    def display(self) -> dict:
        return {"label": "FixedPrecisionTensor",
                "lines": [f"base {self.base}, precision {self.precision}: x -> round(x * {self.scale})"],
                "badge": "shared" if self.shared else None}


FPT = FixedPrecisionTensor


class _Refresh(torch.autograd.Function):
    """refresh() as an op autograd records: new shares forward, the gradient unchanged back."""

    @staticmethod
    def forward(ctx, x):
        return x._like(x.child.refresh())

    @staticmethod
    def backward(ctx, grad):
        return grad


# --- helpers -------------------------------------------------------------------------------------

def _like(args, kwargs=None) -> FPT:
    """The FixedPrecisionTensor among the args that gives the result's precision (all agree)."""
    found = flat_layers(FPT, list(args) + list((kwargs or {}).values()))
    first = found[0]
    for f in found[1:]:
        if f.scale != first.scale or f.base != first.base:
            raise SyftError(f"an op mixes fixed precision base {first.base} precision {first.precision} with base "
                            f"{f.base} precision {f.precision}: convert one (float_precision().fix_precision(...))")
    return first


def _wrap(template: FPT, child) -> FPT:
    return FPT(child, template.base, template.precision)


def _scalar(a):
    """A Python number for a number or a 0-dim plain tensor, else None."""
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return a
    if isinstance(a, bool):
        return int(a)
    if isinstance(a, torch.Tensor) and not isinstance(a, ChainLayer) and a.dim() == 0:
        return a.item()
    return None


def _enc(a, scale):
    """A ring operand: a FixedPrecisionTensor's child, or a public value's encoding."""
    if isinstance(a, FPT):
        return a.child
    s = _scalar(a)
    if s is not None:
        return int(round(s * scale))
    if isinstance(a, torch.Tensor) and not isinstance(a, ChainLayer):
        return encode(a, scale)
    raise SyftError(f"cannot mix a {type(a).__name__} into a fixed precision op")


def _add(x, y):
    """Ring addition of two operands (at least one a tensor)."""
    if isinstance(x, torch.Tensor):
        return x + y
    return y + x


def _mul_public_number(t: FPT, s: float):
    """t * s for a public number: exact for integers and for 1/integer, else one truncation."""
    child = t.child
    if float(s).is_integer():
        return scale_by(child, int(s), t.scale)
    inv = 1.0 / s
    k = round(inv)
    if k != 0 and abs(inv - k) <= 1e-9 * abs(inv):
        out = truncate(child, abs(k))
        return out if k > 0 else -out
    return product(aten.mul.Tensor, child, int(round(s * t.scale)), t.scale)


def _mul(func, args, kwargs):
    a, b = args[0], args[1]
    t = _like(args)
    if not isinstance(a, FPT):
        a, b = b, a
    if isinstance(b, FPT):
        return _wrap(t, product(aten.mul.Tensor, a.child, b.child, t.scale))
    s = _scalar(b)
    if s is not None:
        return _wrap(t, _mul_public_number(a, s))
    if isinstance(b, torch.Tensor) and not b.is_floating_point():
        if not a.shared:
            check_fits(a.child.double() * b.double(), "a fixed precision value times an integer tensor", t.scale)
        return _wrap(t, a.child * b.to(INT64))
    return _wrap(t, product(aten.mul.Tensor, a.child, encode(b, t.scale), t.scale))


def _div(func, args, kwargs):
    if kwargs.get("rounding_mode") is not None or (len(args) > 2):
        raise SyftError("fixed precision division takes no rounding_mode")
    a, b = args[0], args[1]
    t = _like(args)
    if not isinstance(a, FPT):
        raise SyftError("fixed precision tensors divide by public values only (x / 4, x / tensor), not a value "
                        "by a fixed precision tensor")
    if isinstance(b, FPT):
        if b.shared:
            raise SyftError("division by a shared value is not supported: divide by a public number or tensor")
        b = b.float_precision().double()
    s = _scalar(b)
    if s is None and isinstance(b, torch.Tensor) and b.numel() and bool((b == b.reshape(-1)[0]).all()) and tuple(
            torch.broadcast_shapes(tuple(a.shape), tuple(b.shape))) == tuple(a.shape):
        s = b.reshape(-1)[0].item()  # one public divisor (fx / fix(tensor([3.]))): exact as fx / 3
    if s is not None:
        if s == 0:
            raise SyftError("division by zero")
        if float(s).is_integer() and s > 0:
            return _wrap(t, truncate(a.child, int(s)))
        if float(s).is_integer():
            return _wrap(t, -truncate(a.child, int(-s)))
        inv = 1.0 / s
        k = round(inv)
        if k != 0 and abs(inv - k) <= 1e-9 * abs(inv):  # x / 0.5: a product with the integer 2, exact
            return _wrap(t, _mul_public_number(a, inv))
        fine = t.scale * inverse_extra(t.base, t.scale)
        return _wrap(t, product(aten.mul.Tensor, a.child, int(round(inv * fine)), fine))
    fine = t.scale * inverse_extra(t.base, t.scale)
    return _wrap(t, product(aten.mul.Tensor, a.child, encode(1.0 / b.double(), fine), fine))


# A public divisor's inverse is encoded at scale * base^k (base^k about 1000, less where the
# product would not fit: scale^2 * base^k * 2^16 <= 2^63), then truncated by that scale: the
# quotient is off by one unit (the truncation) plus |a| * 0.5 / base^k units, not |a| * 0.5 units
# as with 1/b encoded at the scale itself (9 / tensor([3., 7.]) was 2.997)
INVERSE_EXTRA = 1000


def inverse_extra(base: int, scale: int) -> int:
    extra = 1
    while extra * base <= INVERSE_EXTRA * base // 2 and scale ** 2 * extra * base * MIN_PRODUCT_RANGE <= RING:
        extra *= base
    return extra


def _addsub(func, args, kwargs):
    t = _like(args, kwargs)
    a, b = _enc(args[0], t.scale), args[1]
    alpha = kwargs.get("alpha", 1)
    if alpha != 1:
        b = FPT.__torch_dispatch__(aten.mul.Tensor, (), (b if isinstance(b, FPT) else _wrap(t, _enc(b, t.scale)),
                                                         alpha))
    b = _enc(b, t.scale)
    packet = func.overloadpacket
    if not (_is_shared(a) or _is_shared(b)):  # public operands: the sum in float64 beside the int64 one
        sign = -1.0 if packet is aten.sub else 1.0
        check_fits(_exact(a) * (-1.0 if packet is aten.rsub else 1.0) + _exact(b) * sign
                   if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor) else torch.tensor(0.0),
                   f"{packet.__name__} of fixed precision values", t.scale)
    if packet is aten.sub:
        return _wrap(t, _add(a, -b) if isinstance(b, torch.Tensor) else _add(a, -b))
    if packet is aten.rsub:
        return _wrap(t, _add(-a if isinstance(a, torch.Tensor) else -a, b))
    return _wrap(t, _add(a, b))


def _neg(func, args, kwargs):
    return _wrap(args[0], -args[0].child)


def _bilinear(op):
    def handler(func, args, kwargs):
        t = _like(args)
        a, b = _enc(args[0], t.scale), _enc(args[1], t.scale)
        return _wrap(t, product(op, a, b, t.scale))

    return handler


def _addmm(func, args, kwargs):
    bias, m1, m2 = args[:3]
    t = _like(args)
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    prod = _wrap(t, product(aten.mm.default, _enc(m1, t.scale), _enc(m2, t.scale), t.scale))
    if alpha != 1:
        prod = _mul(None, (prod, alpha), {})
    if beta == 0:
        return prod
    if beta != 1:
        bias = _mul(None, (bias if isinstance(bias, FPT) else _wrap(t, _enc(bias, t.scale)), beta), {})
    return _wrap(t, _add(prod.child, _enc(bias, t.scale)))


def _sum(func, args, kwargs):
    kwargs = {k: v for k, v in kwargs.items() if k != "dtype"}
    if len(args) > 3:
        args = args[:3]
    child = args[0].child
    if not _is_shared(child):  # a public sum: checked in float64 (exact to 2^-52 relative: near 2^63 it errs safe)
        check_fits(func(child.double(), *args[1:], **kwargs), "a sum of fixed precision values", args[0].scale)
    return _wrap(args[0], func(child, *args[1:], **kwargs))


def _mean(func, args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        n, s = x.numel(), aten.sum.default(x.child)
    else:
        dims = [dims] if isinstance(dims, int) else list(dims)
        n = math.prod(x.shape[d] for d in dims)
        s = aten.sum.dim_IntList(x.child, dims, keepdim)
    return _wrap(x, truncate(s, n) if n > 0 else s)


def _structural(func, args, kwargs):
    """Views, reshapes, selections: the same op on the child (a view becomes a reshape: the child
    of a transposed tensor may not be contiguous where the wrapper is)."""
    t = args[0]
    if func in (aten.view.default, aten._unsafe_view.default, aten.reshape.default):
        if list(args[1]) == list(t.shape):  # view_as(itself) (autograd, swap_tensors): no work on the child
            return viewed(t, func, args, kwargs, _wrap(t, t.child))
        return viewed(t, func, args, kwargs, _wrap(t, aten.reshape.default(t.child, *args[1:], **kwargs)))
    return viewed(t, func, args, kwargs, _wrap(t, func(t.child, *args[1:], **kwargs)))


def _alias(func, args, kwargs):
    return viewed(args[0], func, args, kwargs, _wrap(args[0], args[0].child)) if func else _wrap(args[0], args[0].child)


def _listed(func, args, kwargs):
    """cat / stack: every tensor in the list encoded at the same precision."""
    tensors = args[0]
    t = _like(tensors)
    children = [_enc(x, t.scale) for x in tensors]
    if all(_is_shared(c) for c in children):
        out = engine().dispatch(func, [children, *args[1:]], kwargs)
    elif any(_is_shared(c) for c in children):
        out = _cat_mixed(children, _dim_arg(args, kwargs, 1), func.overloadpacket is aten.stack)
    else:
        out = func(children, *args[1:], **kwargs)
    return _wrap(t, out)


def _cat_mixed(children, dim, stack):
    """cat (stack) of shared and public pieces (prod's gradient puts public ones before shared
    factors): each shared piece padded with zeros to the result's length by each party, their sum,
    plus the public pieces among zeros (party 0 adds them). Local: no round."""
    if stack:
        dim %= children[0].dim() + 1
        children = [aten.unsqueeze.default(c, dim) for c in children]
    dim %= children[0].dim()
    sizes = [c.shape[dim] for c in children]
    public = aten.cat.default([torch.zeros(tuple(c.shape), dtype=INT64) if _is_shared(c) else c for c in children], dim)
    out, offset = None, 0
    for c, n in zip(children, sizes):
        if _is_shared(c):
            piece = _pad_dim(c, c.dim(), dim, offset, sum(sizes) - offset - n)
            out = piece if out is None else out + piece
        offset += n
    return out + public


def _to_copy(func, args, kwargs):
    dtype = kwargs.get("dtype")
    if dtype is None and len(args) > 1 and isinstance(args[1], torch.dtype):
        dtype = args[1]
    if dtype is not None and not dtype.is_floating_point:
        raise SyftError(f"a fixed precision tensor converts to float only (got dtype {dtype})")
    return _wrap(args[0], args[0].child)


def _sharing_of(t: FPT, out: FPT) -> FPT:
    """An empty tensor made like a shared one (``empty_like``, ``new_empty``) remembers its parties and
    crypto provider (``sharing_of``): F.dropout fills such a tensor with ``bernoulli_``, and its mask
    is then the crypto provider's, shared among them (syft_lab/smpc/layers.py). Its value is public."""
    out.sharing_of = (t.child.parties, t.child.crypto_provider) if t.shared else None
    return out


def _factory_like(value):
    def handler(func, args, kwargs):
        t = args[0]
        v = value if value is not None else args[1]
        out = _wrap(t, torch.full(tuple(t.shape), int(round(v * t.scale)), dtype=INT64))
        return _sharing_of(t, out) if func.overloadpacket is aten.empty_like else out

    return handler


def _new_factory(value):
    def handler(func, args, kwargs):
        t, size = args[0], args[1]
        v = value if value is not None else args[2]
        out = _wrap(t, torch.full(tuple(size), int(round(v * t.scale)), dtype=INT64))
        return _sharing_of(t, out) if func.overloadpacket in (aten.new_empty, aten.new_empty_strided) else out

    return handler


def _dim_arg(args, kwargs, pos, default=0):
    return args[pos] if len(args) > pos else kwargs.get("dim", default)


def _unbind(func, args, kwargs):
    x = args[0]
    dim = _dim_arg(args, kwargs, 1) % max(x.dim(), 1)
    return [viewed(x, aten.select.int, (x, dim, i), {}, _wrap(x, aten.select.int(x.child, dim, i)))
            for i in range(x.shape[dim])]


def _split(func, args, kwargs):
    """split, split_with_sizes (and chunk, which decomposes to split): slices of the child."""
    x, size = args[0], args[1]
    dim = _dim_arg(args, kwargs, 2) % max(x.dim(), 1)
    n = x.shape[dim]
    sizes = list(size) if isinstance(size, (list, tuple)) else [min(size, n - s) for s in range(0, n, size)]
    out, start = [], 0
    for k in sizes:
        piece = _wrap(x, aten.slice.Tensor(x.child, dim, start, start + k))
        out.append(viewed(x, aten.slice.Tensor, (x, dim, start, start + k), {}, piece))
        start += k
    return out


def _roll(func, args, kwargs):
    """roll: two slices concatenated per rolled dim (no dims: of the flattened tensor)."""
    x = args[0]
    shifts = args[1] if len(args) > 1 else kwargs["shifts"]
    dims = args[2] if len(args) > 2 else kwargs.get("dims", [])
    shifts = [shifts] if isinstance(shifts, int) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims)
    child = x.child
    flat = not dims
    if flat:
        child, dims = aten.reshape.default(child, [-1]), [0]
    for k, d in zip(shifts, dims):
        n = child.shape[d]
        k %= n if n else 1
        if k:
            child = aten.cat.default([aten.slice.Tensor(child, d, n - k, n), aten.slice.Tensor(child, d, 0, n - k)], d)
    if flat:
        child = aten.reshape.default(child, list(x.shape))
    return _wrap(x, child)


def _pad_dim(child, ndim, dim, before, after):
    """Zeros around ``child`` along ``dim`` (a shared child: each party pads its share with 0)."""
    return aten.constant_pad_nd.default(child, [0, 0] * (ndim - 1 - dim) + [before, after])


def _select_backward(func, args, kwargs):
    """The gradient of x[..., i, ...]: the gradient at i along dim, zeros elsewhere."""
    grad, sizes, dim, index = args
    n = len(sizes)
    dim, index = dim % n, index % sizes[dim]
    child = aten.unsqueeze.default(grad.child, dim)
    return _wrap(grad, _pad_dim(child, n, dim, index, sizes[dim] - index - 1))


def _slice_backward(func, args, kwargs):
    grad, sizes, dim, start, end, step = args
    n = len(sizes)
    dim = dim % n
    size = sizes[dim]
    start, end, _ = slice(start, end).indices(size)
    if step != 1:
        raise SyftError("the gradient of a strided slice is not supported on fixed precision tensors")
    return _wrap(grad, _pad_dim(grad.child, n, dim, start, size - max(end, start)))


def _pad(func, args, kwargs):
    """Padding with a public value: a shared child is padded with 0 by each party, then the public
    border (the value where the padding is, 0 inside) is added (issue 41: a nonzero value was refused)."""
    x, pad = args[0], args[1]
    value = args[2] if len(args) > 2 else kwargs.get("value", 0)
    v = int(round((value or 0) * x.scale))
    if not x.shared or v == 0:
        return _wrap(x, aten.constant_pad_nd.default(x.child, pad, v))
    border = aten.constant_pad_nd.default(torch.zeros(tuple(x.shape), dtype=INT64), pad, v)
    return _wrap(x, aten.constant_pad_nd.default(x.child, pad) + border)


def _var(func, args, kwargs):
    """var = sum((x - mean)^2) / (n - correction): a mean, one product, one division."""
    x = args[0]  # aten.var.correction(x, dim=None, *, correction=None, keepdim=False): what torch.var reaches
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    correction = kwargs.get("correction")
    correction = 1 if correction is None else correction
    keepdim = kwargs.get("keepdim", False)
    dims = list(range(x.dim())) if dims is None or (isinstance(dims, (list, tuple)) and not dims) else (
        [dims] if isinstance(dims, int) else list(dims))
    n = math.prod(x.shape[d] for d in dims)
    if type(correction) is not int and not float(correction).is_integer() or n - int(correction) <= 0:
        raise SyftError(f"var over {n} elements with correction {correction} divides by {n - correction}")
    m = _mean(aten.mean.dim, (x, dims, True), {})
    d = _wrap(x, x.child - m.child)
    sq = _mul(None, (d, d), {})
    s = aten.sum.dim_IntList(sq.child, dims, keepdim)
    return _wrap(x, truncate(s, n - int(correction)))


def _inplace(op):
    """x.add_(y) and friends: compute, then this very tensor takes the result's child."""
    def handler(func, args, kwargs):
        self = args[0]
        out = FPT.__torch_dispatch__(op, (), args, kwargs)
        self.child = out.child
        return self

    return handler


_HANDLERS = {
    aten.add: _addsub, aten.sub: _addsub, aten.rsub: _addsub,
    aten.mul: _mul, aten.div: _div, aten.neg: _neg,
    aten.mm: _bilinear(aten.mm.default), aten.bmm: _bilinear(aten.bmm.default),
    aten.addmm: _addmm,  # convolutions: syft_lab/smpc/convolution.py
    aten.sum: _sum, aten.mean: _mean,  # pow: syft_lab/smpc/approximations.py
    aten.unbind: _unbind, aten.split: _split, aten.split_with_sizes: _split, aten.unsafe_split: _split,
    aten.roll: _roll, aten.var: _var, aten.select_backward: _select_backward, aten.slice_backward: _slice_backward,
    aten.constant_pad_nd: _pad,
    aten.cat: _listed, aten.stack: _listed,
    aten.detach: _alias, aten.alias: _alias, aten.lift_fresh: _alias, aten._to_copy: _to_copy, aten.to: _to_copy,
    aten.clone: _structural,  # a copy: a shared child gets its own shares (its .get() leaves the original)
    aten.ones_like: _factory_like(1), aten.zeros_like: _factory_like(0), aten.empty_like: _factory_like(0),
    aten.full_like: _factory_like(None),
    aten.new_zeros: _new_factory(0), aten.new_ones: _new_factory(1), aten.new_empty: _new_factory(0),
    aten.new_full: _new_factory(None), aten.new_empty_strided: _new_factory(0),
    aten.add_: _inplace(aten.add.Tensor), aten.sub_: _inplace(aten.sub.Tensor), aten.mul_: _inplace(aten.mul.Tensor),
    aten.div_: _inplace(aten.div.Tensor), aten.copy_: _copy_, aten.zero_: _fill_(0), aten.fill_: _fill_(None),
}
# comparisons, extrema, sign, abs, relu, % and //, scatter, masked_fill: tensors/fixed_precision_compare.py
# (registered from there when syft_lab.smpc imports it)
for _op in (aten.view, aten._unsafe_view, aten.reshape, aten.t, aten.transpose, aten.permute, aten.expand,
            aten.unsqueeze, aten.squeeze, aten.select, aten.slice, aten.flip, aten.index_select, aten.unfold,
            aten.repeat, aten.narrow, aten.flatten, aten.contiguous, aten.diagonal):
    _HANDLERS[_op] = _structural
_bind_views(FixedPrecisionTensor, encode, _like)
_install(_HANDLERS)  # in-place ops write through views (tensors/fixed_precision_views.py); 0-dim tensors' reductions along a dim


_FUNCTIONS: dict = {}  # functions of syft_lab/smpc/approximations.py that ops here build on (% by a shared value)


def register_functions(**functions) -> None:
    """The approximations' functions that ops here compose (``reciprocal``, ``up``): registered by
    syft_lab/smpc/approximations.py as it loads (it imports this module, so this one cannot import it)."""
    _FUNCTIONS.update(functions)


def register_handlers(handlers: dict) -> None:
    """More ops (aten overload packets or overloads -> handler(func, args, kwargs)): the
    approximations of syft_lab/smpc/approximations.py register themselves here."""
    _HANDLERS.update(_install(dict(handlers)))
