"""Composite ops on pointers: helper tensors the op makes for itself are made on the worker.

Some of torch's composite ops (``cov``, ``quantile``, ``cosine_similarity``,
``scaled_dot_product_attention``, ``combinations``, ...) decompose above ``__torch_dispatch__``
and make helper tensors on the way, from no user data: an ``arange``, a random draw, a
constant, on their input's device. For a pointer that device is the meta placeholder, so the
helper would be a tensor without data, which no worker may receive. A kernel for those ops at
the PythonTLSSnapshot dispatch key (which only tensor subclasses reach: plain tensors pay
nothing, and other ops pay nothing) runs the op on pointers under a dispatch mode that makes
every factory op of its decomposition (an op with no tensor argument) on the worker when it
asks for the pointer's device, else here, marked as a helper either way (see HelpersHere).
A tensor the user
brought from this process is not made inside the op: it is refused as before
(``_local_constant`` in pointer.py).

torch's Python-level composites above the dispatcher (``fractional_max_pool2d``,
``svd_lowrank``, ``multi_head_attention_forward``: ``PYTHON_COMPOSITES``) reach
``PointerTensor.__torch_function__`` when a pointer is an argument, which runs them under the
same mode, popped when the call returns; ``torch.masked``'s reduction identities (which no hook
sees) read a pointer's device as the CPU and are 0-dim constants made here.

Where an op reads the values of a tensor argument here (``tensor_split`` with a tensor of
split points), and that tensor is a pointer, the whole op runs on the worker.

``nn.RNN``/``LSTM``/``GRU`` make their zero initial state with ``torch.zeros(...,
device=input.device)`` before the op: ``state_on_worker`` turns such a data-less (meta)
state into zeros on the input's worker (used by the RNN kernel in logging.py).
"""
from __future__ import annotations

import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .pointer import _VALUE_OP_IDS, PYTHON_LEVEL, PointerTensor, _no_torch_function, wrap_result
from .strides import TensorMeta, meta_tensor

_Tensor = torch.Tensor
_seq = (list, tuple)
_META = torch.device("meta")
_CPU = torch.device("cpu")
aten = torch.ops.aten
_AFTER_SNAPSHOT = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.PythonTLSSnapshot)

# The composite ops (aten overloads; a bare name is the default overload) that make helper tensors of their own; each was seen
# doing it in PyTorch's OpInfo database (issue 22). The hot composites (linear, matmul,
# reshape) make none and do not pay for a kernel here.
HELPER_MAKING_OPS = (
    "cov", "corrcoef", "cosine_similarity", "quantile", "quantile.scalar", "nanquantile", "nanquantile.scalar",
    "combinations", "linalg_matrix_power", "matrix_power", "scaled_dot_product_attention", "feature_alpha_dropout",
    "alpha_dropout", "feature_dropout", "pdist", "kron", "pinverse", "linalg_pinv", "linalg_pinv.atol_rtol_float",
    "linalg_pinv.rcond_tensor", "linalg_matrix_rank", "linalg_matrix_rank.tol_tensor",
    "linalg_matrix_rank.atol_rtol_tensor", "linalg_matrix_rank.atol_rtol_float", "logdet", "ctc_loss.IntList",
    "ctc_loss.Tensor",
)


