"""LoggingTensor: a layer that records every op done to it, then forwards the op to its child."""
from __future__ import annotations

import torch

from .base import ChainLayer, make_layer, require_tensor

_Tensor = torch.Tensor
_make_wrapper = torch.Tensor._make_wrapper_subclass
_seq = (list, tuple)


_writes: dict = {}  # op -> whether its schema writes to an argument (memoised: checked per op)


def _schema_writes(func) -> bool:
    return any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


class OpRecord:
    """One op seen by a LoggingTensor: the aten op and the shapes/dtypes of its tensor inputs."""

    __slots__ = ("func", "inputs")

    def __init__(self, func, inputs):
        self.func = func  # an OpOverload, or its name once restored from a pickle
        self.inputs = inputs  # tuple of (torch.Size, torch.dtype)

    @property
    def op(self) -> str:
        return str(self.func)  # e.g. "aten.addmm.default"

    def to_dict(self) -> dict:
        return {"op": self.op,
                "inputs": [{"shape": list(s), "dtype": str(d).replace("torch.", "")} for s, d in self.inputs]}

    def __repr__(self):
        ins = ", ".join(f"{str(d).replace('torch.', '')}{list(s)}" for s, d in self.inputs)
        return f"{self.op}({ins})"

    def __reduce__(self):
        return (OpRecord, (self.op, self.inputs))

    def __deepcopy__(self, memo):
        return self  # immutable


class OpLog(list):
    """The shared list of ops of a LoggingTensor and of everything computed from it.

    Entries are stored as compact ``(func, inputs)`` tuples (appending must be cheap: it
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


class LoggingTensor(ChainLayer):
    """Logs each op (backward ops included) and forwards it to ``child``.

    Results are LoggingTensors that share their input's log, so ``lx.log`` lists every op done
    on ``lx`` and on what was computed from it. If ``child`` requires grad, the LoggingTensor
    becomes the autograd leaf (its child is detached): grads then arrive at ``lx.grad``.
    """

    kind = "logging"

    @staticmethod
    def __new__(cls, child, log=None):
        require_tensor(cls.__name__, child)
        rg = child.requires_grad
        r = make_layer(cls, child.shape, child.dtype, child.device, rg)
        r.child = child.detach() if rg else child
        r.log = OpLog() if log is None else log
        return r

    def __init__(self, child, log=None):
        pass  # all done in __new__; torch.Tensor.__init__ would reject the arguments

    @classmethod
    def __torch_dispatch__(cls, func, types, args, kwargs=None):
        # Flat unwrap of top-level args and one level of lists: a pytree walk costs ~3x.
        log = None
        unwrapped = []
        inputs = []
        for a in args:
            if isinstance(a, cls):
                a = a.child
                if log is None:
                    log = args[len(unwrapped)].log
                unwrapped.append(a)
                inputs.append((a.shape, a.dtype))
            elif isinstance(a, _Tensor):
                unwrapped.append(a)
                inputs.append((a.shape, a.dtype))
            elif type(a) in _seq:
                inner = []
                for b in a:
                    if isinstance(b, cls):
                        if log is None:
                            log = b.log
                        b = b.child
                    if isinstance(b, _Tensor):
                        inputs.append((b.shape, b.dtype))
                    inner.append(b)
                unwrapped.append(inner)
            else:
                unwrapped.append(a)
        kw = None
        if kwargs:
            kw = {}
            for k, v in kwargs.items():
                if isinstance(v, cls):
                    if log is None:
                        log = v.log
                    v = v.child
                if isinstance(v, _Tensor):
                    inputs.append((v.shape, v.dtype))
                kw[k] = v
            out = func._op(*unwrapped, **kw)
        else:
            out = func._op(*unwrapped)
        if log is None:  # a layer nested deeper than we unwrap: it logged in its own dispatch
            log = OpLog()
        log.append((func, inputs))

        writes = _writes.get(func)
        if writes is None:
            writes = _writes[func] = _schema_writes(func)
        if writes:  # in-place and out= ops return an input: give back the caller's own object
            for orig, u in zip(args, unwrapped):
                if out is u:
                    return orig
            if kw:
                for k, u in kw.items():
                    if out is u:
                        return kwargs[k]
        if isinstance(out, _Tensor):
            if out.is_cpu:
                r = _make_wrapper(cls, out.shape, dtype=out.dtype)
            else:
                r = _make_wrapper(cls, out.shape, dtype=out.dtype, device=out.device)
            r.child = out
            r.log = log
            return r
        if type(out) in _seq:
            return type(out)(cls._rewrap(o, args, unwrapped, log) if isinstance(o, _Tensor) else o for o in out)
        return out

    @classmethod
    def _rewrap(cls, out, args, unwrapped, log):
        for orig, u in zip(args, unwrapped):
            if out is u:
                return orig
        r = make_layer(cls, out.shape, out.dtype, out.device)
        r.child = out
        r.log = log
        return r

    def _node_fields(self) -> dict:
        return {"log_length": len(self.log), "log_tail": [r.op for r in self.log[-5:]]}

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        import copy

        child = copy.deepcopy(self.child, memo)
        if self.requires_grad:
            child.requires_grad_(True)
        new = LoggingTensor.__new__(type(self), child, OpLog(list.__iter__(self.log)))
        memo[id(self)] = new
        return new

    def __reduce_ex__(self, protocol):
        # A LoggingTensor is local data plus its log: both pickle safely and come back whole.
        return (_rebuild_logging_tensor, (type(self), self.child, self.requires_grad, [r for r in self.log]))


def _rebuild_logging_tensor(cls, child, requires_grad, records):
    if requires_grad:
        child = child.detach().requires_grad_(True)
    return cls(child, OpLog(records))
