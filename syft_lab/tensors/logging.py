"""LoggingTensor: a layer that records every op done to it, then forwards the op to its child.

Why it exists: the smallest useful layer, and the one students meet first. It shows that a
chain layer is a real tensor (nn layers, losses, autograd and optimizers take it) and what
torch actually runs for a line of Python (``lx.log``: aten ops, forward and backward apart,
each with the notebook cell that ran it).
"""
from __future__ import annotations

import copy

import torch

from ..dtypes import dtype_name, parse_dtype
from ..errors import SyftError
from ..events import current_cell
from .base import ChainLayer, forward_to_child, layer_like, require_tensor
from .composite import state_on_worker
from .pointer import PointerTensor, lazy_bits_included
from .registry import register_layer, wire_list, wire_shape, wire_text

_Tensor = torch.Tensor
_make_wrapper = torch.Tensor._make_wrapper_subclass
_seq = (list, tuple)
_no_python_dispatch = torch._C._DisableTorchDispatch
_strided = torch.strided


# id(op) -> (op, whether its schema writes to an argument), memoised: checked on every op. Keyed
# by id because an OpOverload hashes in Python (~0.2 us); the op kept in the entry guards the id.
_writes: dict = {}


def _schema_writes(func) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _run(func, args, kwargs):
    """The op on the unwrapped arguments. Inside __torch_dispatch__ torch has turned off the
    keys that resolve a conjugate or negative view, so a kernel would read such a view's raw
    memory (hfftn was off by up to 4.4): an op given one runs with them on again."""
    for a in args:
        if type(a) is _Tensor and (a.is_conj() or a.is_neg()):
            with lazy_bits_included():
                return func._op(*args, **(kwargs or {}))
    return func._op(*args, **kwargs) if kwargs else func._op(*args)


def _synced(cls, layer, child):
    """``layer`` after an in-place op on ``child``: ops like ``t_``, ``unsqueeze_`` and
    ``resize_`` change the child's shape, which the wrapper must then take over."""
    if isinstance(layer, cls) and (
            layer.shape != child.shape or layer.stride() != child.stride()
            or layer.storage_offset() != child.storage_offset()):
        with _no_python_dispatch():  # set_ on the wrapper itself, not forwarded to the child
            _Tensor.set_(layer, layer_like(cls, child))
        layer._meta = (child.shape, child.dtype)
    return layer


_graph_task_id = torch._C._current_graph_task_id  # -1 unless autograd's backward is running
_cell = current_cell  # .number: the notebook cell running now (read on every op)

class OpRecord:
    """One op seen by a LoggingTensor: the aten op, the shapes/dtypes of its tensor inputs,
    whether autograd's backward ran it (the op log shows forward and backward apart) and the
    notebook cell that ran it (``syft_lab.events.current_cell``; None outside a notebook)."""

    __slots__ = ("func", "inputs", "backward", "cell")

    def __init__(self, func, inputs, backward=False, cell=None):
        self.func = func  # an OpOverload, or its name once restored from a pickle or the wire
        self.inputs = inputs  # tuple of (torch.Size, torch.dtype)
        # the graph task id while recording (-1 outside backward), or a bool once restored
        self.backward = backward is True or (type(backward) is int and backward >= 0)
        self.cell = cell  # the execution count of the cell, or None

    @property
    def op(self) -> str:
        return str(self.func)  # e.g. "aten.addmm.default"

    def to_dict(self) -> dict:
        return {"op": self.op, "backward": self.backward, "cell": self.cell,
                "inputs": [{"shape": list(s), "dtype": dtype_name(d)} for s, d in self.inputs]}

    def __repr__(self):
        ins = ", ".join(f"{dtype_name(d)}{list(s)}" for s, d in self.inputs)
        return f"{self.op}({ins})"

    def __reduce__(self):
        return (OpRecord, (self.op, self.inputs, self.backward, self.cell))

    def __deepcopy__(self, memo):
        return self  # immutable


class OpLog(list):
    """The shared list of ops of a LoggingTensor and of everything computed from it.

    Entries are stored as compact ``(func, inputs, graph task id, cell)`` tuples (appending must be cheap: it
    happens on every op) and read as OpRecords."""

    __slots__ = ()

    @staticmethod
    def _record(e):
        return e if type(e) is OpRecord else OpRecord(*e)

    def __getitem__(self, i):
        e = list.__getitem__(self, i)
        if type(i) is slice:
            return [self._record(x) for x in e]
        return self._record(e)

    def __iter__(self):
        for e in list.__iter__(self):
            yield self._record(e)

    def ops(self) -> list[str]:
        return [r.op for r in self]

    def __repr__(self):
        return f"OpLog({[r.op for r in self]})"


