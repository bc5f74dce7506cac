"""Every op of issue 30 on a grid of inputs, on 2 and 3 parties (VirtualWorkers), on fixed precision
tensors that are not shared, and a subset on worker processes (2 and 3 parties), against plaintext within the error docs/secure-computation.md
states for it ("Every op": err <= rel * |want| + abs, per element).

The grids take each op's documented domain: negatives, zero, ties and equal pairs for the exact
ops, [0.1, 50] for log and the square roots, |x| in [0.1, 50] for the reciprocal, [-6, 4] for exp.
The inputs are multiples of 10^-3, so plaintext sees the values the encoding holds."""
import pytest
import torch
import torch.nn.functional as F

import syft_lab as sy

sy.hook()
UNIT = 1e-3


def grid(lo, hi, shape=(4, 6), seed=0):
    """``numel`` values spread over [lo, hi], in a seeded order, rounded to the encoding."""
    n = torch.Size(shape).numel()
    g = torch.Generator().manual_seed(seed)
    v = torch.linspace(lo, hi, n)[torch.randperm(n, generator=g)]
    return (torch.round(v * 1000) / 1000).view(shape)


def general():
    x = grid(-20, 20)
    x[0, :3] = 0.0  # zeros
    x[1, 1] = x[1, 4]  # a tie
    return x


def other():
    """A second operand: equal to the first at every third position."""
    x, y = general(), grid(-20, 20, seed=1)
    return torch.where(torch.arange(24).view(4, 6) % 3 == 0, x, y)


def positive():
    return grid(0.1, 50)


def nonzero():
    return grid(0.1, 50) * torch.where(torch.arange(24).view(4, 6) % 2 == 0, 1.0, -1.0)


def factors():
    """Factors of both signs with |x| in [0.5, 1.5]: products of 6 stay in [1/64, 12]."""
    return grid(0.5, 1.5, seed=4) * torch.where(torch.arange(24).view(4, 6) % 5 == 0, -1.0, 1.0)


def images():
    return grid(-20, 20, (2, 2, 4, 6), seed=3)


def exact(x, want):
    """Exact to the encoding: the float32 roundings of the inputs and of the decoded value alone
    (x % 3 of 12.345 in float32 differs from 0.345 by 6·10^-7), far below a unit"""
    return 2.4e-7 * (want.double().abs() + x.abs().max().item())


def units(k):
    return lambda x, want: k * UNIT


def rel(r, a):
    return lambda x, want: r * want.double().abs() + a


def exp_bound(x, want):  # the limit approximation: relative x^2 / 256, plus 5·10^-3
    return want.double() * x.double() ** 2 / 256 + 5e-3


def var_bound(x, want):  # the mean's unit, each squared deviation |d|·10^-3 + 10^-3 (docs: var)
    return 2 * (x - x.mean()).abs().max().item() * UNIT + 5 * UNIT


def _std(t):
    return t.std(1)


def _chunks(t):
    return torch.cat([c * (i + 1) for i, c in enumerate(torch.chunk(t, 3, 1))], 1)


def _unbound(t):
    return torch.stack([r * (i + 1) for i, r in enumerate(t.unbind(0))], 1)


