"""Nonlinear functions on fixed precision tensors (shared or not), as CrypTen approximates them.

Each is a short program of additions, public scalings, Beaver products, comparisons and
truncations, so it runs the same on a plain and on a shared child. The methods and their
constants are CrypTen's (crypten/common/functions/approximations.py, documented there):

- ``exp``: the limit (1 + x / 2^8)^(2^8): one division, 8 squarings;
- ``reciprocal``: Newton-Raphson y <- y (2 - x y) (CrypTen's 2y - x y^2, one round less) from 3 exp(1 - 2x) + 0.003, 10 iterations, the
  sign taken out first (|x| = sign(x) x); with ``positive`` (softmax's denominators) no sign;
- ``inv_sqrt``: Newton-Raphson y <- y (3 - x y^2) / 2 from 2.2 exp(-(x / 2 + 0.2)) + 0.2 - x / 1024,
  4 iterations (CrypTen: 3); ``sqrt`` = x inv_sqrt(x), for x in [0.05, 150];
- ``log``: 8th-order Householder y <- y - sum_k h^k / k, h = 1 - x exp(-y), from
  x / 120 - 20 exp(-2x - 1) + 3, 2 iterations;
- ``sigmoid``: 1 / (1 + exp(-|x|)) (the denominator lies in [1, 2]: 2 Newton iterations from
  the linear start 24/17 - 8/17 d; CrypTen: 3 from 0.75), mirrored to 1 - that for x < 0; ``tanh`` = 2 sigmoid(2x) - 1;
- ``softmax``: exp(x - max) / sum (the reciprocal of a positive sum); ``log_softmax``: (x - max)
  - log(sum exp(x - max)).

CrypTen computes at 16 fractional bits. At precision 3 (scale 1000) x / 256 would keep 1 digit,
so every function here runs at a working scale of at least 2^16 (base 10: precision 5, the
child times 100, exact) and truncates back at the end. Domains and errors (measured on grids
in tests/smpc/test_approximations.py) are in docs/secure-computation.md.
"""
from __future__ import annotations

import math

import torch

from ..errors import SyftError
from ..tensors import fixed_precision as fp
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import _mul, register_handlers, truncate
from ..tensors.additive_sharing import engine
from ..tensors.fixed_precision_compare import _max

aten = torch.ops.aten
WORK_SCALE = 2**16  # CrypTen's 16 fractional bits
EXP_ITERS = 8
RECIPROCAL_ITERS = 10
SQRT_ITERS = 4  # CrypTen: 3; one more keeps 0.3% at 0.05 (docs: domain [0.05, 150])
LOG_ITERS, LOG_ORDER = 2, 8
SIGMOID_ITERS = 2  # Newton steps from the linear start 24/17 - 8/17 d (CrypTen: 3 from 0.75)


# --- working precision -------------------------------------------------------------------------

def _work_precision(x: FPT) -> int:
    p = x.precision
    while x.base ** p < WORK_SCALE:
        p += 1
    return p


def up(x: FPT) -> FPT:
    """x at the working scale (the child times base^k: exact, no round)."""
    p = _work_precision(x)
    k = x.base ** (p - x.precision)
    return x if k == 1 else FPT(x.child * k, x.base, p)


def down(y: FPT, like: FPT) -> FPT:
    """y (at the working scale) back at ``like``'s scale: one truncation."""
    k = y.scale // like.scale
    return FPT(truncate(y.child, k) if k > 1 else y.child, like.base, like.precision)


def _at_work(fn):
    """A handler computing ``fn(x)`` at the working scale on the first argument."""
    def handler(func, args, kwargs):
        x = args[0]
        return down(fn(up(x)), x)

    return handler


# --- the approximations (on FPTs at the working scale) ------------------------------------------

def exp(x: FPT, iters: int = EXP_ITERS) -> FPT:
    y = x / 2**iters + 1
    for _ in range(iters):
        y = y * y
    return y


def _sign(x: FPT):
    """(sign in {-1, 1} with sign(0) = 1, [x < 0]) as fixed precision values."""
    neg = x < 0
    return 1 - 2 * neg, neg


def reciprocal(x: FPT, positive: bool = False, iters: int = RECIPROCAL_ITERS, initial=None) -> FPT:
    if not positive:
        sgn, _ = _sign(x)
        return sgn * reciprocal(sgn * x, True, iters)
    y = 3 * exp(1 - 2 * x) + 0.003 if initial is None else x * 0 + initial
    for _ in range(iters):
        y = y * (2 - x * y)  # the same step as 2y - y^2 x: two products, one public addition (one round less)
    return y


