"""The op policy: which aten ops a worker runs for a client, and the checks before and after.

The op set is derived from torch's own schemas, not hand-picked: every aten overload with a
kernel that computes on strided CPU tensors (a CPU kernel or a composite one),
less what a structural rule or the short deny-list below excludes. What keeps it safe are checks
that apply to whole classes of ops, decided from the schema (``check_call``):

- arguments by type: devices are the CPU, layouts strided, dtypes the ones a worker holds;
- sizes and strides of views (``as_strided``, ``_reshape_alias``...) stay inside the storage;
- a meta run first (shapes, strides and dtypes, no data; memoised per signature): it refuses
  bad argument combinations before a real kernel sees them, and an op that would resize a
  tensor argument in place;
- a bound on the work (``op_cost.op_work``): super-linear families (windows, convolutions,
  contractions, linear algebra, sorting, degrees) are bounded from shapes and arguments;
- per-family argument checks for kernels that trust their arguments (``op_checks``).

PyTorch promises no memory safety for bad arguments (its SECURITY.md): these checks, the deny-
list and the fuzzer (benchmarks/fuzz_ops.py, tests/network/test_op_fuzz.py) are what stand
between a client and the worker's memory. docs/op-allowlist.md states the policy; its tables
are generated from this module (``python -m syft_lab.wire.policy_doc``).
"""
from __future__ import annotations

import importlib.util
import operator
import os
import re

import torch

from ..dtypes import DTYPES
from ..errors import QuotaExceededError
from ..tensors import whole_ops
from . import op_checks, op_cost
from .meta import OnMeta, meta_like, run_on_meta, to_meta
from .op_checks import OpNotAllowedError

aten = torch.ops.aten
_NAME = re.compile(r"^aten\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$")
__all__ = ["OpNotAllowedError", "ALLOWED", "ALLOWED_OPS", "resolve", "is_allowed", "op_name", "check_call",
           "check_result", "decided_by_metadata"]

# A CPU kernel, or a composite one written once for every backend in terms of other ops (a
# pointer's ops arrive decomposed; plans and secure computation also name composites such as
# reshape and matmul). A composite's inner calls skip this module's per-op checks, so the
# checks that matter are by family name (batch_norm covers _batch_norm_impl_index...) and
# its meta run goes through the inner ops' meta kernels.
KERNEL_KEYS = ("CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
               "CompositeImplicitAutograd")

# --- the deny-list: what is unsafe by nature (regex on the op's base name, why) ---------------
DENIED = (
    (r"^(set_|set_data|resize_|resize_as_|resize_as_sparse_|_resize_output_|_copy_from|_copy_from_and_resize"
     r"|_lazy_clone|_efficientzerotensor)$",
     "storage manipulation: replaces, resizes or shares a stored tensor's storage (a reply may be streaming it)"),
    (r"^_unsafe(?!_view$)", "`_unsafe*` internals skip their kernels' own checks (`_unsafe_view` is checked instead)"),
    (r"sparse|spdiags|^_convert_indices_from|^_?to_dense|coalesce|^_?(crow_|col_|ccol_|row_)?(indices|values)(_copy)?$|^_dim[IV]$"
     r"|^_nnz$|^dense_dim$|^_validate_.*(csr|csc|bsr|bsc|compressed)",
     "sparse layouts and their constructors (index arrays that kernels trust)"),
    (r"quant|^q_|^_make_per_|^int_repr|qparams|obs_fq|prepack|^_?fbgemm|int4pack|int8pack|^_dyn_quant",
     "quantized tensors and their packers"),
    (r"nested|jagged|^_padded_dense|^to_padded_tensor", "nested tensors (offsets that kernels trust)"),
    (r"mkldnn|^_?mkl_|cudnn|miopen|^_mps|vulkan|^_cufft|^_cuda|xnnpack|nnpack|^_cslt|^_use_|^_triton|^_fused_sdp",
     "other backends' internals"),
    (r"^(from_file|_print|save|_assert.*|_functional_assert.*|_record_function.*|record_stream|_?pin_memory"
     r"|is_pinned|_async_error|_test_.*|_debug.*|sym_constrain_range.*|_functional_sym_constrain_range.*"
     r"|_make_dep_token|_sobol_engine_.*)$",
     "host side effects (file I/O, printing, profiler records, aborting asserts, pinned memory), torch's test "
     "ops, and the Sobol engine's state machine"),
    (r"^(_add_batch_dim|_remove_batch_dim|_vmap.*|_wrap_for_grad|_unwrap_for_grad|_functionalize.*"
     r"|_propagate_xla_data|_backward|_fw_primal.*|_make_dual.*|_unpack_dual|retain_grad|requires_grad_"
     r"|_coalesced_|_new_zeros_with_same_feature_meta)$",
     "autograd, vmap and functionalization internals: they act on a tensor's wrapper state, not its values"),
)
_DENIED_RES = [(re.compile(p), why) for p, why in DENIED]

