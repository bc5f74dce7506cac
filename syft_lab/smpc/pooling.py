"""max_pool2d and avg_pool2d on fixed precision tensors (shared or not), and their gradients.

Windows that tile the input (stride = kernel, no padding, no dilation: what ``F.max_pool2d(x, 2)``
and ``nn.MaxPool2d(2)`` do) are a reshape of each share: (N, C, H, W) -> (N, C, Ho, Wo, k*k).
- avg_pool2d: the sum over the last dim (each party alone) and one division by k*k (truncation);
  its gradient spreads g / (k*k) back over each window (an expand of each share).
- max_pool2d: max along the last dim, every pair of a window compared at once (``max_dim``: one
  comparison circuit and one product, a window of at most 256 elements); its gradient is the
  window's one-hot of the maximum times g (the one-hot is computed again from the input: one
  more comparison circuit, no index ever opened).
Other windows (overlapping, padded, dilated, ceil_mode) are a SyftError.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import register_handlers, truncate
from .engine import ENGINE

aten = torch.ops.aten
INT64 = torch.int64


def _pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(a) for a in v] * (2 if len(v) == 1 else 1)


def _window(x: FPT, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
    k, s = _pair(kernel), _pair(stride) if stride else _pair(kernel)
    if (s != k or any(_pair(padding)) or _pair(dilation) != [1, 1] or ceil_mode or x.dim() != 4
            or x.shape[2] % k[0] or x.shape[3] % k[1]):
        raise SyftError(f"pooling on fixed precision tensors takes (N, C, H, W) inputs and windows that tile them: "
                        f"stride = kernel, no padding, dilation or ceil_mode, H and W multiples of the kernel "
                        f"(got kernel {k}, stride {s}, shape {list(x.shape)})")
    return k


def _tiles(child, shape, k):
    """(N, C, H, W) -> (N, C, Ho, Wo, kh * kw): each window on the last dim."""
    n, c, h, w = shape
    t = aten.reshape.default(child, [n, c, h // k[0], k[0], w // k[1], k[1]])
    t = aten.permute.default(t, [0, 1, 2, 4, 3, 5])
    return aten.reshape.default(t, [n, c, h // k[0], w // k[1], k[0] * k[1]])


def _untile(tiles, shape, k):
    n, c, h, w = shape
    t = aten.reshape.default(tiles, [n, c, h // k[0], w // k[1], k[0], k[1]])
    t = aten.permute.default(t, [0, 1, 2, 4, 3, 5])
    return aten.reshape.default(t, [n, c, h, w])


def _onehot(tiles):
    """The one-hot of each window's maximum (ties: the first), as 0/1 ring values."""
    if isinstance(tiles, AdditiveSharingTensor):
        return ENGINE.max_dim(tiles, -1, values=False)[1]
    idx = tiles.argmax(-1, keepdim=True)
    return torch.zeros_like(tiles).scatter_(-1, idx, 1)


def _max_pool(func, args, kwargs):
    x, kernel = args[0], args[1]
    stride = args[2] if len(args) > 2 else kwargs.get("stride", [])
    padding = args[3] if len(args) > 3 else kwargs.get("padding", 0)
    dilation = args[4] if len(args) > 4 else kwargs.get("dilation", 1)
    ceil_mode = args[5] if len(args) > 5 else kwargs.get("ceil_mode", False)
    k = _window(x, kernel, stride, padding, dilation, ceil_mode)
    tiles = _tiles(x.child, tuple(x.shape), k)
    if isinstance(tiles, AdditiveSharingTensor):
        values, _ = ENGINE.max_dim(tiles, -1)
    else:
        values = tiles.max(-1).values
    out = FPT(values, x.base, x.precision)
    # torch's indices are flat positions in H * W; a shared maximum's position stays secret, so the
    # indices here are zeros (the gradient recomputes the one-hot from the input instead)
    return out, torch.zeros(tuple(out.shape), dtype=INT64)


def _max_pool_backward(func, args, kwargs):
    grad, x, kernel, stride, padding, dilation, ceil_mode = args[:7]
    k = _window(x, kernel, stride, padding, dilation, ceil_mode)
    onehot = _onehot(_tiles(x.child, tuple(x.shape), k))
    g = grad.child
    g = aten.unsqueeze.default(g, -1)
    if isinstance(onehot, AdditiveSharingTensor) and isinstance(g, AdditiveSharingTensor):
        spread = ENGINE.bilinear(aten.mul.Tensor, (onehot, g), {})  # 0/1 times g: no truncation
    else:
        spread = onehot * g if isinstance(onehot, AdditiveSharingTensor) else g * onehot
    return FPT(_untile(spread, tuple(x.shape), k), grad.base, grad.precision)


def _avg_args(args, kwargs):
    x, kernel = args[0], args[1]
    stride = args[2] if len(args) > 2 else kwargs.get("stride", [])
    padding = args[3] if len(args) > 3 else kwargs.get("padding", 0)
    ceil_mode = args[4] if len(args) > 4 else kwargs.get("ceil_mode", False)
    divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
    k = _window(x, kernel, stride, padding, ceil_mode=ceil_mode)
    return x, k, divisor or k[0] * k[1]


def _avg_pool(func, args, kwargs):
    x, k, divisor = _avg_args(args, kwargs)
    s = aten.sum.dim_IntList(_tiles(x.child, tuple(x.shape), k), [-1])
    return FPT(truncate(s, divisor), x.base, x.precision)


def _avg_pool_backward(func, args, kwargs):
    grad, rest = args[0], args[1:]
    x, k, divisor = _avg_args(rest, kwargs)
    g = truncate(grad.child, divisor)
    shape = list(g.shape)
    g = aten.expand.default(aten.unsqueeze.default(g, -1), shape + [k[0] * k[1]])
    return FPT(_untile(aten.clone.default(g), tuple(x.shape), k), grad.base, grad.precision)


register_handlers({aten.max_pool2d_with_indices: _max_pool, aten.max_pool2d_with_indices_backward: _max_pool_backward,
                   aten.avg_pool2d: _avg_pool, aten.avg_pool2d_backward: _avg_pool_backward})
