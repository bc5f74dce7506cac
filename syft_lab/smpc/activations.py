"""logsumexp, softplus, elu (selu, celu) and expm1 on fixed precision tensors (shared or not), from the approximations of
approximations.py (exp, log, sigmoid, log sigmoid) and relu's sign-bit circuit. Each is written so that
every approximation stays in its domain for every input:

- ``logsumexp(x, dims)`` = m + log(sum exp(x - m)), m = amax over the dims: every exp is of a value
  <= 0 and the sum lies in [1, n] (log's domain [0.1, 50]: n <= 50 elements per sum);
- ``softplus(x, beta)`` = -log_sigmoid(-beta x) / beta = max(x, 0) + log(1 + exp(-beta |x|)) / beta:
  the log of a value in [1, 2]; its gradient g sigmoid(beta x);
- ``elu(x, alpha)`` = relu(x) + alpha (exp(min(x, 0)) - 1): one relu, then exp of a value <= 0;
  its gradient g where x > 0, g alpha exp(x) elsewhere (one comparison).

torch's ``threshold`` of softplus (linear above it) needs no branch here: the same formula gives x
there within its error. Errors and rounds: docs/secure-computation.md ("Every op").
"""
from __future__ import annotations

import torch

from ..tensors.fixed_precision import register_handlers
from ..tensors.fixed_precision_indexing import _in_place
from . import approximations as ap

aten = torch.ops.aten


def _logsumexp(func, args, kwargs):
    x = args[0]
    dims = args[1] if len(args) > 1 else kwargs.get("dim", [])
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if x.dim() == 0:
        return x.clone()
    dims = sorted({d % x.dim() for d in dims}) if dims else list(range(x.dim()))
    m = torch.amax(x, dims, keepdim=True)
    out = m + torch.log(torch.exp(x - m).sum(dims, keepdim=True))
    return out if keepdim else out.squeeze(dims)


def _softplus(func, args, kwargs):
    x = args[0]
    beta = args[1] if len(args) > 1 else kwargs.get("beta", 1)
    y = x * beta if beta != 1 else x
    out = -ap._log_sigmoid(None, (-y,), {})[0]
    return out / beta if beta != 1 else out


def _softplus_backward(func, args, kwargs):
    grad, x = args[0], args[1]
    beta = args[2] if len(args) > 2 else kwargs.get("beta", 1)
    return grad * torch.sigmoid(x * beta if beta != 1 else x)


def _elu_params(args, kwargs, start):
    names = ("alpha", "scale", "input_scale")
    return [args[start + i] if len(args) > start + i else kwargs.get(n, 1) for i, n in enumerate(names)]


def _elu(func, args, kwargs):
    x = args[0]
    alpha, scale, input_scale = _elu_params(args, kwargs, 1)
    positive = torch.relu(x)
    negative = torch.exp((x - positive) * input_scale) - 1  # exp(min(x, 0)) - 1: 0 where x > 0
    out = positive + negative * alpha
    return out * scale if scale != 1 else out


def _elu_backward(func, args, kwargs):
    """elu_backward(g, alpha, scale, input_scale, is_result, self_or_result)."""
    grad = args[0]
    alpha, scale, input_scale = _elu_params(args, kwargs, 1)
    is_result, y = args[4], args[5]
    above = y > 0  # 0/1 bits: the same sign either way (elu keeps the sign)
    if is_result:  # y = elu(x): where x <= 0 the derivative is input_scale (y + alpha scale)
        below = (y + alpha * scale) * input_scale
    else:
        below = torch.exp((y - torch.relu(y)) * input_scale) * (alpha * scale * input_scale)
    return grad * (above * scale + (1 - above) * below)


def _celu(func, args, kwargs):
    """celu(x, alpha) = elu(x, alpha, 1, 1 / alpha)."""
    alpha = args[1] if len(args) > 1 else kwargs.get("alpha", 1.0)
    return _elu(None, (args[0], alpha, 1, 1 / alpha), {})


register_handlers({aten.logsumexp: _logsumexp, aten.softplus: _softplus, aten.softplus_backward: _softplus_backward,
                   aten.elu: _elu, aten.elu_backward: _elu_backward, aten.celu: _celu,
                   aten.expm1: lambda func, args, kwargs: torch.exp(args[0]) - 1,
                   aten.elu_: _in_place, aten.celu_: _in_place, aten.expm1_: _in_place})
