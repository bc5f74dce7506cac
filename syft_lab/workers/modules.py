"""Sending an nn.Module: its parameters (and buffers) become pointers, in place.

``torch.utils.swap_tensors`` keeps every Parameter object's identity, so optimizers and
other references built before the send keep working on the pointers, and on the fetched
tensors after ``get``.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from ..errors import SyftError
from ..tensors.pointer import PointerTensor


def module_tensors(module: nn.Module):
    """A module's parameters and buffers, each once (tied weights are one tensor)."""
    seen = set()
    for m in module.modules():
        for store in (m._parameters, m._buffers):
            for t in store.values():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield t


def _swap(old, new, what):
    try:
        torch.utils.swap_tensors(old, new)
    except RuntimeError as e:
        raise SyftError(f"cannot {what} this module in place: a result that used its parameters still "
                        f"holds them in its autograd graph (or a view of a parameter is alive). Call "
                        f"backward() on it, or del it, or compute it under torch.no_grad(), then "
                        f"{what} again. ({e})") from None


def send_module(module: nn.Module, worker) -> nn.Module:
    tensors = list(module_tensors(module))
    if any(isinstance(t, PointerTensor) for t in tensors):
        raise SyftError("this module's parameters are pointers already: call module.get() first")
    for t in tensors:
        _send_in_place(t, worker, "send")
    module.location = worker
    return module


def _send_in_place(t, worker, what: str) -> None:
    """The local tensor ``t`` becomes a pointer to its copy on ``worker``, its gradient too."""
    grad = t.grad if t.requires_grad else None
    ptr = worker.send(t.detach(), requires_grad=t.requires_grad)
    t.grad = None
    _swap(t, ptr, what)
    if grad is not None:
        t.grad = worker.send(grad)


def get_module(module: nn.Module) -> nn.Module:
    for t in list(module_tensors(module)):
        if not isinstance(t, PointerTensor):
            continue
        grad = t.grad
        t.grad = None
        # Swap first, while the pointer's object still exists (swap_tensors inspects both),
        # then fill the now-local tensor with the fetched data.
        placeholder = torch.empty(0, dtype=t.dtype)
        local = nn.Parameter(placeholder, requires_grad=t.requires_grad) if t.requires_grad else placeholder
        _swap(t, local, "get")
        pointer = local  # after the swap, `local` is the pointer object
        with torch.no_grad():
            t.data = pointer.get()
        if isinstance(grad, PointerTensor):
            t.grad = grad.get()
    module.__dict__.pop("location", None)
    return module


def move_module(module: nn.Module, worker) -> nn.Module:
    """In place: every parameter pointer moves to ``worker`` (worker to worker, and its
    gradient with it); local parameters are sent there."""
    for t in list(module_tensors(module)):
        if isinstance(t, PointerTensor):
            if t.location is worker:
                continue
            grad = t.grad
            t.grad = None
            # Copy first and swap while both objects exist (swap_tensors inspects both); the
            # old pointer, now in `new`, releases the source's copy when it goes.
            new = worker._receive_from(t.location, t.id_at_location, requires_grad=t.requires_grad,
                                       keep_source=True)
            _swap(t, new, "move")
            del new
            if isinstance(grad, PointerTensor):
                t.grad = grad.move(worker)
        else:
            _send_in_place(t, worker, "move")
    module.location = worker
    return module


def copy_module(module: nn.Module) -> nn.Module:
    """An independent copy; a sent module's copy lives on the same workers (PySyft's ``copy``).

    A worker is an identity (``BaseWorker.__deepcopy__`` returns it): the copy's ``location``
    names the same worker, and its pointers point to copies made there."""
    return copy.deepcopy(module)