# Overloads the fuzzer found crashing a worker on CPU with arguments no check can rule out
# cheaply (benchmarks/fuzz_report.md): name -> what it did.
FUZZ_CRASHES: dict[str, str] = {
    "aten._thnn_differentiable_gru_cell_backward.default": "killed the worker with mismatched gate shapes (an "
                                                           "internal of RNN double backward; it checks none)",
    "aten._thnn_differentiable_lstm_cell_backward.default": "the same kernel family as the GRU cell's, unchecked",
    "aten._stack.default": "killed the worker with an empty list (stack, which checks it, stays allowed)",
    "aten._saturate_weight_to_fp16.default": "a composite that reads its input's data pointer: on a pointer's meta "
                                             "placeholder it raises 'data is not allocated' (an fp16 "
                                             "quantization helper; clamp to the fp16 range instead)",
    "aten._cholesky_solve_helper.default": "killed the worker with mismatched shapes (cholesky_solve, which checks "
                                           "them, stays allowed)",
    "aten._compute_linear_combination.default": "read past its coefficients with mismatched shapes (an internal of "
                                                "matrix_exp, which checks them, stays allowed)",
}

_DENIED_TYPES = ("Storage", "Stream", "Event", "Dimname")
_OUT_OVERLOAD = re.compile(r"(^|_)out($|_)|grad_input")


def _has_kernel(op) -> bool:
    schema = op._schema
    full = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    try:
        return any(torch._C._dispatch_has_kernel_for_dispatch_key(full, k) for k in KERNEL_KEYS)
    except RuntimeError:  # a TorchScript-only operator (``mul.left_t``): no dispatcher entry
        return False


def _meta_runs_a_decomposition(op) -> bool:
    """A CPU kernel registered for the op while its Meta key falls to CompositeImplicitAutograd
    (mish_backward, native_channel_shuffle): what a pointer's placeholder computes is not what
    the worker computes (mish_backward's dtype follows its other argument on meta, not on CPU)."""
    schema = op._schema
    full = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    try:
        table = torch._C._dispatch_dump_table(full).splitlines()
    except RuntimeError:
        return False
    cpu = next((ln for ln in table if ln.startswith("CPU:")), "")
    meta = next((ln for ln in table if ln.startswith("Meta:")), "")
    return bool(cpu) and "CompositeImplicit" not in cpu and "CompositeImplicit" in meta


