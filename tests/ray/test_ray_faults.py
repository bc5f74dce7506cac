"""Faults: a killed actor, an actor Ray restarts, an actor that stops answering, a move whose
source died. Every one gives a clear WorkerUnavailableError naming the worker, and nothing
waits longer than the worker's timeout."""
import os
import signal
import time

import psutil
import pytest
import torch

import syft_lab as sy
from syft_lab.errors import ObjectNotFoundError, WorkerUnavailableError

pytestmark = pytest.mark.network  # a local Ray: processes listening on loopback


def kill_process(pid):
    """SIGKILL the actor's process and wait until it is gone (as a crash or the OOM killer would)."""
    proc = psutil.Process(pid)
    os.kill(pid, signal.SIGKILL)
    proc.wait(30)


def test_a_killed_actor_turns_its_pointers_into_clear_errors(fresh_worker, kill_actor):
    carol = fresh_worker("carol")
    p = torch.ones(3).send(carol)
    kill_actor(carol.actor)  # no restart
    start = time.monotonic()
    with pytest.raises(WorkerUnavailableError, match=r"Ray worker 'carol' .*its actor died.*start a new RayWorker"):
        p.get()
    assert carol.state == "dead"
    for call in (lambda: p + 1, lambda: torch.ones(2).send(carol), carol.summary):
        with pytest.raises(WorkerUnavailableError, match="'carol'"):
            call()
    assert time.monotonic() - start < 10  # at once, not after a timeout
    lane = next(w for w in sy.world({})["workers"] if w["id"] == "carol")
    assert lane["kind"] == "ray" and lane["state"] == "dead" and lane["node"] == "127.0.0.1"
    assert lane["objects"] == [] and "carol" in lane["error"]


def test_a_killed_actor_is_noticed_between_requests_without_waiting(fresh_worker, kill_actor):
    """What a world view's keepalive does (live.poll_remote_events): polls never block, and
    an actor killed while the notebook is idle turns its worker "dead" within a few polls."""
    erin = fresh_worker("erin")
    torch.ones(1).send(erin)
    erin.poll_events()  # sends the probe, waits for nothing
    assert erin.state == "connected"
    kill_actor(erin.actor)
    deadline = time.monotonic() + 20
    while erin.state != "dead" and time.monotonic() < deadline:
        start = time.monotonic()
        erin.poll_events()
        assert time.monotonic() - start < 1.0  # a poll never waits for the actor
        time.sleep(0.1)
    assert erin.state == "dead"
    with pytest.raises(WorkerUnavailableError, match="its actor died"):
        erin.summary()


def test_an_actor_restarted_by_ray_comes_back_empty_and_says_so(fresh_worker):
    dave = fresh_worker("dave", max_restarts=1)
    p = torch.ones(3).send(dave)
    old_pid, old_instance = dave.pid, dave.instance
    kill_process(old_pid)
    # the first call after the crash finds the actor gone or restarted: it never runs on the new one
    with pytest.raises(WorkerUnavailableError, match=r"'dave'.*(comes|came) back empty"):
        p.get()
    assert dave.state in ("restarting", "disconnected")
    with pytest.raises(ObjectNotFoundError) as info:  # the next call waits for the new actor
        p.get()
    assert any("restarted" in note and "gone" in note for note in info.value.__notes__)
    assert dave.restarted and dave.state == "connected"
    assert dave.pid != old_pid and dave.instance != old_instance
    assert len(dave.objects) == 0  # empty
    q = torch.arange(3.0).send(dave)  # and usable again
    assert torch.equal((q * 2).get(), torch.arange(3.0) * 2)


def test_an_actor_that_stops_answering_times_out_and_recovers(fresh_worker):
    erin = fresh_worker("erin", timeout=1.0)
    p = torch.ones(2).send(erin)
    os.kill(erin.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(WorkerUnavailableError, match=r"'erin'.*no reply within 1.0 s"):
            p + 1
        assert time.monotonic() - start < 5
        assert erin.state == "unreachable"
    finally:
        os.kill(erin.pid, signal.SIGCONT)
    erin.timeout = 60.0  # the actor works through the op that timed out first (2 shared cores)
    assert torch.equal((p + 2).get(), torch.full((2,), 3.0))  # the late reply is never mistaken for this one
    assert erin.state == "connected"


def test_a_move_whose_source_died_names_the_source(fresh_worker, kill_actor):
    frank, grace = fresh_worker("frank"), fresh_worker("grace")
    p = torch.ones(4).send(frank)
    kill_actor(frank.actor)
    with pytest.raises(WorkerUnavailableError, match="'frank'"):
        p.move(grace)
    assert frank.state == "dead" and grace.state == "connected" and len(grace.objects) == 0
    assert grace.ping()


def test_a_move_of_a_missing_object_names_the_source(ray_pair):
    bob, alice = ray_pair
    p = torch.ones(4).send(bob)
    bob._discard(p.id_at_location)  # gone from bob behind the pointer's back
    with pytest.raises(ObjectNotFoundError) as info:
        p.move(alice)
    assert info.value.worker_id == "bob"
    assert len(alice.objects) == 0
    del p


def test_a_client_killed_mid_round_is_named_and_the_global_model_is_unchanged(ray_pair, fresh_worker, kill_actor,
                                                                             monkeypatch):
    """FedAvg with plans on Ray workers (every client in flight, one actor call each): carol's
    actor is killed while the round runs, once bob's and alice's calls are in flight and before
    hers is sent (a client whose results are all in when it dies has done its part: the round
    has them); the round names her, changes nothing, and runs again without her."""
    bob, alice = ray_pair
    carol = fresh_worker("carol_fl")
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(36, 4, generator=g), torch.arange(36) % 3
    fds = sy.BaseDataset(x, y, name="killed_mid_round").federate([bob, alice, carol])
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        fl = sy.federated.FedAvg(model, fds, lr=0.2, batch_size=4, plans=True)
        fl.round(progress=False)
        before = {k: v.clone() for k, v in model.state_dict().items()}
        real = carol.submit_calls
        in_flight = []

        def killed_first(msgs, **kw):
            in_flight.extend(len(w.transport._replies) for w in (bob, alice))
            kill_actor(carol.actor)
            return real(msgs, **kw)

        monkeypatch.setattr(carol, "submit_calls", killed_first)
        with pytest.raises(sy.federated.FederatedRoundError,
                           match=r"round 2: worker 'carol_fl' failed during .*Ray worker 'carol_fl'.*"
                                 r"global model is unchanged") as e:
            fl.round(progress=False)
        monkeypatch.undo()
        # bob's and alice's rounds were in flight (3 replies each to read here; bob, the aggregator, also the sum's start)
        assert len(in_flight) == 2 and all(n >= 3 for n in in_flight), in_flight
        assert e.value.worker_id == "carol_fl"
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
        assert len(fl.history) == 1
        retry = fl.round(clients=["bob", "alice"], progress=False)
        assert retry.round == 2 and set(retry.clients) == {"bob", "alice"}
        assert not torch.equal(before["0.weight"], model[0].weight)
    finally:
        for wid in ("bob", "alice"):  # carol's part went with her actor
            fds[wid].unload()
