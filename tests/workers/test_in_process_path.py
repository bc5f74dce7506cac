"""A VirtualWorker's pointer ops take the service's lean in-process path (issue 22: the
pointer-op cost); what a user and the views see is what a ``run`` message gives any worker:
the same results, errors, session references, ledger records and events."""
import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.commands import NewObject
from syft_lab.errors import RemoteError
from syft_lab.wire.op_checks import OpNotAllowedError
from syft_lab.workers.connection import ServiceConnection
from syft_lab.workers.service import Session, WorkerService

aten = torch.ops.aten
_FIELDS = ("kind", "direction", "peer_kind", "bytes", "cell", "op")


def _message_run(op_name, values, uses=None, cell=None):
    """The same op as a ``run`` message on a service (as a worker process runs it): its
    arguments are the stored ``values`` (by index, ``uses``)."""
    service = WorkerService("svc", unlimited=True)
    session = Session()
    conn = ServiceConnection(service, session)
    ids = [conn.answer({"c": "store", "o": v})[0]["ok"] for v in values]
    uses = range(len(values)) if uses is None else uses
    msg = {"c": "run", "op": op_name, "a": [sy.commands.Ref(ids[i]) for i in uses], "k": None}
    if cell is not None:
        msg["cell"] = cell
    reply, _ = conn.answer(msg)
    records = service.ledger.read(session)["records"]
    return reply, records, service, session


def test_a_pointer_op_records_what_a_run_message_records(bob):
    events.set_current_cell(7)
    try:
        x = torch.tensor([1.0, 2.0, 3.0]).send(bob)
        y = x * x
    finally:
        events.set_current_cell(None)
    reply, records, _, _ = _message_run("aten.mul.Tensor", [torch.tensor([1.0, 2.0, 3.0])], [0, 0], cell=7)
    mine = bob.ledger()[-1]
    theirs = records[-1]
    assert [mine[k] for k in _FIELDS] == [theirs[k] for k in _FIELDS] == ["op", "in", "client", 0, 7, "mul"]
    assert mine["id"] == y.id_at_location and theirs["id"] == reply["ok"].id
    assert mine["peer"] == "me" and isinstance(mine["time"], float)
    # the session holds one reference to the result, and only while the pointer lives
    session = bob.transport.session
    assert session.refs[y.id_at_location] == 1 and bob.core.refcounts[y.id_at_location] == 1
    gone = y.id_at_location
    del y
    assert gone not in session.refs and gone not in bob.objects


def test_a_constant_and_keyword_arguments_are_counted_as_a_message_counts_them(bob):
    x = torch.ones(2, 3).send(bob)
    x + torch.tensor(2.0)  # a 0-dim constant travels with the op: its 4 bytes
    torch.sum(x, dim=1, keepdim=True)
    const, summed = bob.ledger()[-2:]
    assert (const["op"], const["bytes"]) == ("add", 4)
    assert (summed["op"], summed["bytes"]) == ("sum", 0)


def test_an_op_off_the_list_is_refused_in_a_remote_workers_words(bob):
    x = torch.ones(3).send(bob)
    with pytest.raises(OpNotAllowedError) as local:
        x.resize_(5)
    service = WorkerService("svc", unlimited=True)
    conn = ServiceConnection(service, Session())
    stored = conn.answer({"c": "store", "o": torch.ones(3)})[0]["ok"]
    reply, _ = conn.answer({"c": "run", "op": "aten.resize_.default", "a": [sy.commands.Ref(stored), [5]]})
    assert reply["err"]["t"] == "OpNotAllowedError"
    assert str(local.value) == reply["err"]["m"]
    assert torch.equal(x.get(), torch.ones(3))  # nothing ran


def test_an_ops_own_error_is_the_error_a_message_gets(bob):
    a, b = torch.ones(3).send(bob), torch.ones(4).send(bob)
    before = set(bob.objects)
    with pytest.raises(RemoteError) as local:
        a + b
    reply, _, _, _ = _message_run("aten.add.Tensor", [torch.ones(3), torch.ones(4)])
    assert reply["err"]["t"] == local.value.remote_type == "RuntimeError"
    assert reply["err"]["m"] == local.value.remote_message
    assert set(bob.objects) == before and bob.ledger()[-1]["kind"] == "stored"  # no record of an op that failed


def test_the_world_hears_of_every_result_and_release(bob):
    x = torch.ones(2).send(bob)
    seen = []
    unsubscribe = events.subscribe(lambda e: seen.append((e["type"], e["worker"], e["id"], e.get("reason"))))
    try:
        y = x + 1
        obj_id = y.id_at_location
        x.add_(1)
        del y
    finally:
        unsubscribe()
    ours = [e for e in seen if e[0] in ("stored", "deleted", "changed")]
    assert ours == [("stored", "bob", obj_id, None), ("changed", "bob", x.id_at_location, None),
                    ("deleted", "bob", obj_id, "released")]


def test_inside_a_batch_ops_are_recorded_and_run_at_its_end(bob):
    x = torch.ones(3).send(bob)
    ran = []
    original = bob.core.run
    bob.core.run = lambda *a: ran.append(a) or original(*a)
    try:
        with sy.batch(bob):
            y = (x + 1) * 2
            assert y.id_at_location not in bob.objects and ran == []
    finally:
        del bob.core.run
    assert torch.equal(y.get(), torch.full((3,), 4.0))


def test_pointers_to_pointers_and_list_arguments_take_the_same_path(bob, alice):
    x = torch.arange(4.0)
    pp = x.send(bob).send(alice)  # alice holds a pointer to bob's tensor
    out = pp + pp  # runs on alice, whose op runs on bob
    inner = alice.objects[out.id_at_location]
    assert isinstance(inner, sy.PointerTensor) and inner.holder_id == "alice"
    assert torch.equal(out.get().get(), x + x)
    a, b = torch.ones(2).send(bob), torch.zeros(2).send(bob)
    assert torch.equal(torch.cat([a, b]).get(), torch.tensor([1.0, 1.0, 0.0, 0.0]))
    assert torch.equal(torch.stack((a, b), dim=1).get(), torch.tensor([[1.0, 0.0], [1.0, 0.0]]))


def test_an_in_place_op_and_a_tuple_result(bob):
    x = torch.tensor([3.0, 1.0, 2.0]).send(bob)
    assert x.mul_(2) is x
    values, indices = torch.sort(x)
    assert torch.equal(values.get(), torch.tensor([2.0, 4.0, 6.0]))
    assert torch.equal(indices.get(), torch.tensor([1, 2, 0]))
    result = bob.service.run_op(aten.neg.default, [x._ref], None, bob.transport.session)
    assert type(result) is NewObject and torch.equal(bob.objects[result.id], torch.tensor([-6.0, -2.0, -4.0]))
    bob._release(result.id)  # the session's reference, as a dropped pointer releases it
    assert result.id not in bob.objects
