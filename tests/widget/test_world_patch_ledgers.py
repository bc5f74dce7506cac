"""A lane's ledger in world patches (syft_lab/widget/diff.py): only its new records travel."""
import json

from syft_lab.widget import diff


def rec(seq, kind="op"):
    return {"seq": seq, "kind": kind, "direction": "in", "peer": "me", "bytes": 8, "cell": 3}


def world(records, state="in-process", **ledger):
    lanes = [{"id": "me", "kind": "local", "state": "in-process", "objects": []},
             {"id": "bob", "kind": "virtual", "state": state, "objects": [{"id": 1, "kind": "tensor"}]}]
    if records is not None:
        lanes[1]["ledger"] = {"records": records, "seq": len(records), "dropped": 0, "cap": 2000,
                              "totals": {"op in": [len(records), 8 * len(records)]}, "material": {}, **ledger}
    return {"workers": lanes}


def test_a_grown_ledger_sends_only_its_new_records_and_applies_to_the_new_world():
    old, new = world([rec(i) for i in range(40)]), world([rec(i) for i in range(1, 41)])
    patch = diff.diff(old, new)
    assert "lanes" not in patch and patch["ops"] == []
    assert patch["ledgers"]["bob"]["append"] == [rec(40)] and patch["ledgers"]["bob"]["keep"] == 40
    assert len(json.dumps(patch)) < 400
    assert diff.apply(old, patch) == new


def test_a_ledger_that_is_not_the_old_one_grown_is_sent_whole_and_a_lost_one_as_null():
    old = world([rec(5), rec(6)])
    restarted = world([rec(0)])  # a worker made again: its sequence starts over
    patch = diff.diff(old, restarted)
    assert patch["ledgers"]["bob"] == restarted["workers"][1]["ledger"]
    assert diff.apply(old, patch) == restarted
    down = world(None, state="closed")
    patch = diff.diff(restarted, down)
    assert patch["ledgers"] == {"bob": None} and patch["lanes"][1] == {"id": "bob", "kind": "virtual", "state": "closed"}
    assert diff.apply(restarted, patch) == down


def test_a_header_change_keeps_the_ledger_the_patch_does_not_name():
    old = world([rec(0)])
    new = world([rec(0)])
    new["workers"].insert(1, {"id": "alice", "kind": "virtual", "state": "in-process", "objects": []})
    patch = diff.diff(old, new)
    assert "ledgers" not in patch and [h["id"] for h in patch["lanes"]] == ["me", "alice", "bob"]
    assert all("ledger" not in h for h in patch["lanes"])
    assert diff.apply(old, patch) == new
