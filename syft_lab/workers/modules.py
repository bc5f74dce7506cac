"""Sending an nn.Module: its parameters (and buffers) become pointers, in place.

``torch.utils.swap_tensors`` keeps every Parameter object's identity, so optimizers and
other references built before the send keep working on the pointers, and on the fetched
tensors after ``get``. Where swapping is impossible (autograd saved the tensor for a result
that is still alive, as a Conv2d or BatchNorm forward does), the module's slot takes the new
tensor instead, as ``get`` of a tensor with history copies it: the old one stays with the
graph that needs it (an optimizer built before then holds the old tensors: build it again).
Recurrent modules (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``) keep weak references to their
weights, which swapping refuses; they are dropped for the swap and made again after it.
A lazy module (``nn.LazyConv2d``, ``nn.LazyLinear``) has no values to send before its first
forward: its uninitialised parameters stay here until that forward gives them their shapes and
initial values (drawn here, as plain torch does), and are sent to the module's worker then,
before the forward runs.
"""
from __future__ import annotations

import contextlib
import copy
import weakref

import torch
from torch import nn

from ..errors import SyftError
from ..tensors.pointer import PointerTensor

_is_lazy = nn.parameter.is_lazy


def module_tensors(module: nn.Module):
    """A module's parameters and buffers, each once (tied weights are one tensor)."""
    seen = set()
    for m in module.modules():
        for store in (m._parameters, m._buffers):
            for t in store.values():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    yield t


@contextlib.contextmanager
def weights_unreferenced(module: nn.Module):
    """RNN modules hold weak references to their flat weights (``_flat_weight_refs``), and
    ``swap_tensors`` refuses a tensor with weak references: drop them for the block, then let
    each such module rebuild its flat weights from its (swapped or replaced) parameters."""
    rnns = [m for m in module.modules() if isinstance(getattr(m, "_flat_weight_refs", None), list)]
    for m in rnns:
        m._flat_weight_refs = []
    try:
        yield
    finally:
        for m in rnns:
            m._init_flat_weights()


def swappable(t: torch.Tensor) -> bool:
    """torch's own rule for ``swap_tensors``: no weak reference names ``t``, and nothing but a
    leaf's gradient accumulator holds it (a tensor saved for backward, or a live view, would)."""
    n = t._use_count()
    return not weakref.getweakrefs(t) and (n == 1 or (n == 2 and t.is_leaf))


def in_place_possible(tensors) -> bool:
    """Whether a module's tensors may all be swapped: when autograd saved any of them for a
    result still alive, none is (swapping the others would poison that result's backward)."""
    return all(swappable(t) for t in tensors)


def replace_tensor(module: nn.Module, old: torch.Tensor, new: torch.Tensor, in_place: bool) -> bool:
    """Put ``new`` where ``old`` is in ``module``: in place (``old`` becomes ``new``, keeping
    its identity) if ``in_place``, else in every parameter and buffer slot that holds ``old``
    (a Parameter slot gets ``new`` as a Parameter). Returns ``in_place``."""
    if in_place:
        torch.utils.swap_tensors(old, new)
        return True
    as_param = new
    if not isinstance(new, nn.Parameter) and type(new) is torch.Tensor:
        as_param = nn.Parameter(new, requires_grad=new.requires_grad)
    for m in module.modules():
        for store, value in ((m._parameters, as_param), (m._buffers, new)):
            for name, t in store.items():
                if t is old:
                    store[name] = value
    return False


def send_module(module: nn.Module, worker) -> nn.Module:
    tensors = list(module_tensors(module))
    if any(isinstance(t, PointerTensor) for t in tensors):
        raise SyftError("this module's parameters are pointers already: call module.get() first")
    lazy = [t for t in tensors if _is_lazy(t)]
    tensors = [t for t in tensors if not _is_lazy(t)]
    with weights_unreferenced(module):
        in_place = in_place_possible(tensors)
        for t in tensors:
            _send_in_place(module, t, worker, in_place)
    if lazy:
        _send_when_initialised(module, worker)
    module.location = worker
    return module


