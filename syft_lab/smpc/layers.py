"""Dropout and BatchNorm on fixed precision tensors (shared or not), and their gradients.

- Dropout (training mode): torch draws its mask with ``bernoulli_`` on ``empty_like(input)``, divides
  it by 1 - p in place and multiplies the input by it (``F.dropout``'s CPU decomposition). On a
  shared input the mask is the crypto provider's: ``Dealer.bernoulli_mask`` draws the bits b from
  its CSPRNG and secret-shares them, each party stores its share of b (and of b · scale), the
  division by 1 - p is a local product with the integer round(scale / (1 - p)) (b is 0 or 1:
  exact, the encoding of 1 / (1 - p)), and the input's product with the shared mask is one Beaver
  product; autograd keeps that shared mask for the backward product. No party sees the mask
  (each holds a uniform share of it); this process relays the dealer's rows as for any material
  and shows no value. ``torch.manual_seed`` does not govern a shared mask (the dealer's generator
  is keyed from the OS: a seeded mask would be predictable); on a plain fixed precision input
  the mask is drawn here from torch's generator (``torch.manual_seed`` gives plain torch's mask).
  Eval mode is the identity (torch does no op).
- BatchNorm (``native_batch_norm`` and its backward): eval mode uses the running statistics;
  public ones (a fixed but not shared module) give 1 / sqrt(var + eps) exactly here, shared ones
  the inverse square root approximation (approximations.inv_sqrt). Training mode takes the
  batch mean and biased variance by the protocols of mean and var, 1 / sqrt(var + eps) by the
  approximation (its domain, var + eps in [0.01, 150], is what BatchNorm's inputs of unit
  scale give; 6 Newton iterations keep 0.5% down to 0.01, the variance itself taken at the working precision), and updates the running statistics in place (they become shared when the batch
  is). The products with the scale run at the working precision (2^16), so the inverse
  standard deviation is not rounded to 10^-3 first.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..tensors.additive_sharing import AdditiveSharingTensor as AST
from ..tensors import fixed_precision as fp
from ..tensors.fixed_precision import INT64
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import encode, register_handlers
from .approximations import _work_precision, down, inv_sqrt, up
from .provider import Dealer
from .runtime import Program, run

aten = torch.ops.aten
# Newton iterations of 1/sqrt(var + eps): 6 (not rsqrt's 4) keep 0.5% down to 0.01, since the
# variances of small activations (0.05 and below) are common; measured in tests/smpc/test_layers.py
BN_SQRT_ITERS = 6


# --- dropout -------------------------------------------------------------------------------------

def _bernoulli_(func, args, kwargs):
    """``mask.bernoulli_(1 - p)`` on the fixed precision tensor F.dropout makes like its input: a
    shared mask from the crypto provider when that input is shared (``_shared_bits``), else one
    drawn here from torch's generator."""
    self = args[0]
    if func is not aten.bernoulli_.float:
        raise SyftError("a fixed precision tensor draws a Bernoulli mask with one public probability only")
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    sharing = (self.child.parties, self.child.crypto_provider) if self.shared else getattr(self, "sharing_of", None)
    if sharing is not None:
        if kwargs.get("generator") is not None:
            raise SyftError("a shared dropout mask comes from the crypto provider's generator: a torch.Generator "
                            "cannot seed it")
        bits, scaled = _shared_bits(*sharing, tuple(self.shape), p, self.scale)
        self.child, self.mask_bits, self.sharing_of = scaled, (bits, scaled), None
        return self
    mask = torch.empty(tuple(self.shape)).bernoulli_(p, generator=kwargs.get("generator"))
    self.child = mask.to(INT64) * self.scale
    return self


def _shared_bits(parties, provider, shape, keep: float, scale: int):
    """([b], [b * scale]) for b ~ Bernoulli(keep) per element: the crypto provider's mask
    (``Dealer.bernoulli_mask``, one dealer round), each party's share stored on it (one round, not
    waited for)."""
    if provider is None:
        raise SyftError("a shared dropout mask comes from the crypto provider: share with crypto_provider=worker")
    n = len(parties)
    dealer, item = Dealer.planned(provider, n, ("bernoulli", n, tuple(shape), float(keep)),
                                  lambda d: d.bernoulli_mask(tuple(shape), keep))
    dealer.generate(parties)
    progs = [Program(w) for w in parties]
    for i, prog in enumerate(progs):
        [piece] = dealer.part(item, i)
        prog.keep(prog.op(aten.clone.default, piece))
        prog.keep(prog.op(aten.mul.Tensor, piece, scale))
    run(progs)
    return (AST([prog.kept[0] for prog in progs], provider), AST([prog.kept[1] for prog in progs], provider))


def _div_(func, args, kwargs):
    """x.div_(s): a shared dropout mask divided by 1 - p is b * round(scale / (1 - p)), exact (b is
    0 or 1); anything else as x.div(s)."""
    self, s = args[0], args[1] if len(args) > 1 else None
    bits = getattr(self, "mask_bits", None)
    if (bits is not None and self.child is bits[1] and isinstance(s, (int, float)) and not isinstance(s, bool)
            and s > 0 and not kwargs):  # the mask as bernoulli_ left it (no in-place op since)
        self.child, self.mask_bits = bits[0] * int(round(self.scale / s)), None
        return self
    return _plain_div_(func, args, kwargs)


