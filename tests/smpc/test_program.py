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
            if worker is alice:  # the keep-only round was sent and not waited for; the open was one round trip
                assert (stats["rounds"], stats["unwaited"], stats["messages"]) == (1, 1, 2)
            else:
                assert stats["messages"] == 0  # in process: no message
    finally:
        local.close()


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
