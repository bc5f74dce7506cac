"""Direct tracing: record a plan's aten ops with a ``__torch_dispatch__`` mode, without make_fx.

torch's ``make_fx`` imports ``torch._dynamo`` (and with it inductor, networkx, ...) on its first
use, about half a second of a fresh process's first plan build; so do ``FakeTensorMode`` and the
Python meta kernels (their type-promotion wrappers are ``torch._disable_dynamo`` functions). A
plan whose state and inputs are small is traced here instead: the function runs once on zero
tensors of the inputs' shapes and dtypes (never the caller's values), under a dispatch mode
that sits below autograd, as make_fx's does, so the ops of a backward pass and an optimizer
step are recorded too. Each op is run for real, on these few elements, and recorded with its
arguments as references to the values before it: the same aten ops, in the same order, as
make_fx records (the same CompositeImplicitAutograd decompositions, ``lift_fresh`` as
``lift_fresh_copy``).

What this tracer does not do, it hands back (``Unsupported``) and ``trace`` uses make_fx:
inputs, state or constants of more than ``REAL_ELEMENTS`` elements, an op whose outputs pass
``OUT_ELEMENTS`` (an outer product), ops whose output shape follows the data (``nonzero``),
tensor subclasses, ops outside aten, an op that fails on zeros (a Cholesky of a zero matrix).
A read of a tensor's value (``.item()``, ``if x.sum() > 0``) is the same error as make_fx's;
a read of its memory outside aten (``.numpy()``, ``.tolist()``, ``data_ptr()``) goes to make_fx.
The process's random generator is as before afterwards (a random op draws while tracing).
"""
from __future__ import annotations

import linecache
import sys

import torch
from torch.utils._python_dispatch import TorchDispatchMode, autograd_would_have_decomposed

from ..dtypes import dtype_name
from .graph import Node, Value, manual_seed

REAL_ELEMENTS = 2 ** 20  # state, inputs and constants together, traced for real up to this many elements
OUT_ELEMENTS = 2 ** 24  # one op's outputs: past this the trace goes to make_fx's meta tensors

_aten = torch.ops.aten
_Tensor = torch.Tensor
_DATA = torch.Tag.data_dependent_output
_DYNAMIC = torch.Tag.dynamic_output_shape
_SHAPE_QUERIES = (_aten.size.default, _aten.stride.default, _aten.storage_offset.default)
_PASS = ("prim", "profiler")  # device queries, record_function markers: run, nothing to replay
_TORCH_DIR = torch.__file__.rsplit("/", 1)[0] + "/"
_SYFT_DIR = __file__.rsplit("/", 2)[0] + "/"


class Unsupported(Exception):
    """The direct tracer does not trace this function: make_fx does (plans/trace.py)."""


class OwnGenerator(Exception):
    """An op given a torch.Generator of the function's own (trace.py says why that is refused)."""


class DataDependent(RuntimeError):
    """A data-dependent read while tracing (the words make_fx's error uses: trace.py knows them)."""


# Tensor methods that read a tensor's memory without an aten op the Recorder would see: the
# trace then goes to make_fx, whose fake tensors refuse them as they always have
_MEMORY_READS = frozenset(("numpy", "__array__", "data_ptr", "tolist", "__dlpack__", "untyped_storage",
                           "storage", "_storage", "__reduce_ex__"))


