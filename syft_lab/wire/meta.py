"""Shape inference on meta tensors, the one way a worker's checks run an op before it runs.

An op run on meta copies of its arguments (shapes, strides, dtypes, no data) tells its outputs'
metadata and raises torch's own shape errors, at no cost in memory. The one rule: in such a run,
every device is meta. A factory's ``device`` (given, defaulted or positional) and the device an
op implies inside its own decomposition: ``_to_cpu`` copies each tensor to the CPU through
``_to_copy(device=cpu)``, and on a meta copy of a 2**31-element broadcast view that was a real
4 GiB CPU tensor, made by the check itself, before any quota was asked (the seed-45 fuzz: the
worker's cgroup killed it). The mode below sees every aten call of the run, the ones a
composite op makes included, and hands each the meta device.
"""
from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

META = torch.device("meta")

# id(op) -> (op, the index of its ``device`` argument or -1, whether that is keyword-only)
_device_args: dict[int, tuple] = {}


def meta_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=META)


def to_meta(a):
    """A tensor as a meta tensor of its shape, strides and dtype; lists and tuples elementwise."""
    if isinstance(a, torch.Tensor):
        return meta_like(a)
    if type(a) in (list, tuple):
        return [to_meta(b) for b in a]
    return a


def _device_arg(op) -> tuple:
    entry = _device_args.get(id(op))
    if entry is None or entry[0] is not op:
        index, kwarg_only = -1, False
        for i, a in enumerate(op._schema.arguments):
            if a.name == "device":
                index, kwarg_only = i, a.kwarg_only
        entry = _device_args[id(op)] = (op, index, kwarg_only)
    return entry


def on_meta_device(op, args, kwargs: dict):
    """``op``'s arguments with its device argument, if it has one, set to meta."""
    _, index, kwarg_only = _device_arg(op)
    if index < 0:
        return args, kwargs
    if index < len(args) and not kwarg_only:
        return (*args[:index], META, *args[index + 1:]), kwargs
    return args, {**kwargs, "device": META}


class OnMeta(TorchDispatchMode):
    """Every aten call made under it runs with the meta device for any device argument."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        args, kwargs = on_meta_device(func, args, kwargs or {})
        return func(*args, **kwargs)


def run_on_meta(op, margs, mkw: dict | None = None):
    """``op`` on meta arguments (``to_meta``'s), every device meta: its outputs, or torch's error."""
    with OnMeta():
        return op(*margs, **(mkw or {}))
