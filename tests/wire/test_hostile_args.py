"""The argument classes issue 37's outside fuzzer found unchecked, checked by class.

- every enum-typed argument of every allowed overload (MemoryFormat, Layout, ScalarType,
  Device, and the int arguments naming a C++ enum: reduction codes, modes...) is checked against
  its legal values before anything runs, a meta run included;
- a check or cost estimate that reads a tensor's values never materialises a broadcast view;
- an op returning uninitialised memory hands back zeros.
(tests/network/test_hostile_ops.py runs the same attacks against a real worker process.)
"""
import os
import select
import signal
import time

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from syft_lab.commands import Ref
from syft_lab.wire import allowlist, op_checks
from syft_lab.wire.allowlist import ALLOWED, OpNotAllowedError, check_call
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.limits import Limits

aten = torch.ops.aten
ENUM_TYPES = ("MemoryFormat", "Layout", "ScalarType", "Device")
BAD = {"MemoryFormat": [-1, 4, 2**40, "channels_last", 1.0, True], "Layout": [-1, 0, torch.sparse_coo],
       "ScalarType": [-1, 6, 2**40, torch.qint8, "float32"],
       "Device": [torch.device("cpu", 7), torch.device("meta"), "cpu", 0], "enum": [-1, 3 + 2**40, 99, True, 1.0]}


def _enum_arguments():
    """(overload name, position, argument, its class) of every enum-typed argument allowed."""
    for name, op in sorted(ALLOWED.items()):
        enums = op_checks.int_enums(op)
        for i, a in enumerate(op._schema.arguments):
            kind = next((t for t in ENUM_TYPES if t in str(a.real_type)), None) or ("enum" if a.name in enums else None)
            if kind is not None and "List" not in str(a.real_type):
                yield name, i, a, kind


def _call_with(op, i, a, value):
    """The overload's arguments, every one None but argument ``a`` (at ``i``)."""
    n = len(op._schema.arguments)
    if a.kwarg_only:
        return [None] * sum(1 for b in op._schema.arguments if not b.kwarg_only), {a.name: value}
    args = [None] * n
    args[i] = value
    return args[:i + 1], None


CHILD_SECONDS = 120  # what one forked check may take on a loaded machine


