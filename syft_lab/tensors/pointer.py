"""PointerTensor: a layer whose data lives on another worker.

A pointer is a real ``torch.Tensor`` on the meta device (shape and dtype known, no storage),
so nn layers, losses, autograd and optimizers accept it. Each op reaching its
``__torch_dispatch__`` runs on the pointer's worker and comes back as new pointers whose
shape and dtype are the worker's answer (so data-dependent shapes such as ``nonzero`` are
exact), and whose strides and storage offset come from a memoised meta run of the op
(strides.py), so composite ops see what the worker holds.

Remote objects are reference counted: a pointer that ``owns`` a reference releases it when it
is garbage collected, and the worker deletes the object when its last reference goes.

Why it exists: it is remote execution itself. Its layer has no children here (the rest of its
chain is on its worker); on the wire it travels as a ``PointerSpec``, data that decoding never
turns into a live pointer.
"""
from __future__ import annotations

import sys
import threading

import torch

from .. import events
from ..commands import NewObject, SameAsArg, get_worker
from ..errors import ObjectNotFoundError, SyftError, SyftTypeError, SyftValueError
from ..ids import short
from .base import ChainLayer, flat_layers
from .lazy_bits import lazy_bits_included
from .nodes import tree_from_list
from .registry import register_layer, wire_int, wire_shape, wire_text
from .remote_ref import RemoteRef, _live_refs, mark_left, newest_live_refs, pointer_state  # noqa: F401 (imported here)
from .strides import ColumnMajor, TensorMeta, constant_key, infer, intern, memo_get as _memo_get
from .transfer import GetWithGrad, MoveWithGrad
from .whole_ops import AUTOCAST_CASTS, whole_call, whole_on_the_worker

_make_wrapper = torch.Tensor._make_wrapper_subclass
_Tensor = torch.Tensor
_seq = (list, tuple)
_META = torch.device("meta")
_strided = torch.strided
_CPU = torch.device("cpu")
_device = torch.device
_no_python_dispatch = torch._C._DisableTorchDispatch
_no_torch_function = torch._C._disabled_torch_function_impl
_OpOverload = torch._ops.OpOverload
_MISSING = object()
aten = torch.ops.aten

# Ops whose result is a Python value computed from the data: they would move values off the
# worker behind the user's back.
_VALUE_OPS = {aten._local_scalar_dense.default, aten.equal.default, aten.is_nonzero.default}
# by id: an OpOverload hashes in Python (~0.2 us), on every op; these ops live as long as torch
_VALUE_OP_IDS = frozenset(id(op) for op in _VALUE_OPS)

# torch's Python-level functions (and attribute reads) that need more than "run it on the
# pointers": function -> its runner(func, args, kwargs). Filled by composite.py (the composites
# that make helper tensors of their own, torch.masked's constants); every other call through
# __torch_function__ is one dict miss and torch's own disabled implementation.
PYTHON_LEVEL: dict = {}
_python_level = PYTHON_LEVEL.get
_NO_KWARGS: dict = {}  # never written: unpacked by the call it is passed to


def _value_error(func, location):
    return SyftError(
        f"{func} would bring a value from worker {location.id!r} to this process: values never "
        f"leave a worker implicitly. Call .get() on the pointer first to fetch the tensor.")


def _mixed_error(a_loc: str, b_loc: str) -> SyftError:
    return SyftError(
        f"an op mixes data on {a_loc} with data on {b_loc}: move them to one place first "
        f"(.send(worker), .move(worker) or .get())")


class RemoteHandle:
    """What every pointer (to a tensor or to a plan) says about the object it stands for."""

    _ref: RemoteRef

    @property
    def location(self):
        """The worker that holds the object."""
        return self._ref.location

    @property
    def id_at_location(self) -> int:
        return self._ref.id

    @property
    def owner(self):
        """The worker that holds this pointer (``sy.local_worker`` unless it was sent on)."""
        return get_worker(self._ref.owner_id)

    @property
    def holder_id(self) -> str:
        """The id of the worker that holds this pointer ("me" for this process)."""
        return self._ref.owner_id

    def set_holder(self, worker_id: str) -> None:
        """Record that ``worker_id`` holds this pointer now (a worker stored it, or it was
        fetched back: "me"). The core calls this instead of writing the pointer's internals."""
        self._ref.owner_id = worker_id

    @property
    def id(self) -> int:
        return self._ref.pointer_id

    @property
    def owning(self) -> bool:
        """Whether dropping this pointer releases the remote object (False for search results)."""
        return self._ref.owning

    def _check_alive(self):
        if self._ref.released:
            raise ObjectNotFoundError(self.location.id, self.id_at_location)

    def _remote_root(self) -> dict | None:
        """The root of the remote object's chain (as its worker describes it), a node saying
        why there is none (the worker is gone), or None once the object left."""
        ref = self._ref
        if ref.released:
            return None
        try:
            root = ref.location.describe(ref.id)
        except Exception as e:  # a view must still render when the worker is gone
            return {"kind": "unreachable", "type": type(e).__name__, "id": ref.id, "owner": ref.location.id,
                    "error": str(e), "children": []}
        if isinstance(root, list):  # a head-first list (chain model version 1)
            return tree_from_list(root) if root else None
        return root


