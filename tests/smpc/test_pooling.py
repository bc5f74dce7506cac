"""Pooling on shared fixed precision tensors against plain torch (2 and 3 parties, and worker
processes), with its gradients: max_pool2d and avg_pool2d with tiling, overlapping, padded, dilated
and ceil_mode windows; adaptive_avg_pool2d and adaptive_max_pool2d at output sizes that do not divide
the input's; unbatched (C, H, W) inputs. A window that reads padding alone (torch's -inf), and a
shared max-pooling window of more than 256 elements, are a clear error.

Tolerances (precision 3, unit 10^-3): max exact; avg one unit (one truncation); gradients of
(out * out).sum() 0.1% + 4 units (g = 2 out is within 2 units, divided by the count within one more)."""
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


def _against_torch(fn, x, ws, provider, **kw):
    """fn(x, **kw) on shares and its gradient of (out * out).sum(), against plain torch's."""
    xx = x.clone().requires_grad_(True)
    want = fn(xx, **kw)
    (want * want).sum().backward()
    sx = x.fix_precision().share(*ws, crypto_provider=provider, requires_grad=True)
    out = fn(sx, **kw)
    (out * out).sum().backward()
    name = f"{fn.__name__} {kw} {list(x.shape)}"
    assert tuple(out.shape) == tuple(want.shape), name
    assert torch.allclose(out.get().float_precision(), want.detach(), atol=1.01 * UNIT), name
    assert torch.allclose(sx.grad.get().float_precision(), xx.grad, rtol=1e-3, atol=4 * UNIT), name
    del sx, out


DILATED_AND_CEIL = [
    (F.max_pool2d, (1, 2, 7, 7), dict(kernel_size=2, dilation=2)),
    (F.max_pool2d, (1, 2, 7, 8), dict(kernel_size=3, stride=2, padding=1, dilation=2)),
    (F.max_pool2d, (1, 2, 5, 5), dict(kernel_size=2, ceil_mode=True)),
    (F.max_pool2d, (1, 2, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, dilation=(1, 2))),
    (F.max_pool2d, (2, 6, 7), dict(kernel_size=3, stride=2, ceil_mode=True)),  # unbatched (C, H, W)
    (F.avg_pool2d, (1, 2, 5, 5), dict(kernel_size=2, ceil_mode=True)),  # the last windows are cut: smaller counts
    (F.avg_pool2d, (1, 2, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    (F.avg_pool2d, (1, 2, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)),
]


@pytest.mark.parametrize("fn, shape, window", DILATED_AND_CEIL,
                         ids=lambda v: v.__name__ if callable(v) else (",".join(f"{k}={a}" for k, a in v.items())
                                                                       if isinstance(v, dict) else str(list(v))))
def test_dilated_and_ceil_mode_windows(parties, fn, shape, window):
    ws, provider = parties
    torch.manual_seed(17)
    x = torch.round(torch.randn(*shape) * 3000) / 1000 - 1  # mostly negative: padding must not win
    _against_torch(fn, x, ws, provider, **window)


ADAPTIVE = [((2, 2, 5, 7), 3), ((2, 2, 5, 7), (4, 5)), ((1, 3, 7, 6), (None, 4)), ((2, 9, 5), (2, 3))]


@pytest.mark.parametrize("fn", [F.adaptive_avg_pool2d, F.adaptive_max_pool2d], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape, size", ADAPTIVE, ids=lambda v: str(v))
def test_adaptive_pooling_at_sizes_that_do_not_divide(parties, fn, shape, size):
    """Windows of different lengths, overlapping where the size does not divide (5 -> 3 reads [0, 2), [1, 4),
    [3, 5)); the average divides each by its own count."""
    ws, provider = parties
    torch.manual_seed(19)
    x = torch.round(torch.randn(*shape) * 3000) / 1000
    _against_torch(fn, x, ws, provider, output_size=size)


def test_pooling_of_a_fixed_precision_tensor_not_shared():
    """The same windows on a fixed precision tensor that is not shared: max exact, avg rounded to nearest."""
    torch.manual_seed(23)
    x = torch.round(torch.randn(2, 2, 7, 8) * 3000) / 1000
    for fn, kw in ((F.max_pool2d, dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)),
                   (F.adaptive_avg_pool2d, dict(output_size=(3, 5))), (F.adaptive_max_pool2d, dict(output_size=3))):
        xx = x.clone().requires_grad_(True)
        want = fn(xx, **kw)
        (want * want).sum().backward()
        fx = x.fix_precision().requires_grad_(True)
        out = fn(fx, **kw)
        (out * out).sum().backward()
        assert torch.allclose(out.float_precision(), want.detach(), atol=1.01 * UNIT), fn.__name__
        assert torch.allclose(fx.grad.float_precision(), xx.grad, rtol=1e-3, atol=4 * UNIT), fn.__name__


def test_a_window_of_padding_alone_is_refused(parties2):
    """torch gives -inf where a dilated window reads padding alone; fixed precision has no -inf: a SyftError."""
    alice, bob, carol = parties2
    window = dict(kernel_size=(2, 1), padding=(1, 0), dilation=(2, 1))
    assert torch.isinf(F.max_pool2d(torch.randn(1, 1, 1, 4), **window)).all()
    sx = torch.randn(1, 1, 1, 4).fix_precision().share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="reads padding alone"):
        F.max_pool2d(sx, **window)
    with pytest.raises(RuntimeError, match="pad should be at most half"):  # torch's own checks, as in plain torch
        F.max_pool2d(sx, 2, padding=2)
    big = torch.randn(1, 1, 17, 17).fix_precision().share(alice, bob, crypto_provider=carol)
    with pytest.raises(sy.SyftError, match="max-pooling compares every pair of a window: at most 256"):
        F.adaptive_max_pool2d(big, 1)  # one window of 289 elements
    del sx, big


def test_dilated_ceil_and_adaptive_pooling_on_worker_processes(remote_parties):
    alice, bob, carol = remote_parties
    torch.manual_seed(29)
    x = torch.round(torch.randn(1, 2, 6, 7) * 3000) / 1000 - 1
    _against_torch(F.max_pool2d, x, [alice, bob], carol, kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)
    _against_torch(F.adaptive_avg_pool2d, x, [alice, bob], carol, output_size=(4, 3))
    _against_torch(F.adaptive_max_pool2d, x, [alice, bob], carol, output_size=(4, 5))