def _native_dropout(func, args, kwargs):
    x, p, train = args[0], args[1], args[2] if len(args) > 2 else kwargs.get("train")
    if not train:
        return x * 1, torch.ones(tuple(x.shape), dtype=torch.bool)
    if x.shared:  # torch.native_dropout itself (F.dropout on CPU goes through bernoulli_): the dealer's mask
        raise SyftError("native_dropout on a shared tensor: use F.dropout or nn.Dropout (their mask comes from "
                        "the crypto provider, shared)")
    mask = torch.empty(tuple(x.shape)).bernoulli_(1 - p) > 0
    return _masked(x, mask, 1 / (1 - p) if p < 1 else 0.0), mask


def _masked(x: FPT, mask, scale: float) -> FPT:
    return (x * mask.to(INT64)) * scale  # an integer mask: exact; then a public number


def _native_dropout_backward(func, args, kwargs):
    grad, mask, scale = args
    return _masked(grad, mask, scale)


# --- batch norm ----------------------------------------------------------------------------------

def _channel(t, ndim: int):
    """(C,) -> (1, C, 1, ...): broadcast over the input."""
    return t.reshape([1, -1] + [1] * (ndim - 2))


def _reduced_dims(x) -> list:
    return [0] + list(range(2, x.dim()))


def _invstd(var, eps: float, like: FPT):
    """1 / sqrt(var + eps): a public float64 tensor for public statistics, else a FixedPrecisionTensor
    at the working precision (the inverse square root approximation)."""
    if isinstance(var, FPT) and var.shared:
        return inv_sqrt(up(var) + eps, BN_SQRT_ITERS)
    v = var.float_precision() if isinstance(var, FPT) else var.detach()
    return 1 / torch.sqrt(v.double() + eps)


def _scaled(d: FPT, invstd, weight) -> FPT:
    """d * invstd * weight, per channel, computed at the working precision and truncated back once."""
    k = up(invstd) if isinstance(invstd, FPT) else invstd
    if weight is not None:
        k = up(weight) * k if isinstance(weight, FPT) else k * weight.detach().double()
    if not isinstance(k, FPT):
        k = k.float()
    return down(up(d) * _channel(k, d.dim()), d)


def _at_work(t, like: FPT) -> FPT:
    """``t`` (an FPT at the working precision, or public values) as an FPT at the working precision."""
    if isinstance(t, FPT):
        return up(t)
    p = _work_precision(like)
    return FPT(encode(t, like.base ** p), like.base, p)


def _update(stat, new: FPT, momentum: float, name: str) -> None:
    """stat <- (1 - momentum) stat + momentum new, in place."""
    if stat is None:
        return
    if isinstance(stat, FPT):
        stat.child = (stat * (1 - momentum) + new * momentum).child
        return
    if new.shared:
        raise SyftError(f"BatchNorm's {name} on a shared batch becomes secret: call .fix_precision() on the module "
                        f"so its buffers are fixed precision tensors")
    stat.copy_(stat * (1 - momentum) + new.float_precision() * momentum)


def _empty(like: FPT) -> FPT:
    return FPT(torch.zeros(0, dtype=INT64), like.base, like.precision)


def _batch_norm(func, args, kwargs):
    x, weight, bias, running_mean, running_var, training, momentum, eps = args[:8]
    if not isinstance(x, FPT):
        raise SyftError("BatchNorm with fixed precision parameters takes a fixed precision input "
                        "(x.fix_precision(), shared or not)")
    dims = _reduced_dims(x)
    if training:
        n = x.numel() // x.shape[1]  # torch checks n > 1 before it comes here
        mean = x.mean(dims)
        d = x - _channel(mean, x.dim())
        dw = up(d)
        var = (dw * dw).mean(dims)  # at the working precision: 10^-3 steps would be 10% of a variance of 0.01
        invstd = _invstd(var, eps, x)
        _update(running_mean, mean, momentum, "running_mean")
        _update(running_var, down(var, x) * (n / (n - 1)), momentum, "running_var")
        save_mean, save_invstd = mean, _at_work(invstd, x)  # kept at the working precision for backward
    else:
        if running_mean is None or running_var is None:
            raise SyftError("BatchNorm in eval mode needs running statistics (track_running_stats=True)")
        d = x - _channel(running_mean, x.dim())
        invstd = _invstd(running_var, eps, x)
        save_mean, save_invstd = _empty(x), _empty(x)
    out = _scaled(d, invstd, weight)
    if bias is not None:
        out = out + _channel(bias, x.dim())
    return out, save_mean, save_invstd


def _batch_norm_backward(func, args, kwargs):
    """dx = k (g - mean(g) - xhat mean(g xhat)) in training, g k in eval (k = weight * invstd);
    dweight = sum(g xhat), dbias = sum(g)."""
    g, x, weight, running_mean, running_var, save_mean, save_invstd, train, eps, mask = args
    dims = _reduced_dims(x)
    if train:
        mean, invstd = save_mean, save_invstd
    else:
        mean, invstd = running_mean, _invstd(running_var, eps, x)
    d = x - _channel(mean, x.dim())
    xhat = _scaled(d, invstd, None)
    grad_weight = (g * xhat).sum(dims) if mask[1] else None
    grad_bias = g.sum(dims) if mask[2] else None
    grad_input = None
    if mask[0]:
        inner = g
        if train:
            inner = g - _channel(g.mean(dims), x.dim()) - xhat * _channel((g * xhat).mean(dims), x.dim())
        grad_input = _scaled(inner, invstd, weight)
    return grad_input, grad_weight, grad_bias


_plain_div_ = fp._HANDLERS[aten.div_]
register_handlers({aten.bernoulli_: _bernoulli_, aten.div_: _div_, aten.native_dropout: _native_dropout,
                   aten.native_dropout_backward: _native_dropout_backward,
                   aten.native_batch_norm: _batch_norm, aten.native_batch_norm_backward: _batch_norm_backward})
