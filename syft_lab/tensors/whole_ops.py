"""Composite aten overloads called on pointers by name: they run on the worker whole.

An aten overload whose only kernel for the pointer's keys is a CompositeImplicitAutograd
decomposition never reaches a pointer's ``__torch_dispatch__``: autograd's key runs the
decomposition first, in this process, on the pointer's meta placeholder. What that computes is
not what plain torch computes on the worker's CPU tensor whenever the two differ:

- a CPU kernel of the op's own while meta falls to the decomposition (``mish_backward``'s dtype
  follows its other argument on meta, not on CPU; ``native_channel_shuffle``);
- a decomposition that reads the placeholder's device or data (``_saturate_weight_to_fp16``
  reads a data pointer, ``_pad_packed_sequence`` wants its lengths on the CPU) and raises where
  torch computes;
- a decomposition that makes a value-typed result here, a local meta tensor no worker holds
  (``unflatten_dense_tensors`` of empty tensors);
- a decomposition that a hostile argument crashes in this process before any worker could check
  it (``_batch_norm_impl_index_backward`` with ``impl_index=-3``: a client segfault).

The class rule: such an overload, called by name (``torch.ops.aten.<op>.<overload>``, what
reaches ``__torch_function__`` as an OpOverload), functional (it writes no argument and returns no
view) and with tensor results only, goes to the worker as one op, where the worker's checks and
policy judge it and plain torch's CPU kernel runs it. It is decomposed here as before where the
decomposition is what gives the call its meaning: an argument requires grad (autograd records
the decomposition's ops), a dispatch mode or a functorch transform is active (they see the ops),
another tensor subclass takes part, or the op returns a Python value (computed from metadata, or
refused as a value read); mutating and view composites stay the dispatcher's too (autograd's
version counters and view records see their ops). Its enum-typed int arguments are checked here
first in every case, as the worker checks them: no hostile code reaches torch in this process
either.
"""
from __future__ import annotations

import torch

aten = torch.ops.aten
_OpOverload = torch._ops.OpOverload
_Tensor = torch.Tensor
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch_active = torch._C._are_functorch_transforms_active
_grad_enabled = torch.is_grad_enabled
_seq = (list, tuple)
_TENSOR_RESULTS = frozenset(("Tensor", "List[Tensor]"))



def _no_literal_check(op, args, kwargs) -> None:
    raise RuntimeError("the op policy's argument checks are not loaded (import syft_lab, not its tensors alone)")


# the worker's check of enum-typed arguments (wire/allowlist.check_enum_literals), set by the op
# policy when it loads (the wire package sits above this one: it imports pointers, not the reverse)
_literal_check = _no_literal_check


def use_literal_check(check) -> None:
    """Called by the op policy (wire/allowlist.py) with its check of enum-typed arguments."""
    global _literal_check
    _literal_check = check


# id(op) -> True (composite, tensor results: whole), False (the dispatcher's as always); an
# OpOverload lives as long as torch, so its id is never reused
_routes: dict[int, bool] = {}


def _decomposes_here(op) -> bool:
    """Whether ``op`` reaches a pointer as its CompositeImplicitAutograd decomposition (the
    kernel at AutogradMeta, the placeholder's autograd key) with tensor results only."""
    name = op.name()
    if not name.startswith("aten::"):
        return False
    try:
        table = torch._C._dispatch_dump_table(name).splitlines()
        syft_kernel = _has_kernel(name, "PythonTLSSnapshot")  # one of syft's own (composite.py): its call
    except RuntimeError:
        return False
    autograd_meta = next((ln for ln in table if ln.startswith("AutogradMeta:")), "")
    if "CompositeImplicitAutograd" not in autograd_meta or syft_kernel:
        return False
    schema = op._schema
    returns = schema.returns
    # (a composite that writes an argument or returns a view stays the dispatcher's: autograd's
    # version counters and view records see its ops, which a tensor saved for backward needs)
    return bool(returns) and not schema.is_mutable and all(
        str(r.type) in _TENSOR_RESULTS and r.alias_info is None for r in returns)


def _route(op) -> bool:
    route = _routes.get(id(op))
    if route is None:
        route = _routes[id(op)] = _decomposes_here(op)
    return route


def _grad_or_foreign(values, pointer_type) -> bool:
    """An argument requiring grad (grad mode on), or a tensor of another subclass than pointers."""
    grad = _grad_enabled()
    for v in values:
        if type(v) in _seq:
            if _grad_or_foreign(v, pointer_type):
                return True
        elif isinstance(v, _Tensor):
            if (type(v) is not pointer_type and type(v) is not _Tensor) or (grad and v.requires_grad):
                return True
    return False


def whole_call(func, args, kwargs, pointer_type):
    """The result of composite overload ``func`` run on the worker as one op, or None where the
    dispatcher's decomposition is the call's meaning (the module's docstring says when)."""
    if type(func) is not _OpOverload or not _route(func):
        return None
    _literal_check(func, args, kwargs)
    if _dispatch_modes() or _functorch_active() or _grad_or_foreign(args, pointer_type) \
            or (kwargs and _grad_or_foreign(kwargs.values(), pointer_type)):
        return None
    return pointer_type.__torch_dispatch__(func, (), tuple(args), kwargs)


# Autocast's casts decide by their tensor's device (``self.is_cpu()``): on the pointer's placeholder
# they returned the input uncast, where the worker's CPU tensor is cast (found by the property
# fuzzer). Called as Tensor methods too (not OpOverloads), and whatever requires grad, they go to
# the worker whole (pointer.py registers these runners among its Python-level functions).
AUTOCAST_CASTS = (aten._autocast_to_reduced_precision.default, aten._autocast_to_full_precision.default)


def whole_on_the_worker(op, pointer_type):
    """A Python-level runner (pointer.PYTHON_LEVEL) that sends ``op`` to the worker as one op."""
    def run(func, args, kwargs):
        return pointer_type.__torch_dispatch__(op, (), tuple(args), kwargs)

    return run
