"""Pooling on fixed precision tensors (shared or not), and its gradients: max_pool2d and avg_pool2d
(any kernel, stride, padding, dilation, ceil_mode) and adaptive_avg_pool2d / adaptive_max_pool2d
(any output size, dividing the input's or not).

A pooling window is public: per spatial dim, a table of the input positions each output's window
reads (``Window``). Strided pooling reads start + j * dilation from start = i * stride - padding;
adaptive pooling reads floor(i * H / O) up to ceil((i + 1) * H / O), windows of different lengths.
A position outside the input, or past a shorter window's end, reads a padding slot: one 0 appended
after each spatial dim of each share. Each share, (.., H, W) -> (.., Ho, Wo, kh * kw), is then one
``index_select`` of its flattened (H + 1) x (W + 1) plane (each party alone); max-pooling adds a
public -2^40 at the slots (never a maximum, as torch's -inf). Gradients go back through the
adjoint, one ``index_add`` of each share into zeros (overlapping windows add up; the slots are cut).
- avg: the sum over the last dim (each party alone) and one division by each window's count, a
  public integer (torch's: kh * kw, or the window clipped to the padded input, or its input
  positions alone with count_include_pad=False, or divisor_override; an adaptive window's own
  size): windows of one count, one truncation; of several, a product by the public integer
  lcm / count, then one truncation by the lcm. Its gradient spreads g / count over each window.
- max: max along the last dim, every pair of a window compared at once (``max_dim``: one
  comparison circuit and one product; a window of more than 256 elements is a SyftError); its
  gradient is the window's one-hot of the maximum times g (the one-hot is computed again from the
  input: one more comparison circuit, no index ever opened).
Shapes and arguments are checked by torch itself (the op on a meta tensor); a window that would
read padding alone (torch's -inf) is a SyftError.
"""
from __future__ import annotations

import math

import torch

from ..errors import SyftError
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import register_handlers, truncate
from .engine import ENGINE, PAIRWISE_MAX

aten = torch.ops.aten
INT64 = torch.int64

# Padding of max-pooling: a public -2^40 ring units (~ -10^9 at precision 3) added at the padding
# slots, never a maximum; window keys x * m stay within the ring for windows up to 2^8 elements
PAD_MIN = -(2**40)
# lcm of a pooling's distinct window counts up to which one truncation divides them all (beyond: one each)
LCM_MAX = 2**12


def _pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(a) for a in v] * (2 if len(v) == 1 else 1)


def _strided_dim(size: int, out: int, k: int, s: int, p: int, d: int):
    """The positions a strided window reads along one dim (out, k), and torch's count_include_pad
    divisor of each (the window clipped to the padded input)."""
    starts = torch.arange(out, dtype=INT64) * s - p
    pos = starts[:, None] + torch.arange(k, dtype=INT64) * d
    clipped = torch.clamp(starts + (k - 1) * d + 1, max=size + p) - starts
    return pos, clipped


def _adaptive_dim(size: int, out: int):
    """The positions adaptive window i reads along one dim: floor(i * size / out) to ceil((i + 1) * size / out)."""
    i = torch.arange(out, dtype=INT64)
    starts, ends = (i * size) // out, -((-(i + 1) * size) // out)
    pos = starts[:, None] + torch.arange(int((ends - starts).max()), dtype=INT64)
    return torch.where(pos < ends[:, None], pos, size), ends - starts


