"""The gradient of a convolution on fixed precision tensors (shared or not): two convolutions.

``convolution_backward`` is bilinear in (grad, weight) and in (input, grad), so each gradient
is one product by the protocol of a convolution (a Beaver triple for it when both are shared):
- the input's gradient is the transposed convolution of the output's gradient with the weight
  (output_padding chosen so it has the input's size);
- the weight's gradient is a convolution of the input with the output's gradient, batch and
  channels swapped (stride and dilation trade places), cut to the kernel's size;
- the bias's gradient is a sum (each party alone).
Groups other than 1 and transposed convolutions are a SyftError.
"""
from __future__ import annotations

import torch

from ..errors import SyftError
from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import _enc, _like, product, register_handlers

aten = torch.ops.aten


def _convolution_backward(func, args, kwargs):
    g, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask = args
    if transposed or groups != 1:
        raise SyftError("the gradient of a convolution on fixed precision tensors takes groups=1 and no transposed "
                        "convolution")
    t = _like([a for a in (g, x, w) if isinstance(a, FPT)])
    spatial = range(2, x.dim())
    grad_input = grad_weight = grad_bias = None
    if mask[0]:
        out_pad = [x.shape[i] - ((g.shape[i] - 1) * stride[i - 2] - 2 * padding[i - 2]
                                 + dilation[i - 2] * (w.shape[i] - 1) + 1) for i in spatial]
        grad_input = FPT(product(aten.convolution.default, _enc(g, t.scale), _enc(w, t.scale), t.scale,
                                 (None, stride, padding, dilation, True, out_pad, 1)), t.base, t.precision)
    if mask[1]:
        xt = _enc(x, t.scale).transpose(0, 1)
        gt = _enc(g, t.scale).transpose(0, 1)
        gw = product(aten.convolution.default, xt, gt, t.scale,
                     (None, dilation, padding, stride, False, [0] * len(spatial), 1)).transpose(0, 1)
        for i in spatial:
            gw = gw.narrow(i, 0, w.shape[i])
        grad_weight = FPT(gw.contiguous(), t.base, t.precision)
    if mask[2]:
        grad_bias = g.sum([0, *spatial])
    return grad_input, grad_weight, grad_bias


register_handlers({aten.convolution_backward: _convolution_backward})
