"""max_pool2d and avg_pool2d on fixed precision tensors (shared or not), and their gradients.

Any kernel, stride and padding (overlapping windows too): each share is padded with 0 and
unfolded, (N, C, H, W) -> (N, C, Ho, Wo, kh*kw); max-pooling adds a public -2^40 at the padded
positions (never a maximum, as torch's -inf). Gradients go back through unfold's adjoint
(``unfold_backward`` of each share: overlapping windows add up).
- avg_pool2d: the sum over the last dim (each party alone) and one division by k*k (truncation;
  with count_include_pad=False and padding, one truncation per distinct window count, each kept
  where it applies by a public 0/1 mask);
  its gradient spreads g / (k*k) back over each window (an expand of each share).
- max_pool2d: max along the last dim, every pair of a window compared at once (``max_dim``: one
  comparison circuit and one product, a window of at most 256 elements); its gradient is the
  window's one-hot of the maximum times g (the one-hot is computed again from the input: one
  more comparison circuit, no index ever opened).
Dilation, ceil_mode and padding beyond half the kernel are a SyftError.
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


# Padding of max_pool2d: a public -2^40 ring units (~ -10^9 at precision 3) added at the padded
# positions, never a maximum; window keys x * m stay within the ring for windows up to 2^8 elements
PAD_MIN = -(2**40)


class Window:
    """A pooling window: kernel k, stride s, padding p (per spatial dim), of a (N, C, H, W) input."""

    def __init__(self, x, kernel, stride, padding, dilation=(1, 1), ceil_mode=False):
        self.k = _pair(kernel)
        self.s = _pair(stride) if stride else list(self.k)
        self.p = _pair(padding)
        self.shape = tuple(x.shape)
        if _pair(dilation) != [1, 1] or ceil_mode or x.dim() != 4 or any(
                p > k // 2 for p, k in zip(self.p, self.k)) or any(
                h + 2 * p < k for h, p, k in zip(self.shape[2:], self.p, self.k)):
            raise SyftError(f"pooling on fixed precision tensors takes (N, C, H, W) inputs, any kernel, stride and "
                            f"padding (at most half the kernel), no dilation or ceil_mode (got kernel {self.k}, "
                            f"stride {self.s}, padding {self.p}, dilation {_pair(dilation)}, ceil_mode {ceil_mode}, "
                            f"shape {list(self.shape)})")
        self.padded = [h + 2 * p for h, p in zip(self.shape[2:], self.p)]
        self.out = [(h - k) // s + 1 for h, k, s in zip(self.padded, self.k, self.s)]

    def pad_mask(self):
        """PAD_MIN at the padded positions, 0 inside (a public int64 tensor)."""
        m = torch.full([1, 1, *self.padded], PAD_MIN, dtype=INT64)
        m[..., self.p[0]:self.p[0] + self.shape[2], self.p[1]:self.p[1] + self.shape[3]] = 0
        return m

    def tiles(self, child, pad_value=0):
        """(N, C, H, W) -> (N, C, Ho, Wo, kh * kw): each window on the last dim (unfold of each share)."""
        if any(self.p):
            child = aten.constant_pad_nd.default(child, [self.p[1], self.p[1], self.p[0], self.p[0]])
            if pad_value:
                child = child + self.pad_mask()
        t = aten.unfold.default(child, 2, self.k[0], self.s[0])
        t = aten.unfold.default(t, 3, self.k[1], self.s[1])  # (N, C, Ho, Wo, kh, kw)
        return aten.reshape.default(t, [*t.shape[:2], *self.out, self.k[0] * self.k[1]])

    def untile(self, tiles):
        """The adjoint of ``tiles``: each window's values added back at their positions (overlaps sum)."""
        n, c = self.shape[:2]
        t = aten.reshape.default(tiles, [n, c, *self.out, self.k[0], self.k[1]])
        t = aten.unfold_backward.default(t, [n, c, self.out[0], self.padded[1], self.k[0]], 3, self.k[1], self.s[1])
        t = aten.unfold_backward.default(t, [n, c, *self.padded], 2, self.k[0], self.s[0])
        if any(self.p):
            t = aten.slice.Tensor(t, 2, self.p[0], self.p[0] + self.shape[2])
            t = aten.slice.Tensor(t, 3, self.p[1], self.p[1] + self.shape[3])
            t = aten.clone.default(t)
        return t

    def counts(self):
        """How many input positions (padding left out) each window covers: a public tensor."""
        ones = torch.ones(1, 1, *self.shape[2:], dtype=INT64)
        return aten.sum.dim_IntList(self.tiles(ones), [-1])


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
    win = Window(x, kernel, stride, padding, dilation, ceil_mode)
    tiles = win.tiles(x.child, PAD_MIN)
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
    win = Window(x, kernel, stride, padding, dilation, ceil_mode)
    onehot = _onehot(win.tiles(x.child, PAD_MIN))
    g = grad.child
    g = aten.unsqueeze.default(g, -1)
    if isinstance(onehot, AdditiveSharingTensor) and isinstance(g, AdditiveSharingTensor):
        spread = ENGINE.bilinear(aten.mul.Tensor, (onehot, g), {})  # 0/1 times g: no truncation
    else:
        spread = onehot * g if isinstance(onehot, AdditiveSharingTensor) else g * onehot
    return FPT(win.untile(spread), grad.base, grad.precision)


def _avg_args(args, kwargs):
    x, kernel = args[0], args[1]
    stride = args[2] if len(args) > 2 else kwargs.get("stride", [])
    padding = args[3] if len(args) > 3 else kwargs.get("padding", 0)
    ceil_mode = args[4] if len(args) > 4 else kwargs.get("ceil_mode", False)
    include_pad = args[5] if len(args) > 5 else kwargs.get("count_include_pad", True)
    divisor = args[6] if len(args) > 6 else kwargs.get("divisor_override")
    win = Window(x, kernel, stride, padding, ceil_mode=ceil_mode)
    return win, divisor, include_pad


def _divide(child, like: FPT, win: Window, divisor, include_pad):
    """A window sum's child divided by the window's size: one public integer (a truncation), or,
    with count_include_pad=False and padding, each window's own count (public; a truncation per count)."""
    if divisor or include_pad or not any(win.p):
        return truncate(child, divisor or win.k[0] * win.k[1])
    counts = win.counts()
    out = None
    for c in torch.unique(counts).tolist():  # a few distinct counts: one truncation each, kept where it applies
        part = truncate(child, int(c)) * (counts == c).to(INT64)
        out = part if out is None else out + part
    return out


def _avg_pool(func, args, kwargs):
    x = args[0]
    win, divisor, include_pad = _avg_args(args, kwargs)
    s = aten.sum.dim_IntList(win.tiles(x.child), [-1])
    return FPT(_divide(s, x, win, divisor, include_pad), x.base, x.precision)


def _avg_pool_backward(func, args, kwargs):
    grad, rest = args[0], args[1:]
    win, divisor, include_pad = _avg_args(rest, kwargs)
    g = _divide(grad.child, grad, win, divisor, include_pad)
    shape = list(g.shape)
    g = aten.expand.default(aten.unsqueeze.default(g, -1), shape + [win.k[0] * win.k[1]])
    return FPT(win.untile(aten.clone.default(g)), grad.base, grad.precision)


register_handlers({aten.max_pool2d_with_indices: _max_pool, aten.max_pool2d_with_indices_backward: _max_pool_backward,
                   aten.avg_pool2d: _avg_pool, aten.avg_pool2d_backward: _avg_pool_backward})
