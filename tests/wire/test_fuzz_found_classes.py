"""The classes the property-based fuzz (benchmarks/fuzz_property.py, issue 37) found in the op
policy, each checked on a WorkerCore (the code a worker process runs) in a forked child: a
check that let the case through would kill (SIGFPE, SIGSEGV) or exhaust that child, never the
test process (the child's address space is capped, so an allocation past it fails instead).

- internal overloads (`_*`) whose CPU kernel skips the meta checks refuse empty tensors;
- list-returning splits are bounded in their number of outputs before shape inference;
- an op's temporaries (mvlgamma: numel x p) and the size list of an op that shape inference
  cannot tell (_pack_padded_sequence_backward's input_size) are costed before it allocates;
- ops whose meta run is another function than their CPU kernel are refused.
"""
import resource

import pytest
import torch

from syft_lab.commands import Ref
from syft_lab.errors import QuotaExceededError
from syft_lab.wire import allowlist, op_checks
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.limits import Limits

from .test_hostile_args import in_child

aten = torch.ops.aten
CHILD_ADDRESS_SPACE = 6 * 2**30  # torch's own mappings fit; 8 GiB of temporaries do not


def _outcome(op, make_args):
    """In a forked child: run ``op`` on a worker core (1 GiB quota) with the arguments
    ``make_args(store)`` builds; the name of the error it raised, or 'ran'."""
    def run():
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))
        core = WorkerCore("fuzz-classes", Limits(max_bytes=2**30, max_op_seconds=None))

        def store(t):
            return Ref(core.store(t))
        try:
            core.run(op, make_args(store), {})
        except (OpNotAllowedError, QuotaExceededError) as e:
            return f"{type(e).__name__}: {e}"
        return "ran"
    return in_child(run)


WORKER_DEATHS = [  # (op, arguments): each ended a worker with SIGFPE or SIGSEGV
    (aten._weight_norm_interface.default, lambda s: [s(torch.zeros(0)), s(torch.zeros(0)), 0]),
    (aten._weight_norm_interface.default, lambda s: [s(torch.zeros(4, 0, 0, 0)), s(torch.zeros(4, 0, 0, 0))]),
    (aten._scaled_dot_product_flash_attention_for_cpu.default,
     lambda s: [s(torch.zeros(0, 0, 3, 3)), s(torch.zeros(0, 0, 3, 3)), s(torch.zeros(0, 0, 3, 3))]),
    (aten._cummin_helper.default,
     lambda s: [s(torch.zeros(0, 1, 4, 5).transpose(2, 3)), s(torch.zeros(0, 1, 4, 5).transpose(2, 3)),
                s(torch.zeros(0, 1, 5, 4, dtype=torch.int64)), 3]),
]


@pytest.mark.parametrize("op, make_args", WORKER_DEATHS, ids=lambda v: str(v) if hasattr(v, "_schema") else "")
def test_internal_overloads_refuse_empty_tensors_clearly(op, make_args):
    outcome = _outcome(op, make_args)
    assert outcome.startswith("OpNotAllowedError") and "refuses empty tensors" in outcome, outcome


def test_the_empty_rule_leaves_conversions_and_public_wrappers_alone():
    empty = torch.zeros(0, 3)
    assert allowlist.check_call(aten._to_copy.default, [empty], {"dtype": torch.float64}) == 0
    assert allowlist.check_call(aten.cummin.default, [empty, 1], {}) == 0
    assert allowlist.check_call(aten._unique2.default, [empty, True, True, True], {}) == 0  # torch.unique's
    assert not op_checks.refuses_empty_inputs("__and__") and not op_checks.refuses_empty_inputs("_foreach_add")
    # a kernel that runs its meta function's checks first is trusted with them
    assert allowlist.check_call(aten._softmax.default, [empty, 1, False], {}) == 0


