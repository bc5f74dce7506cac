"""``.fix_precision()``, ``.share()``, ... on tensors and ``nn.Module``s, added by ``sy.hook()``.

Registered with syft_lab/hook.py's ``register_methods`` when this module is imported, so ``sy.hook()``
adds them with ``send`` and ``tag`` and ``sy.unhook()`` removes them again (if syft_lab was
hooked already, they are added at once). Methods of the layers themselves (``float_precision``,
``get``, ``share`` and ``refresh`` of a FixedPrecisionTensor) need no hook.

A module's parameters are replaced in place (``torch.utils.swap_tensors``), so an optimizer
built before keeps working on them, as with ``model.send(bob)``.
"""
from __future__ import annotations

import torch
from torch import nn

from ..hook import register_methods
from ..errors import SyftError
from ..tensors.fixed_precision import refuse_left_out
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.base import ChainLayer
from ..tensors.fixed_precision import (DEFAULT_BASE, DEFAULT_PRECISION, RING, RING_MAX, FixedPrecisionTensor,
                                       check_precision, encode)
from ..tensors.pointer import PointerTensor
from ..workers.modules import get_module, in_place_possible, replace_tensor, weights_unreferenced
from ..workers.modules import module_tensors as _tensors
from .engine import ENGINE


def _precision(precision, precision_fractional) -> int:
    """``precision``, or PySyft's spelling of it, ``precision_fractional`` (not both)."""
    if precision_fractional is None:
        return DEFAULT_PRECISION if precision is None else precision
    if precision is not None:
        raise SyftError("fix_precision takes precision or precision_fractional (PySyft's name), not both")
    return precision_fractional


def fix_precision(t, base: int = DEFAULT_BASE, precision: int | None = None, *,
                  precision_fractional: int | None = None, **pysyft) -> FixedPrecisionTensor:
    """``x.fix_precision()``: x encoded as round(x * base**precision) in an int64 child
    (``precision_fractional=``: PySyft's name for ``precision``)."""
    refuse_left_out(pysyft, "fix_precision")
    precision = _precision(precision, precision_fractional)
    scale = check_precision(base, precision)
    if isinstance(t, PointerTensor):
        return FixedPrecisionTensor(_encode_on_worker(t, scale), base, precision)
    if isinstance(t, ChainLayer):
        raise SyftError(f"fix_precision encodes a plain tensor or a pointer, got a {type(t).__name__}")
    return FixedPrecisionTensor(encode(t, scale), base, precision,
                                requires_grad=bool(t.requires_grad and t.is_floating_point()))


def _encode_on_worker(ptr: PointerTensor, scale: int) -> PointerTensor:
    """``encode`` run on the pointer's worker: a pointer to the int64 encoding. The one thing
    that comes here is whether every value fits the ring (one bool), for a clear error."""
    if ptr.is_complex():
        raise SyftError("fix_precision encodes real tensors, not complex ones")
    with torch.no_grad():
        if ptr.is_floating_point():
            y = torch.round(ptr.double() * scale)
            bad = ~(y.abs() < float(RING))  # also NaN and infinities
        else:
            bound = RING_MAX // scale
            y = ptr.long()
            bad = (y < -bound) | (y > bound)
        if bool(bad.any().get()):
            raise SyftError(f"a value on {ptr.location.id!r} does not fit fixed precision with scale {scale} (or is "
                            f"NaN or infinite): the ring holds |x| < {RING / scale:.4g}")
        return y.long() if ptr.is_floating_point() else y * scale


def share(t, *workers, crypto_provider=None, requires_grad=None, **pysyft) -> AdditiveSharingTensor:
    """``x.share(alice, bob, crypto_provider=carol)`` of a plain int64 tensor (reals: fix_precision first)."""
    refuse_left_out(pysyft, "share")
    if requires_grad:
        raise SyftError("an int64 shared tensor has no gradient: share a fixed precision tensor with "
                        "requires_grad=True (x.fix_precision().share(..., requires_grad=True))")
    if isinstance(t, PointerTensor) and t.dtype != torch.int64:
        raise SyftError(f"share() splits int64 tensors; encode the {t.dtype} values on {t.location.id!r} with "
                        f"ptr.fix_precision() first (ptr.fix_precision().share(...))")
    if isinstance(t, PointerTensor):
        return ENGINE.share(t, workers, crypto_provider)
    if isinstance(t, ChainLayer):
        raise SyftError(f"share() splits a plain int64 tensor or a FixedPrecisionTensor, got {type(t).__name__}")
    if t.dtype != torch.int64:
        raise SyftError(f"share() splits int64 tensors; call .fix_precision() first to share {t.dtype} values")
    return ENGINE.share(t, workers, crypto_provider)


# --- modules ------------------------------------------------------------------------------------

def _replace_each(module, tensors, make) -> None:
    """Each of ``tensors`` of ``module`` becomes ``make(t)``: swapped in place (an optimizer built
    before keeps working), or, while a forward result still holds them in its autograd graph,
    put in the module's slots instead (that result can still backward)."""
    with weights_unreferenced(module):
        in_place = in_place_possible(tensors)
        for t in tensors:
            new = make(t)
            if new is None:
                continue
            t.grad = None
            replace_tensor(module, t, new, in_place)