def structural_refusal(op) -> str | None:
    """Why the schema alone rules an overload out (None: it passes)."""
    schema = op._schema
    if _OUT_OVERLOAD.search(schema.overload_name) or any(
            a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return "out= overloads (they resize their output, freeing storage a reply may be streaming)"
    if not _has_kernel(op):
        return "no CPU or composite kernel (another backend's op, or a TorchScript helper)"
    if _meta_runs_a_decomposition(op):
        return ("a CPU kernel of its own while meta tensors (shape inference, a pointer's placeholder) run a "
                "composite decomposition: the two differ in dtypes and values")
    types = [str(a.type) for a in schema.arguments] + [str(r.type) for r in schema.returns]
    if not any("Tensor" in t for t in types):
        return "takes and returns no tensor"
    for a in schema.arguments:
        t = str(a.type)
        if any(bad in t for bad in _DENIED_TYPES):
            return "takes a Storage, Stream, Event or Dimname"
        if t == "Generator":  # an optional generator must be None (checked): none travels
            return "needs a Generator (none travels)"
    return None


def denial(name: str) -> str | None:
    """Why the deny-list refuses an overload ('aten.<base>.<overload>'), or None."""
    if name in FUZZ_CRASHES:
        return "crashed the fuzzer: " + FUZZ_CRASHES[name]
    base = name.split(".")[1]
    for pattern, why in _DENIED_RES:
        if pattern.search(base):
            return why
    return None


def _every_overload():
    for full in sorted(torch._C._dispatch_get_all_op_names()):
        if not full.startswith("aten::"):
            continue
        base, _, overload = full[6:].partition(".")
        packet = getattr(aten, base, None)
        if packet is None:
            continue
        op = getattr(packet, overload or "default", None)
        if isinstance(op, torch._ops.OpOverload):
            yield op


def _build():
    allowed, refused = {}, {}
    for op in _every_overload():
        name = str(op)
        why = structural_refusal(op) or denial(name)
        if why is None:
            allowed[name] = op
        else:
            refused[name] = why
    return allowed, refused


ALLOWED, REFUSED = _build()  # name -> OpOverload; name -> why not
ALLOWED_OPS = frozenset(ALLOWED.values())
ALLOWED_NAMES = frozenset(n.split(".")[1] for n in ALLOWED)


def resolve(name) -> torch._ops.OpOverload:
    """The aten OpOverload named ``name`` if it is allowed; OpNotAllowedError otherwise."""
    op = ALLOWED.get(name) if type(name) is str else None
    if op is not None:
        return op
    if type(name) is not str or len(name) > 200:
        raise OpNotAllowedError(f"an op is named by a string such as 'aten.add.Tensor', got {type(name).__name__}")
    if not _NAME.match(name):
        raise OpNotAllowedError(f"op {name!r} is not allowed: only aten.<op>.<overload> names are")
    why = REFUSED.get(name)
    if why is not None:
        base = name.split(".")[1]
        others = [n for n in ALLOWED if n.split(".")[1] == base]
        also = f" (allowed overloads of aten.{base}: {', '.join(others)})" if others else ""
        raise OpNotAllowedError(f"op {name!r} is denied by the worker's op policy: {why}{also} "
                                f"(docs/op-allowlist.md states the policy)")
    raise OpNotAllowedError(f"op {name!r} is denied by the worker's op policy (no such aten "
                            f"overload in this torch build)")


def is_allowed(name) -> bool:
    return type(name) is str and name in ALLOWED


def op_name(op) -> str:
    """The wire name of an OpOverload, e.g. 'aten.add.Tensor'."""
    return str(op)


# --- per-op plans: what check_call does for each allowed overload, decided once ----------------

_TENSOR_OR_SCALAR = re.compile(r"^(Optional\[)?(Tensor|number|bool)\]?$")  # (a Scalar's real type: number)
_CPU = torch.device("cpu")
_HELD_DTYPES = frozenset(DTYPES.values())


class _Plan:
    """What ``check_call`` does for one overload (built lazily, once)."""

    __slots__ = ("op", "name", "fast", "arg_check", "typed", "meta", "writes", "inplace_view", "view", "family",
                 "calls")

    def __init__(self, op):
        schema = op._schema
        self.op, self.name = op, str(op)
        args = schema.arguments
        # Pointwise ops on tensors and scalars only: TensorIterator checks their shapes itself,
        # and their work is their output's size, so no meta run is needed (the tiny add's path).
        self.arg_check = op_checks.check_for(self.name, op)
        if op_checks.refuses_empty_inputs(schema.name[6:]) and _meta_source(op) == "separate":
            self.arg_check = op_checks.with_empty_refusal(self.arg_check)
        self.family = op_cost.family_of(self.name, op)
        self.fast = self.arg_check is None and self.family is op_cost.LINEAR and torch.Tag.pointwise in op.tags \
            and all(_TENSOR_OR_SCALAR.match(str(a.real_type)) for a in args)
        # arguments checked by type: (position, keyword, kind)
        self.typed = _typed_arguments(op)
        self.meta = None if self.fast else _meta_source(op)
        self.writes = tuple(i for i, a in enumerate(args) if a.alias_info is not None and a.alias_info.is_write
                            and "Tensor" in str(a.type) and "[]" not in str(a.type))
        self.inplace_view = torch.Tag.inplace_view in op.tags
        self.view = self.inplace_view or any(r.alias_info is not None and not r.alias_info.is_write
                                             for r in schema.returns)
        self.calls: dict = {}  # (fast ops) number of tensor arguments -> torch's binding or op._op (fast_call)


_structured: set | None = None


def _structured_ops() -> set:
    """Names ('mm', 'add.Tensor') of the ops whose CPU kernel is a structured kernel: it runs its
    meta function (the shape and argument checks) before computing. Read once from the
    native_functions.yaml that ships inside the torch wheel (torchgen/packaged)."""
    global _structured
    if _structured is None:
        spec = importlib.util.find_spec("torchgen")
        path = os.path.join(os.path.dirname(spec.origin), "packaged", "ATen", "native", "native_functions.yaml") \
            if spec is not None and spec.origin else None
        try:
            text = open(path).read() if path else ""
        except OSError:
            text = ""
        _structured = {entry.split("(", 1)[0] for entry in text.split("\n- func: ")[1:]
                       if "structured_delegate:" in entry or "structured: True" in entry}
    return _structured


def _meta_source(op) -> str:
    """'kernel' when the op's CPU kernel checks what its meta run checks, first: a structured
    kernel (its meta function runs before it), or a Meta kernel registered from the same C++
    function as the CPU one. 'separate' otherwise: then a meta run's refusal is final."""
    schema = op._schema
    if (schema.name[6:] + ("." + schema.overload_name if schema.overload_name else "")) in _structured_ops():
        return "kernel"
    full = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    try:
        table = torch._C._dispatch_dump_table(full)
    except RuntimeError:
        return "separate"
    line = next((ln for ln in table.splitlines() if ln.startswith("Meta:")), "")
    return "kernel" if "RegisterMeta" in line else "separate"


def _type_kind(t: str, name: str) -> str | None:
    """How an argument of schema type ``t`` is checked (None: not by its type)."""
    if name == "unsafe" and t == "bool":
        return "unsafe"
    if "Device" in t:
        return "device"
    if "Layout" in t:
        return "layout"
    if "ScalarType" in t:
        return "dtype"
    if "MemoryFormat" in t:  # (torch casts any int to the C++ enum: -1 segfaults clone on meta tensors)
        return "memory_format"
    if "Generator" in t:
        return "generator"
    return None


def _typed_arguments(op) -> tuple:
    """``(position, name, kind, legal values)`` of every argument checked by its type: devices,
    layouts, dtypes, memory formats, generators, ``unsafe`` flags (legal values: None) and the
    int arguments that name a C++ enum (``op_checks.int_enums``: reduction codes, modes...)."""
    enums = op_checks.int_enums(op)
    typed = []
    for i, a in enumerate(op._schema.arguments):
        legal = enums.get(a.name)
        if legal is not None:
            typed.append((i, a.name, "enum", legal))
            continue
        kind = _type_kind(str(a.real_type), a.name)
        if kind:
            typed.append((i, a.name, kind, None))
    return tuple(typed)


_plans: dict[int, _Plan] = {}  # id(op) -> plan; the plan holds the op, so its id is never reused
_ALLOWED_IDS = frozenset(id(op) for op in ALLOWED_OPS)


def _plan(op) -> _Plan:
    plan = _plans.get(id(op))
    if plan is None:
        plan = _plans[id(op)] = _Plan(op)
    return plan


_MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1, torch.channels_last: 2,
                   torch.channels_last_3d: 3}  # (and their C++ codes, which torch also takes as ints)
