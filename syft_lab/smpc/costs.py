"""What the last op on a shared value cost, on its node: ``last_op`` (op, rounds, random words).

Every op of a FixedPrecisionTensor (its handlers, approximations included) and of an
AdditiveSharingTensor is measured with ``runtime.totals``: the protocol steps it ran (one round
each, in process too) and the random words drawn on workers for it (the dealer's material:
triples, masks, bits; counts only, never a value). The shared result gets
``last_op = {"op", "rounds", "random_words"}``, which its inspection node shows
(``AdditiveSharingTensor.node_fields``). A product that refills the dealer's pool counts the
words drawn for the next products too; one served from the pool counts none.
"""
from __future__ import annotations

from ..tensors import fixed_precision as fp
from ..tensors.additive_sharing import AdditiveSharingTensor
from ..tensors.fixed_precision import FixedPrecisionTensor
from .engine import ENGINE
from .runtime import totals


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