# name: (inputs, the op, the error bound); each op runs on shared inputs and on plaintext
OPS = {
    "eq": ((general, other), lambda a, b: a == b, exact),
    "ne": ((general, other), lambda a, b: a != b, exact),
    "eq scalar": ((general,), lambda a: a == 0, exact),
    "gt": ((general, other), lambda a, b: a > b, exact),
    "lt": ((general, other), lambda a, b: a < b, exact),
    "ge": ((general, other), lambda a, b: a >= b, exact),
    "le": ((general, other), lambda a, b: a <= b, exact),
    "gt public": ((general,), lambda a: a > 1.5, exact),
    "min": ((general,), lambda a: a.min(), exact),
    "min(dim)": ((general,), lambda a: a.min(1)[0], exact),
    "argmin": ((general,), lambda a: a.argmin(1), exact),
    "argmin(dim 0)": ((general,), lambda a: a.argmin(0), exact),
    "abs": ((general,), lambda a: a.abs(), exact),
    "sign": ((general,), lambda a: a.sign(), exact),
    "var": ((general,), lambda a: a.var(1), var_bound),
    "std": ((lambda: general() / 4,), _std, rel(0.01, 0.05)),
    "sqrt": ((positive,), lambda a: a.sqrt(), rel(0.01, 2e-3)),
    "rsqrt": ((positive,), lambda a: a.rsqrt(), rel(0.01, 3e-3)),
    "remainder 3": ((general,), lambda a: a % 3, exact),
    "remainder 0.7": ((general,), lambda a: a % 0.7, exact),
    "remainder -2.5": ((general,), lambda a: torch.remainder(a, -2.5), exact),
    "exp": ((lambda: grid(-6, 4),), lambda a: a.exp(), exp_bound),
    "log": ((positive,), lambda a: a.log(), rel(0.02, 6e-3)),
    "reciprocal": ((nonzero,), lambda a: a.reciprocal(), rel(0.01, 2e-3)),
    "div shared": ((lambda: grid(-3, 3), nonzero), lambda a, b: a / b, rel(0.01, 3e-3)),
    "div public tensor": ((general,), lambda a: a / torch.tensor([3.0, 7.0, -0.3, 1.5, 9.0, 0.25]),
                          lambda x, want: 1.01 * UNIT + x.double().abs() * 0.5 * UNIT / 1000),
    "sigmoid": ((lambda: grid(-10, 10),), lambda a: a.sigmoid(), units(4)),
    "tanh": ((lambda: grid(-10, 10),), lambda a: a.tanh(), units(8)),
    "softmax": ((lambda: grid(-5, 5),), lambda a: F.softmax(a, 1), units(4)),
    "softmax dim 0": ((lambda: grid(-5, 5),), lambda a: F.softmax(a, 0), units(4)),
    "log_softmax": ((lambda: grid(-5, 5),), lambda a: F.log_softmax(a, 1), rel(0.01, 1e-2)),
    "max_pool2d": ((images,), lambda a: F.max_pool2d(a, 2), exact),
    "max_pool2d 3x3 padded": ((images,), lambda a: F.max_pool2d(a, 3, stride=1, padding=1), exact),
    "avg_pool2d": ((images,), lambda a: F.avg_pool2d(a, 2), units(1.01)),
    "avg_pool2d (2, 3)": ((images,), lambda a: F.avg_pool2d(a, (2, 3)), units(1.01)),
    # issue 41: pooling by a public window table (dilation, ceil_mode, adaptive sizes that do not divide),
    # transposed convolutions (one product by the convolution's protocol, transposed=True)
    "max_pool2d dilation 2, ceil_mode": ((images,), lambda a: F.max_pool2d(a, 2, dilation=2, ceil_mode=True), exact),
    "max_pool2d 3x3 stride 2 padded, ceil_mode": ((images,), lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True),
                                                  exact),
    "avg_pool2d 3x3 stride 2 padded, ceil_mode": ((images,), lambda a: F.avg_pool2d(a, 3, 2, 1, ceil_mode=True),
                                                  units(1.01)),
    "adaptive_avg_pool2d (3, 4)": ((images,), lambda a: F.adaptive_avg_pool2d(a, (3, 4)), units(1.01)),
    "adaptive_max_pool2d (3, 5)": ((images,), lambda a: F.adaptive_max_pool2d(a, (3, 5)), exact),
    "conv_transpose2d": ((images, lambda: grid(-1, 1, (2, 3, 3, 3), seed=5)),
                         lambda a, w: F.conv_transpose2d(a, w, stride=2, padding=1, output_padding=1), units(1.01)),
    "conv_transpose1d groups 2": ((lambda: grid(-20, 20, (2, 4, 6), seed=6), lambda: grid(-1, 1, (4, 1, 3), seed=7)),
                                  lambda a, w: F.conv_transpose1d(a, w, stride=2, groups=2), units(1.01)),
    "chunk": ((general,), _chunks, exact),
    "unbind": ((general,), _unbound, exact),
    "roll": ((general,), lambda a: a.roll((1, -2), (0, 1)), exact),
    "roll flat": ((general,), lambda a: a.roll(5), exact),
    # issue 41: a public index or condition (each party on its own share), clamp by two relus
    "clamp": ((general,), lambda a: a.clamp(-5.0, 7.5), exact),
    "hardtanh": ((general,), lambda a: F.hardtanh(a, -2.5, 3.0), exact),
    "relu6": ((general,), F.relu6, exact),
    "where public": ((general, other), lambda a, b: torch.where(general() > other(), a, b), exact),
    "cumsum": ((general,), lambda a: a.cumsum(1), exact),
    "trace": ((general,), lambda a: a.trace(), exact),
    "gather": ((general,), lambda a: a.gather(1, torch.tensor([[5, 0], [1, 1], [2, 4], [3, 0]])), exact),
    "scatter_add": ((general, other), lambda a, b: a.scatter_add(0, torch.tensor([[3, 0, 3, 1, 2, 0]]), b[:1]),
                    exact),
    "index_add": ((general, other), lambda a, b: a.index_add(1, torch.tensor([0, 5, 0]), b[:, :3]), exact),
    "pow 1.5": ((lambda: grid(0.1, 20),), lambda a: a ** 1.5, rel(0.01, 3e-3)),
    "norm": ((lambda: general() / 8,), lambda a: torch.norm(a), rel(0.01, 3e-3)),
    # issue 41: products of many factors (a log-depth tree), cos/sin (e^(ix) by squarings), amax/amin over dims
    "prod(dim 1)": ((factors,), lambda a: a.prod(1), rel(0.01, 3e-3)),
    "prod": ((lambda: grid(0.8, 1.25) * torch.where(torch.arange(24).view(4, 6) % 7 == 0, -1.0, 1.0),),
             lambda a: a.prod(), rel(0.01, 3e-3)),
    "cumprod": ((factors,), lambda a: a.cumprod(1), rel(0.01, 3e-3)),
    "cos": ((lambda: grid(-32, 32),), torch.cos, units(2)),
    "sin": ((lambda: grid(-32, 32),), torch.sin, units(2)),
    "amax(dims 0, 1)": ((general,), lambda a: a.amax((0, 1)), exact),
    "amax(dim 1)": ((general,), lambda a: a.amax(1), exact),
    "amin(dim 0, keepdim)": ((general,), lambda a: a.amin(0, keepdim=True), exact),
    "triu": ((general,), lambda a: a.triu(1), exact),
    "masked_select": ((general,), lambda a: a.masked_select(general() > 1.0), exact),
    "logsumexp": ((lambda: grid(-8, 8),), lambda a: torch.logsumexp(a, 1), units(15)),
    "softplus": ((lambda: grid(-8, 8),), F.softplus, units(8)),
    "elu": ((lambda: grid(-8, 8),), F.elu, units(6)),
}