_MEMORY_FORMAT_CODES = frozenset(_MEMORY_FORMATS.values())
_MemoryFormat, _Device, _DType = torch.memory_format, torch.device, torch.dtype


def _check_typed(plan: _Plan, args, kwargs) -> None:
    """Every enum-typed argument against its legal values, before anything (a meta run included)
    sees it: torch casts an int to a C++ enum unchecked, and some kernels switch on it blindly."""
    for i, key, kind, legal in plan.typed:
        v = args[i] if i < len(args) else (kwargs.get(key) if kwargs else None)
        if v is None:
            continue
        tp = type(v)
        if kind == "enum":
            if tp is not int or v not in legal[0]:
                raise OpNotAllowedError(f"{plan.name}: {key}={v!r:.40} is not one of its legal values: {legal[1]}")
        elif kind == "memory_format":
            if not (v in _MEMORY_FORMATS if tp is _MemoryFormat else tp is int and v in _MEMORY_FORMAT_CODES):
                raise OpNotAllowedError(f"{plan.name}: {key}={v!r:.40} is not a memory format (torch.contiguous_format, "
                                        f"preserve_format, channels_last or channels_last_3d)")
        elif kind == "device":
            if tp is not _Device or v.type != "cpu" or v.index not in (None, 0):
                raise OpNotAllowedError(f"{plan.name}: a worker makes tensors on its CPU only (device={v!r:.40})")
        elif kind == "layout":
            if v is not torch.strided:
                raise OpNotAllowedError(f"{plan.name}: only strided (dense) tensors are made on a worker "
                                        f"({key}={v!r:.40})")
        elif kind == "dtype":
            if tp is not _DType or v not in _HELD_DTYPES:
                raise OpNotAllowedError(f"{plan.name}: dtype {v!r:.40} is not one a worker holds "
                                        f"({', '.join(DTYPES)})")
        elif kind == "unsafe":
            if v is not False:
                raise OpNotAllowedError(f"{plan.name}: unsafe=True skips the kernel's own checks: refused")
        else:
            raise OpNotAllowedError(f"{plan.name}: a generator cannot travel; the worker uses its own")


