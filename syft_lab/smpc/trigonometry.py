"""cos and sin of fixed precision tensors (shared or not), as CrypTen computes them: through e^(ix).

CrypTen (crypten/common/functions/approximations.py, ``_eix``/``cossin``) takes e^(ix) as the limit
(1 + ix / 2^10)^(2^10): ten complex squarings (a + bi)^2 = (a^2 - b^2) + 2ab i, each three products
in one round (here: one Beaver square of the stack [a, b, a + b], 2ab = (a + b)^2 - a^2 - b^2). Its amplitude drifts: |1 + ix/n|^n = (1 + x^2/n^2)^(n/2), about 1 + x^2 / 2048 (0.5% at
pi, 5% at 10). Here the same squarings start from a better e^(it), t = x / 2^8: its Taylor terms
cos t = 1 - t^2/2 + t^4/24 and sin t = t - t^3/6 (two rounds: t^2, then t^3 and t^4 in one product),
then 8 squarings: ten rounds of products, as CrypTen's, and the error is that of the Taylor terms
carried through the squarings, 2^8 (t^5/120) = x^5 / (120 * 2^32), below 10^-4 for |x| <= 32 and
2·10^-3 at 64 (then growing as x^5), plus the truncations'. They run at a working scale of at least
2^19 (base 10: precision 6), where t's last place times 2^8 costs 3·10^-4 at most: the measured
error is below 2·10^-3 on |x| <= 32 (docs/secure-computation.md, "Every op"). Gradients are torch's
(-sin x, cos x): the same approximation, run on the backward.
"""
from __future__ import annotations

import torch

from ..tensors.fixed_precision import FixedPrecisionTensor as FPT
from ..tensors.fixed_precision import register_handlers
from ..tensors.fixed_precision_indexing import _in_place
from .approximations import down

aten = torch.ops.aten
TRIG_SCALE = 2**19  # the working scale (at least): t = x / 2^8 keeps 11 more bits than x
DOUBLINGS = 8  # squarings of e^(i x / 2^8); with the two Taylor rounds, CrypTen's ten rounds


def at_scale(x: FPT, least: int) -> FPT:
    """x at the first precision whose scale is at least ``least`` (the child times base^k: exact)."""
    p = x.precision
    while x.base ** p < least:
        p += 1
    k = x.base ** (p - x.precision)
    return x if k == 1 else FPT(x.child * k, x.base, p)


def cossin(x: FPT) -> tuple[FPT, FPT]:
    """(cos x, sin x) at x's scale: e^(it) by Taylor terms, t = x / 2^8, squared 8 times."""
    w = at_scale(x, TRIG_SCALE)
    t = w / 2**DOUBLINGS
    t2 = t * t
    t3, t4 = torch.unbind(torch.stack([t, t2]) * t2)  # one round for both
    z = torch.stack([1 - t2 / 2 + t4 / 24, t - t3 / 6])  # (re, im) of e^(it)
    combine = torch.tensor([[1, -1, 0], [-1, -1, 1]]).view([2, 3] + [1] * x.dim())
    for _ in range(DOUBLINGS):
        stacked = torch.cat([z, z.sum(0, keepdim=True)])  # re, im, re + im
        squares = stacked * stacked  # one Beaver square of the stack: one round
        # (re + i im)^2 = (re^2 - im^2) + i ((re + im)^2 - re^2 - im^2): public integers, exact
        z = (squares.unsqueeze(0) * combine).sum(1)
    return torch.unbind(down(z, x))


def _cos(func, args, kwargs):
    return cossin(args[0])[0]


def _sin(func, args, kwargs):
    return cossin(args[0])[1]


register_handlers({aten.cos: _cos, aten.sin: _sin, aten.cos_: _in_place, aten.sin_: _in_place})
