"""WorkerCore quotas: output estimates, per-storage accounting, refusals that leave everything intact."""
import pytest
import torch

from syft_lab.errors import QuotaExceededError, SyftError
from syft_lab.plans.graph import Node, PlanGraph, Value
from syft_lab.commands import Ref
from syft_lab.workers.core import WorkerCore
from syft_lab.workers.limits import DEFAULT_MAX_OBJECTS, GiB, Limits, OutputEstimator, default_max_bytes

aten = torch.ops.aten
MiB = 2**20


def core(max_bytes=16 * MiB, max_objects=100):
    return WorkerCore("limited", limits=Limits(max_bytes=max_bytes, max_objects=max_objects))


def test_default_limits_leave_the_machine_room():
    limits = Limits()
    assert limits.max_objects == DEFAULT_MAX_OBJECTS == 100_000
    assert 0 < limits.max_bytes == default_max_bytes() <= 8 * GiB
    import os
    assert limits.max_bytes <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    for bad in ({"max_bytes": 0}, {"max_bytes": -1}, {"max_objects": 0}, {"max_bytes": 1.5}):
        with pytest.raises(ValueError):
            Limits(**bad)


def test_an_in_process_core_has_no_quota_unless_given_one():
    assert WorkerCore("plain").limits is None
    assert core().limits.max_bytes == 16 * MiB


def test_outputs_too_big_are_refused_before_they_run_and_nothing_is_stored():
    c = core(max_bytes=3 * MiB)
    x = c.store(torch.ones(1000, 1))
    y = c.store(torch.ones(1, 1000))
    before = dict(c.objects)
    for op, args, size in [(aten.ones.default, [[2**30]], "4.0 GiB"), (aten.empty.memory_format, [[2**31]], "8.0 GiB"),
                           (aten.mm.default, [Ref(x), Ref(y)], "3.8 MiB"),
                           (aten.repeat.default, [Ref(x), [5000, 1]], "19.1 MiB")]:
        with pytest.raises(QuotaExceededError, match=f"would make {size} while the worker holds 7.8 KiB of its "
                                                     f"3.0 MiB memory limit: nothing ran"):
            c.run(op, args, None)
    assert c.objects == before and c.ledger.bytes == 2 * 4000
    assert c.run(aten.mm.default, [Ref(y), Ref(x)], None).shape == (1, 1)  # what fits still runs


def test_object_limit_counts_the_pieces_of_unbind_and_split_before_making_them():
    c = core(max_objects=100)
    rows = c.store(torch.ones(200_000, 1))
    for op, args in [(aten.unbind.int, [Ref(rows)]), (aten.split.Tensor, [Ref(rows), 1]),
                     (aten.chunk.default, [Ref(rows), 500])]:
        with pytest.raises(QuotaExceededError, match=r"would make \d+ objects .* limit of 100"):
            c.run(op, args, None)
    assert list(c.objects) == [rows]
    assert len(c.run(aten.chunk.default, [Ref(rows), 4], None)) == 4


