"""Convolutions on fixed precision tensors (shared or not): plain, grouped and transposed, and their gradients.

A convolution is bilinear in (input, weight), so each one, forward or backward, is one product by the
protocol of a convolution: a Beaver triple for that very convolution when both operands are shared
(CrypTen's ``beaver.conv_transpose2d`` too), each party alone on its share when one operand is public,
then one truncation. A transposed convolution is the adjoint of a plain one in its input: the same op,
``transposed=True``. ``convolution_backward`` (any groups, plain or transposed):
- the input's gradient is the other kind of convolution of the output's gradient with the weight: a
  transposed one for a plain convolution (output_padding chosen so it has the input's size), a plain one
  for a transposed convolution;
- the weight's gradient is a convolution of the input with the output's gradient, batch and channels
  swapped (stride and dilation trade places), cut to the kernel's size; with groups, each group's input
  channels are batched on the batch axis and the same grouped convolution pairs them with that group's
  output channels (one product for all groups). A transposed convolution's weight gradient is a plain
  convolution's with input and output's gradient exchanged;
- the bias's gradient is a sum (each party alone).
"""
from __future__ import annotations

import torch

from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import _add, _enc, _like, product, register_handlers

aten = torch.ops.aten


def _conv(a, b, scale: int, stride, padding, dilation, transposed: bool, output_padding, groups: int):
    """conv(a, b) / scale on ring operands (shared or public): one product."""
    return product(aten.convolution.default, a, b, scale,
                   (None, list(stride), list(padding), list(dilation), transposed, list(output_padding), groups))


def _convolution(func, args, kwargs):
    x, w, bias, stride, padding, dilation, transposed, output_padding, groups = args
    t = _like(args)
    out = _conv(_enc(x, t.scale), _enc(w, t.scale), t.scale, stride, padding, dilation, transposed,
                output_padding, groups)
    if bias is not None:
        b = _enc(bias, t.scale)
        out = _add(out, aten.view.default(b, [1, -1] + [1] * (out.dim() - 2)))
    return FPT(out, t.base, t.precision)


def _weight_grad(inp, grad, kernel, scale: int, stride, padding, dilation, groups: int):
    """d loss / d weight of ``grad = conv(inp, weight)`` (a plain convolution; ring children): the
    convolution of the input, its channels of a group batched (C/G, G*N, ...), with the output's gradient
    (C_out, N, ...) as the kernel, groups kept, stride and dilation exchanged; cut to the kernel's size."""
    n, c = inp.shape[0], inp.shape[1]
    spatial = list(inp.shape[2:])
    dims = list(range(3, 3 + len(spatial)))
    xt = aten.reshape.default(inp, [n, groups, c // groups, *spatial])
    xt = aten.reshape.default(aten.permute.default(xt, [2, 1, 0, *dims]), [c // groups, groups * n, *spatial])
    gt = aten.transpose.int(grad, 0, 1)
    gw = aten.transpose.int(_conv(xt, gt, scale, dilation, padding, stride, False, [0] * len(spatial), groups), 0, 1)
    for i, k in enumerate(kernel):
        gw = aten.narrow.default(gw, i + 2, 0, k)
    return gw.contiguous()


def _convolution_backward(func, args, kwargs):
    g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask = args
    t = _like([a for a in (g, x, w) if isinstance(a, FPT)])
    ge, xe, we = (_enc(a, t.scale) for a in (g, x, w))
    spatial = range(2, x.dim())
    grad_input = grad_weight = grad_bias = None
    if mask[0]:
        if transposed:  # the adjoint of a transposed convolution: the plain one
            gi = _conv(ge, we, t.scale, stride, padding, dilation, False, [0] * len(spatial), groups)
        else:
            out_pad = [x.shape[i] - ((g.shape[i] - 1) * stride[i - 2] - 2 * padding[i - 2]
                                     + dilation[i - 2] * (w.shape[i] - 1) + 1) for i in spatial]
            gi = _conv(ge, we, t.scale, stride, padding, dilation, True, out_pad, groups)
        grad_input = FPT(gi, t.base, t.precision)
    if mask[1]:
        inp, out = (ge, xe) if transposed else (xe, ge)  # transposed: x = conv(g, w) plain, in the adjoint's view
        gw = _weight_grad(inp, out, list(w.shape[2:]), t.scale, stride, padding, dilation, groups)
        grad_weight = FPT(gw, t.base, t.precision)
    if mask[2]:
        grad_bias = g.sum([0, *spatial])
    return grad_input, grad_weight, grad_bias


register_handlers({aten.convolution: _convolution, aten.convolution_backward: _convolution_backward})