def _short_op(name: str) -> str:
    """``aten.addmm.default`` -> ``addmm`` (the op log shows the full name)."""
    parts = name.split(".")
    return parts[1] if len(parts) >= 3 and parts[0] == "aten" else name


@register_layer
class LoggingTensor(ChainLayer):
    """Logs each op (backward ops included) and forwards it to ``child``.

    Results are LoggingTensors that share their input's log, so ``lx.log`` lists every op done
    on ``lx`` and on what was computed from it. If ``child`` requires grad, the LoggingTensor
    becomes the autograd leaf (its child is detached): grads then arrive at ``lx.grad``.
    """

    kind = "logging"
    wire_code = 10
    wire_schema = {"records": list}
    node_actions = ("send", "oplog")
    # Slots: read and written on every op, found before torch.Tensor's long attribute lookup.
    # ``_meta``: the child's (shape, dtype), kept for the log records of the ops it enters
    # (reading them off the tensor again costs ~0.1 us per input, a sixth of the layer's cost).
    __slots__ = ("child", "log", "_meta")

    @staticmethod
    def __new__(cls, child, log=None):
        require_tensor(cls.__name__, child)
        rg = child.requires_grad
        r = layer_like(cls, child, rg)
        r.child = child.detach() if rg else child
        r.log = OpLog() if log is None else log
        r._meta = (child.shape, child.dtype)
        return r

    def __init__(self, child, log=None):
        pass  # all done in __new__; torch.Tensor.__init__ would reject the arguments

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        log = None
        inputs = []  # each tensor input's (shape, dtype), in order

        def unwrap(t):
            nonlocal log
            if isinstance(t, cls):
                if log is None:
                    log = t.log
                inputs.append(t._meta)
                return t.child
            inputs.append((t.shape, t.dtype))
            return t

        unwrapped, kw = forward_to_child(args, kwargs, unwrap)
        out = _run(func, unwrapped, kw)
        if log is None:  # none of this class among the arguments (torch found it elsewhere)
            log = OpLog()
        log.append((func, inputs, _graph_task_id(), _cell.number))

        entry = _writes.get(id(func))
        if entry is None or entry[0] is not func:
            entry = _writes[id(func)] = (func, _schema_writes(func))
        if entry[1]:  # in-place and out= ops return an input: give back the caller's own object
            for orig, u in zip(args, unwrapped):
                if out is u:
                    return _synced(cls, orig, u)
            if kw:
                for k, u in kw.items():
                    if out is u:
                        return _synced(cls, kwargs[k], u)
        if isinstance(out, _Tensor):
            # layer_like inline for the common case (a strided CPU tensor): this runs on every op.
            shape, dtype = out.shape, out.dtype
            if out.is_cpu and out.layout is _strided:
                r = _make_wrapper(cls, shape, out.stride(), out.storage_offset(), None, dtype)
            else:
                r = layer_like(cls, out)
            r.child = out
            r.log = log
            r._meta = (shape, dtype)
            return r
        if type(out) in _seq:
            return type(out)(cls._rewrap(o, args, unwrapped, log) for o in out)
        return out

    @classmethod
    def _rewrap(cls, out, args, unwrapped, log):
        """One element of an op's tuple or list result, as a layer (lists inside too)."""
        if type(out) in _seq:
            return type(out)(cls._rewrap(o, args, unwrapped, log) for o in out)
        if not isinstance(out, _Tensor):
            return out
        for orig, u in zip(args, unwrapped):
            if out is u:
                return orig
        r = layer_like(cls, out)
        r.child = out
        r.log = log
        r._meta = (out.shape, out.dtype)
        return r

    # --- the layer protocol (base.py) ---------------------------------------------------
    def node_fields(self) -> dict:
        return {"log_length": len(self.log), "log_tail": [r.op for r in self.log[-5:]]}

    def display(self) -> dict:
        n = len(self.log)
        if not n:
            line = "no ops yet"
        else:
            names = [_short_op(r.op) for r in self.log[-3:]]
            line = f"{n} op{'s' if n != 1 else ''}: {'..., ' if n > 3 else ''}{', '.join(names)}"
        return {"label": type(self).__name__, "lines": [line], "badge": None}

    def stored_copy(self, copy_child):
        return type(self)(copy_child(self.child), OpLog(list.__iter__(self.log)))

    def wire_fields(self) -> dict:
        return {"records": [[r.op, [[list(s), dtype_name(d)] for s, d in r.inputs], r.backward, r.cell]
                            for r in self.log]}

    @classmethod
    def from_wire(cls, fields, children):
        if len(children) != 1:
            raise SyftError("a LoggingTensor has one child")
        log = OpLog()
        for r in wire_list(fields["records"], "a log"):
            if type(r) is not list or len(r) != 4 or type(r[1]) is not list or type(r[2]) is not bool or not (
                    r[3] is None or (type(r[3]) is int and r[3] >= 0)):
                raise SyftError("a log record is [op name, [[shape, dtype], ...], backward, cell or None]")
            inputs = []
            for i in r[1]:
                if type(i) is not list or len(i) != 2:
                    raise SyftError("a log record input is [shape, dtype]")
                inputs.append((torch.Size(wire_shape(i[0])), parse_dtype(i[1])))
            log.append(OpRecord(wire_text(r[0], "an op name"), tuple(inputs), r[2], r[3]))
        return cls(children[0], log)

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        child = copy.deepcopy(self.child, memo)
        if self.requires_grad:
            child.requires_grad_(True)
        new = LoggingTensor.__new__(type(self), child, OpLog(list.__iter__(self.log)))
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        # A LoggingTensor is local data plus its log: both pickle safely and come back whole.
        return (_rebuild_logging_tensor, (type(self), self.child, self.requires_grad, [r for r in self.log]))