class _NoMemoryReads(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", None) in _MEMORY_READS:
            raise Unsupported(f"{func.__name__} reads a tensor's memory")
        return func(*args, **(kwargs or {}))


_current: "Recorder | None" = None  # the recorder of the trace running now (manual_seed finds it)


def recording() -> "Recorder | None":
    return _current


def _numel(t) -> int:
    n = 1
    for s in t.shape:
        n *= s
    return n


class Recorder(TorchDispatchMode):
    """Records every aten op that reaches it: nodes, the constants they read, and per tensor
    (by identity) the value that made it."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ in torch._disable_dynamo otherwise, whose first
        # call imports torch._dynamo: what this tracer is here to avoid
        return False

    def __init__(self, anchor=None):
        super().__init__()
        self.values: dict[int, Value] = {}  # id(tensor) -> the value that made it
        self._alive: list = []  # every tensor of ``values``: its id stays its own while tracing
        self.nodes: list[Node] = []
        self.constants: list[_Tensor] = []  # copies of the tensors the function closed over
        self.originals: list[_Tensor] = []  # the tensors themselves (their names, requires_grad)
        self._computed: dict[int, _Tensor] = {}  # id(original) -> the copy ops compute on
        self._anchor = getattr(anchor, "__code__", None)

    def track(self, t: _Tensor, v: Value) -> None:
        self.values[id(t)] = v
        self._alive.append(t)

    def constant(self, t: _Tensor) -> Value:
        """A tensor no op of the trace made: one of the function's constants."""
        if _numel(t) > REAL_ELEMENTS or type(t) not in (_Tensor, torch.nn.Parameter) or t.device.type != "cpu":
            raise Unsupported("a large, subclassed or non-CPU constant")
        v = Value("const", len(self.constants))
        self.constants.append(t.detach().clone())
        self.originals.append(t)
        self._alive.append(t)
        self.values[id(t)] = v
        self._computed[id(t)] = t.detach().clone()
        return v

    def _arg(self, a):
        """(what the node records, what the op runs on) for one argument."""
        if isinstance(a, _Tensor):
            v = self.values.get(id(a))
            if v is None:
                v = self.constant(a)
            if v.kind == "const":
                return v, self._computed[id(self.originals[v.index])]
            return v, a
        if type(a) in (list, tuple):
            pairs = [self._arg(b) for b in a]
            return [p[0] for p in pairs], type(a)(p[1] for p in pairs)
        if isinstance(a, torch.Generator):
            raise OwnGenerator()
        if isinstance(a, torch.device) and a.type != "cpu":
            raise Unsupported("a device other than the CPU")
        return a, a

    def _source(self):
        """The user's line of the op being recorded: the innermost frame of the plan's own
        function or of a ``forward``, outside torch and syft_lab (what make_fx's stack traces keep)."""
        f = sys._getframe(2)
        while f is not None:
            code = f.f_code
            if (code is self._anchor or code.co_name == "forward") and not code.co_filename.startswith(
                    (_TORCH_DIR, _SYFT_DIR)):
                line = f.f_lineno
                return {"file": code.co_filename, "line": line,
                        "code": linecache.getline(code.co_filename, line).strip()}
            f = f.f_back
        return None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace in _PASS:
            return func(*args, **kwargs)
        if func.namespace != "aten" or any(t is not _Tensor and t is not torch.nn.Parameter for t in types):
            raise Unsupported(f"{func} (not aten, or on a tensor subclass)")
        if _DATA in func.tags:
            raise DataDependent(f"{func} reads a data-dependent value of a tensor while tracing")
        if _DYNAMIC in func.tags:
            raise Unsupported(f"{func}: its output shape follows the data")
        if func not in _SHAPE_QUERIES:
            flat = [*args, *kwargs.values()]
            if autograd_would_have_decomposed(func, flat):  # as make_fx does (inference mode skips autograd)
                with self:
                    r = func.decompose(*args, **kwargs)
                if r is not NotImplemented:
                    return r
        if func is _aten.lift_fresh.default:  # torch.tensor(...) in the function: a fresh copy of a constant
            func = _aten.lift_fresh_copy.default
        rec_args, run_args = [], []
        for a in args:
            r, x = self._arg(a)
            rec_args.append(r)
            run_args.append(x)
        rec_kw, run_kw = {}, {}
        for k, a in kwargs.items():
            rec_kw[k], run_kw[k] = self._arg(a)
        out = func(*run_args, **run_kw)
        outs = [out] if isinstance(out, _Tensor) else [o for o in out if isinstance(o, _Tensor)] if type(
            out) in (list, tuple) else []
        if sum(_numel(o) for o in outs) > OUT_ELEMENTS:
            raise Unsupported(f"{func} made {sum(_numel(o) for o in outs)} elements")
        k = len(self.nodes)
        self.nodes.append(Node(func, rec_args, rec_kw, [(tuple(o.shape), dtype_name(o.dtype)) for o in outs],
                               self._source()))
        if isinstance(out, _Tensor):
            self.track(out, Value("node", k))
        elif type(out) in (list, tuple):
            for i, o in enumerate(out):
                if isinstance(o, _Tensor):
                    self.nodes.append(Node("getitem", [Value("node", k), i], {},
                                           [(tuple(o.shape), dtype_name(o.dtype))]))
                    self.track(o, Value("node", len(self.nodes) - 1))
        return out

    def seed(self, seed: int) -> None:
        """``torch.manual_seed(seed)`` in the function: a node (replay seeds its generator)."""
        self.nodes.append(Node(manual_seed, [int(seed)], {}, []))

    def output(self, t) -> Value:
        if not isinstance(t, _Tensor):
            raise TypeError("not a tensor")
        v = self.values.get(id(t))
        return v if v is not None else self.constant(t)


def run(flat_fn, examples: list, anchor=None):
    """Run ``flat_fn(*examples)`` under a Recorder; returns ``(recorder, output)``. The default
    generator's state is put back (random ops draw while the function runs)."""
    global _current
    rec = Recorder(anchor)
    for i, e in enumerate(examples):
        rec.track(e, Value("input", i))
    rng = torch.random.get_rng_state()
    previous, _current = _current, rec
    try:
        with _NoMemoryReads(), rec:
            out = flat_fn(*examples)
    finally:
        _current = previous
        torch.random.set_rng_state(rng)
    return rec, out