def inv_sqrt(x: FPT, iters: int = SQRT_ITERS) -> FPT:
    y = exp(-(x / 2 + 0.2)) * 2.2 + 0.2 - x / 1024
    for _ in range(iters):
        y = y * (3 - x * y * y) / 2
    return y


def sqrt(x: FPT) -> FPT:
    return inv_sqrt(x) * x


def log(x: FPT) -> FPT:
    y = x / 120 - 20 * exp(-2 * x - 1) + 3
    for _ in range(LOG_ITERS):
        h = 1 - x * exp(-y)
        term, acc = h, h
        for k in range(2, LOG_ORDER + 1):
            term = term * h
            acc = acc + term / k
        y = y - acc
    return y


def sigmoid(x: FPT) -> FPT:
    """1 / d, d = 1 + exp(-|x|) in [1, 2], mirrored for x < 0: neg + sgn / d.

    CrypTen's method (the reciprocal of 1 + exp(-|x|), then 1 - that where x < 0), with two round
    savers: the Newton start is the linear minimax 24/17 - 8/17 d (|1 - d y| <= 1/17 on [1, 2], a
    public affine map: no round), so SIGMOID_ITERS = 2 steps reach a relative 1.2e-5 (CrypTen starts
    from 0.75: 3 steps, 0.4%); the last step's two products d y and sgn y are one product of a
    stack, so the mirror costs no round of its own."""
    sgn, neg = _sign(x)
    d = exp(-(sgn * x)) + 1
    y = 24 / 17 - (8 / 17) * d
    for _ in range(SIGMOID_ITERS - 1):
        y = y * (2 - d * y)
    both = torch.stack([d, sgn]) * y  # d y and sgn y in one round
    return neg + both[1] * (2 - both[0])  # sgn y (2 - d y): 1 / d, or -1 / d where x < 0


def tanh(x: FPT) -> FPT:
    return 2 * sigmoid(2 * x) - 1


def _dim(x, dim):
    return dim % x.dim() if x.dim() else 0


def _max_keep(x: FPT, dim: int) -> FPT:
    """The max along ``dim``, kept: on shares the values alone (no index: the halvings need not
    carry keys, engine.max_values)."""
    if x.shared:
        return fp._wrap(x, engine().max_values(x.child, dim, keepdim=True))
    return _max(aten.max.dim, (x, dim, True), {})[0]


def softmax(x: FPT, dim: int) -> FPT:
    if x.dim() == 0 or x.shape[dim] == 1:
        return x * 0 + 1
    num = exp(x - _max_keep(x, dim))
    return num * reciprocal(num.sum(dim, keepdim=True), True)


def log_softmax(x: FPT, dim: int) -> FPT:
    if x.dim() == 0 or x.shape[dim] == 1:
        return x * 0
    logits = x - _max_keep(x, dim)
    return logits - log(exp(logits).sum(dim, keepdim=True))


# --- the aten ops --------------------------------------------------------------------------------

def _softmax(func, args, kwargs):
    x, dim = args[0], _dim(args[0], args[1])
    fn = softmax if func.overloadpacket is aten._softmax else log_softmax
    return down(fn(up(x), dim), x)


def _softmax_backward(func, args, kwargs):
    """d softmax: out * (g - sum(g * out)); d log_softmax: g - exp(out) * sum(g)."""
    grad, out, dim = args[0], args[1], _dim(args[1], args[2])
    if func.overloadpacket is aten._softmax_backward_data:
        return out * (grad - (grad * out).sum(dim, keepdim=True))
    return grad - down(exp(up(out)), out) * grad.sum(dim, keepdim=True)


def _std(func, args, kwargs):
    """std = sqrt(var): var's protocol, then sqrt at the working scale."""
    v = fp._var(aten.var.correction, args, kwargs)
    return down(sqrt(up(v)), v)


def _sigmoid_backward(func, args, kwargs):
    grad, out = args
    return grad * out * (1 - out)


def _tanh_backward(func, args, kwargs):
    grad, out = args
    return grad * (1 - out * out)


def _div_shared(func, args, kwargs):
    """a / b for a fixed precision b (shared or a tensor of several values): a * reciprocal(b)."""
    if kwargs.get("rounding_mode") is not None:
        raise SyftError("fixed precision division takes no rounding_mode")
    a, b = args[0], args[1]
    if not isinstance(b, FPT):
        return _plain_div(func, args, kwargs)
    inv = down(reciprocal(up(b)), b)
    if not isinstance(a, FPT):
        return inv * a
    return _mul(None, (a, inv), {})


