"""WorkerCore on its own: the store, reference counts, held data and commands, with no client,
no service and no transport (quotas: test_core_limits.py)."""
import pytest
import torch

from syft_lab import events
from syft_lab.commands import NewObject, Ref, SameAsArg
from syft_lab.errors import ObjectNotFoundError, RemoteError, SyftError
from syft_lab.wire.allowlist import OpNotAllowedError
from syft_lab.workers.core import WorkerCore

aten = torch.ops.aten


@pytest.fixture
def core():
    return WorkerCore("solo")


def test_store_lookup_and_fetch(core):
    t = torch.arange(3.0)
    i = core.store(t)
    assert core.lookup(i) is t and core.refcounts[i] == 1
    assert core.fetch(i) is t
    assert i not in core.objects and i not in core.refcounts
    with pytest.raises(ObjectNotFoundError, match=f"holds no object with id {i}"):
        core.lookup(i)


def test_an_id_in_use_is_refused(core):
    i = core.store(torch.ones(1))
    with pytest.raises(SyftError, match="already holds an object"):
        core.store(torch.zeros(1), i)
    assert torch.equal(core.lookup(i), torch.ones(1))


def test_the_last_decref_deletes_and_unknown_ids_are_ignored(core):
    i = core.store(torch.ones(1))
    core.incref(i)
    core.decref(i)
    assert i in core.objects
    core.decref(i)
    assert i not in core.objects
    core.decref(i)  # fetched or moved already: not the dropping pointer's fault
    with pytest.raises(ObjectNotFoundError):
        core.incref(i)


def test_held_data_outlives_every_release(core):
    i = core.store(torch.ones(2), held=True)
    core.decref(i)
    assert i in core.objects and i in core.held
    core.fetch(i)
    assert i not in core.held


def test_run_stores_new_results_and_names_in_place_ones(core):
    a, b = core.store(torch.tensor([1.0, 2.0])), core.store(torch.tensor([3.0, 4.0]))
    out = core.run(aten.add.Tensor, [Ref(a), Ref(b)], None)
    assert type(out) is NewObject and out.shape == (2,) and out.dtype == torch.float32
    assert torch.equal(core.lookup(out.id), torch.tensor([4.0, 6.0])) and core.refcounts[out.id] == 1
    same = core.run(aten.mul_.Tensor, [Ref(a), 2.0], None)
    assert type(same) is SameAsArg and same.index == 0
    assert torch.equal(core.lookup(a), torch.tensor([2.0, 4.0]))


def test_list_results_and_list_arguments(core):
    a = core.store(torch.arange(6.0).reshape(2, 3))
    parts = core.run(aten.unbind.int, [Ref(a), 0], None)
    assert [type(p) for p in parts] == [NewObject, NewObject]
    cat = core.run(aten.cat.default, [[Ref(p.id) for p in parts]], None)
    assert torch.equal(core.lookup(cat.id), torch.arange(6.0))


def test_ops_off_the_allow_list_never_run(core):
    a = core.store(torch.ones(2))
    before = dict(core.objects)
    with pytest.raises(OpNotAllowedError):
        core.run(aten.set_.source_Tensor, [Ref(a), Ref(a)], None)
    assert core.objects == before


def test_an_ops_own_error_becomes_a_remote_error_without_a_traceback(core):
    a = core.store(torch.ones(3))
    with pytest.raises(RemoteError) as info:
        core.run(aten.view.default, [Ref(a), [2, 2]], None)
    assert info.value.worker_id == "solo" and info.value.remote_type == "RuntimeError"
    assert info.value.__cause__ is None


def test_a_missing_argument_names_its_id(core):
    with pytest.raises(ObjectNotFoundError) as info:
        core.run(aten.neg.default, [Ref(12345)], None)
    assert info.value.obj_id == 12345 and info.value.worker_id == "solo"


def test_search_matches_tags_and_description_words(core):
    t = torch.ones(1)
    t.tags, t.description = {"#digits", "#train"}, "Hand written digits"
    i = core.store(t)
    core.store(torch.zeros(1))
    assert core.search(("#digits",)) == [i]
    assert core.search(("#digits", "written")) == [i]
    assert core.search(("#digits", "#test")) == []


def test_store_and_delete_are_events():
    seen = []
    unsubscribe = events.subscribe(seen.append)
    try:
        c = WorkerCore("evented")
        i = c.store(torch.ones(1))
        c.decref(i)
    finally:
        unsubscribe()
    assert [(e["type"], e["worker"], e["id"]) for e in seen] == [("stored", "evented", i), ("deleted", "evented", i)]
    assert seen[1]["reason"] == "released"


def test_an_op_writing_a_stored_object_in_place_is_a_change_event(core):
    a = core.store(torch.ones(2))
    seen = []
    unsubscribe = events.subscribe(seen.append)
    try:
        core.run(aten.mul_.Tensor, [Ref(a), 3.0], None)
        core.run(aten.mul.Tensor, [Ref(a), 3.0], None)
    finally:
        unsubscribe()
    assert [e["type"] for e in seen] == ["changed", "stored"] and seen[0]["id"] == a


def test_describe_and_summary_tell_no_values(core):
    t = torch.tensor([1234.5, 2.0])
    i = core.store(t)
    root = core.describe(i)
    assert root["id"] == i and root["kind"] == "tensor" and root["shape"] == [2]
    assert "1234.5" not in repr(root) and "1234.5" not in repr(core.summary())  # ids may hold "1234"
    assert core.summary()[0]["id"] == i and core.summary()[0]["refcount"] == 1


def test_a_plans_random_ops_draw_from_the_workers_own_generator():
    import syft_lab as sy

    @sy.plan(args_shape=[(3,)])
    def noise(x):
        return x + torch.randn(3)

    core = WorkerCore("dicey")
    before = torch.get_rng_state()
    (out,) = core._run_graph(noise._graph, [torch.zeros(3)], None)
    assert torch.equal(torch.get_rng_state(), before)  # the notebook's generator is untouched
    assert core.generator.initial_seed() != torch.initial_seed()
    replay = torch.Generator()
    replay.set_state(torch.Generator().manual_seed(core.generator.initial_seed()).get_state())
    assert torch.equal(core.lookup(out.id), torch.randn(3, generator=replay))