_LITERAL_KINDS = ("enum", "memory_format")


class _Literals:
    __slots__ = ("name", "typed")

    def __init__(self, op):
        self.name = str(op)
        self.typed = tuple(t for t in _typed_arguments(op) if t[2] in _LITERAL_KINDS)


_literals: dict[int, _Literals] = {}  # id(op) -> its enum-typed arguments (an OpOverload lives as long as torch)


def check_enum_literals(op, args, kwargs) -> None:
    """Any overload's enum-typed int and memory-format arguments against their legal values, as
    ``check_call`` checks them, for code that runs an op in a client before a worker sees it (a
    composite's decomposition on a pointer's placeholder: tensors/whole_ops.py). Devices, dtypes
    and layouts are left to the worker (a pointer's meta placeholder names the meta device)."""
    lit = _literals.get(id(op))
    if lit is None:
        lit = _literals[id(op)] = _Literals(op)
    if lit.typed:
        _check_typed(lit, args, kwargs)


whole_ops.use_literal_check(check_enum_literals)


# --- torch's own binding of a fast op ----------------------------------------------------------
# An OpOverload's call (``op._op``) converts its arguments by the schema and calls the kernel boxed:
# for a 1-element add ~1.4 us, against ~0.9 us for torch's own binding of the same overload
# (``torch.add``: the Python argument parser and the unboxed call), a third of the worker's op.
# For a pointwise op called with tensors only, the binding of the same name is used where it is
# seen (once per op and number of arguments, on meta tensors, under a dispatch mode that records)
# to reach exactly this overload with exactly these arguments and nothing else: the same kernel,
# the same autograd, the same errors. Anything else (numbers among the arguments: a binding may
# pick another overload for them, ``pow(t, 2)``; a torch function mode active) keeps ``op._op``.

_VF = torch._C._VariableFunctions


class OverloadRecorder(OnMeta):
    """Records the aten overloads (and their arguments) that a call on meta tensors reaches,
    running each on the meta device (``meta.OnMeta``)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append((func, args, kwargs))
        return super().__torch_dispatch__(func, types, args, kwargs)


def _learn_binding(plan: _Plan, args):
    fn = getattr(_VF, plan.op._schema.name.split("::")[-1], None)
    if fn is None or type(fn) is not type(_VF.add):
        return None
    margs = [meta_like(a) for a in args]
    rec = OverloadRecorder()
    try:
        with rec:
            fn(*margs)
    except Exception:
        return None
    if len(rec.seen) != 1:
        return None
    func, seen_args, seen_kwargs = rec.seen[0]
    if func is not plan.op or seen_kwargs or len(seen_args) != len(margs) \
            or not all(x is y for x, y in zip(seen_args, margs)):
        return None
    return fn


def fast_call(plan: _Plan, args):
    """The callable that runs fast op ``plan.op`` on ``args`` (plain tensors only, no torch
    function mode active): torch's own binding where it is seen to be the same overload, else
    ``op._op``; remembered in ``plan.calls`` by the number of arguments (read it there first)."""
    fn = plan.calls.get(len(args))
    if fn is None:
        if _dispatch_modes():  # (a user's dispatch mode would see the meta run: learn another time)
            return plan.op._op
        fn = plan.calls[len(args)] = _learn_binding(plan, args) or plan.op._op
    return fn


function_mode_enabled = torch._C._is_torch_function_mode_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack


# --- the meta run ------------------------------------------------------------------------------

_MEMO_SIZE = 8192
_memo: dict = {}


class _Verdict:
    """A meta run's outcome for one signature: refused (why) or the output sizes it found."""

    __slots__ = ("refusal", "out_numels", "work", "always")

    def __init__(self, refusal, out_numels, always=False):
        self.refusal, self.out_numels, self.work, self.always = refusal, out_numels, None, always