def run(name, parties, provider):
    inputs, op, bound = OPS[name]
    xs = [make() for make in inputs]
    if parties is None:  # fixed precision, not shared
        shared = [x.fix_precision() for x in xs]
        out = op(*shared)
        # argmax/argmin of a public value: torch's int64 indices, as plain torch gives them
        got = (out.float_precision() if isinstance(out, sy.FixedPrecisionTensor) else out).double()
    else:
        shared = [x.fix_precision().share(*parties, crypto_provider=provider) for x in xs]
        out = op(*shared)
        got = out.get().float_precision().double()
    want = op(*[x.double() for x in xs]).double()  # in float64; comparisons: 0/1; argmin: indices
    err = (got - want).abs()
    del shared, out
    limit = bound(xs[0], want)
    limit = torch.as_tensor(limit, dtype=torch.float64) + 1e-9
    assert got.shape == want.shape, name
    assert bool((err <= limit).all()), (f"{name}: worst error {err.max().item():.4g} where the bound is "
                                        f"{torch.broadcast_to(limit, err.shape).flatten()[err.argmax()].item():.4g}")


@pytest.mark.parametrize("name", list(OPS))
def test_op_on_a_grid(parties, name):
    ws, provider = parties
    run(name, ws, provider)


@pytest.mark.parametrize("name", list(OPS))
def test_op_on_a_grid_fixed_precision_not_shared(name):
    """The same ops on a FixedPrecisionTensor over a plain int64 child (the same handlers, the ring
    ops run here): the same bounds."""
    run(name, None, None)


REMOTE = ["eq", "ne", "ge", "argmin", "abs", "sign", "remainder 0.7", "reciprocal", "div public tensor", "sqrt",
          "softmax", "log_softmax", "max_pool2d 3x3 padded", "avg_pool2d", "roll", "unbind",
          "adaptive_avg_pool2d (3, 4)", "max_pool2d dilation 2, ceil_mode"]


@pytest.mark.network
@pytest.mark.parametrize("name", REMOTE)
def test_op_on_worker_processes_2_parties(remote_parties, name):
    alice, bob, carol = remote_parties
    run(name, (alice, bob), carol)


@pytest.mark.network
@pytest.mark.parametrize("name", ["eq", "abs", "remainder 3", "reciprocal", "softmax", "max_pool2d", "chunk"])
def test_op_on_worker_processes_3_parties(remote_parties3, name):
    alice, bob, dave, carol = remote_parties3
    run(name, (alice, bob, dave), carol)