def in_child(fn):
    """``fn()``'s result (a str), computed in a forked copy of this process: a check that let a
    bad argument through to torch could segfault it (the meta run of clone(memory_format=-1)
    did), and must not take the test process with it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave, whatever happens
        code = 1
        try:
            # one thread: an OpenMP team the test process started before the fork is not in the
            # child, and a parallel region waiting on it would never return (seen in a CI run)
            torch.set_num_threads(1)
            os.write(write, fn().encode()[:60000])
            code = 0
        except BaseException as e:
            os.write(write, f"{type(e).__name__}: {e}".encode()[:60000])
        finally:
            os._exit(code)
    os.close(write)
    chunks, deadline = [], time.monotonic() + CHILD_SECONDS
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)  # (a hung child must not hang the suite: waitpid below)
                os.waitpid(pid, 0)
                raise AssertionError(f"the forked child gave no answer within {CHILD_SECONDS} s")
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read)
    _, status = os.waitpid(pid, 0)
    assert not os.WIFSIGNALED(status), f"the checks let the child die of signal {os.WTERMSIG(status)}"
    text = b"".join(chunks).decode()
    assert os.WEXITSTATUS(status) == 0, text
    return text


def test_every_enum_typed_argument_of_every_allowed_overload_refuses_illegal_values_before_anything_runs():
    assert in_child(_sweep) == "ok"


def _sweep():
    seen = set()
    calls = []

    class Calls(TorchDispatchMode):  # any op call (a meta run included) would show here
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            calls.append(func)
            return func(*args, **(kwargs or {}))

    for name, i, a, kind in _enum_arguments():
        seen.add(kind)
        op = ALLOWED[name]
        for bad in BAD[kind]:
            if kind == "enum" and bad in op_checks.int_enums(op)[a.name][0] and type(bad) is int:
                continue
            args, kwargs = _call_with(op, i, a, bad)
            with Calls(), pytest.raises(OpNotAllowedError, match=a.name if kind in ("enum", "MemoryFormat") else ""):
                check_call(op, args, kwargs)
    assert calls == [] and seen == set(ENUM_TYPES) | {"enum"}
    return "ok"


def test_legal_enum_values_pass_the_type_checks():
    legal = {"MemoryFormat": [torch.contiguous_format, torch.preserve_format, torch.channels_last,
                              torch.channels_last_3d, 0, 1, 2, 3], "Layout": [torch.strided],
             "ScalarType": [torch.float32, torch.int64, torch.bool], "Device": [torch.device("cpu")]}
    for name, i, a, kind in _enum_arguments():
        op = ALLOWED[name]
        values = sorted(op_checks.int_enums(op)[a.name][0]) if kind == "enum" else legal[kind]
        for value in values:
            args, kwargs = _call_with(op, i, a, value)
            allowlist._check_typed(allowlist._plan(op), args, kwargs)  # (raises if refused)


def test_every_int_argument_named_like_an_enum_has_its_legal_values():
    """A new torch may add an int mode: its name must not slip past (op_checks.INT_ENUMS)."""
    missed = [(name, a.name) for name, op in ALLOWED.items() for a in op._schema.arguments
              if str(a.real_type) in ("int", "Optional[int]") and op_checks.ENUM_LIKE_NAME.search(a.name)
              and a.name not in op_checks.int_enums(op)]
    assert missed == []


def test_the_reported_attacks_are_refused_by_name():
    assert in_child(_reported_attacks) == "ok"


def _reported_attacks():
    x = torch.ones(2, 3)
    for op, args, kwargs, match in [
        (aten.clone.default, [x], {"memory_format": -1}, "memory_format=-1 is not a memory format"),
        (aten.zeros_like.default, [x], {"memory_format": -1}, "not a memory format"),
        (aten.full_like.default, [x, 1.0], {"memory_format": 17}, "not a memory format"),
        (aten.mse_loss.default, [x, x, 3], None, r"reduction=3 is not one of its legal values: 0, 1, 2"),
        (aten.nll_loss.default, [x, torch.zeros(2, dtype=torch.long), None, -1, -100], None, "reduction=-1"),
        (aten.grid_sampler_2d.default, [torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 1, 2), 9, 0, False], None,
         "interpolation_mode=9"),
        (aten._fft_r2c.default, [torch.ones(4), [0], 7, True], None, "normalization=7"),
        (aten.empty.memory_format, [[2]], {"device": torch.device("cpu", 3)}, "CPU only"),
    ]:
        with pytest.raises(OpNotAllowedError, match=match):
            check_call(op, args, kwargs)
    assert check_call(aten.clone.default, [x], {"memory_format": torch.contiguous_format}) == 0
    return "ok"


class LargestMade(TorchDispatchMode):
    """The most elements any op made while it watched."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for o in out if type(out) in (list, tuple) else (out,):
            if isinstance(o, torch.Tensor) and not o.is_meta and o.untyped_storage().nbytes():
                self.largest = max(self.largest, o.untyped_storage().nbytes() // o.element_size())
        return out


def test_value_reading_checks_never_materialise_a_broadcast_view():
    wide = 2**20
    degree = torch.full((1,), 3.0).expand(wide)
    repeats = torch.tensor([2]).expand(wide)
    ints = torch.tensor([4]).expand(wide)
    for op, args, kwargs in [
        (aten.special_chebyshev_polynomial_t.x_scalar, [1e308, degree], None),
        (aten.special_hermite_polynomial_he.x_scalar, [0.5, degree], None),
        (aten.special_legendre_polynomial_p.default, [torch.ones(wide), degree], None),
        (aten.bincount.default, [ints], None),
        (aten.repeat_interleave.Tensor, [repeats], None),
        (aten.embedding_dense_backward.default, [torch.ones(wide, 2), ints, 10, -1, False], None),
    ]:
        watch = LargestMade()
        with watch:
            check_call(op, args, kwargs)
        assert watch.largest < wide, op  # (abs() of the degree made all 2**20: 2**31 killed a worker)


def test_a_degree_or_repeats_given_as_a_broadcast_view_is_costed_on_its_values():
    from syft_lab.wire import op_cost

    repeats = torch.tensor([3]).expand(2**12)
    plan = allowlist._plan(aten.repeat_interleave.Tensor)
    assert op_cost.op_work(plan.family, plan.name, plan.op, [repeats], None, None) == 3 * 2**12
    degree = torch.tensor([-7.0, 2.0]).expand(8, 2)
    plan = allowlist._plan(aten.special_laguerre_polynomial_l.x_scalar)
    assert op_cost.op_work(plan.family, plan.name, plan.op, [0.5, degree], None, [16]) == 16 * 7


UNINITIALISED = [
    (aten.empty.memory_format, lambda n, like: [[n]], {"dtype": torch.float64}),
    (aten.empty_strided.default, lambda n, like: [[n, 2], [1, 2 * n]], {"dtype": torch.float64}),
    (aten.empty_permuted.default, lambda n, like: [[n, 1], [1, 0]], {"dtype": torch.float64}),
    (aten.new_empty.default, lambda n, like: [like, [n]], None),
    (aten.new_empty_strided.default, lambda n, like: [like, [n], [1]], None),
    (aten.empty_like.default, lambda n, like: [like], None),
]


@pytest.mark.parametrize("limits", [None, Limits(max_bytes=2**30)], ids=["unlimited", "limited"])
@pytest.mark.parametrize("op,make_args,kwargs", UNINITIALISED, ids=[str(u[0]) for u in UNINITIALISED])
def test_an_op_returning_uninitialised_memory_hands_back_zeros(limits, op, make_args, kwargs):
    core = WorkerCore("shared", limits)
    for n in (16, 1000, 50_000):
        for _ in range(3):  # a freed tensor's values, left in the allocator's pages
            secret = torch.full((n * 2,), 1234.5, dtype=torch.float64)
            del secret
        like = core.run(aten.zeros.default, [[n]], {"dtype": torch.float64})
        made = core.run(op, make_args(n, Ref(like.id)), kwargs)
        got = core.objects[made.id]
        assert not torch.tensor([], dtype=torch.uint8).set_(got.untyped_storage()).any(), (op, n)
        core.decref(made.id)
        core.decref(like.id)


def test_the_uninitialised_class_is_every_allowed_empty_factory():
    names = {n for n, op in ALLOWED.items() if id(op) in allowlist._UNINITIALISED_IDS}
    assert names == {"aten.empty.memory_format", "aten.empty_like.default", "aten.empty_permuted.default",
                     "aten.empty_strided.default", "aten.new_empty.default", "aten.new_empty_strided.default"}
    # and the ops that could hand back grown, uninitialised storage are refused outright
    for name in ("aten.resize_.default", "aten.set_.source_Tensor", "aten.resize_as_.default", "aten.empty.out",
                 "aten.empty_like.out", "aten._resize_output_.default"):
        assert name not in ALLOWED and name in allowlist.REFUSED, name


def test_a_plan_replay_zero_fills_uninitialised_results_on_every_run():
    """A stored plan's replays learn which nodes' checks follow from metadata and skip them; an
    `empty` node's zero-fill is never skipped."""
    from syft_lab.plans.graph import Node, PlanBuilds, PlanGraph, Value

    n = 4096
    nodes = [Node(aten.empty.memory_format, [[n]], {"dtype": torch.float64}, [((n,), "float64")]),
             Node(aten.add.Tensor, [Value("node", 0), Value("input", 0)], {}, [((n,), "float64")])]
    text = PlanBuilds("fresh", [PlanGraph("fresh", [{"name": "x", "role": "input", "shape": [1], "dtype": "float64"}],
                                          [], nodes, [Value("node", 1)], False)]).to_json()
    for limits in (None, Limits(max_bytes=2**30)):
        core = WorkerCore("replays", limits)
        plan_id = core.store_plan(PlanBuilds.from_json(text), [], json_size=len(text))
        x = core.store(torch.zeros(1, dtype=torch.float64))
        for _ in range(4):  # (the first replay learns, the later ones reuse what it learned)
            for _ in range(3):
                secret = torch.full((n,), 1234.5, dtype=torch.float64)
                del secret
            (out,) = core.run_plan(plan_id, [x])
            assert not core.objects[out.id].any()
            core.decref(out.id)