def test_a_split_into_too_many_pieces_is_refused_before_shape_inference():
    outcome = _outcome(aten.split_copy.Tensor, lambda s: [s(torch.zeros(1, dtype=torch.int8).expand(2**31 + 1)), 4])
    assert outcome.startswith("OpNotAllowedError") and "536870913 tensors" in outcome, outcome
    for op, args in ((aten.tensor_split.sections, [torch.zeros(3), 2**40]),
                     (aten.unbind.int, [torch.zeros(1).expand(2**20)]),
                     (aten.unbind_copy.int, [torch.zeros(1).expand(2**20)]),
                     (aten.chunk.default, [torch.zeros(1).expand(2**20), 2**20]),
                     (aten.chunk.default, [torch.zeros(0), 2**31 - 1])):  # an empty dim: `chunks` pieces
        with pytest.raises(OpNotAllowedError, match="tensors, more than"):
            allowlist.check_call(op, args, {})
    assert len(torch.split(torch.zeros(10), 3)) == 4 and allowlist.check_call(aten.split.Tensor, [torch.zeros(10), 3], {}) == 0


MEMORY = [  # (op, arguments): each got a worker OOM-killed past its 1 GiB quota
    (aten.mvlgamma.default, lambda s: [s(torch.zeros(())), 2**31 - 1]),  # numel x p temporaries
    (aten.mvlgamma.default, lambda s: [s(torch.zeros(0)), 2**31 - 1]),  # an empty x: still an arange of p
    (aten._pack_padded_sequence_backward.default,  # zeros(input_size) before any check
     lambda s: [s(torch.zeros(1, dtype=torch.int8)), [2**32, 3], s(torch.zeros(1, dtype=torch.complex64)), False]),
    # 4 GiB of temporaries, a 4 MiB output (a broadcast: no parallel kernel runs in the forked child,
    # where an OpenMP team the test process started earlier would deadlock it)
    (aten.mvlgamma.default, lambda s: [s(torch.ones(1).expand(2**20)), 2**9]),
    # torch.special's alias of mvlgamma (a composite calling it: the seed-41 long run's OOM kills)
    (aten.special_multigammaln.default, lambda s: [s(torch.zeros((), dtype=torch.bfloat16)), 2**31 - 1]),
]


@pytest.mark.parametrize("op, make_args", MEMORY, ids=["mvlgamma-p", "mvlgamma-empty", "pack_padded_backward",
                                                       "mvlgamma-numel", "special_multigammaln-p"])
def test_temporaries_and_size_lists_are_costed_before_the_op_allocates(op, make_args):
    outcome = _outcome(op, make_args)
    assert outcome.startswith("QuotaExceededError") and "nothing ran" in outcome, outcome


def test_a_small_mvlgamma_still_computes_through_the_worker_core():
    core = WorkerCore("fuzz-classes-small", Limits(max_bytes=2**30, max_op_seconds=None))
    x = torch.linspace(2, 5, 6)
    out = core.run(aten.mvlgamma.default, [Ref(core.store(x)), 3], {})
    assert torch.allclose(core.fetch(out.id), torch.mvlgamma(x, 3))


def test_ops_whose_meta_run_is_another_function_are_refused():
    """mish_backward's meta run is its composite (float64 for a float32 grad with a float64
    input), its CPU kernel another (float32): neither a shape check nor a pointer's placeholder
    can be trusted for it. The class is found from the dispatcher's table."""
    for name in ("aten.mish_backward.default", "aten.native_channel_shuffle.default"):
        assert not allowlist.is_allowed(name)
        assert "composite decomposition" in allowlist.REFUSED[name]
    assert allowlist.is_allowed("aten.mish.default") and allowlist.is_allowed("aten.channel_shuffle.default")


def test_every_output_past_the_first_adds_its_overhead_to_the_work_bound():
    from syft_lab.wire import op_cost

    plan = allowlist._plan(aten.split.Tensor)
    x = torch.zeros(10)
    assert op_cost.op_work(plan.family, plan.name, plan.op, [x, 1], None, [1] * 10) == 10 + 9 * op_cost.OUTPUT_OVERHEAD
    assert op_cost.op_work(plan.family, plan.name, plan.op, [x, 10], None, [10]) == 10


