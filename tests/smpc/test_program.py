"""The smpc runtime's programs (syft_lab/smpc/runtime.py) on a worker process and in process: the same
program gives the same values wherever its worker is; a round that opens nothing is sent and not
waited for, its pointers usable at once, and an error in it is raised by the next round or flush."""
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError
from syft_lab.smpc import runtime

aten = torch.ops.aten
pytestmark = pytest.mark.network


def _program_values(worker):
    """A two-round program: keep x + c and x * 3 (not waited for), then open their sum."""
    x = torch.tensor([1, -2, 3], dtype=torch.int64)
    ptr = x.send(worker)
    first = runtime.Program(worker)
    first.keep(first.op(aten.add.Tensor, ptr, torch.tensor([10, 20, 30])))
    first.keep(first.op(aten.mul.Tensor, ptr, 3))
    runtime.reset_stats()
    runtime.run([first])
    kept = list(first.kept)
    second = runtime.Program(worker)
    second.open(second.op(aten.add.Tensor, kept[0], kept[1]))
    runtime.run([second])
    return kept, second.opened[0], dict(runtime.stats)


def test_a_program_gives_the_same_values_in_process_and_on_a_worker_process(remote_parties):
    alice = remote_parties[0]
    local = sy.VirtualWorker("program_local")
    try:
        for worker in (alice, local):
            kept, opened, stats = _program_values(worker)
            assert [k.get().tolist() for k in kept] == [[11, 18, 33], [3, -6, 9]]
            assert opened.tolist() == [14, 12, 42]
            if worker is alice:  # the keep-only round was held back and went in the open's message: one round trip
                assert (stats["rounds"], stats["unwaited"], stats["messages"]) == (1, 1, 1)
            else:
                assert stats["messages"] == 0  # in process: no message
    finally:
        local.close()


def test_held_rounds_go_first_whatever_the_next_request_and_their_dropped_values_are_released(remote_parties):
    """A round that opens nothing is held back: chained held rounds and the open after them are one
    message; a .get() of a held value, or any other request, sends the held round first; a held
    value dropped before its message leaves nothing on the worker."""
    alice = remote_parties[0]
    ptr = torch.tensor([1, 2, 3], dtype=torch.int64).send(alice)
    runtime.flush()
    runtime.reset_stats()
    one = runtime.Program(alice)
    one.keep(one.op(aten.mul.Tensor, ptr, 2))
    runtime.run([one])
    two = runtime.Program(alice)
    two.keep(two.op(aten.add.Tensor, one.kept[0], ptr))  # reads a value of the held round
    runtime.run([two])
    assert runtime.stats["messages"] == 0  # both held: nothing sent yet
    three = runtime.Program(alice)
    three.open(three.op(aten.mul.Tensor, two.kept[0], one.kept[0]))
    runtime.run([three])
    assert three.opened[0].tolist() == [6, 24, 54]  # (3x) * (2x)
    assert runtime.stats["messages"] == 1 and runtime.stats["rounds"] == 1
    assert one.kept[0].get().tolist() == [2, 4, 6]  # stored under the id its pointer was given
    # a held round, then a plain request: the held round goes first
    four = runtime.Program(alice)
    four.keep(four.op(aten.sub.Tensor, ptr, 1))
    runtime.run([four])
    assert four.kept[0].get().tolist() == [0, 1, 2]
    # a held value dropped before its round was sent: released after the message that makes it
    five = runtime.Program(alice)
    five.keep(five.op(aten.neg.default, ptr))
    runtime.run([five])
    kept_id = five.kept[0].id_at_location
    sent = runtime.stats["messages"]
    del five  # its pointer's release is queued before its round is sent
    runtime.flush()
    assert runtime.stats["messages"] == sent + 1  # flush sent the held round
    alice.flush()  # the queued release goes now, after the round that made the value
    objects = alice.objects
    assert ptr.id_at_location in objects and kept_id not in objects  # made, then released: nothing left
    # the same inside the next message: a held value dropped, then the round that takes it in
    six = runtime.Program(alice)
    six.keep(six.op(aten.neg.default, ptr))
    runtime.run([six])
    dropped = six.kept[0].id_at_location
    del six
    seven = runtime.Program(alice)
    seven.open(seven.op(aten.add.Tensor, ptr, 1))
    runtime.run([seven])  # the held round travels inside this message
    assert seven.opened[0].tolist() == [2, 3, 4]
    alice.flush()
    assert dropped not in alice.objects  # its release followed the message that made it


def test_an_error_in_a_round_not_waited_for_is_raised_by_flush(remote_parties):
    alice = remote_parties[0]
    ptr = torch.tensor([4, 5, 6], dtype=torch.int64).send(alice)
    p = runtime.Program(alice)
    # integer division by zero: its shape is known here (meta), its error only on the worker
    p.keep(p.op(aten.div.Tensor_mode, ptr, torch.zeros(3, dtype=torch.int64), rounding_mode="floor"))
    runtime.run([p])  # returns at once: nothing to wait for
    with pytest.raises(SyftError, match="(?i)zero"):
        runtime.flush()
    runtime.flush()  # raised once: nothing is left unread
    q = runtime.Program(alice)
    q.open(q.op(aten.add.Tensor, ptr, 1))
    runtime.run([q])  # the worker goes on with the next round
    assert q.opened[0].tolist() == [5, 6, 7]


def test_run_graph_takes_its_constants_as_raw_tensors_and_refuses_a_mismatch(remote_parties):
    """The runtime sends a program's public values beside its JSON graph (``cv``), not as base64 in it."""
    from syft_lab.ids import new_id
    from syft_lab.plans.graph import Node, PlanGraph, Value

    alice = remote_parties[0]
    ptr = torch.tensor([1, 2, 3], dtype=torch.int64).send(alice)
    stub = torch.empty(0, dtype=torch.int64)
    node = Node(aten.add.Tensor, [Value("input", 0), Value("const", 0)], {}, [((3,), "int64")])
    graph = PlanGraph("smpc", [{"name": "in0", "role": "input", "shape": [3], "dtype": "int64"}], [stub], [node],
                      [Value("node", 0)], False).to_json()
    out = new_id()
    msg = {"c": "run_graph", "g": graph, "i": [ptr.id_at_location], "o": [out], "ret": [out]}
    got = alice.submit_request(dict(msg, cv=[torch.tensor([10, 20, 30])])).result()
    assert got[0].tolist() == [11, 22, 33]
    with pytest.raises(SyftError, match="'cv' lists one tensor per constant"):
        alice.submit_request(dict(msg, o=[new_id()], cv=[])).result()
    bad = new_id()
    with pytest.raises(SyftError, match="'cv' lists one tensor per constant"):
        alice.submit_request(dict(msg, o=[bad], ret=[bad], cv=["not a tensor"])).result()
