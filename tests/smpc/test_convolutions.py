"""Transposed convolutions (conv_transpose1d/2d, nn.ConvTranspose2d) and grouped convolutions on shared
fixed precision tensors against plain torch (2 and 3 parties, and worker processes), forward and
backward, with a shared and a public weight.

Tolerances (precision 3, unit 10^-3), the op table's: an output within one unit plus the weights'
encoding error (5·10^-4 times the inputs summed, well under one unit here); a gradient within 1% plus
2 units per product summed into it: the loss is sum(out * r) for a public r of three decimals, so the
output's gradient is r within one unit, and each product of the backward convolution adds one more."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy

sy.hook()
UNIT = 1e-3


def _round(*shape):
    return torch.round(torch.randn(*shape) * 1000) / 1000


def _get(t):
    """The plain value of a result: shared ones reconstructed (a gradient of public factors alone, as the
    input's through a public weight here, is public)."""
    return (t.get() if t.shared else t).float_precision()


def _check(fn, x, w, ws, provider, shared_weight, **kw):
    """fn(x, w, **kw) on shares against plain torch: the output, the input's and the weight's gradients."""
    xx, ww = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    want = fn(xx, ww, **kw)
    r = _round(*want.shape)
    (want * r).sum().backward()
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    sw = (w.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True) if shared_weight
          else w.clone().requires_grad_(True))
    out = fn(sx, sw, **kw)
    (out * r).sum().backward()
    groups = kw.get("groups", 1)
    kernel = w[0, 0].numel()
    transposed = fn in (F.conv_transpose1d, F.conv_transpose2d)
    # products summed into one gradient element: the input's over (channels of a group) x kernel, the
    # weight's over the batch and every position of the larger side
    in_sum = (w.shape[1] if transposed else w.shape[0] // groups) * kernel
    w_sum = x.shape[0] * max(want[0, 0].numel(), x[0, 0].numel())
    assert torch.allclose(_get(out), want.detach(), atol=1.01 * UNIT), (fn.__name__, kw)
    assert torch.allclose(_get(sx.grad), xx.grad, rtol=1e-2, atol=2 * in_sum * UNIT), (fn.__name__, kw)
    assert torch.allclose(_get(sw.grad), ww.grad, rtol=1e-2, atol=2 * w_sum * UNIT), (fn.__name__, kw)
    del sx, sw, out


TRANSPOSED = [
    (F.conv_transpose2d, (2, 4, 4, 5), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    (F.conv_transpose2d, (1, 4, 3, 4), (4, 1, 3, 2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)),
    (F.conv_transpose1d, (2, 4, 6), (4, 3, 3), dict(stride=3)),
]


@pytest.mark.parametrize("shared_weight", [True, False], ids=["shared weight", "public weight"])
@pytest.mark.parametrize("fn, xs, wsz, kw", TRANSPOSED, ids=["2d stride 2", "2d groups dilation", "1d"])
def test_transposed_convolutions_forward_and_backward(parties, fn, xs, wsz, kw, shared_weight):
    ws, provider = parties
    torch.manual_seed(3)
    _check(fn, _round(*xs), _round(*wsz), ws, provider, shared_weight, **kw)


GROUPED = [
    (F.conv2d, (2, 4, 6, 6), (6, 2, 3, 3), dict(groups=2, stride=2, padding=1)),
    (F.conv2d, (2, 4, 6, 6), (4, 1, 3, 3), dict(groups=4, dilation=2)),  # depthwise
    (F.conv1d, (2, 6, 9), (3, 2, 3), dict(groups=3)),
]


@pytest.mark.parametrize("fn, xs, wsz, kw", GROUPED, ids=["2 groups", "depthwise", "1d 3 groups"])
def test_grouped_convolution_gradients(parties, fn, xs, wsz, kw):
    ws, provider = parties
    torch.manual_seed(5)
    _check(fn, _round(*xs), _round(*wsz), ws, provider, True, **kw)


def test_conv_transpose_module_with_bias(parties2):
    """nn.ConvTranspose2d (bias too) made fixed precision and shared: its output (of the size torch gives,
    output_padding included) and its weight's and bias's gradients as plain torch's."""
    alice, bob, carol = parties2
    torch.manual_seed(9)
    layer = nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1, groups=1)
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.round(p * 1000) / 1000)  # encoded exactly: the output within one unit
    secure = copy.deepcopy(layer).fix_precision().share(alice, bob, crypto_provider=carol)
    x = _round(2, 3, 4, 4)
    r = _round(2, 2, 8, 8)
    want = layer(x)
    (want * r).sum().backward()
    sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
    out = secure(sx)
    assert tuple(out.shape) == tuple(want.shape) == (2, 2, 8, 8)
    (out * r).sum().backward()
    assert torch.allclose(_get(out), want.detach(), atol=1.01 * UNIT)
    summed = 2 * 8 * 8
    assert torch.allclose(_get(secure.weight.grad), layer.weight.grad, rtol=1e-2, atol=2 * summed * UNIT)
    assert torch.allclose(_get(secure.bias.grad), layer.bias.grad, rtol=1e-2, atol=2 * summed * UNIT)
    del sx, out


def test_transposed_and_grouped_on_worker_processes(remote_parties):
    """The same protocols between worker processes: a transposed convolution and a grouped one's gradients."""
    alice, bob, carol = remote_parties
    torch.manual_seed(13)
    _check(F.conv_transpose2d, _round(1, 2, 3, 3), _round(2, 2, 3, 3), [alice, bob], carol, True, stride=2)
    _check(F.conv2d, _round(1, 4, 5, 5), _round(4, 2, 3, 3), [alice, bob], carol, True, groups=2)
