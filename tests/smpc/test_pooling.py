"""max_pool2d and avg_pool2d on shared fixed precision tensors against plaintext (2 and 3
parties), with their gradients; windows they do not take are a clear error."""
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


def test_windows_that_do_not_tile_are_refused(parties2):
    alice, bob, carol = parties2
    sx = torch.randn(1, 1, 4, 4).fix_precision().share(alice, bob, crypto_provider=carol)
    for bad in (lambda: F.max_pool2d(sx, 2, stride=1), lambda: F.max_pool2d(sx, 3), lambda: F.avg_pool2d(sx, 2, padding=1)):
        with pytest.raises(sy.SyftError, match="windows that tile"):
            bad()
    del sx
