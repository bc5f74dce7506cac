"""Products of many factors on fixed precision tensors (shared or not): ``prod`` and ``cumprod``.

As CrypTen computes ``prod``: a tree of secure products, not a chain. Along the reduced dim the
factors are paired, first half times second half, one Beaver product for every pair at once (one
round of products), and the halves shrink until one factor is left: ceil(log2 n) rounds for n
factors, n - 1 products in all. ``cumprod`` is the prefix scan of the same products (Hillis and
Steele: at step k each position takes the product of itself and the position 2^k before it),
ceil(log2 n) rounds, which is what the gradient of ``prod`` builds on (torch's zero-safe formula:
the exclusive products from the left and from the right, each a ``cumprod``). ``cumprod`` itself has
no gradient here (refused: torch's formula for it branches on which inputs are 0).

Each product truncates once (one unit of the last place); its error is that unit times the
magnitude of the other factor, so the result's relative error grows with the number of factors and
their size: docs/secure-computation.md ("Every op", prod). The result must fit the ring like any
product: |prod| * scale < 2^63.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import _wrap, register_handlers

aten = torch.ops.aten


def _ones(x: FPT, shape) -> FPT:
    """Ones of ``shape`` at ``x``'s precision, public (a product with them costs no round)."""
    return _wrap(x, torch.full(tuple(shape), x.scale, dtype=torch.int64))


def tree_product(x: FPT, dim: int) -> FPT:
    """The product of ``x`` along ``dim`` (kept, of size 1): ceil(log2 n) rounds of products."""
    n = x.shape[dim]
    if n == 0:
        shape = list(x.shape)
        shape[dim] = 1
        return _ones(x, shape)
    while n > 1:
        half = n // 2
        paired = x.narrow(dim, 0, half) * x.narrow(dim, half, half)
        x = torch.cat([paired, x.narrow(dim, 2 * half, 1)], dim) if n % 2 else paired
        n = x.shape[dim]
    return x


def prefix_product(x: FPT, dim: int) -> FPT:
    """cumprod along ``dim``: at step k each position i >= 2^k takes y[i] * y[i - 2^k] (one round)."""
    n, step = x.shape[dim], 1
    while step < n:
        later = x.narrow(dim, step, n - step) * x.narrow(dim, 0, n - step)
        x = torch.cat([x.narrow(dim, 0, step), later], dim)
        step *= 2
    return x


def _refuse_dtype(kwargs, op):
    if kwargs.get("dtype") not in (None, torch.float32):
        raise SyftError(f"{op} on a fixed precision tensor gives a fixed precision tensor (float to torch): no dtype=")


def _prod(func, args, kwargs):
    """prod(x) over every element, or prod(x, dim, keepdim) along one dim."""
    x = args[0]
    _refuse_dtype(kwargs, "prod")
    if func is aten.prod.default or func.overloadpacket is aten.prod and len(args) < 2 and "dim" not in kwargs:
        flat = x.reshape(-1) if x.dim() else x.reshape(1)
        return tree_product(flat, 0).reshape(())
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    if x.dim() == 0:
        if dim not in (0, -1):
            raise IndexError(f"Dimension out of range (expected to be in range of [-1, 0], but got {dim})")
        return x.clone()
    dim %= x.dim()
    out = tree_product(x, dim)
    return out if keepdim else out.squeeze(dim)


def _cumprod(func, args, kwargs):
    x = args[0]
    _refuse_dtype(kwargs, "cumprod")
    dim = args[1] if len(args) > 1 else kwargs["dim"]
    if torch.is_grad_enabled() and x.requires_grad:
        raise SyftError("cumprod of a fixed precision tensor has no gradient here: torch's formula for it branches on "
                        "which inputs are 0 (a cumsum of a 0/1 mask, indexing by it), which a shared value cannot "
                        "do without opening them; prod has one; for x > 0, exp(cumsum(log(x))) does, or run "
                        "cumprod under torch.no_grad()")
    if x.dim() == 0:
        return x.clone()
    return prefix_product(x, dim % x.dim())


register_handlers({aten.prod: _prod, aten.cumprod: _cumprod})