def test_an_upsample_with_a_scale_that_is_not_positive_is_refused_before_it_runs():
    """A lanczos upsample with scale -1 read memory it was never given (the property fuzzer)."""
    import torch as _torch

    from syft_lab.wire.allowlist import OpNotAllowedError, check_call

    x = _torch.randn(1, 1, 4, 4)
    for scale in (-1.0, 0.0, float("inf"), float("nan")):
        with pytest.raises(OpNotAllowedError, match="scale factor is a positive finite number"):
            check_call(_torch.ops.aten._upsample_lanczos2d_aa.default, [x, [8, 8], False, scale, 2.0], None)
    check_call(_torch.ops.aten._upsample_lanczos2d_aa.default, [x, [8, 8], False, 2.0, None], None)
    from syft_lab.wire import allowlist

    assert "_compute_linear_combination" in allowlist.REFUSED["aten._compute_linear_combination.default"] or \
        "coefficients" in allowlist.REFUSED["aten._compute_linear_combination.default"]
    with pytest.raises(OpNotAllowedError, match="not on the worker's allow-list"):
        check_call(_torch.ops.aten._compute_linear_combination.default, [x, _torch.randn(3, 3)], None)


def test_random_on_a_float_tensor_refuses_a_range_past_its_exact_integers():
    """random_.from(float32 x, 2**63 - 1) hung torch's kernel for good (the seed-41 long run: a
    stalled worker); torch itself warns outside ±2**24 for float32. Refused before it runs."""
    random_from = getattr(aten.random_, "from")
    with pytest.raises(OpNotAllowedError, match="outside the integers a torch.float32 holds exactly"):
        allowlist.check_call(random_from, [torch.zeros(()), 2**63 - 1, None], {})
    with pytest.raises(OpNotAllowedError, match="to=1073741824"):
        allowlist.check_call(aten.random_.to, [torch.zeros(3), 2**30], {})
    allowlist.check_call(random_from, [torch.zeros(3), -5, 2**24 + 1], {})  # its exact integers: fine
    allowlist.check_call(random_from, [torch.zeros(3, dtype=torch.int64), 2**63 - 1, None], {})  # torch checks ints


@pytest.mark.parametrize("op", [aten.linalg_eigvals.default, aten._linalg_eigvals.default, aten.linalg_eig.default])
def test_the_general_eigensolver_refuses_infs_and_nans_before_lapack_sees_them(op):
    """LAPACK's geev segfaulted a worker on an inf or NaN entry through linalg_eigvals (the seed-42
    long run: two deaths); linalg_eig's own check said so, its eigenvalues-only paths did not."""
    bad = torch.tensor([[float("inf"), -float("inf")], [3e38, float("nan")]])
    outcome = _outcome(op, lambda s: [s(bad)])
    assert outcome.startswith("OpNotAllowedError") and "infs or NaNs" in outcome, outcome
    assert _outcome(op, lambda s: [s(torch.tensor([[2.0, 1.0], [1.0, 2.0]]))]) == "ran"


def test_a_negative_view_of_a_bool_tensor_is_refused_not_stored():
    """_neg_view of a bool tensor was stored; fetching it dropped the client's connection (its reply
    could not be encoded: torch cannot negate bools). The seed-43 long run found it."""
    with pytest.raises(OpNotAllowedError, match="negative view of a bool tensor"):
        allowlist.check_result(aten._neg_view.default, aten._neg_view.default(torch.tensor([True, False])))
    allowlist.check_result(aten._neg_view.default, aten._neg_view.default(torch.tensor([1.0, 2.0])))  # a number: fine


@pytest.mark.parametrize("op", [aten.linalg_matrix_power.default, aten.matrix_power.default])
def test_matrix_power_refuses_a_power_whose_negation_overflows(op):
    """matrix_power(x, -2**63) negates n for the inverse's power: it overflowed and the kernel never
    returned (the seed-43 long run's stall). Refused before it runs; -2**63 + 1 still computes."""
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(OpNotAllowedError, match="no negation in int64"):
        allowlist.check_call(op, [x, -2**63], {})
    allowlist.check_call(op, [x, -2**63 + 1], {})
