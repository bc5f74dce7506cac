"""hook.py's public registration: packages above it (smpc, federated) add and replace methods
through ``register_methods``, hooked or not, and sy.unhook() removes what was added."""
import importlib

import torch
from torch import nn

import syft_lab as sy
from syft_lab.hook import register_methods

hook_module = importlib.import_module("syft_lab.hook")  # (sy.hook is the function)


class Thing:
    pass


def _first(self):
    return "first"


def _second(self):
    return "second"


def test_registered_methods_are_added_by_hook_and_replaced_where_asked():
    was_hooked = hook_module.is_hooked()
    try:
        sy.unhook()
        register_methods(Thing, {"ping": _first})
        assert not hasattr(Thing, "ping")  # not hooked: only in the table
        sy.hook()
        assert Thing().ping() == "first"
        register_methods(Thing, {"ping": _second}, replacing=("ping",))  # hooked: at once
        assert Thing().ping() == "second"
        register_methods(Thing, {"pong": _first})
        assert Thing().pong() == "first"
        sy.unhook()
        assert not hasattr(Thing, "ping") and not hasattr(Thing, "pong")
        # smpc's Module.get (it reconstructs shared parameters) took over hook.py's own
        sy.hook()
        assert nn.Module.get.__module__ == "syft_lab.smpc.methods"
        assert hasattr(torch.Tensor, "fix_precision") and hasattr(torch.optim.SGD, "fix_precision")
    finally:
        sy.unhook()
        hook_module._TABLES.pop(Thing, None)
        if was_hooked:
            sy.hook()