def module_fix_precision(module, base: int = DEFAULT_BASE, precision: int | None = None, *,
                         precision_fractional: int | None = None, **pysyft):
    """Every parameter and buffer becomes a FixedPrecisionTensor (in place); returns the module."""
    refuse_left_out(pysyft, "fix_precision")
    precision = _precision(precision, precision_fractional)
    check_precision(base, precision)
    tensors = list(_tensors(module))
    if any(isinstance(t, ChainLayer) for t in tensors):
        raise SyftError("this module's parameters are not plain tensors (sent, shared or fixed already)")
    def fixed(t):
        with torch.no_grad():
            new = fix_precision(t.detach(), base, precision)
        return new.requires_grad_(True) if t.requires_grad else new

    _replace_each(module, tensors, fixed)
    return module


def module_share(module, *workers, crypto_provider=None, **pysyft):
    """Every fixed precision parameter is secret-shared among ``workers`` (in place)."""
    refuse_left_out(pysyft, "share")
    tensors = list(_tensors(module))
    if not tensors or not all(isinstance(t, FixedPrecisionTensor) for t in tensors):
        raise SyftError("share() a module after .fix_precision(): its parameters must be FixedPrecisionTensors")
    if any(t.shared for t in tensors):
        raise SyftError("this module is shared already")
    _replace_each(module, tensors, lambda t: FixedPrecisionTensor(ENGINE.share(t.child, workers, crypto_provider),
                                                                  t.base, t.precision, requires_grad=t.requires_grad))
    return module


def _module_get_shared(module):
    _replace_each(module, list(_tensors(module)), lambda t: FixedPrecisionTensor(
        t.child.get(), t.base, t.precision, requires_grad=t.requires_grad)
        if isinstance(t, FixedPrecisionTensor) and t.shared else None)


def module_float_precision(module):
    """Every fixed precision parameter becomes a float Parameter again (shared ones are
    reconstructed first); returns the module."""
    _module_get_shared(module)

    def floated(t):
        if not isinstance(t, FixedPrecisionTensor):
            return None
        value = t.float_precision()
        return nn.Parameter(value, requires_grad=True) if t.requires_grad else value

    _replace_each(module, list(_tensors(module)), floated)
    return module


def module_get(module):
    """``model.get()``: shared parameters are reconstructed here (still fixed precision, as in
    PySyft), pointer parameters fetched from their worker.

    In place: every parameter pointer is fetched back into a local Parameter."""
    _module_get_shared(module)
    return get_module(module)

# --- optimizers ---------------------------------------------------------------------------------

def optimizer_fix_precision(optimizer, *args, precision_fractional: int | None = None, **kwargs):
    """PySyft's ``optimizer.fix_precision()``: here an optimizer needs no conversion (its
    parameters are swapped in place by ``model.fix_precision()``, and its hyperparameters stay
    public numbers: ``lr * grad`` is a product with a public number). It checks that every
    parameter is a FixedPrecisionTensor (at the precision asked, if one is given), encodes any
    float state the optimizer holds already (a momentum buffer) like its parameter, sharing it on
    the parameter's parties, and returns the optimizer."""
    refuse_left_out({k: v for k, v in kwargs.items() if k not in ("base", "precision")}, "fix_precision")
    base = kwargs.get("base", args[0] if args else None)
    precision = kwargs.get("precision", args[1] if len(args) > 1 else None)
    if precision_fractional is not None:
        precision = _precision(precision, precision_fractional)
    params = [p for group in optimizer.param_groups for p in group["params"]]
    for p in params:
        if not isinstance(p, FixedPrecisionTensor):
            raise SyftError("optimizer.fix_precision(): call model.fix_precision() first (the optimizer's "
                            f"parameters must be FixedPrecisionTensors, got a {type(p).__name__})")
        if (base is not None and p.base != base) or (precision is not None and p.precision != precision):
            raise SyftError(f"optimizer.fix_precision(): its parameters are at base {p.base} precision "
                            f"{p.precision}, not base {base or p.base} precision {precision or p.precision}")
        state = optimizer.state.get(p, {})
        for name, value in list(state.items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, ChainLayer) and value.is_floating_point() \
                    and value.dim() > 0:
                fixed = FixedPrecisionTensor(encode(value.detach(), p.scale), p.base, p.precision)
                if p.shared:
                    fixed = FixedPrecisionTensor(ENGINE.share(fixed.child, p.child.parties, p.child.crypto_provider),
                                                 p.base, p.precision)
                state[name] = fixed
    return optimizer


TENSOR_METHODS = {"fix_precision": fix_precision, "fix_prec": fix_precision, "share": share}
OPTIMIZER_METHODS = {"fix_precision": optimizer_fix_precision, "fix_prec": optimizer_fix_precision}
MODULE_METHODS = {"fix_precision": module_fix_precision, "fix_prec": module_fix_precision,
                  "share": module_share, "float_precision": module_float_precision}


def _register() -> None:
    """Into hook.py's tables through its public API: sy.hook() adds these and sy.unhook() removes them."""
    register_methods(torch.Tensor, TENSOR_METHODS)
    register_methods(nn.Module, {**MODULE_METHODS, "get": module_get}, replacing=("get",))
    register_methods(torch.optim.Optimizer, OPTIMIZER_METHODS)


_register()
