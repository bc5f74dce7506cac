"""max_pool2d and avg_pool2d on shared fixed precision tensors against plaintext (2 and 3
parties), with their gradients: tiling, overlapping and padded windows; dilation and ceil_mode
are a clear error."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import syft_lab as sy

sy.hook()
UNIT = 1e-3


def test_pooling_and_gradients(parties):
    ws, provider = parties
    torch.manual_seed(7)
    x = torch.round(torch.randn(2, 2, 4, 6) * 3000) / 1000
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    m, a = F.max_pool2d(sx, 2), nn.AvgPool2d((2, 3))(sx)
    (m.sum() + (a * 3).sum()).backward()
    xx = x.clone().requires_grad_(True)
    want_m, want_a = F.max_pool2d(xx, 2), nn.AvgPool2d((2, 3))(xx)
    (want_m.sum() + (want_a * 3).sum()).backward()
    assert torch.allclose(m.get().float_precision(), want_m.detach(), atol=UNIT)
    assert torch.allclose(a.get().float_precision(), want_a.detach(), atol=1.01 * UNIT)
    assert torch.allclose(sx.grad.get().float_precision(), xx.grad, atol=2 * UNIT)
    del sx


WINDOWS = [dict(kernel_size=3, stride=1), dict(kernel_size=3, stride=2, padding=1),
           dict(kernel_size=2, stride=1, padding=1), dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0))]


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: ",".join(f"{k}={v}" for k, v in w.items()))
def test_overlapping_and_padded_windows(parties, window):
    """Max: exact (padding never wins); avg: one unit, count_include_pad=False too; gradients add up
    over overlapping windows: a position in up to 9 windows, each within one unit of g / count."""
    ws, provider = parties
    torch.manual_seed(11)
    x = torch.round(torch.randn(1, 2, 5, 6) * 3000) / 1000 - 1  # mostly negative: padding must not win
    for fn, extra in ((F.max_pool2d, {}), (F.avg_pool2d, {}), (F.avg_pool2d, dict(count_include_pad=False))):
        xx = x.clone().requires_grad_(True)
        want = fn(xx, **window, **extra)
        (want * want).sum().backward()
        sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
        out = fn(sx, **window, **extra)
        (out * out).sum().backward()
        name = f"{fn.__name__} {extra}"
        assert torch.allclose(out.get().float_precision(), want.detach(), atol=1.01 * UNIT), name
        assert torch.allclose(sx.grad.get().float_precision(), xx.grad, rtol=1e-3, atol=4 * UNIT), name
        del sx, out


def test_windows_torch_takes_and_we_do_not_are_refused(parties2):
    alice, bob, carol = parties2
    sx = torch.randn(1, 1, 4, 4).fix_precision().share(alice, bob, crypto_provider=carol)
    for bad in (lambda: F.max_pool2d(sx, 2, dilation=2), lambda: F.max_pool2d(sx, 3, ceil_mode=True),
                lambda: F.avg_pool2d(sx, 3, ceil_mode=True), lambda: F.max_pool2d(sx.reshape(1, 4, 4), 2)):
        with pytest.raises(sy.SyftError, match="no dilation or ceil_mode"):
            bad()
    del sx
