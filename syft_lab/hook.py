"""sy.hook(): add syft methods (send, send_, tag, describe, copy) to torch.Tensor and nn.Module.

It wraps or patches no torch op and installs no mode, so plain tensors pay nothing. The one
method it replaces is ``Tensor.__repr__`` (not an op): a tagged tensor prints its tags and
description below it, as in PySyft 0.2; every other tensor prints as torch prints it.
``sy.unhook()`` removes exactly what hook() added. Both are idempotent. Packages above this one
add their own methods to the tables with ``register_methods`` (smpc: ``fix_precision``;
federated: ``Dataset.federate``). A worker may be named by its id (``model.send("alice")``).
"""
from __future__ import annotations

import torch
from torch.utils.data import Dataset

from .errors import SyftError
from .tensors.base import tag_lines
from .workers.base import resolve_worker
from .workers.modules import copy_module, get_module, move_module, send_module


def _tensor_send(self, worker):
    """A pointer to a copy of this tensor on ``worker`` (a worker or its id); this tensor is left as it was."""
    return resolve_worker(worker).send(self)


def _tensor_send_(self, worker):
    """In place: this very Python object becomes the pointer (the data is copied to ``worker``)."""
    ptr = resolve_worker(worker).send(self)
    try:
        torch.utils.swap_tensors(self, ptr)
    except RuntimeError as e:
        ptr.get()  # nothing left behind on the worker
        raise SyftError(f"send_ cannot turn this tensor into a pointer in place ({e}); "
                        f"use p = x.send(worker) instead") from None
    return self


def _tensor_tag(self, *tags):
    """Add tags (strings such as ``"#data"``) that ``worker.search`` finds; returns self."""
    for t in tags:
        if not isinstance(t, str) or not t:
            raise SyftError(f"tags are non-empty strings such as '#data', got {t!r}")
    d = self.__dict__
    d["tags"] = set(d.get("tags", ())) | set(tags)
    return self


def _tensor_describe(self, description):
    """Attach a human description (shown in the views and searchable); returns self."""
    if not isinstance(description, str):
        raise SyftError(f"a description is a string, got {type(description).__name__}")
    self.__dict__["description"] = description
    return self


def _tensor_copy(self):
    """PySyft's ``.copy()``: a copy that stays where this tensor is (``clone()``, in the graph)."""
    return self.clone()


def _module_send(self, worker):
    """In place: every parameter becomes a pointer to its copy on ``worker`` (a worker or its id).

    Parameter objects keep their identity, so an optimizer built earlier still works."""
    return send_module(self, resolve_worker(worker))


def _module_get(self):
    """In place: every parameter pointer is fetched back into a local Parameter."""
    return get_module(self)


def _module_move(self, worker):
    """In place: every parameter moves to ``worker`` (from wherever it is)."""
    return move_module(self, resolve_worker(worker))


def _module_copy(self):
    """An independent copy of the module (of a sent one: on the same workers)."""
    return copy_module(self)


_TENSOR_METHODS = {"send": _tensor_send, "send_": _tensor_send_, "tag": _tensor_tag,
                   "describe": _tensor_describe, "copy": _tensor_copy}
_MODULE_METHODS = {"send": _module_send, "get": _module_get, "move": _module_move, "copy": _module_copy}
_DATASET_METHODS: dict = {}  # torch.utils.data.Dataset: federate (syft_lab/federated/datasets.py)
_TABLES = {torch.Tensor: _TENSOR_METHODS, torch.nn.Module: _MODULE_METHODS, Dataset: _DATASET_METHODS}
_added: list[tuple[type, str]] = []


def register_methods(cls: type, methods: dict, *, replacing: tuple = ()) -> None:
    """Methods that sy.hook() adds to ``cls`` (torch.Tensor, nn.Module, Dataset, an optimizer
    class...) and sy.unhook() removes; added at once when syft_lab is hooked already.
    ``replacing``: names whose earlier registration these take over (smpc's ``Module.get``,
    which also reconstructs shared parameters), on the class too when it holds the earlier one."""
    table = _TABLES.setdefault(cls, {})
    earlier = {name: table.get(name) for name in replacing}
    table.update(methods)
    if not is_hooked():
        return
    for name, fn in methods.items():
        current = cls.__dict__.get(name)
        if current is None:
            setattr(cls, name, fn)
            _added.append((cls, name))
        elif name in earlier and current is earlier[name]:
            setattr(cls, name, fn)


_native_tensor_repr = torch.Tensor.__repr__


def _tensor_repr(self, *args, **kwargs):
    """A tagged or described tensor prints its tags and description below it, as in PySyft 0.2;
    any other tensor prints exactly as torch prints it."""
    return _native_tensor_repr(self, *args, **kwargs) + tag_lines(self)


_REPLACED = {(torch.Tensor, "__repr__"): (_native_tensor_repr, _tensor_repr)}  # the one replaced method


def hook() -> None:
    if _added:
        return
    for cls, methods in _TABLES.items():
        for name, fn in methods.items():
            if name in cls.__dict__:
                raise SyftError(f"{cls.__name__}.{name} exists already; syft_lab will not replace it")
            setattr(cls, name, fn)
            _added.append((cls, name))
    for (cls, name), (_, fn) in _REPLACED.items():
        setattr(cls, name, fn)


def unhook() -> None:
    while _added:
        cls, name = _added.pop()
        delattr(cls, name)
    for (cls, name), (native, _) in _REPLACED.items():
        setattr(cls, name, native)


def is_hooked() -> bool:
    return bool(_added)