def _key(a):
    if isinstance(a, torch.Tensor):
        return (a.shape, a.stride(), a.dtype)
    t = type(a)
    if t is list or t is tuple:
        return tuple([_key(b) for b in a])
    if t is float and a != a:
        return (t, "nan")
    return (t, a)


def _data_independent_failure(e: BaseException) -> bool:
    """A meta run that failed because it cannot tell (no meta kernel, data-dependent sizes)."""
    if isinstance(e, NotImplementedError):
        return True
    text = str(e)
    return "meta" in text or "Meta" in text or "data-dependent" in text or "data dependent" in text


def _meta_run(plan: _Plan, args, kwargs) -> _Verdict:
    op = plan.op
    margs = [to_meta(a) for a in args]
    mkw = {k: to_meta(v) for k, v in kwargs.items()} if kwargs else {}
    before = [margs[i].shape if i < len(margs) and isinstance(margs[i], torch.Tensor) else None for i in plan.writes]
    try:
        out = run_on_meta(op, margs, mkw)
    except (RuntimeError, IndexError, ValueError, TypeError, OverflowError, NotImplementedError) as e:
        if _data_independent_failure(e):
            return _Verdict(None, None)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return _Verdict(f"{type(e).__name__}: {first[:300]}", None)
    except Exception:  # anything else: the real run decides, behind the other checks
        return _Verdict(None, None)
    if not plan.inplace_view:
        for i, shape in zip(plan.writes, before):
            if shape is not None and margs[i].shape != shape:
                return _Verdict(f"it would resize argument {op._schema.arguments[i].name!r} in place", None, True)
    outs = out if type(out) in (list, tuple) else (out,)
    return _Verdict(None, [o.numel() for o in outs if isinstance(o, torch.Tensor)])


def _verdict(plan: _Plan, args, kwargs) -> _Verdict:
    try:
        key = (plan.name, _key(args), tuple((k, _key(v)) for k, v in kwargs.items()) if kwargs else None)
        hash(key)
    except (TypeError, RuntimeError):
        key = None
    if key is not None:
        hit = _memo.get(key)
        if hit is not None:
            return hit
    verdict = _meta_run(plan, args, kwargs)
    if key is not None:
        if len(_memo) >= _MEMO_SIZE:
            _memo.clear()
        _memo[key] = verdict
    return verdict


# --- the checks --------------------------------------------------------------------------------

# families whose work bound may read a tensor argument's values (bincount's largest value,
# repeats' sum, a degree given as a tensor): computed on every call, never memoised
_VALUE_READ_FAMILIES = frozenset(("data-sized", "degree"))