class Window:
    """The windows of a pooling over (..., H, W): for each output position, the input positions it reads."""

    def __init__(self, shape, rows, cols, clipped=None):
        self.shape = tuple(shape)
        h, w = self.shape[-2:]
        self.rows = torch.where((rows >= 0) & (rows < h), rows, h)  # (Ho, kh); h: the padding slot
        self.cols = torch.where((cols >= 0) & (cols < w), cols, w)  # (Wo, kw)
        self.out = [rows.shape[0], cols.shape[0]]
        self.k = [rows.shape[1], cols.shape[1]]
        self.clipped = clipped  # per dim, count_include_pad's divisors
        # flat (Ho, Wo, kh, kw) positions in each share's (H + 1) x (W + 1) plane
        self.flat = (self.rows[:, None, :, None] * (w + 1) + self.cols[None, :, None, :]).reshape(-1)
        self.inside = ((self.rows < h).sum(1)[:, None] * (self.cols < w).sum(1)[None, :])  # input positions read
        if bool((self.inside == 0).any()):
            raise SyftError(f"a pooling window reads padding alone (torch gives -inf there; shape {list(shape)})")

    @classmethod
    def strided(cls, x, out_shape, kernel, stride, padding, dilation=1):
        k, p, d = _pair(kernel), _pair(padding), _pair(dilation)
        s = _pair(stride) if stride else list(k)
        dims = [_strided_dim(x.shape[-2 + i], out_shape[-2 + i], k[i], s[i], p[i], d[i]) for i in range(2)]
        return cls(x.shape, dims[0][0], dims[1][0], (dims[0][1], dims[1][1]))

    @classmethod
    def adaptive(cls, x, output_size):
        out = [x.shape[-2 + i] if o is None else int(o) for i, o in enumerate(_pair(output_size))]
        (rows, rh), (cols, rw) = (_adaptive_dim(x.shape[-2 + i], out[i]) for i in range(2))
        return cls(x.shape, rows, cols, (rh, rw))

    def _plane(self):
        lead, (h, w) = list(self.shape[:-2]), self.shape[-2:]
        return lead, h, w

    def tiles(self, child, pad_value=0):
        """(..., H, W) -> (..., Ho, Wo, kh * kw): each window on the last dim (one index_select of each share)."""
        lead, h, w = self._plane()
        t = aten.constant_pad_nd.default(child, [0, 1, 0, 1])  # the padding slot: a 0 (each share's)
        t = aten.index_select.default(aten.reshape.default(t, [*lead, (h + 1) * (w + 1)]), -1, self.flat)
        t = aten.reshape.default(t, [*lead, *self.out, self.k[0] * self.k[1]])
        if pad_value:
            slots = (self.rows == h)[:, None, :, None] | (self.cols == w)[None, :, None, :]  # (Ho, Wo, kh, kw)
            if bool(slots.any()):  # windows that read no padding: nothing to add
                t = t + slots.reshape(*self.out, -1).to(INT64) * pad_value
        return t

    def untile(self, tiles):
        """The adjoint of ``tiles``: each window's values added back at their positions (overlaps sum)."""
        lead, h, w = self._plane()
        t = aten.reshape.default(tiles, [*lead, -1])
        zeros = torch.zeros([*lead, (h + 1) * (w + 1)], dtype=INT64)
        if isinstance(t, AdditiveSharingTensor):
            t = ENGINE.each_share(aten.index_add.default, t, lambda s: (zeros, -1, self.flat, s))
        else:
            t = aten.index_add.default(zeros, -1, self.flat, t)
        t = aten.reshape.default(t, [*lead, h + 1, w + 1])
        t = aten.slice.Tensor(aten.slice.Tensor(t, -2, 0, h), -1, 0, w)
        return aten.clone.default(t)

    def counts(self, include_pad: bool, divisor=None):
        """Each window's divisor (a public (Ho, Wo) tensor), or one integer for all."""
        if divisor:
            return int(divisor)
        if include_pad:
            return self.clipped[0][:, None] * self.clipped[1][None, :]
        return self.inside