def _nll_loss(func, args, kwargs):
    """nll_loss_forward(log_probs, target, weight, reduction, ignore_index): -log_probs at the
    targets, as a product with their one-hot: a public integer one-hot (exact) for public class
    indices, a shared one (an equality circuit, then a Beaver product) for shared ones."""
    x, target, weight, reduction, ignore_index = args[:5]
    onehot, total = _onehot(x, target, weight, ignore_index)
    picked = x * -onehot
    total_out = total if isinstance(total, FPT) else torch.tensor(total)
    if reduction == 0:  # none
        return picked.sum(1), total_out
    s = picked.sum()
    return (s / total if reduction == 1 else s), total_out


def _onehot(x, target, weight, ignore_index):
    """(the one-hot of the targets, the count of targets taken). Shared targets: (target == c) for
    every class c, shared; each of the N rows counts (an ignored index matches no class, so its
    row is 0, but it cannot be left out of the count without opening it). Class weights (public,
    one per class, as torch's ``weight=``): the one-hot times the weights, and the total their sum
    over the targets (shared for shared targets: the mean is then a division by a shared value)."""
    if x.dim() != 2:
        raise SyftError("nll_loss on fixed precision tensors takes (N, C) log-probabilities and class indices "
                        "(public, or shared as fixed precision values)")
    if weight is not None and (isinstance(weight, FPT) or not isinstance(weight, torch.Tensor)
                               or not weight.is_floating_point() or tuple(weight.shape) != (x.shape[1],)):
        raise SyftError(f"nll_loss's class weights on fixed precision tensors are a public float tensor of one "
                        f"weight per class ({x.shape[1]}), got "
                        f"{type(weight).__name__ if not isinstance(weight, torch.Tensor) else list(weight.shape)}")
    if isinstance(target, FPT):
        if tuple(target.shape) != (x.shape[0],):
            raise SyftError(f"nll_loss takes one class index per row: targets of shape {list(target.shape)} for "
                            f"{list(x.shape)} log-probabilities")
        classes = torch.arange(x.shape[1], dtype=torch.float32)
        onehot = target.unsqueeze(1) == classes
        if weight is None:
            return onehot, float(x.shape[0])
        weighted = onehot * weight.detach().float()
        return weighted, weighted.sum()
    t = target.long()
    keep = t != ignore_index
    onehot = torch.zeros(tuple(x.shape), dtype=torch.int64)
    onehot[torch.arange(x.shape[0])[keep], t[keep]] = 1
    if weight is None:
        return onehot, float(onehot.sum())
    weighted = onehot.double() * weight.detach().double()
    return weighted.float(), float(weighted.sum())


def _nll_loss_backward(func, args, kwargs):
    grad_out, x, target, weight, reduction, ignore_index, total_weight = args
    g = -_onehot(x, target, weight, ignore_index)[0]
    if reduction == 0:
        return grad_out.unsqueeze(1) * g
    out = grad_out * g
    if reduction != 1:
        return out
    return out / (total_weight if isinstance(total_weight, FPT) else float(total_weight))


def _reduce(loss, reduction):
    return loss if reduction == 0 else (loss.sum() / loss.numel() if reduction == 1 else loss.sum())


def _bce(func, args, kwargs):
    """binary_cross_entropy(p, t, weight, reduction): -(t log p + (1 - t) log(1 - p)), both logs by
    the approximation (its domain: p and 1 - p in [10^-2, 1]; torch clamps each log at -100)."""
    p, t = args[0], args[1]
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    reduction = args[3] if len(args) > 3 else kwargs.get("reduction", 1)
    logs = down(log(up(torch.stack([p, 1 - p]))), p)
    loss = -(t * logs[0] + (1 - t) * logs[1])
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _bce_backward(func, args, kwargs):
    """g (p - t) / (p (1 - p)): a reciprocal of the shared p (1 - p)."""
    g, p, t = args[:3]
    weight = args[3] if len(args) > 3 else kwargs.get("weight")
    reduction = args[4] if len(args) > 4 else kwargs.get("reduction", 1)
    inv = down(reciprocal(up(p * (1 - p)), True), p)
    out = (p - t) * inv * g
    if weight is not None:
        out = out * weight
    return out / p.numel() if reduction == 1 else out


def _log_sigmoid(func, args, kwargs):
    """log sigmoid(x) = min(x, 0) - log(1 + exp(-|x|)): the log of a value in [1, 2] (in its domain
    for every x). Returns (out, an empty buffer) as log_sigmoid_forward does."""
    x = args[0]
    w = up(x)
    sgn, neg = _sign(w)
    a = sgn * w  # |x|
    out = w * neg - log(exp(-a) + 1)
    return down(out, x), torch.zeros(0)


