"""Every known worker by id: what sy.world() shows and what ids in messages resolve to.

The registry itself lives in the leaf module syft_lab.commands (tensors resolve a pointer's
holder there without importing workers); these are the same functions.
"""
from ..commands import _workers, all_workers, get_worker, lookup, register, unregister

__all__ = ["_workers", "all_workers", "get_worker", "lookup", "register", "unregister"]