class PointerSpec:
    """A pointer as it travels: where its object is and which id it has there.

    Decoding never makes a live pointer: a receiver decides what, if anything, to do with it."""

    __slots__ = ("worker_id", "address", "id_at_location", "shape", "dtype", "tags", "description")

    def __init__(self, worker_id, address, id_at_location, shape, dtype, tags=None, description=None):
        self.worker_id, self.address, self.id_at_location = worker_id, address, id_at_location
        self.shape, self.dtype, self.tags, self.description = shape, dtype, tags, description

    def __repr__(self):
        return f"PointerSpec({self.worker_id!r}, {self.id_at_location})"


@register_layer
class PointerTensor(ChainLayer, RemoteHandle):
    kind = "pointer"
    wire_code = 11
    wire_schema = {"worker": str, "address": (str, type(None)), "id": int, "shape": list, "dtype": torch.dtype}
    node_actions = ("get", "move")
    id = RemoteHandle.id  # a pointer is known by one id everywhere (ChainLayer would give another)

    @staticmethod
    def __new__(cls, location, id_at_location: int, shape, dtype, requires_grad: bool = False,
                owning: bool = True, stride=None, storage_offset: int = 0):
        """A pointer to object ``id_at_location`` on ``location``, a tensor of ``shape`` and
        ``dtype``; contiguous unless ``stride``/``storage_offset`` say otherwise (what a worker
        stores when it is sent or moved a tensor is contiguous: strides.py)."""
        r = _make_wrapper(cls, shape, stride, storage_offset if stride is not None else None, None, dtype,
                          _strided, _META, False, requires_grad)
        ref = r._ref = RemoteRef(location, id_at_location, owning, "tensor", r.shape, dtype,
                                 intern(r.shape, r.stride(), r.storage_offset(), dtype))
        if events._subscribers:
            events.emit("pointer_created", ref.owner_id, r.id, location=location.id, id_at_location=id_at_location)
        return r

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's Python-level composites listed in ``PYTHON_LEVEL`` run here (composite.py);
        a call that reaches exactly one functional aten op with these very arguments goes to the
        worker directly (the direct path, below); every other call goes on as with torch
        function disabled."""
        run = _python_level(func)
        if run is not None:
            return run(func, args, kwargs or {})
        if kwargs or type(func) is _method_wrapper:  # (an attribute read: p.shape, p.grad_fn, ...)
            return _torch_call(func, types, args, kwargs or _NO_KWARGS)
        # The direct path (one loop: the key, the worker's arguments and the pointers' worker).
        # The key holds everything the dispatcher's choice of op reads here: the function, each
        # pointer's interned sizes/strides/offset/dtype, each scalar's type and value.
        key = [func]
        wire_args = []
        loc = None
        try:
            for a in args:
                if type(a) is PointerTensor:
                    ref = a._ref
                    if loc is not None and ref.location is not loc:
                        return _torch_call(func, types, args, _NO_KWARGS)  # a mix: the dispatch's error
                    loc = ref.location
                    key.append(ref.meta)
                    wire_args.append(ref)
                elif type(a) in _scalars:
                    key.append(type(a))
                    key.append(a)
                    wire_args.append(a)
                else:
                    return _torch_call(func, types, args, _NO_KWARGS)
        except AttributeError:  # no _ref yet: __new__ reading its own wrapper's strides
            return _torch_call(func, types, args, _NO_KWARGS)
        key = tuple(key)
        entry = _direct_get(key)
        if entry is None:
            return _learn(func, types, args, key)
        # (autograd's part: ``p.requires_grad`` would take this function again, ~4 us)
        if entry is _NOT_DIRECT or loc is None or _any_requires_grad(*args) or _dispatch_modes() or _functorch_active():
            return _torch_call(func, types, args, _NO_KWARGS)
        out = loc._run(entry.op, wire_args, None)
        desc = entry.desc
        if type(out) is NewObject and type(desc) is TensorMeta:  # as in __torch_dispatch__
            dtype = out.dtype
            if desc.dtype is dtype and desc.shape == out.shape:
                r = _make_wrapper(cls, out.shape, desc.wrap_stride, desc.wrap_offset, None, dtype, _strided, _META)
                r._ref = RemoteRef(loc, out.id, True, "tensor", out.shape, dtype, desc.mkey)
                return r
        return wrap_result(cls, out, loc, args, desc)

    # --- moving data ------------------------------------------------------------------
    def get(self):
        """Bring the object back; it leaves the worker and this pointer becomes stale.

        A fetched leaf keeps ``requires_grad`` and its gradient; a tensor with autograd history
        is copied instead (its graph may still need the original) and its gradient is sent back
        in backward."""
        self._check_alive()
        if self.grad_fn is not None:
            return GetWithGrad.apply(self)
        grad = self.grad if self.requires_grad else None
        obj = self.location._fetch(self._ref.id)
        mark_left(self.location, self._ref.id, "fetched")
        if self.requires_grad and isinstance(obj, _Tensor) and not obj.requires_grad:
            obj.requires_grad_(True)
        if isinstance(grad, PointerTensor) and not grad._ref.released:
            obj.grad = grad.get()
        return obj

    def move(self, worker, requires_grad: bool | None = None):
        """Move the object to ``worker`` (it leaves its current worker); returns the new pointer.

        A leaf's gradient moves with it. A tensor with autograd history is copied instead and
        stays differentiable: backward moves its gradient back here (split learning).
        ``requires_grad`` (PySyft's SplitNN spelling): the moved leaf requires grad, or not."""
        self._check_alive()
        if requires_grad is not None:
            if not isinstance(requires_grad, bool):
                raise SyftTypeError(f"move's requires_grad is True or False, got {requires_grad!r}")
            if self.grad_fn is not None:
                raise SyftValueError("move(requires_grad=...) is for a leaf; this tensor has autograd "
                                     "history: move it, then .detach().requires_grad_() the result")
            moved = self.move(worker)
            return moved.requires_grad_(requires_grad)
        if worker is self.location:
            return self
        if self.grad_fn is not None:
            return MoveWithGrad.apply(self, worker)
        grad = self.grad if self.requires_grad else None
        new = worker._receive_from(self.location, self._ref.id, requires_grad=self.requires_grad)
        mark_left(self.location, self._ref.id, "moved", worker.id)
        if isinstance(grad, PointerTensor) and not grad._ref.released:
            new.grad = grad.move(worker)
        return new

    def send(self, worker):
        """A pointer to a pointer: ``worker`` now holds a pointer to this pointer's object."""
        return worker.send(self)

    def copy(self):
        """A pointer to a new copy of the object, made on the same worker (PySyft's ``copy``).

        Like ``clone``, the copy stays in the autograd graph of a tensor with history; a leaf's
        copy is a leaf that requires grad as the original does."""
        self._check_alive()
        if self.grad_fn is not None:
            return aten.clone.default(self)
        with torch.no_grad():
            new = aten.clone.default(self)
        if self.requires_grad:
            new.requires_grad_(True)
        return new

    # --- ops --------------------------------------------------------------------------
    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        # The common path in one function, the whole body in the try (free in Python 3.11): a
        # helper call costs ~0.1 us on every op; keyword and list arguments (rarer) have theirs.
        # ``key``: the op and its arguments' metadata, the memo key of the results' strides (strides.py).
        if _probe is not None and types is not _INNER:  # a call is being learned (the direct path)
            return _probed(cls, func, args, kwargs)
        try:
            loc = None
            wire_args = []
            key = [id(func)]
            for a in args:
                if isinstance(a, PointerTensor):
                    ref = a._ref
                    if loc is None:
                        loc = ref.location
                    elif ref.location is not loc:
                        raise _mixed_error(f"worker {loc.id!r}", f"worker {ref.location.id!r}")
                    wire_args.append(ref)
                    key.append(ref.meta)
                elif isinstance(a, _Tensor):
                    wire_args.append(_local_constant(a, func))
                    key.append(constant_key(a.dtype))
                elif type(a) is _device:
                    wire_args.append(_worker_device(a))
                    key.append(a)
                elif type(a) in _seq:  # a list of tensors (cat, stack, index): rarer, a call of its own
                    inner, inner_key, loc = _wire_sequence(a, func, loc)
                    wire_args.append(inner)
                    key.append(inner_key)
                else:
                    wire_args.append(a)
                    key.append(a)
            wire_kwargs = None
            if kwargs:  # (most ops reach here with none)
                wire_kwargs, loc = _wire_kwargs(kwargs, func, loc, key)
            if id(func) in _VALUE_OP_IDS:
                raise _value_error(func, loc)
            with lazy_bits_included():
                out = loc._run(func, wire_args, wire_kwargs)
            key = tuple(key)
            try:
                desc = _memo_get(key, _MISSING)
            except TypeError:  # an unhashable argument: no memo, the worker's shape, contiguous
                desc = None
            else:
                if desc is _MISSING:
                    desc = infer(func, key, args, kwargs)
            if type(out) is NewObject and type(desc) is TensorMeta:  # wrap_result's common case, inline
                dtype = out.dtype
                if desc.dtype is dtype and desc.shape == out.shape:
                    r = _make_wrapper(cls, out.shape, desc.wrap_stride, desc.wrap_offset, None, dtype, _strided, _META)
                    r._ref = RemoteRef(loc, out.id, True, "tensor", out.shape, dtype, desc.mkey)
                    return r
            return wrap_result(cls, out, loc, args, desc)
        except _MixedLocal as e:
            where = flat_layers(PointerTensor, list(args) + list((kwargs or {}).values()))
            raise _mixed_error(f"this process (a local {e.args[0]})",
                               f"worker {where[0].location.id!r} (a pointer)") from None

    # --- the layer protocol (base.py) ---------------------------------------------------
    def layer_children(self) -> list:
        return []  # the rest of the chain is on the pointer's worker

    def node_fields(self) -> dict:
        ref = self._ref
        fields = {"owner": ref.owner_id, "location": ref.location.id, "id_at_location": ref.id,
                  "owning": ref.owning, "state": pointer_state(ref)}
        if ref.gone_how is not None:
            fields["gone_how"] = ref.gone_how
            if ref.gone_to is not None:
                fields["gone_to"] = ref.gone_to
        return fields

    def display(self) -> dict:
        ref = self._ref
        state = pointer_state(ref)
        badge = state if state != "ok" else ("weak" if not ref.owning else None)
        return {"label": type(self).__name__,
                "lines": [f"{ref.owner_id}:{short(ref.pointer_id)} -> {ref.location.id}:{short(ref.id)}"],
                "badge": badge}

    def stored_copy(self, copy_child):
        """A pointer to a pointer (in-process workers): a new owning reference to the same object."""
        self._check_alive()
        self.location._incref(self.id_at_location)
        return type(self)(self.location, self.id_at_location, self.shape, self.dtype, stride=self.stride(),
                          storage_offset=self.storage_offset())

    def wire_fields(self) -> dict:
        ref = self._ref
        return {"worker": ref.location.id, "address": getattr(ref.location, "url", None), "id": ref.id,
                "shape": list(self.shape), "dtype": self.dtype}

    @classmethod
    def from_wire(cls, fields, children):
        if children:
            raise SyftError("a pointer has no children on the wire")
        address = fields["address"]
        if address is not None:
            wire_text(address, "a worker address")
        return PointerSpec(wire_text(fields["worker"], "a worker id"), address, wire_int(fields["id"], "an object id"),
                           wire_shape(fields["shape"]), fields["dtype"])

    # --- copies -----------------------------------------------------------------------
    def __deepcopy__(self, memo):
        """A copy of a pointer is a pointer to a copy, made on the worker."""
        if id(self) in memo:
            return memo[id(self)]
        self._check_alive()
        with torch.no_grad():
            new = aten.clone.default(self)
        if self.requires_grad:
            new.requires_grad_(True)
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        raise SyftError(
            f"a PointerTensor cannot be pickled: its data lives on worker {self.location.id!r}. "
            f"Fetch it with .get() first, or keep the data on the worker.")


def _joined(loc, ref):
    """The one worker of an op's pointers: ``loc`` (None before the first pointer), checked
    against ``ref``'s."""
    if loc is None:
        return ref.location
    if ref.location is not loc:
        raise _mixed_error(f"worker {loc.id!r}", f"worker {ref.location.id!r}")
    return loc


def _wire_sequence(seq, func, loc):
    """A list argument of a dispatched op (``cat``'s tensors): (its items as the worker takes
    them, their memo key, the op's worker)."""
    inner = []
    inner_key = []
    for b in seq:
        if isinstance(b, PointerTensor):
            loc = _joined(loc, b._ref)
            inner.append(b._ref)
            inner_key.append(b._ref.meta)
        elif isinstance(b, _Tensor):
            inner.append(_local_constant(b, func))
            inner_key.append(constant_key(b.dtype))
        else:
            inner.append(b)
            inner_key.append(b)
    return inner, tuple(inner_key), loc


def _wire_kwargs(kwargs, func, loc, key):
    """A dispatched op's keyword arguments: (them as the worker takes them, the op's worker);
    each name and its metadata go on ``key`` (the memo key of the results' strides)."""
    wire_kwargs = {}
    for k, v in kwargs.items():
        key.append(k)
        if isinstance(v, PointerTensor):
            loc = _joined(loc, v._ref)
            key.append(v._ref.meta)
            v = v._ref
        elif isinstance(v, _Tensor):
            key.append(constant_key(v.dtype))
            v = _local_constant(v, func)
        elif type(v) is _device:
            key.append(v)
            v = _worker_device(v)
        elif type(v) in _seq:
            key.append(tuple(v))
        else:
            key.append(v)
        wire_kwargs[k] = v
    return wire_kwargs, loc


# --- the direct path ---------------------------------------------------------------------------
# ``p + p`` reaches __torch_dispatch__ through torch's C++ dispatcher (the Python arg parser,
# autograd's kernel, the Python key's trip back into Python): on a VirtualWorker that was ~8 us of
# a ~25 us op, more than the worker's own part. A call whose arguments are pointers (none
# requiring grad) and scalars, and which is seen to reach exactly one functional aten op (no
# write, no view) with those very arguments and to return that op's result unchanged, is
# remembered under its key (the function, every pointer's metadata, every scalar's type and
# value); the next such call sends that op to the worker at once, with the results' metadata
# remembered too. What the dispatcher would do in between is nothing then: no autograd (no
# argument requires grad, and no view or in-place op, whose wrapper autograd would touch), no
# dispatch mode (checked on every call: syft's own HelpersHere, FakeTensorMode, a user's mode)
# and no functorch transform (checked too). The worker's checks are the same: it gets the same
# op and arguments. Any other call (keywords, a local tensor, a list, an attribute read, a
# composite of several ops) takes the dispatcher, as before.


class _Direct:
    __slots__ = ("op", "desc")

    def __init__(self, op, desc):
        self.op, self.desc = op, desc


MAX_DIRECT = 20_000  # entries; past it the table starts again (calls with ever-new scalars)
_direct: dict = {}
_direct_get = _direct.get
_NOT_DIRECT = object()
_probe = None  # while _learn runs a call: its _Probe
_learning = threading.Lock()  # one call learned at a time (a second thread meanwhile: the dispatcher)
_INNER = ("inner",)  # the ``types`` of a dispatch _probed passes on (__torch_dispatch__ reads none)
_scalars = (int, float, bool)
_method_wrapper = type(_Tensor.shape.__get__)
_dispatch_modes = torch._C._len_torch_dispatch_stack
_functorch_active = torch._C._are_functorch_transforms_active
_any_requires_grad = torch._C._any_requires_grad  # (reads no attribute through __torch_function__)
_thread_id = threading.get_ident
_has_kernel = torch._C._dispatch_has_kernel_for_dispatch_key


class _Probe:
    __slots__ = ("thread", "depth", "seen")

    def __init__(self):
        self.thread, self.depth, self.seen = _thread_id(), 0, []


def _functional(op) -> bool:
    """An aten overload that writes none of its arguments and returns no alias of one."""
    if type(op) is not torch._ops.OpOverload or id(op) in _VALUE_OP_IDS:
        return False
    schema = op._schema
    # (an op with a kernel of syft's own at the PythonTLSSnapshot key, composite.py, is the dispatcher's)
    return (not schema.is_mutable and all(r.alias_info is None for r in schema.returns)
            and not _has_kernel(op.name(), "PythonTLSSnapshot"))


def _same_args(seen, args) -> bool:
    if len(seen) != len(args):
        return False
    for s, a in zip(seen, args):
        if s is not a and not (type(a) in _scalars and type(s) is type(a) and s == a):
            return False
    return True


def _learn(func, types, args, key):
    """Run the call through the dispatcher, watching what reaches __torch_dispatch__, and
    remember under ``key`` whether it may take the direct path."""
    global _probe
    if not _learning.acquire(blocking=False):
        return _no_torch_function(func, types, args, _NO_KWARGS)
    try:
        probe = _probe = _Probe()
        try:
            result = _torch_call(func, types, args, _NO_KWARGS)
        finally:
            _probe = None
    finally:
        _learning.release()
    entry = _NOT_DIRECT
    if len(probe.seen) == 1 and not _any_requires_grad(*args) and not _dispatch_modes() and not _functorch_active():
        op, dargs, dkwargs, dout = probe.seen[0]
        if not dkwargs and dout is result and _functional(op) and _same_args(dargs, args):
            mkey = [id(op)]
            for a in args:
                mkey.append(a._ref.meta if type(a) is PointerTensor else a)
            mkey = tuple(mkey)
            desc = _memo_get(mkey, _MISSING)  # (what the dispatch just stored)
            if desc is _MISSING:
                desc = infer(op, mkey, args, None)
            entry = _Direct(op, desc)
    if len(_direct) >= MAX_DIRECT:
        _direct.clear()
    _direct[key] = entry
    return result


def _probed(cls, func, args, kwargs):
    """__torch_dispatch__ while a call is learned: the op runs as always; the learning thread
    notes each op it dispatches at the top level (not those its ops dispatch in turn)."""
    probe = _probe
    if probe is None or probe.thread != _thread_id() or probe.depth:
        return cls.__torch_dispatch__(func, _INNER, args, kwargs)
    probe.depth = 1
    try:
        out = cls.__torch_dispatch__(func, _INNER, args, kwargs)
    finally:
        probe.depth = 0
    probe.seen.append((func, args, kwargs, out))
    return out


# ``p + q``, ``p * 2``, ...: torch's operator (C++) parses its arguments, finds the pointer among
# them and calls ``PointerTensor.__torch_function__`` with the method it stands for (``p + q``:
# ``TensorBase.add``) and ``types`` (PointerTensor,): ~1 us of a ~8 us pointer op. These make that
# call themselves when it is the one torch would make: the operands are pointers of this very class
# and Python numbers, torch function is on (no ``DisableTorchFunction(Subclass)``) and no torch
# function mode is active (a mode is called first), and no Python-level runner (composite.py) is
# registered for the method (one may read its caller's frame). Anything else is torch's operator.
_TYPES = (None,)  # (PointerTensor,), set below
_torch_function_enabled = torch._C._is_torch_function_enabled
_function_mode_enabled = torch._C._is_torch_function_mode_enabled


def _binary_operator(name: str, func):
    torch_operator = getattr(_Tensor, name)

    def operator(self, other):
        if (type(self) is PointerTensor and (type(other) is PointerTensor or type(other) in _scalars)
                and _torch_function_enabled() and not _function_mode_enabled() and func not in PYTHON_LEVEL):
            return PointerTensor.__torch_function__(func, _TYPES, (self, other))
        return torch_operator(self, other)

    operator.__name__ = operator.__qualname__ = name
    operator.__doc__ = torch_operator.__doc__
    return operator


def _refuse_value(what: str):
    def refuse(self, *args, **kwargs):
        raise _value_error(what, self.location)

    refuse.__name__ = refuse.__qualname__ = what.split("(")[0]
    return refuse


# Values torch's own Python code reads where the bit or number is what plain torch shows anyway:
# ``F.gaussian_nll_loss`` checks ``if torch.any(var < 0): raise ValueError`` (bool() decides only
# whether torch raises its input error), and BatchNorm with ``momentum=None`` averages by
# ``1.0 / float(self.num_batches_tracked)`` (how many batches the module was run on: the
# caller's own count). Code object -> (the conversion read there, the dtype it reads).
_TORCH_READS = {
    torch.nn.functional.gaussian_nll_loss.__code__: ("bool", torch.bool),
    torch.nn.modules.batchnorm._BatchNorm.forward.__code__: ("float", torch.int64),
}


def _torch_read(what: str, cast):
    def read(self):
        entry = _TORCH_READS.get(sys._getframe(1).f_code)
        if entry is not None and entry[0] == what and self.dtype is entry[1] and self.dim() == 0:
            self._check_alive()
            return cast(self.location._copy_out(self.id_at_location))
        raise _value_error(f"{what}()", self.location)

    read.__name__ = read.__qualname__ = f"__{what}__"
    return read


_TYPES = (PointerTensor,)
# (not ``/``: torch.masked's division reads its caller's frame, composite.py, which a Python
# operator would move one frame down; its every call runs there anyway, never the direct path)
for _name, _func in (("__add__", _Tensor.add), ("__sub__", _Tensor.sub), ("__mul__", _Tensor.mul)):
    setattr(PointerTensor, _name, _binary_operator(_name, _func))

PointerTensor.__bool__ = _torch_read("bool", bool)
PointerTensor.__float__ = _torch_read("float", float)

# Python conversions that would read the data: values stay remote until .get().
for _name, _what in (("item", "item()"), ("tolist", "tolist()"), ("numpy", "numpy()"),
                     ("__int__", "int()"), ("__index__", "index()"),
                     ("__complex__", "complex()"), ("__array__", "numpy conversion")):
    setattr(PointerTensor, _name, _refuse_value(_what))


def _local_constant(t: _Tensor, func):
    """Plain tensors may join a remote op only as 0-dim constants (as CPU scalars join CUDA ops),
    or as helpers a composite op made for itself from no user data (composite.py)."""
    if t.dim() == 0 and not t.is_meta and not isinstance(t, ChainLayer):
        return t.detach()
    if type(t) is _Tensor and t.__dict__.get("_syft_helper", False) and not t.is_meta:
        return t.detach()
    if t.is_meta and not isinstance(t, ChainLayer):
        raise SyftError(f"{func} got a tensor on the meta device (one made with device=pointer.device, outside "
                        f"an op syft_lab knows): it has no data, so no worker can use it. Make it on the worker "
                        f"instead (pointer.new_zeros(...), torch.zeros_like(pointer), ...)")
    raise _MixedLocal(type(t).__name__)


def _index_helpers(index):
    """``index`` with its lists of Python ints or bools as index tensors made here (helpers)."""
    if type(index) is list and all(type(i) in (int, bool) for i in index):
        t = torch.tensor(index)
        t._syft_helper = True  # made from the user's Python values, which travel as scalars anyway
        return t
    if type(index) is tuple:
        return tuple(_index_helpers(i) if type(i) is list else i for i in index)
    return index


def _indexed(func, args, kwargs):
    """``p[index]``, ``p[index] = v`` (and ``torch.Tensor.__getitem__(p, index)``): torch turns a
    list index (``p[[0, 2]]``) into an index tensor on the pointer's placeholder device, without
    its values; it is made here instead, as a helper the op takes along."""
    if len(args) > 1:
        args = (args[0], _index_helpers(args[1]), *args[2:])
    if len(args) == 3 and type(args[2]) in (int, float, bool, complex):  # p[i] = 2.: torch would
        # make the value a tensor on the placeholder device; a 0-dim constant made here joins the op
        args = (args[0], args[1], torch.tensor(args[2], dtype=args[0].dtype))
    return _no_torch_function(func, (), args, kwargs)


PYTHON_LEVEL[_Tensor.__getitem__] = PYTHON_LEVEL[_Tensor.__setitem__] = _indexed


for _op in AUTOCAST_CASTS:  # (their Tensor methods too: whole_ops.py)
    PYTHON_LEVEL[_op] = PYTHON_LEVEL[getattr(_Tensor, _op._schema.name.split("::")[1])] = \
        whole_on_the_worker(_op, PointerTensor)


def _worker_device(d: torch.device) -> torch.device:
    """The meta device is only the pointer's placeholder: an op that names it (autograd's
    ``new_empty_strided(..., device=meta)`` for a gradient, ``empty_like``, ...) means "where
    the data is", which on a worker is its CPU."""
    return _CPU if d.type == "meta" else d


class _MixedLocal(Exception):
    pass


def wrap_result(cls, out, loc, args=(), desc=None):
    """Pointers for a worker's reply: new objects become owning pointers, in-place results
    give back the caller's own argument, other values pass through. ``desc``: the results'
    metadata from the meta run (strides.py), which gives each new pointer its strides and
    storage offset and brings an argument changed in place (``t_``, ``unsqueeze_``) up to date."""
    if type(out) is NewObject:
        shape, dtype = out.shape, out.dtype
        if type(desc) is TensorMeta and desc.dtype is dtype and (desc.shape == shape or desc.shape == tuple(shape)):
            # positional: torch parses keyword arguments here ~0.2 us slower, on every op's result
            r = _make_wrapper(cls, shape, desc.wrap_stride, desc.wrap_offset, None, dtype, _strided, _META)
            meta = desc.mkey
        else:  # meta could not tell (data-dependent shapes): contiguous, as most such kernels give
            stride = desc.stride(shape) if type(desc) is ColumnMajor else None
            r = _make_wrapper(cls, shape, stride, None if stride is None else 0, None, dtype, _strided, _META)
            meta = intern(r.shape, r.stride(), 0, dtype)
        r._ref = RemoteRef(loc, out.id, True, "tensor", out.shape, dtype, meta)
        return r
    if type(out) is SameAsArg:
        r = args[out.index]
        if type(desc) is TensorMeta and isinstance(r, PointerTensor) and desc.mkey is not r._ref.meta:
            _restride(r, desc)
        return r
    if type(out) in _seq:
        if type(desc) is not tuple or len(desc) != len(out):
            desc = (None,) * len(out)
        return type(out)(wrap_result(cls, o, loc, args, d) for o, d in zip(out, desc))
    if isinstance(out, (_Tensor, tuple, list)):  # a tensor, or a named tuple (torch.return_types) of them
        raise _unstored_error(out, loc)
    return out


def _torch_call(func, types, args, kwargs):
    """torch's own implementation of ``func`` on pointers (torch function disabled), its result
    checked: every tensor it returns is a pointer. A composite that makes its output itself with
    ``at::empty(..., x.options())`` (``vander``) makes it here, a plain tensor on the pointer's
    placeholder meta device, and fills it by ops on it that a worker cannot run. An empty such
    result holds nothing: it becomes a pointer to an empty tensor made on the worker; any other
    is refused (the op would need its helper made on the worker: composite.py). A composite
    aten overload called by name goes to the worker whole instead (whole_ops.py)."""
    if type(func) is _OpOverload:
        result = whole_call(func, args, kwargs, PointerTensor)
        if result is not None:
            return result
    result = _no_torch_function(func, types, args, kwargs)
    if type(result) is _Tensor:
        return _placed(result, func, args, kwargs)
    if type(result) is not PointerTensor and isinstance(result, (tuple, list)) and any(type(r) is _Tensor for r in result):
        return type(result)([_placed(r, func, args, kwargs) if type(r) is _Tensor else r for r in result])
    return result


def _placed(t: _Tensor, func, args, kwargs):
    pointers = flat_layers(PointerTensor, list(args) + list(kwargs.values()))
    if not t.is_meta or not pointers:
        return t
    loc = pointers[0].location
    if t.numel() == 0:
        out = loc._run(aten.empty.memory_format, [list(t.shape)], {"dtype": t.dtype})
        return wrap_result(PointerTensor, out, loc)
    raise SyftError(f"{getattr(func, '__name__', func)} made its result in this process (a {t.dtype} tensor of "
                    f"shape {list(t.shape)} on the meta device) instead of on worker {loc.id!r}: not supported "
                    f"through a pointer. Run it on the data (.get() first) or report it")


def _unstored_error(out, loc) -> SyftError:
    """Every tensor an op on a pointer returns is a pointer: a reply that carries a tensor's data
    (or a container type the worker did not describe as its results) is refused, never handed
    back: the worker's values would have left it without ``.get()``."""
    return SyftError(
        f"worker {loc.id!r} answered an op with a {type(out).__module__}.{type(out).__name__} instead of "
        f"stored results: its values never leave the worker without .get(), so nothing is returned "
        f"(a defect of the worker's reply path: report it)")


def _restride(p: PointerTensor, desc: TensorMeta) -> None:
    """An in-place op changed the remote tensor's metadata (``t_``, ``squeeze_``, ``resize_``):
    the wrapper takes it over, so later ops see what the worker holds."""
    with _no_python_dispatch():  # set_ on the wrapper itself, not an op for the worker
        _Tensor.set_(p, _make_wrapper(type(p), desc.shape, desc.stride, desc.offset, None, desc.dtype,
                                      _strided, _META))
    ref = p._ref
    ref.shape, ref.meta = p.shape, desc.mkey
