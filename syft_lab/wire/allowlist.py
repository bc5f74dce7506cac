"""The op allow-list: which op names a worker will run for a client.

A command names its op as text, e.g. ``"aten.add.Tensor"``. The name resolves to an op only
if every rule holds:

1. It is exactly ``aten.<name>.<overload>``: the ``aten`` namespace (PyTorch's tensor
   operators), identifier characters only, no dunder name. Builtins, ``os.*``, ``torch.load``
   /``torch.save``, attribute chains and other namespaces never resolve.
2. ``torch.ops.aten.<name>`` is an operator (not another attribute of the namespace object)
   and ``<overload>`` is one of its registered overloads: no getattr walk beyond that.
3. The schema takes or returns a Tensor. This leaves out the TorchScript helpers registered
   under ``aten`` (``aten::save``, ``aten::warn``, string and list methods, ...).
4. No argument is a Storage, Stream, Event or Generator: ops that reach memory or devices
   other than through tensors (``aten.set_.source_Storage``, ``aten.record_stream``).
5. The name is not denied explicitly: ops that read files (``from_file``), print, pin or
   share memory, touch global state (seeds, flags) or assert asynchronously.

Every other aten op computes on tensors only and may run, including in-place and ``out=``
overloads (they write to tensors the caller already holds on that worker) and backward ops
(autograd through pointers sends them). Memory a client can make a worker allocate is bounded
only by the worker's machine: a token holder is trusted with the worker's CPU and memory,
never with its files or its Python interpreter.
"""
from __future__ import annotations

import re

import torch

from ..errors import SyftError

_NAME = re.compile(r"^aten\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")

DENIED_NAMES = frozenset({
    "from_file",  # reads a file
    "save", "load",  # TorchScript file helpers, should they ever resolve
    "_print", "warn",  # writes to the worker's output
    "pin_memory", "_pin_memory", "is_pinned", "share_memory_", "_share_memory_",
    "set_", "set", "record_stream",  # storages and streams
    "manual_seed", "seed", "initial_seed",  # global generator state
    "_assert_async", "_assert_scalar", "_functional_assert_async", "_functional_assert_scalar",
    "_print_", "Delete",
})
DENIED_PREFIXES = ("_set_", "_use_", "_cudnn", "cudnn_", "miopen", "_miopen", "_cufft", "_cuda", "_mps",
                   "_nnpack", "_cslt", "_fused_sdp_choice")
_DENIED_ARG_TYPES = ("Storage", "Stream", "Event", "Generator")


class OpNotAllowedError(SyftError):
    """An op name that is not on the allow-list (nothing ran)."""


_cache: dict[str, object] = {}


def _check_schema(name: str, op) -> None:
    schema = op._schema
    arg_types = [str(a.type) for a in schema.arguments]
    all_types = arg_types + [str(r.type) for r in schema.returns]
    if not any("Tensor" in t for t in all_types):
        raise OpNotAllowedError(f"{name} does not compute on tensors: not allowed")
    for t in arg_types:
        if any(bad in t for bad in _DENIED_ARG_TYPES) and t != "Generator?":
            raise OpNotAllowedError(f"{name} takes a {t}: not allowed")


def resolve(name) -> torch._ops.OpOverload:
    """The aten OpOverload named ``name`` if it is allowed; OpNotAllowedError otherwise."""
    if type(name) is not str or len(name) > 200:
        raise OpNotAllowedError(f"an op is named by a string such as 'aten.add.Tensor', got {type(name).__name__}")
    op = _cache.get(name)
    if op is not None:
        return op
    m = _NAME.match(name)
    if not m:
        raise OpNotAllowedError(f"op {name!r} is not allowed: only aten.<op>.<overload> names are")
    base, overload = m.groups()
    if base.startswith("__") or overload.startswith("__"):
        raise OpNotAllowedError(f"op {name!r} is not allowed: dunder names never resolve")
    if base in DENIED_NAMES or base.startswith(DENIED_PREFIXES):
        raise OpNotAllowedError(f"op {name!r} is denied: it reaches beyond tensors (files, devices, "
                                f"global state or output)")
    try:
        packet = getattr(torch.ops.aten, base)
    except (AttributeError, RuntimeError):
        raise OpNotAllowedError(f"op {name!r} does not exist") from None
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        raise OpNotAllowedError(f"{name!r} is not an op")
    if overload not in packet.overloads():
        raise OpNotAllowedError(f"op {name!r} does not exist (overloads of aten.{base}: "
                                f"{', '.join(packet.overloads())})")
    op = getattr(packet, overload)
    _check_schema(name, op)
    _cache[name] = op
    return op


def is_allowed(name) -> bool:
    try:
        resolve(name)
        return True
    except OpNotAllowedError:
        return False


def op_name(op) -> str:
    """The wire name of an OpOverload, e.g. 'aten.add.Tensor'."""
    return str(op)