def check_call(op, args, kwargs) -> int:
    """Refuse an op off the list (OpNotAllowedError), arguments that would reach outside a
    tensor's storage or that shape inference rejects (OpNotAllowedError), or an op whose work
    exceeds ``op_cost.MAX_OP_WORK`` (QuotaExceededError); nothing has run then. ``args``/``kwargs`` are
    the resolved values the op is about to run on. Returns the estimated work of an op whose cost
    grows faster than its sizes (0 for a view or an op whose cost is its sizes: bounded by them, it
    runs inline; workers/forked.py)."""
    plan = _plans.get(id(op))
    if plan is None:
        if id(op) not in _ALLOWED_IDS:
            raise OpNotAllowedError(f"op {op} is not on the worker's allow-list")
        plan = _plan(op)
    if plan.fast:  # (op_cost.check_pointwise's bound; the product inline: this is every tiny op's path)
        product = 1
        for a in args:
            if isinstance(a, _Tensor):
                product *= a.numel()
        if product > op_cost.MAX_OP_WORK:
            op_cost.check_pointwise(plan.name, args)
        return 0
    if plan.typed:
        _check_typed(plan, args, kwargs)
    if plan.arg_check is not None:
        plan.arg_check(plan.name, args, kwargs)
    verdict = _verdict(plan, args, kwargs)
    if verdict.refusal is not None and (plan.meta == "separate" or verdict.always):
        # (where the CPU kernel checks what the meta run checks, first, the op's own error is left
        # to it: a client sees the error type and words plain torch gives)
        raise OpNotAllowedError(f"{plan.name}: refused before it ran, by shape inference: {verdict.refusal}")
    if plan.view:
        return 0  # a view computes nothing (its bounds are checked above and on its result)
    work = verdict.work
    if work is None:
        work = op_cost.op_work(plan.family, plan.name, op, args, kwargs, verdict.out_numels)
        if plan.family.name not in _VALUE_READ_FAMILIES:  # (the memo is keyed by metadata, not values)
            verdict.work = work
    if work > op_cost.MAX_OP_WORK:
        raise QuotaExceededError(
            f"{plan.name} would cost about {work:.3g} element operations ({plan.family.name}), more than the per-op "
            f"limit of {op_cost.MAX_OP_WORK:.3g} on a worker (a broadcast view counts every element it "
            f"shows): nothing ran. Work in smaller pieces (a smaller window, fewer rows, a materialised input)")
    return 0 if plan.family is op_cost.LINEAR else work


# ops whose outputs' sizes or values follow their inputs' data (nonzero, unique, item ...)
_DATA_TAGS = frozenset((torch.Tag.dynamic_output_shape, torch.Tag.data_dependent_output))
# what a check may ask a tensor without reading its values: its metadata (attribute getters
# return metadata or tensors, whose values a later call would read)
_METADATA_CALLS = frozenset(("getset_descriptor.__get__", "TensorBase.size", "TensorBase.stride",
                             "TensorBase.numel", "TensorBase.nelement", "TensorBase.dim", "TensorBase.ndimension",
                             "TensorBase.storage_offset", "TensorBase.untyped_storage", "TensorBase.element_size",
                             "TensorBase.is_floating_point", "TensorBase.is_complex", "TensorBase.is_contiguous",
                             "TensorBase.is_signed", "TensorBase.is_conj", "TensorBase.is_neg", "Tensor.__len__"))


class _ValueReads(torch.overrides.TorchFunctionMode):
    """Notes whether the code it watches called anything on a tensor beyond its metadata."""

    def __init__(self):
        super().__init__()
        self.seen = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__qualname__", None) not in _METADATA_CALLS:
            self.seen = True
        return func(*args, **(kwargs or {}))


def decided_by_metadata(op, args, kwargs, out) -> bool:
    """Whether ``check_call``'s verdict on these arguments (which it passed) and the metadata of
    the op's result ``out`` follow from the arguments' metadata alone (shapes, strides, dtypes,
    storage extents) and their literal values. Then a stored plan replayed on inputs of the same
    metadata gets the same verdicts and may skip ``check_call`` and ``check_result`` for this
    op. False (check every call) when a check reads tensor values (a degree or repeats given as
    a tensor, a backward kernel's indices), when the outputs follow the data (nonzero, unique,
    item), or when the meta run could not tell their sizes."""
    plan = _plans.get(id(op))
    if plan is None or not _DATA_TAGS.isdisjoint(op.tags) or plan.family.data_sized or id(op) in _UNINITIALISED_IDS:
        return False  # (uninitialised results: check_result zero-fills them, on every call)
    outs = out if type(out) in (list, tuple) else (out,)
    if not all(type(o) is _Tensor or type(o) is _Parameter for o in outs):
        return False  # a number or flag made from the data, or a chain layer (a Parameter: an in-place update's)
    if plan.fast:
        return True  # the pointwise bound reads sizes only; the output has the broadcast shape
    verdict = _verdict(plan, args, kwargs)  # (memoised by check_call, on the arguments' metadata)
    if verdict.out_numels is None or verdict.out_numels != [o.numel() for o in outs]:
        return False  # the meta run could not tell, or its sizes are not what the kernel made
    if plan.arg_check is None and (plan.view or plan.family is op_cost.LINEAR):
        return True  # the bound of a view or a linear op is its sizes
    # the argument check and the work bound again, watched: any call beyond metadata reads values
    watch = _ValueReads()
    try:
        with watch:
            if plan.arg_check is not None:
                plan.arg_check(plan.name, args, kwargs)
            if not plan.view:
                op_cost.op_work(plan.family, plan.name, op, args, kwargs, verdict.out_numels)
    except Exception:
        return False
    return not watch.seen


