"""Issue 39, item 4, on Ray: a move between two Ray workers goes actor to actor, and each
worker's record says the other worker sent or took it (not "from me" / "to me"), as a move
between worker processes does (tests/widget/test_what_each_party_saw.py)."""
from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.network, pytest.mark.ray]  # a local Ray: processes listening on loopback


def test_a_move_between_ray_workers_is_a_worker_to_worker_flow_in_both_records(ray_pair):
    bob, alice = ray_pair  # bob: a hospital; alice: the aggregator
    p = torch.ones(3).send(bob)
    seen = {w.id: len(w.ledger()) for w in (bob, alice)}
    moved = p.move(alice)
    arrived = [r for r in alice.ledger()[seen["alice"]:] if r["direction"] == "in"]
    assert [(r["kind"], r["peer"], r["peer_kind"]) for r in arrived] == [("moved", "bob", "worker")], arrived
    left = [r for r in bob.ledger()[seen["bob"]:] if r["direction"] == "out"]
    assert [(r["kind"], r["peer"], r["peer_kind"]) for r in left] == [("moved", "alice", "worker")], left
    assert torch.equal(moved.get(), torch.ones(3))
    del p
