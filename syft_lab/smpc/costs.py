"""What the last op on a shared value cost, on its node: ``last_op`` (op, rounds, random words).

Every op of a FixedPrecisionTensor (its handlers, approximations included) and of an
AdditiveSharingTensor is measured with ``runtime.totals``: the protocol steps it ran (one round
each, in process too) and the random words drawn on workers for it (the dealer's material:
triples, masks, bits; counts only, never a value). The shared result gets
``last_op = {"op", "rounds", "random_words"}`` (an approximation adds ``"approximation":
{"method", "iterations"}``), which its inspection node shows (``AdditiveSharingTensor.node_fields``)
and its display lines say (so every chain view draws it). A product that refills the dealer's pool counts the
words drawn for the next products too; one served from the pool counts none.
"""
from __future__ import annotations

from ..tensors import fixed_precision as fp
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.fixed_precision import FixedPrecisionTensor
from . import approximations as ap
from .engine import ENGINE
from .trigonometry import DOUBLINGS
from .runtime import totals

# An approximation's method and iterations (CrypTen's; syft_lab/smpc/approximations.py), on its
# result's ``last_op`` beside its rounds: {"method", "iterations"}
APPROXIMATIONS = {
    "exp": ("limit (1 + x/2^8)^(2^8): squarings", ap.EXP_ITERS),
    "reciprocal": ("Newton-Raphson from 3 exp(1 - 2x) + 0.003", ap.RECIPROCAL_ITERS),
    "sqrt": ("x · inverse square root (Newton-Raphson)", ap.SQRT_ITERS),
    "rsqrt": ("inverse square root, Newton-Raphson", ap.SQRT_ITERS),
    "std": ("sqrt(var): inverse square root, Newton-Raphson", ap.SQRT_ITERS),
    "log": (f"Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "sigmoid": ("1 / (1 + exp(-|x|)): Newton-Raphson reciprocal", ap.SIGMOID_ITERS),
    "tanh": ("2 sigmoid(2x) - 1: Newton-Raphson reciprocal", ap.SIGMOID_ITERS),
    "_softmax": ("exp(x - max) · reciprocal(sum): Newton-Raphson", ap.RECIPROCAL_ITERS),
    "_log_softmax": (f"(x - max) - log(sum exp(x - max)): Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "binary_cross_entropy": (f"two logs: Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "log_sigmoid_forward": (f"min(x, 0) - log(1 + exp(-|x|)): Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "cos": ("e^(ix): Taylor terms at x / 2^8, then complex squarings", DOUBLINGS),
    "sin": ("e^(ix): Taylor terms at x / 2^8, then complex squarings", DOUBLINGS),
    "logsumexp": (f"max + log(sum exp(x - max)): Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "softplus": (f"-log_sigmoid(-beta x) / beta: Householder of order {ap.LOG_ORDER}", ap.LOG_ITERS),
    "elu": ("relu(x) + alpha (exp(min(x, 0)) - 1): limit (1 + x/2^8)^(2^8): squarings", ap.EXP_ITERS),
    "celu": ("elu at input scale 1 / alpha: limit (1 + x/2^8)^(2^8): squarings", ap.EXP_ITERS),
    "expm1": ("exp(x) - 1: limit (1 + x/2^8)^(2^8): squarings", ap.EXP_ITERS),
}


def _approximation(label: str, args):
    if label == "div" and len(args) > 1 and isinstance(args[1], FixedPrecisionTensor) and args[1].shared:
        return {"method": "a · reciprocal(b): Newton-Raphson", "iterations": ap.RECIPROCAL_ITERS}
    found = APPROXIMATIONS.get(label)
    return None if found is None else {"method": found[0], "iterations": found[1]}


def _shared_results(out):
    if isinstance(out, FixedPrecisionTensor):
        out = out.child
    if isinstance(out, AdditiveSharingTensor):
        yield out
    elif type(out) in (tuple, list):
        for o in out:
            yield from _shared_results(o)


def _label(func) -> str:
    name = getattr(func, "overloadpacket", func)
    return str(getattr(name, "__name__", name))


def measured(handler):
    """``handler(func, args, kwargs)`` recording its cost on the shared values it returns."""
    def run(func, args, kwargs):
        rounds, words = totals["rounds"], totals["random_words"]
        out = handler(func, args, kwargs)
        if totals["rounds"] != rounds:  # a local op (a view, a sum) leaves the last protocol's cost in place
            cost = {"op": _label(func), "rounds": totals["rounds"] - rounds,
                    "random_words": totals["random_words"] - words}
            approximation = _approximation(cost["op"], args)
            if approximation is not None:
                cost["approximation"] = approximation
            for shared in _shared_results(out):
                shared.last_op = cost
        return out

    run.__wrapped__ = handler
    return run


def _install() -> None:
    for key, handler in list(fp._HANDLERS.items()):
        if not hasattr(handler, "__wrapped__"):
            fp._HANDLERS[key] = measured(handler)
    if not hasattr(ENGINE.dispatch, "__wrapped__"):
        ENGINE.dispatch = measured(ENGINE.dispatch)


_install()