# --- Recurrent layers -------------------------------------------------------------------------
# torch's RNN ops (``_VF.rnn_tanh``, ``_VF.lstm``, the cells...) are composite: they decompose
# above __torch_dispatch__, into steps like ``linear(hx).add_(input)``. When ``nn.RNN`` made the
# initial state itself (``torch.zeros``), that in-place add writes the LoggingTensor input's
# values into a plain tensor, so the output came back plain and unlogged. A kernel at the
# PythonTLSSnapshot key, which only tensors with a Python key (wrapper subclasses, fake tensors)
# or an active dispatch mode carry, gives a plain state the input's chain of LoggingTensors
# first. Plain tensors never reach it and other ops pay nothing (a __torch_function__ on the
# class would cost every op about 1 us).

_RNN_OPS = ("rnn_tanh.input", "rnn_tanh.data", "rnn_relu.input", "rnn_relu.data", "lstm.input", "lstm.data",
            "gru.input", "gru.data", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell", "gru_cell")
_AFTER_SNAPSHOT = torch._C._dispatch_keyset_full_after(torch._C.DispatchKey.PythonTLSSnapshot)


def _logs_of(args) -> list | None:
    """The logs of the first LoggingTensor chain among ``args`` (outermost first), or None."""
    for a in args:
        for t in (a if type(a) in _seq else (a,)):
            if isinstance(t, LoggingTensor):
                logs = []
                while isinstance(t, LoggingTensor):
                    logs.append(t.log)
                    t = t.child
                return logs
    return None


def _in_chain(t, logs):
    """``t`` as LoggingTensors with ``logs``, differentiably when ``t`` requires grad."""
    if not isinstance(t, _Tensor) or isinstance(t, LoggingTensor):
        return t
    for log in reversed(logs):
        if t.requires_grad:  # wrapping would cut t's history: add it to a logged zero instead
            t = LoggingTensor(t.new_zeros(()), log) + t
        else:
            t = LoggingTensor(t, log)
    return t


def _rnn_kernel(op):
    names = [a.name for a in op._schema.arguments]
    hx_at = names.index("hx")

    def kernel(keyset, *args, **kwargs):
        logs = _logs_of(list(args) + list(kwargs.values()))
        like = args[0] if args and isinstance(args[0], PointerTensor) else None
        if like is not None:  # an RNN on pointers: its own zero state is made on their worker
            if "hx" in kwargs:
                kwargs["hx"] = _on_worker_all(kwargs["hx"], like)
            elif len(args) > hx_at:
                args = (*args[:hx_at], _on_worker_all(args[hx_at], like), *args[hx_at + 1:])
        elif logs is not None:
            if "hx" in kwargs:
                kwargs["hx"] = _in_chain_all(kwargs["hx"], logs)
            elif len(args) > hx_at:
                args = (*args[:hx_at], _in_chain_all(args[hx_at], logs), *args[hx_at + 1:])
        return op.redispatch(keyset & _AFTER_SNAPSHOT, *args, **kwargs)

    return kernel


def _on_worker_all(hx, like):
    if type(hx) in _seq:  # lstm: [h, c]
        return [state_on_worker(t, like) for t in hx]
    return state_on_worker(hx, like)


def _in_chain_all(hx, logs):
    if type(hx) in _seq:  # lstm: [h, c]
        return [_in_chain(t, logs) for t in hx]
    return _in_chain(hx, logs)


_rnn_library = torch.library.Library("aten", "IMPL")
for _name in _RNN_OPS:
    _packet, _, _overload = _name.partition(".")
    _op = getattr(getattr(torch.ops.aten, _packet), _overload or "default")
    _rnn_library.impl(_name, _rnn_kernel(_op), "PythonTLSSnapshot", with_keyset=True)


def _rebuild_logging_tensor(cls, child, requires_grad, records):
    if requires_grad:
        child = child.detach().requires_grad_(True)
    return cls(child, OpLog(records))