def _send_when_initialised(module: nn.Module, worker) -> None:
    """Each lazy submodule sends its parameters to ``worker`` once its first forward has made
    them (a forward pre-hook after torch's own ``_infer_parameters``, which registered first)."""
    for m in module.modules():
        if not any(_is_lazy(t) for t in (*m._parameters.values(), *m._buffers.values()) if t is not None):
            continue
        handle = None

        def send_them(m, args, kwargs=None):
            local = [t for t in (*m._parameters.values(), *m._buffers.values())
                     if t is not None and not isinstance(t, PointerTensor)]
            if any(_is_lazy(t) for t in local):
                return None  # not initialised yet (torch raises its own error for the forward)
            handle.remove()
            target = module.__dict__.get("location")
            if target is None:  # fetched back (module.get()) before its first forward: it stays here
                return None
            in_place = in_place_possible(local)
            for t in local:
                _send_in_place(m, t, target, in_place)
            return None

        handle = m.register_forward_pre_hook(send_them)


def _send_in_place(module, t, worker, in_place: bool) -> None:
    """The local tensor ``t`` becomes a pointer to its copy on ``worker``, its gradient too."""
    grad = t.grad if t.requires_grad else None
    ptr = worker.send(t.detach(), requires_grad=t.requires_grad)
    if grad is not None:
        t.grad = None
    if replace_tensor(module, t, ptr, in_place):
        ptr = t  # after the swap, `t` is the pointer
    elif grad is not None:
        t.grad = grad  # the local tensor keeps what it had: the graph that holds it may still read it
    if grad is not None:
        ptr.grad = worker.send(grad)


def get_module(module: nn.Module) -> nn.Module:
    with weights_unreferenced(module):
        tensors = list(module_tensors(module))
        in_place = in_place_possible(tensors)
        for t in tensors:
            if isinstance(t, PointerTensor):
                _get_in_place(module, t, in_place)
    module.__dict__.pop("location", None)
    return module


def _get_in_place(module, t, in_place: bool) -> None:
    grad = t.grad
    # Swap first, while the pointer's object still exists (swap_tensors inspects both), then
    # fill the now-local tensor with the fetched data.
    placeholder = torch.empty(0, dtype=t.dtype)
    local = nn.Parameter(placeholder, requires_grad=t.requires_grad) if t.requires_grad else placeholder
    t.grad = None
    if not in_place:
        # a result still alive backpropagates into the pointers: copy the data here and leave the
        # remote object to that graph (the old pointer releases it when the graph goes)
        t.grad = grad
        value = t.location._copy_out(t.id_at_location)
        new = nn.Parameter(value, requires_grad=t.requires_grad) if t.requires_grad else value
        replace_tensor(module, t, new, False)
        if isinstance(grad, PointerTensor):
            new.grad = grad.location._copy_out(grad.id_at_location)
        return
    torch.utils.swap_tensors(t, local)
    pointer = local  # after the swap, `local` is the pointer object
    with torch.no_grad():
        t.data = pointer.get()
    if isinstance(grad, PointerTensor):
        t.grad = grad.get()


def move_module(module: nn.Module, worker) -> nn.Module:
    """In place: every parameter pointer moves to ``worker`` (worker to worker, and its
    gradient with it); local parameters are sent there."""
    with weights_unreferenced(module):
        tensors = list(module_tensors(module))
        in_place = in_place_possible(tensors)
        for t in tensors:
            if isinstance(t, PointerTensor):
                if t.location is worker:
                    continue
                grad = t.grad
                t.grad = None
                # Copy first and swap while both objects exist (swap_tensors inspects both); the
                # old pointer, now in `new`, releases the source's copy when it goes.
                new = worker._receive_from(t.location, t.id_at_location, requires_grad=t.requires_grad,
                                           keep_source=True)
                if replace_tensor(module, t, new, in_place):
                    new = t
                else:
                    t.grad = grad  # the old pointer stays with the graph that holds it
                if isinstance(grad, PointerTensor):
                    new.grad = grad.move(worker) if new is t else grad.copy().move(worker)
            else:
                _send_in_place(module, t, worker, in_place)
    module.location = worker
    return module


def copy_module(module: nn.Module) -> nn.Module:
    """An independent copy; a sent module's copy lives on the same workers (PySyft's ``copy``).

    A worker is an identity (``BaseWorker.__deepcopy__`` returns it): the copy's ``location``
    names the same worker, and its pointers point to copies made there."""
    new = copy.deepcopy(module)
    for m in new.modules():
        if isinstance(getattr(m, "_flat_weight_refs", None), list):
            m._init_flat_weights()  # the copied weak references still name the original's weights
    return new