def test_a_storage_is_counted_once_however_many_views_share_it():
    c = core()
    x = c.store(torch.ones(MiB // 4))  # 1 MiB
    assert c.ledger.bytes == MiB
    view = c.run(aten.view.default, [Ref(x), [-1, 2]], None)
    row = c.run(aten.select.int, [Ref(x), 0, 0], None)
    assert c.ledger.bytes == MiB
    c.run(aten.add_.Tensor, [Ref(x), 1.0], None)  # in place: same storage
    copy = c.run(aten.clone.default, [Ref(x)], None)
    assert c.ledger.bytes == 2 * MiB
    c.decref(x)
    assert c.ledger.bytes == 2 * MiB  # the views keep the storage alive
    c.decref(view.id)
    c.decref(row.id)
    assert c.ledger.bytes == MiB
    assert torch.equal(c.fetch(copy.id), torch.full((MiB // 4,), 2.0))
    assert c.ledger.bytes == 0 and c.objects == {}


def test_space_freed_by_a_release_is_usable_again():
    c = core(max_bytes=10 * MiB)
    x = c.store(torch.ones(2 * MiB))  # 8 MiB
    with pytest.raises(QuotaExceededError):
        c.run(aten.clone.default, [Ref(x)], None)
    y = c.run(aten.sum.default, [Ref(x)], None)
    c.decref(x)
    assert c.run(aten.ones.default, [[2 * MiB]], None).shape == (2 * MiB,)
    assert c.objects[y.id].item() == 2 * MiB


def test_ops_of_data_dependent_size_are_bounded_before_they_run():
    c = core(max_bytes=12 * MiB)
    x = c.store(torch.ones(1000, 1000))  # 4 MB in; nonzero could make 16 MB of int64 indices
    assert OutputEstimator().estimate(aten.nonzero.default, [c.objects[x]], None).new_bytes == 16_000_000
    with pytest.raises(QuotaExceededError, match="aten.nonzero.default would make 15.3 MiB .*nothing ran"):
        c.run(aten.nonzero.default, [Ref(x)], None)
    assert list(c.objects) == [x] and c.ledger.bytes == 4_000_000
    # the amplification: 9 Mi bools of 64 dimensions would make 4.5 GiB of indices
    wide = torch.ones([9 * 2**20] + [1] * 63, dtype=torch.bool)
    assert OutputEstimator().estimate(aten.nonzero.default, [wide], None).new_bytes == 9 * 2**20 * 64 * 8
    for op, args, size in [(aten.masked_select.default, [Ref(x), torch.ones(1000, 1, dtype=torch.bool)], "3.8 MiB"),
                           (aten._unique2.default, [Ref(x)], "19.1 MiB")]:
        assert OutputEstimator().estimate(op, [c.objects[x], *args[1:]], None).new_bytes > 0
    small = c.store(torch.tensor([0.0, 3.0, 0.0, 4.0]))
    assert torch.equal(c.objects[c.run(aten.nonzero.default, [Ref(small)], None).id], torch.tensor([[1], [3]]))


def test_materialising_a_view_and_conv_workspace_are_counted_before_running():
    c = core(max_bytes=64 * MiB)
    one = c.store(torch.ones(1))
    wide = c.run(aten.expand.default, [Ref(one), [2**15, 2**15]], None)  # a view: 0 bytes
    with pytest.raises(QuotaExceededError, match="aten.contiguous.default would make 4.0 GiB .*nothing ran"):
        c.run(aten.contiguous.default, [Ref(wide.id)], None)
    with pytest.raises(QuotaExceededError, match="aten.clone.default would .*4.0 GiB"):
        c.run(aten.clone.default, [Ref(wide.id)], None)
    est = OutputEstimator()
    x = torch.ones(1, dtype=torch.float64)
    conv = [x.expand(1, 64, 160, 160), x.expand(1, 64, 33, 33), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1]
    # 128 KiB of output, 9.1 GB of im2col columns: 64 x 33 x 33 per output position, 128 x 128 positions
    assert est.estimate(aten.convolution.default, conv, None).new_bytes == 128 * 128 * 8 + 64 * 33 * 33 * 128 * 128 * 8
    d = c.store(torch.ones(1, dtype=torch.float64))
    i = c.run(aten.expand.default, [Ref(d), [1, 64, 64, 64]], None)
    w = c.run(aten.expand.default, [Ref(d), [1, 64, 9, 9]], None)
    # 25 KiB of output, 124 MiB of columns (64 x 9 x 9 for each of 56 x 56 positions)
    with pytest.raises(QuotaExceededError, match=r"aten.convolution.default would make 124.1 MiB .*nothing ran"):
        c.run(aten.convolution.default, [Ref(i.id), Ref(w.id), *conv[2:]], None)
    assert est.estimate(aten.contiguous.default, [torch.ones(4, 4)], None).new_bytes == 0  # already whole: itself


def test_tags_logs_and_plans_count_as_memory():
    c = core(max_bytes=3_500_000)
    for _ in range(3):
        t = torch.empty(0)
        t.tags = {f"#{k:04d}" + "x" * 4000 for k in range(256)}  # ~1 MiB of tags on 0 bytes of data
        c.store(t)
    assert c.ledger.bytes > 3_000_000
    t = torch.empty(0)
    t.tags = {f"#{k:04d}" + "x" * 4000 for k in range(256)}
    with pytest.raises(QuotaExceededError, match="cannot keep this object"):
        c.store(t)
    for i in list(c.objects):
        c.decref(i)
    assert c.ledger.bytes == 0
    from syft_lab.tensors.logging import LoggingTensor

    lt = LoggingTensor(torch.ones(2))
    for _ in range(5000):
        lt = lt + 1
    lid = c.store(lt)
    assert c.ledger.bytes >= 5000 * 300
    c.decref(lid)
    assert c.ledger.bytes == 0
    from syft_lab.plans.graph import PlanBuilds

    builds = PlanBuilds("chain", [chain(6000, 2)])
    with pytest.raises(QuotaExceededError, match="plan 'chain' takes about .* nothing was stored"):
        c.store_plan(builds, [torch.ones(2)], json_size=len(builds.to_json()))
    assert c.objects == {} and c.ledger.bytes == 0


def test_repeat_interleave_is_sized_from_its_repeats():
    c = core()
    repeats = c.store(torch.tensor([2**31]))
    with pytest.raises(QuotaExceededError, match="16.0 GiB"):
        c.run(aten.repeat_interleave.Tensor, [Ref(repeats)], None)


def test_no_computing_on_a_broadcast_view_larger_than_the_memory_limit():
    c = core()
    one = c.store(torch.tensor(1.0))
    huge = c.run(aten.expand.default, [Ref(one), [2**40]], None)  # a view: allowed, costs nothing
    with pytest.raises(QuotaExceededError, match="broadcast"):
        c.run(aten.sum.default, [Ref(huge.id)], None)


@pytest.mark.parametrize("write", [
    (aten.rrelu_.default, [], {"training": False}),  # makes temporaries at the view's full size first
    (aten.fill_.Scalar, [3], {}),  # torch allows it on a broadcast view: it still visits every element
    (aten.add_.Tensor, [1.0], {}),
])
def test_an_in_place_write_into_a_broadcast_view_is_refused_before_it_runs(write):
    # found by the seed-44 fuzz: rrelu_ into an expand of 2**31 int8 elements peaked at 2.26 GiB
    op, more, kwargs = write
    c = core()
    one = c.store(torch.tensor([5], dtype=torch.uint8))
    huge = c.run(aten.expand.default, [Ref(one), [3, 2**24 + 1]], None)  # 48 MiB of view, one stored byte
    with pytest.raises(QuotaExceededError, match="broadcast view"):
        c.run(op, [Ref(huge.id), *more], kwargs or None)
    assert c.objects[one].tolist() == [5]  # nothing ran: the stored byte is unchanged


def test_an_in_place_write_into_a_broadcast_view_is_costed_at_the_view_size():
    c = core()  # 16 MiB, 5 held: a 12 MiB view of one byte passes the input check, its temporaries do not fit
    one = c.store(torch.tensor([5], dtype=torch.uint8))
    held = c.store(torch.zeros(5 * MiB, dtype=torch.uint8))
    view = c.run(aten.expand.default, [Ref(one), [3, 4 * MiB]], None)
    with pytest.raises(QuotaExceededError, match="would make 12.0 MiB"):
        c.run(aten.rrelu_.default, [Ref(view.id)], {"training": False})
    assert c.objects[one].tolist() == [5] and c.objects[held].sum() == 0


def test_estimates_are_memoised_on_shapes_and_arguments():
    est = OutputEstimator()
    a = torch.ones(3, 4)
    first = est.estimate(aten.mm.default, [a, torch.ones(4, 5)], None)
    assert (first.new_bytes, first.outputs) == (60, 1)
    assert est.estimate(aten.mm.default, [torch.zeros(3, 4), torch.zeros(4, 5)], None) is first
    assert est.estimate(aten.view.default, [a, [12]], None).new_bytes == 0  # a view makes no memory
    assert est.estimate(aten.full.default, [[10], 2.0], {"dtype": torch.float64}).new_bytes == 80


def chain(n, size):
    nodes = [Node(aten.add.Tensor, [Value("input", 0) if k == 0 else Value("node", k - 1), 1.0], {},
                  [((size,), "float32")]) for k in range(n)]
    return PlanGraph("chain", [{"name": "x", "role": "input", "shape": [size], "dtype": "float32"}], [], nodes,
                     [Value("node", n - 1)], True)


def test_plan_replay_frees_each_value_after_its_last_use():
    c = core(max_bytes=5 * MiB)  # one 1 MiB input, 300 nodes of 1 MiB: only if freed
    x = c.store(torch.zeros(MiB // 4))
    (out,) = c.run_graph(chain(300, MiB // 4), [x], [12345])
    assert torch.equal(c.objects[out.id], torch.full((MiB // 4,), 300.0))
    assert c.ledger.bytes == 2 * MiB


def test_a_plan_node_over_the_quota_is_refused_and_nothing_is_stored():
    c = core(max_bytes=5 * MiB)
    x = c.store(torch.zeros(MiB // 4))
    big = PlanGraph("big", chain(1, MiB // 4).inputs, [],
                    [Node(aten.repeat.default, [Value("input", 0), [10]], {}, [((10 * MiB // 4,), "float32")])],
                    [Value("node", 0)], True)
    with pytest.raises(QuotaExceededError, match="aten.repeat.default"):
        c.run_graph(big, [x], [777])
    assert list(c.objects) == [x]


def test_plan_nodes_pass_the_allow_list_argument_checks():
    c = WorkerCore("plain")
    x = c.store(torch.zeros(4))
    bad = PlanGraph("peek", chain(1, 4).inputs, [],
                    [Node(aten.as_strided.default, [Value("input", 0), [64], [1]], {}, [((64,), "float32")])],
                    [Value("node", 0)], True)
    with pytest.raises(SyftError, match="outside the input's storage"):
        c.run_graph(bad, [x], [4242])
    assert list(c.objects) == [x]


def test_a_stored_object_over_the_quota_is_not_kept():
    c = core(max_bytes=5 * MiB, max_objects=3)
    kept = c.store(torch.ones(MiB // 4))
    with pytest.raises(QuotaExceededError, match="cannot keep this object.*5.0 MiB"):
        c.store(torch.ones(MiB + 1))
    assert list(c.objects) == [kept] and c.ledger.bytes == MiB
    c.store(torch.ones(1))
    c.store(torch.ones(1))
    with pytest.raises(QuotaExceededError, match="3 objects"):
        c.store(torch.ones(1))
    assert len(c.objects) == 3


def test_cgroup_limits_are_read_for_the_process_own_cgroup_v1_and_v2_walking_up(tmp_path):
    from syft_lab.workers.limits import cgroup_memory_limit

    v1, v2 = tmp_path / "memory", tmp_path / "unified"
    (v1 / "outer" / "inner").mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # the root: no limit
    (v1 / "outer" / "memory.limit_in_bytes").write_text(f"{3 * GiB}\n")
    (v1 / "outer" / "inner" / "memory.limit_in_bytes").write_text(f"{5 * GiB}\n")  # the parent's binds
    (v2 / "a" / "b").mkdir(parents=True)
    (v2 / "a" / "memory.max").write_text(f"{2 * GiB}\n")
    (v2 / "a" / "b" / "memory.max").write_text("max\n")
    mounts = (f"35 31 0:32 / {v1} rw,relatime - cgroup cgroup rw,memory\n"
              f"41 31 0:38 / {v2} rw,relatime - cgroup2 cgroup2 rw\n"
              f"42 31 0:39 / /proc rw - proc proc rw\n")
    assert cgroup_memory_limit("4:memory:/outer/inner\n1:cpu:/\n", mounts) == (3 * GiB, f"cgroup v1 {v1}/outer/inner")
    assert cgroup_memory_limit("4:memory:/outer/inner\n0::/a/b\n", mounts) == (2 * GiB, f"cgroup v2 {v2}/a/b")
    assert cgroup_memory_limit("0::/\n", mounts) is None
    # a container whose mount shows only its own subtree (mount root /outer): paths are relative to it
    inner_mount = f"35 31 0:32 /outer {v1 / 'outer'} rw - cgroup cgroup rw,memory\n"
    assert cgroup_memory_limit("4:memory:/outer/inner\n", inner_mount)[0] == 3 * GiB


def test_a_histogram_is_sized_from_its_bins_before_it_runs():
    # the seed-48 fuzz: histogramdd.int_bins(x of [0, 5], 2**31 - 1) asked for (2**31)**5 counts and
    # the cgroup killed the worker (the meta run cannot tell: the edges come from the data)
    c = core()
    x = c.store(torch.zeros(0, 5, dtype=torch.float16))
    with pytest.raises(QuotaExceededError, match="nothing ran"):
        c.run(aten.histogramdd.int_bins, [Ref(x), 2**31 - 1], None)
    wide = c.store(torch.zeros(10, 2))
    with pytest.raises(QuotaExceededError, match="nothing ran"):
        c.run(aten.histogramdd.default, [Ref(wide), [2**14, 2**14]], None)  # 2**28 counts: 1 GiB
    h = c.run(aten.histc.default, [Ref(wide), 10], None)
    assert c.objects[h.id].shape == (10,)
    est = OutputEstimator().estimate(aten.histogramdd.default, [torch.zeros(10, 2), [3, 4]], None)
    assert (est.new_bytes, est.outputs) == ((12 + 4 + 5) * 4, 3)  # the counts, each dimension's edges
