"""The worker contract's lifecycle, for every kind of worker (tests/contract/kinds.py): a closed
worker refuses every request in the same words and still takes releases, its lane tells what it
still holds; a worker whose process died is named in a clear error."""
import gc

import pytest
import torch

import syft_lab as sy
from syft_lab.errors import SyftError, WorkerUnavailableError
from syft_lab.workers.base import WorkerClosedError, closed_error
from syft_lab.workers.protocol import submit

from contract.kinds import KINDS, clients

aten = torch.ops.aten
REMOTE = [k for k in KINDS if k.values[0] != "virtual"]


def refusal(call) -> SyftError:
    with pytest.raises(SyftError) as info:
        call()
    return info.value


def lane(worker_id: str, namespace: dict) -> dict:
    return next(w for w in sy.world(namespace)["workers"] if w["id"] == worker_id)


def test_a_closed_worker_refuses_every_request_in_the_same_words(world):
    bob, alice, _ = world
    p = torch.arange(3.0).send(bob)
    mine = torch.ones(2).send(alice)
    bob.close()
    expected = str(closed_error("bob"))
    assert "'bob'" in expected and "was closed" in expected
    requests = {
        "send": lambda: bob.send(torch.ones(1)),
        "send a module": lambda: torch.nn.Linear(2, 1).send(bob),
        "op": lambda: p + 1,
        "submitted op": lambda: submit(aten.add.Tensor, (p, p)).result(),
        "get": p.get,
        "copy": p.copy,
        "move out": lambda: p.move(alice),
        "move in": lambda: mine.move(bob),
        "ledger": bob.ledger,
        "search": lambda: bob.search("#data"),
        "load": lambda: bob.load(torch.ones(1), tags=["#data"]),
    }
    said = {what: refusal(call) for what, call in requests.items()}
    assert {what: str(e) for what, e in said.items()} == dict.fromkeys(requests, expected)
    assert {what: type(e) for what, e in said.items()} == dict.fromkeys(requests, WorkerClosedError)
    # a move into the closed worker was refused before its source gave the object up
    assert torch.equal(mine.get(), torch.ones(2)) and len(alice.objects) == 0


def test_releases_go_after_close_and_the_lane_tells_what_the_worker_still_holds(world, kind, request):
    bob, _, _ = world
    p, q = torch.arange(3.0).send(bob), torch.ones(2).send(bob)
    ids = {p.id_at_location, q.id_at_location}
    bob.close()
    gone = lane("bob", {"p": p, "q": q})
    assert gone["state"] == "closed" and gone["gone"]
    if kind == "virtual":  # in process its objects stay until the pointers that own them are dropped
        assert {o["id"] for o in gone["objects"]} == ids and all(o["actions"] == [] for o in gone["objects"])
    else:  # a remote worker's session ended with the close: what it held for this client went with it
        assert gone["objects"] == []
    del p  # a release: no error, whatever the kind
    gc.collect()
    bob.flush()
    rows = lane("bob", {"q": q})["objects"]
    assert [o["id"] for o in rows] == ([q.id_at_location] if kind == "virtual" else [])
    del q
    gc.collect()
    if kind != "virtual":  # what the lane says is what the worker holds: ask it through a new client
        (again,) = clients(request, kind, ("bob",))
        assert not ids & {o["id"] for o in again.summary()}


@pytest.mark.parametrize("kind", REMOTE, indirect=True)
def test_a_worker_whose_process_died_is_named_in_a_clear_error(doomed, kind):
    erin, kill = doomed
    p = torch.arange(3.0).send(erin)
    kill()
    for call in (p.get, lambda: p + 1, lambda: erin.send(torch.ones(1)), erin.summary):
        e = refusal(call)
        assert isinstance(e, WorkerUnavailableError) and "worker 'erin'" in str(e) and "unavailable" in str(e), e
        assert "Traceback" not in str(e)