def _log_sigmoid_backward(func, args, kwargs):
    g, x = args[0], args[1]
    return g * down(sigmoid(-up(x)), x)


def _integer_power(x: FPT, k: int) -> FPT:
    """x^k for an integer k >= 1 by squaring: about 2 log2(k) products (x^8: 3, was 7)."""
    result, base = None, x
    while k:
        if k & 1:
            result = base if result is None else result * base
        k >>= 1
        if k:
            base = base * base
    return result


def _power(w: FPT, k: float) -> FPT:
    """w^k at the working scale for a public k != 0 (docs/secure-computation.md: pow)."""
    if float(k).is_integer():
        return _integer_power(w, int(k)) if k > 0 else _integer_power(reciprocal(w), int(-k))
    if float(2 * k).is_integer():  # a half: x^m sqrt(x), or rsqrt(x) / x^m
        m = int(abs(k) - 0.5)
        root = sqrt(w) if k > 0 else inv_sqrt(w)
        if m == 0:
            return root
        rest = _integer_power(w, m) if k > 0 else _integer_power(reciprocal(w, True), m)
        return root * rest
    return exp(log(w) * k)  # x > 0: log's domain [0.1, 50], k log x below ~10 (exp's)


def _pow(func, args, kwargs):
    """x ** k for a public number k (issue 41: it took positive integers only): 0 gives ones
    (shared like x), a positive integer products by squaring (exact to the products' truncations), a
    negative one the reciprocal's power, halves sqrt/rsqrt times an integer power, any other k
    exp(k log x) for x > 0; ``number ** x`` (x shared) is exp(x ln(number)) for a number > 0."""
    if func is aten.pow.Scalar:
        number, x = args[0], args[1]
        if not isinstance(number, (int, float)) or number <= 0:
            raise SyftError(f"number ** x on a fixed precision x takes a positive number, got {number!r}")
        return down(exp(up(x) * math.log(number)), x)
    x, k = args[0], args[1]
    if isinstance(k, torch.Tensor):
        if isinstance(k, FPT) or k.numel() != 1:
            raise SyftError("pow on a fixed precision tensor takes one public number as its exponent; a tensor of "
                            "exponents y: exp(y * log(x)) for x > 0")
        k = k.item()
    if not isinstance(k, (int, float)) or k != k or abs(k) == float("inf"):
        raise SyftError(f"pow on a fixed precision tensor takes a finite public number as its exponent, got {k!r}")
    if k == 0:  # ones, shared like x (each party zeroes its share, party 0 adds one): no round
        return fp._wrap(x, x.child * 0 + x.scale)
    if k == 1:
        return fp._wrap(x, x.child)
    if float(k).is_integer() and k > 0:
        return _integer_power(x, int(k))
    return down(_power(up(x), k), x)


_plain_div = fp._HANDLERS[aten.div]  # division by a public value (fixed_precision._div)


def _register():
    def div(func, args, kwargs):
        b = args[1] if len(args) > 1 else None
        if isinstance(b, FPT) and b.shared:  # a public fixed precision divisor: fixed_precision._div, exact
            return _div_shared(func, args, kwargs)
        return _plain_div(func, args, kwargs)

    register_handlers({
        aten.exp: _at_work(exp), aten.reciprocal: _at_work(reciprocal), aten.sqrt: _at_work(sqrt),
        aten.rsqrt: _at_work(inv_sqrt), aten.log: _at_work(log), aten.sigmoid: _at_work(sigmoid),
        aten.tanh: _at_work(tanh), aten.pow: _pow, aten._softmax: _softmax, aten._log_softmax: _softmax,
        aten._softmax_backward_data: _softmax_backward, aten._log_softmax_backward_data: _softmax_backward,
        aten.sigmoid_backward: _sigmoid_backward, aten.tanh_backward: _tanh_backward, aten.div: div,
        aten.nll_loss_forward: _nll_loss, aten.nll_loss_backward: _nll_loss_backward, aten.std: _std,
        aten.binary_cross_entropy: _bce, aten.binary_cross_entropy_backward: _bce_backward,
        aten.log_sigmoid_forward: _log_sigmoid, aten.log_sigmoid.default: lambda f, a, k: _log_sigmoid(f, a, k)[0], aten.log_sigmoid_backward: _log_sigmoid_backward,
    })


_register()
fp.register_functions(reciprocal=reciprocal, up=up)  # what % by a shared value builds on (fixed_precision.py)