# (read on every result)
_Tensor, _Parameter, _strided, _bool = torch.Tensor, torch.nn.Parameter, torch.strided, torch.bool
# Ops returning uninitialised memory: whatever a freed tensor (another client's, taken back with
# .get()) left in the allocator's pages. Their results are zero-filled (check_result) before any
# client sees them. (resize_, set_ and the out= overloads, which may hand back grown storage, are
# refused outright: allowlist's DENIED and structural_refusal.)
UNINITIALISED = re.compile(r"^(new_)?empty(_like|_strided|_permuted)?$|^_empty_|^_?new_empty_")
_UNINITIALISED_IDS = frozenset(id(op) for name, op in ALLOWED.items() if UNINITIALISED.search(name.split(".")[1]))
# ops whose results check_result must see (a worker's fast paths skip it for the rest): the ops
# returning a view of an input (not an in-place result), bounds-checked, and the ones above
_VIEW_IDS = frozenset(id(op) for op in ALLOWED_OPS
                      if any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns)
                      or torch.Tag.inplace_view in op.tags) | _UNINITIALISED_IDS


def _in_bounds(t: torch.Tensor) -> bool:
    numel = t.numel()
    if numel == 0:
        return True
    stride, offset = t.stride(), t.storage_offset()
    if offset < 0 or (stride and min(stride) < 0):  # (min's default= keyword costs 0.25 us)
        return False
    if t.is_contiguous():  # its elements fill offset .. offset + numel - 1
        last = offset + numel - 1
    else:  # offset + sum((n - 1) * s), in C: this runs on every view a plan replays
        last = offset + sum(map(operator.mul, t.shape, stride)) - sum(stride)
    return (last + 1) * t.element_size() <= t.untyped_storage().nbytes()


def check_result(op, t) -> None:
    """Refuse a result that no worker should hold: a meta, sparse or non-CPU tensor, a dtype a
    worker does not hold, or a view that reaches outside its storage (a backstop behind the
    argument checks); zero-fill the result of an op that returns uninitialised memory
    (``UNINITIALISED``). A chain layer is judged by its innermost tensor; a pointer (meta by
    design) holds no data here."""
    while type(t) is not _Tensor and type(t) is not _Parameter:
        t = getattr(t, "__dict__", {}).get("child")
        if t is None:
            return
    if t.is_meta:
        raise OpNotAllowedError(f"{op} made a meta tensor: a worker holds data only (use device='cpu')")
    if t.layout is not _strided:
        raise OpNotAllowedError(f"{op} made a {t.layout} tensor: a worker holds dense tensors only")
    if t.dtype not in _HELD_DTYPES:
        raise OpNotAllowedError(f"{op} made a {t.dtype} tensor: a worker holds {', '.join(DTYPES)} only")
    if id(op) in _VIEW_IDS:
        if t.dtype is _bool and t.is_neg():  # (nothing resolves it: torch has no negation of bool, and
            # fetching it dropped the client's connection; the seed-43 long run's _neg_view of a bool tensor)
            raise OpNotAllowedError(f"{op} made a negative view of a bool tensor: torch cannot negate bools")
        if id(op) in _UNINITIALISED_IDS:
            t.untyped_storage().fill_(0)  # (every byte of it: a strided result may skip some)
        elif not _in_bounds(t):
            raise OpNotAllowedError(f"{op} made a view outside its storage: refused")