def _pointers_in(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        for t in (a if type(a) in _seq else (a,)):
            if isinstance(t, PointerTensor):
                return t
    return None


def _tensors_in(args, kwargs) -> list:
    return [t for a in list(args) + list(kwargs.values()) for t in (a if type(a) in _seq else (a,))
            if isinstance(t, _Tensor)]


def _mark(out):
    """Mark the tensors in ``out`` as helpers (made inside the op from no user data)."""
    if isinstance(out, PointerTensor):
        out._ref.helper = True
    elif type(out) is _Tensor:
        out._syft_helper = True
    elif type(out) in _seq:
        for o in out:
            _mark(o)
    return out


def is_helper(t) -> bool:
    """Whether ``t`` is a tensor a composite op made for itself from no user data (here, or on
    a worker)."""
    if isinstance(t, PointerTensor):
        return t._ref.helper
    return type(t) is _Tensor and t.__dict__.get("_syft_helper", False)


class HelpersHere(TorchDispatchMode):
    """Inside a composite op on pointers: a factory op for the pointer's placeholder device
    (``self.options()``) makes its tensor on the worker, any other factory makes a real tensor
    here; both are marked as helpers, and so is what ops on helpers alone make. Pointer ops
    take local helpers along to the worker (``_local_constant`` in pointer.py), and a value
    read of helpers alone (``cov``'s degrees-of-freedom check) reads copies of them here: they
    hold no user data. Every other op runs as usual."""

    active = False  # one at a time: a composite inside a composite runs under the outer one

    def __init__(self, worker):
        super().__init__()
        self.worker = worker

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = _tensors_in(args, kwargs)
        if not tensors:
            if "device" not in {a.name for a in func._schema.arguments}:
                return func(*args, **kwargs)
            device = kwargs.get("device")
            if device is not None and device.type == "meta":  # for the pointer's device: made on its worker
                return _mark(make_on_worker(func, args, kwargs, self.worker))
            return _mark(func(*args, **kwargs))
        if all(is_helper(t) for t in tensors):  # derived from helpers alone: still no user data
            if id(func) in _VALUE_OP_IDS:
                return func(*_copied_here(args), **_copied_here(kwargs))
            device = kwargs.get("device")
            if device is not None and device.type == "meta" and not any(isinstance(t, PointerTensor) for t in tensors):
                # a local helper copied to the pointer's device (C++'s at::tensor(values, input.options())):
                # it stays here, with its data, and joins the op as a helper
                return _mark(func(*args, **{**kwargs, "device": _CPU}))
            return _mark(func(*args, **kwargs))
        return func(*args, **kwargs)


def _copied_here(x):
    if isinstance(x, PointerTensor):
        return x.location._copy_out(x.id_at_location)
    if type(x) is dict:
        return {k: _copied_here(v) for k, v in x.items()}
    if type(x) in _seq:
        return type(x)(_copied_here(v) for v in x)
    return x


def make_on_worker(func, args, kwargs, worker):
    """The factory op ``func`` run on ``worker``: a pointer to what it made there."""
    on_meta = func(*args, **kwargs)  # on the meta device: its metadata (strides) for the pointer
    out = worker._run(func, list(args), {**kwargs, "device": _CPU})
    return wrap_result(PointerTensor, out, worker, args, TensorMeta(on_meta) if isinstance(on_meta, _Tensor) else None)


def _helper_kernel(op):
    def kernel(keyset, *args, **kwargs):
        if HelpersHere.active or _pointers_in(args, kwargs) is None:
            return op.redispatch(keyset & _AFTER_SNAPSHOT, *args, **kwargs)
        HelpersHere.active = True
        try:
            with HelpersHere(_pointers_in(args, kwargs).location):
                return op.redispatch(keyset & _AFTER_SNAPSHOT, *args, **kwargs)
        finally:
            HelpersHere.active = False

    return kernel


def _split_there(t, points, dim):
    """``tensor_split`` as one op on the worker (its pointer's own dispatch, not this kernel)."""
    op = aten.tensor_split.tensor_indices_or_sections
    return list(PointerTensor.__torch_dispatch__(op, (PointerTensor,), (t, points, dim), {}))


class _SplitOnWorker(torch.autograd.Function):
    """``tensor_split`` at split points held by the worker, run there as one op; its backward
    joins the pieces' gradients again (zeros for pieces that got none)."""

    @staticmethod
    def forward(ctx, t, points, dim):
        pieces = _split_there(t, points, dim)
        ctx.dim, ctx.shapes = dim, [p.shape for p in pieces]
        return tuple(pieces)

    @staticmethod
    def backward(ctx, *grads):
        ref = next(g for g in grads if g is not None)
        full = [g if g is not None else ref.new_zeros(s) for g, s in zip(grads, ctx.shapes)]
        return torch.cat(full, ctx.dim), None, None


def _tensor_split_kernel(keyset, t, points, dim=0):
    if isinstance(points, PointerTensor):  # its values are on the worker: the split happens there
        if t.requires_grad and torch.is_grad_enabled():
            return list(_SplitOnWorker.apply(t, points, dim))
        return _split_there(t, points, dim)
    return aten.tensor_split.tensor_indices_or_sections.redispatch(keyset & _AFTER_SNAPSHOT, t, points, dim)


def state_on_worker(t, like: PointerTensor):
    """An RNN state made without data (``torch.zeros(..., device=input.device)``, on the meta
    placeholder) as zeros on ``like``'s worker; anything else unchanged."""
    if isinstance(t, _Tensor) and not isinstance(t, PointerTensor) and t.device.type == "meta":
        zeros = like.new_zeros(t.shape, dtype=t.dtype)
        return zeros.requires_grad_(True) if t.requires_grad else zeros
    return t


def _needs_graph(*tensors) -> bool:
    return torch.is_grad_enabled() and any(isinstance(t, _Tensor) and t.requires_grad for t in tensors)


_cov_helpers = _helper_kernel(aten.cov.default)


def _cov_kernel(keyset, *args, **kwargs):
    """``cov`` whose ``fweights``/``aweights`` are pointers: it reads their values (no weight is
    negative; the degrees of freedom, from their sum) while it runs, so the whole op runs on the
    worker, where they are (without autograd history: with it, the decomposition below)."""
    weights = (kwargs.get("fweights"), kwargs.get("aweights"))
    if any(isinstance(w, PointerTensor) for w in weights) and not _needs_graph(*args, *weights):
        return PointerTensor.__torch_dispatch__(aten.cov.default, (PointerTensor,), args, kwargs)
    return _cov_helpers(keyset, *args, **kwargs)


def _narrow_kernel(keyset, t, dim, start, length):
    """``narrow`` at a start held by a worker (a pointer): its value stays there, so the view is
    made there, as one op. The new pointer's sizes and strides are the view's (narrow keeps its
    input's strides); its storage offset would tell the start, so it is the input's own."""
    if (isinstance(t, PointerTensor) and isinstance(start, PointerTensor) and start._ref.location is t._ref.location
            and not _needs_graph(t)):
        t._check_alive()
        start._check_alive()
        out = t._ref.location._run(aten.narrow.Tensor, [t._ref, dim, start._ref, length], None)
        desc = TensorMeta(meta_tensor(t._ref.meta).narrow(dim, 0, length))
        return wrap_result(PointerTensor, out, t._ref.location, (t, dim, start, length), desc)
    return aten.narrow.Tensor.redispatch(keyset & _AFTER_SNAPSHOT, t, dim, start, length)


_library = torch.library.Library("aten", "IMPL")
for _name in HELPER_MAKING_OPS:
    if _name == "cov":
        continue
    _packet, _, _overload = _name.partition(".")
    _library.impl(_name, _helper_kernel(getattr(getattr(aten, _packet), _overload or "default")), "PythonTLSSnapshot",
                  with_keyset=True)
_library.impl("cov", _cov_kernel, "PythonTLSSnapshot", with_keyset=True)
_library.impl("tensor_split.tensor_indices_or_sections", _tensor_split_kernel, "PythonTLSSnapshot",
              with_keyset=True)
_library.impl("narrow.Tensor", _narrow_kernel, "PythonTLSSnapshot", with_keyset=True)


# --- torch's Python-level composites -------------------------------------------------------
# Functions written in Python above the dispatcher that make a helper tensor with
# ``device=input.device`` (a random draw, zeros): they honour ``__torch_function__``, so a
# pointer argument brings them to PointerTensor.__torch_function__, which runs them under
# HelpersHere (their factories for the pointer's device run on its worker, its generator for
# random draws); the mode is popped when the call returns. Plain tensors never reach this.
_F = torch.nn.functional
PYTHON_COMPOSITES = (
    _F.fractional_max_pool2d, _F.fractional_max_pool2d_with_indices, _F.fractional_max_pool3d,
    _F.fractional_max_pool3d_with_indices, _F.multi_head_attention_forward, torch.svd_lowrank, torch.pca_lowrank,
)


def run_python_composite(func, args, kwargs):
    with torch._C.DisableTorchFunctionSubclass():
        pointer = None if HelpersHere.active else _pointers_in(args, kwargs)
        if pointer is None:
            return func(*args, **kwargs)
        HelpersHere.active = True
        try:
            with HelpersHere(pointer.location):
                return func(*args, **kwargs)
        finally:
            HelpersHere.active = False


for _fn in PYTHON_COMPOSITES:
    PYTHON_LEVEL[_fn] = run_python_composite


# torch's own Python code where a pointer's device is read to make a 0-dim constant from no
# user data: torch.masked's reduction identities (``torch.tensor(0, dtype=input.dtype,
# device=input.device)``, -inf for amax, ...), the values masked-out elements take. Read there,
# a pointer's device is this process's CPU: the constant is made here and joins the remote op
# as a 0-dim constant does (the dtype decides it, never the data). Everywhere else a pointer's
# device is its meta placeholder.
_CPU_CONSTANT_FRAMES = frozenset({torch.masked._ops._reduction_identity.__code__})
_device_of = torch.Tensor.device.__get__
_sys_getframe = sys._getframe


# torch.masked's mean, var and std without a mask count the elements they reduce with
# ``sum(torch.ones(input.shape, dtype=torch.int64, device=input.device), dim)``: a count made from
# the input's shape alone. Read there, a pointer's device is this process's CPU too, and that
# ``count`` (the frame's own local, checked by identity) joins the divisions by it as a helper.
_MASKED_COUNT_FRAMES = frozenset({torch.masked._ops.mean.__code__, torch.masked._ops._std_var.__code__})


def _masked_counting(frame) -> bool:
    return frame.f_code in _MASKED_COUNT_FRAMES and frame.f_locals.get("mask") is None


def _device_read(func, args, kwargs):
    frame = _sys_getframe(2)
    if frame.f_code in _CPU_CONSTANT_FRAMES or _masked_counting(frame):
        return _CPU
    return _no_torch_function(func, (), args, kwargs)


def _division(func, args, kwargs):
    frame = _sys_getframe(2)
    if frame.f_code in _MASKED_COUNT_FRAMES and _masked_counting(frame):
        count = frame.f_locals.get("count")
        for a in args:
            if a is count and type(a) is _Tensor:
                a._syft_helper = True  # made from the input's shape alone
    return _no_torch_function(func, (), args, kwargs or {})


PYTHON_LEVEL[_device_of] = _device_read
for _fn in (torch.divide, torch.div, _Tensor.div, _Tensor.__truediv__):
    PYTHON_LEVEL[_fn] = _division