def _divide(child, counts):
    """A window sum's child divided by the window's count (public): one truncation (see the module's doc)."""
    if isinstance(counts, int):
        return truncate(child, counts)
    values = [int(c) for c in torch.unique(counts).tolist()]
    if len(values) == 1:
        return truncate(child, values[0])
    lcm = math.lcm(*values)
    if lcm <= LCM_MAX:
        return truncate(child * (lcm // counts), lcm)  # an exact product by a public integer, then one truncation
    out = None
    for c in values:  # many distinct counts: one truncation each, kept where it applies
        part = truncate(child, c) * (counts == c).to(INT64)
        out = part if out is None else out + part
    return out


def _onehot(tiles):
    """The one-hot of each window's maximum (ties: the first), as 0/1 ring values."""
    if isinstance(tiles, AdditiveSharingTensor):
        return ENGINE.max_dim(tiles, -1, values=False)[1]
    idx = tiles.argmax(-1, keepdim=True)
    return torch.zeros_like(tiles).scatter_(-1, idx, 1)


def _window_max(x: FPT, win: Window):
    """(max over each window, torch's indices): the indices are zeros, as a shared maximum's position
    stays secret (the gradient recomputes the one-hot from the input instead)."""
    size = win.k[0] * win.k[1]
    if x.shared and size > PAIRWISE_MAX:
        raise SyftError(f"max-pooling compares every pair of a window: at most {PAIRWISE_MAX} elements on a shared "
                        f"tensor (got {win.k[0]} x {win.k[1]}); pool in two steps (a max of maxima) or use avg_pool2d")
    tiles = win.tiles(x.child, PAD_MIN)
    if isinstance(tiles, AdditiveSharingTensor):
        values, _ = ENGINE.max_dim(tiles, -1)
    else:
        values = tiles.max(-1).values
    out = FPT(values, x.base, x.precision)
    return out, torch.zeros(tuple(out.shape), dtype=INT64)


def _window_max_backward(grad: FPT, x: FPT, win: Window) -> FPT:
    onehot = _onehot(win.tiles(x.child, PAD_MIN))
    g = aten.unsqueeze.default(grad.child, -1)
    if isinstance(onehot, AdditiveSharingTensor) and isinstance(g, AdditiveSharingTensor):
        spread = ENGINE.bilinear(aten.mul.Tensor, (onehot, g), {})  # 0/1 times g: no truncation
    else:
        spread = onehot * g if isinstance(onehot, AdditiveSharingTensor) else g * onehot
    return FPT(win.untile(spread), grad.base, grad.precision)


def _meta(x):
    return torch.empty(tuple(x.shape), device="meta")


def _max_args(x, args, kwargs):
    """The window of max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode) (its backward's too)."""
    kernel = args[0]
    stride = args[1] if len(args) > 1 else kwargs.get("stride", [])
    padding = args[2] if len(args) > 2 else kwargs.get("padding", 0)
    dilation = args[3] if len(args) > 3 else kwargs.get("dilation", 1)
    ceil_mode = args[4] if len(args) > 4 else kwargs.get("ceil_mode", False)
    out = aten.max_pool2d_with_indices.default(_meta(x), _pair(kernel), _pair(stride) if stride else [],
                                               _pair(padding), _pair(dilation), ceil_mode)[0]
    return Window.strided(x, out.shape, kernel, stride, padding, dilation)


def _max_pool(func, args, kwargs):
    return _window_max(args[0], _max_args(args[0], args[1:], kwargs))


def _max_pool_backward(func, args, kwargs):
    grad, x = args[0], args[1]
    return _window_max_backward(grad, x, _max_args(x, args[2:7], {}))


def _avg_args(x, args, kwargs):
    """(window, divisors) of avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)."""
    kernel = args[0]
    stride = args[1] if len(args) > 1 else kwargs.get("stride", [])
    padding = args[2] if len(args) > 2 else kwargs.get("padding", 0)
    ceil_mode = args[3] if len(args) > 3 else kwargs.get("ceil_mode", False)
    include_pad = args[4] if len(args) > 4 else kwargs.get("count_include_pad", True)
    divisor = args[5] if len(args) > 5 else kwargs.get("divisor_override")
    out = aten.avg_pool2d.default(_meta(x), _pair(kernel), _pair(stride) if stride else [], _pair(padding),
                                  ceil_mode, include_pad, divisor)
    win = Window.strided(x, out.shape, kernel, stride, padding)
    return win, win.counts(include_pad, divisor)


def _window_avg(x: FPT, win: Window, counts) -> FPT:
    s = aten.sum.dim_IntList(win.tiles(x.child), [-1])
    return FPT(_divide(s, counts), x.base, x.precision)


def _window_avg_backward(grad: FPT, win: Window, counts) -> FPT:
    g = _divide(grad.child, counts)
    g = aten.expand.default(aten.unsqueeze.default(g, -1), list(g.shape) + [win.k[0] * win.k[1]])
    return FPT(win.untile(aten.clone.default(g)), grad.base, grad.precision)


def _avg_pool(func, args, kwargs):
    return _window_avg(args[0], *_avg_args(args[0], args[1:], kwargs))


def _avg_pool_backward(func, args, kwargs):
    grad, x = args[0], args[1]
    return _window_avg_backward(grad, *_avg_args(x, args[2:], kwargs))


def _adaptive(x, output_size):
    win = Window.adaptive(x, output_size)
    return win, win.counts(include_pad=False)


register_handlers({
    aten.max_pool2d_with_indices: _max_pool, aten.max_pool2d_with_indices_backward: _max_pool_backward,
    aten.avg_pool2d: _avg_pool, aten.avg_pool2d_backward: _avg_pool_backward,
    aten._adaptive_avg_pool2d: lambda func, args, kwargs: _window_avg(args[0], *_adaptive(args[0], args[1])),
    aten._adaptive_avg_pool2d_backward: lambda func, args, kwargs: _window_avg_backward(
        args[0], *_adaptive(args[1], args[0].shape[-2:])),
    aten.adaptive_max_pool2d: lambda func, args, kwargs: _window_max(args[0], Window.adaptive(args[0], args[1])),
    aten.adaptive_max_pool2d_backward: lambda func, args, kwargs: _window_max_backward(
        args[0], args[1], Window.adaptive(args[1], args[0].shape[-2:])),
})
