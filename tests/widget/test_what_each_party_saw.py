"""Issue 39, item 4: what each party saw, as it happened (the ledger in a lane, worker to
worker flows, steps that name what happened)."""
import pytest
import torch

import syft_lab as sy
from syft_lab import events
from syft_lab.widget import WorldWidget, live


def _lane(widget, wid):
    return {ln["id"]: ln for ln in widget.world["workers"]}[wid]


@pytest.mark.network
@pytest.mark.slow
def test_a_worker_process_lane_shows_its_record_as_cells_run():
    """A worker process's lane header said `record ↓0 ↑0 · nothing yet` after a cell that sent
    and computed there: its record was read once, when the lane was first shown."""
    w = sy.start_worker("h4_ledger_lane")
    try:
        ns = {"w": w}
        view = WorldWidget(namespace=ns)
        first = _lane(view, "h4_ledger_lane").get("ledger") or {"seq": 0}
        ns["p"] = torch.ones(3).send(w)
        ns["q"] = ns["p"] * 2
        live.refresh_all()  # the end of a cell
        led = _lane(view, "h4_ledger_lane")["ledger"]
        assert led["seq"] >= first["seq"] + 2, led
        assert led["totals"]["stored in"][0] >= 1 and led["totals"]["op in"][0] >= 1, led["totals"]
        assert [r["kind"] for r in led["records"]][-2:] == ["stored", "op"], led["records"]
        assert w.ledger()[-1]["kind"] == "op"
        view.close()
    finally:
        w.close()


def test_a_trusted_aggregator_ledger_names_each_hospital():
    """With a trusted aggregator every record read "from me" / "to me", as if the notebook had
    seen each hospital's weights: the ledgers name the hospital -> aggregator flows."""
    from torch import nn

    hospitals = [sy.VirtualWorker(f"h4_hospital_{i}") for i in range(3)]
    aggregator = sy.VirtualWorker("h4_aggregator")
    try:
        torch.manual_seed(0)
        models = {h.id: nn.Linear(2, 1).send(h) for h in hospitals}
        avg = sy.federated_avg(models, {h.id: 1 for h in hospitals}, to=aggregator)
        arrived = [r for r in aggregator.ledger() if r["direction"] == "in" and r["kind"] != "op"]
        from_hospitals = [r for r in arrived if r["peer"] != "me"]
        # each hospital's two weighted terms (weight, bias) came from that hospital
        assert sorted(r["peer"] for r in from_hospitals) == sorted(h.id for h in hospitals for _ in range(2)), arrived
        assert all(r["kind"] == "moved" and r["peer_kind"] == "worker" for r in from_hospitals)
        for h in hospitals:
            left = [r for r in h.ledger() if r["direction"] == "out"]
            assert [r["peer"] for r in left] == [aggregator.id] * 2, left
        view = WorldWidget(namespace={"avg": avg})
        records = _lane(view, aggregator.id)["ledger"]["records"]
        assert {r["peer"] for r in records if r["kind"] == "moved"} == {h.id for h in hospitals}
        view.close()
        del avg, models
    finally:
        for w in (*hospitals, aggregator):
            w.close()


def _fresh_steps():
    from syft_lab.widget.tracker import StepContext

    live.scheduler.states, live.scheduler.raw, live.scheduler.step = None, [], StepContext()


def _step_of(sent, cell, code, run, ns):
    live.scheduler.step.cell, live.scheduler.step.code = cell, code
    run(ns)
    live.refresh_all()
    patches = sent.of("world_patch")
    return patches[-1]["step"] if patches else None


def test_history_steps_say_what_happened(capture):
    """Every History step read "names or values changed", whether a cell trained four hospitals
    or read a ledger: a step names what it did (sent, trained N clients, averaged, reconstructed)."""
    from torch import nn

    _fresh_steps()
    hospitals = [sy.VirtualWorker(f"h4_clinic_{i}") for i in range(4)]
    agg = sy.VirtualWorker("h4_secure")
    alice, bob, carol = (sy.VirtualWorker(f"h4_{n}") for n in ("alice", "bob", "carol"))
    ns = {}
    view = WorldWidget(namespace=ns)
    view._views.add("v1")
    sent = capture(view)
    try:
        step = _step_of(sent, 2, "x_ptr = x.send(bob)", lambda ns: ns.update(x_ptr=torch.ones(2).send(bob)), ns)
        assert [(e["type"], e.get("how"), e["worker"]) for e in step["events"]] == [("stored", "sent", "h4_bob")]

        x = torch.randn(40, 2)
        y = (x[:, 0] > 0).long()
        fds = sy.BaseDataset(x, y, name="h4_clinics").federate(hospitals)
        torch.manual_seed(0)
        fl = sy.federated.FedAvg(nn.Linear(2, 2), fds, lr=0.1, batch_size=5, plans=False, aggregator=agg)
        ns.update(fl=fl, fds=fds)
        step = _step_of(sent, 3, "fl.round()", lambda ns: ns["fl"].round(progress=False), ns)
        kinds = [e["type"] for e in step["events"]]
        trained = next(e for e in step["events"] if e["type"] == "trained")
        assert sorted(trained["clients"]) == sorted(h.id for h in hospitals) and trained["round"] == 1
        assert "averaged" in kinds and next(e for e in step["events"] if e["type"] == "averaged")["worker"] == agg.id
        assert any(e["type"] == "ops" and e["count"] > 0 for e in step["events"]), kinds

        def share(ns):
            ns["sx"] = torch.tensor([0.5, -1.0]).fix_precision().share(alice, bob, crypto_provider=carol)
        _step_of(sent, 4, "sx = ...share(alice, bob, crypto_provider=carol)", share, ns)
        step = _step_of(sent, 5, "v = sx.get()", lambda ns: ns.update(v=ns.pop("sx").get()), ns)
        rec = [e for e in step["events"] if e["type"] == "reconstructed"]
        assert [(e["secret"], sorted(e["workers"])) for e in rec] == [("sx", ["h4_alice", "h4_bob"])], step["events"]
        assert not any(e["type"] in ("fetched", "deleted") and e["worker"] in ("h4_alice", "h4_bob")
                       for e in step["events"]), step["events"]

        before = len(sent.of("world_patch"))
        _step_of(sent, 6, "bob.ledger()", lambda ns: ns["x_ptr"].location.ledger(), ns)
        assert len(sent.of("world_patch")) == before  # nothing changed: no step claims it did
        view.close()
        del fl, fds
        ns.clear()
    finally:
        _fresh_steps()
        for w in (*hospitals, agg, alice, bob, carol):
            w.close()


@pytest.mark.network
@pytest.mark.slow
def test_a_worker_process_records_the_cell_that_sent_each_message():
    w = sy.start_worker("h4_ledger_cells")
    try:
        events.set_current_cell(7)
        p = torch.ones(3).send(w)
        q = p * 2
        events.set_current_cell(None)
        records = w.ledger()
        assert [r["cell"] for r in records[-2:]] == [7, 7], records[-2:]
        del p, q
    finally:
        events.set_current_cell(None)
        w.close()


@pytest.mark.network
@pytest.mark.slow
def test_a_move_between_worker_processes_is_a_worker_to_worker_flow_in_both_records():
    """model.move(secure_worker) between worker processes goes through the notebook, but each
    worker's record says the other worker sent or took it (not "from me" / "to me")."""
    hospital, secure = sy.start_worker("h4_move_hospital"), sy.start_worker("h4_move_secure")
    try:
        p = torch.ones(3).send(hospital)
        moved = p.move(secure)
        arrived = [r for r in secure.ledger() if r["direction"] == "in" and r["kind"] == "moved"]
        assert [(r["peer"], r["peer_kind"]) for r in arrived] == [(hospital.id, "worker")], secure.ledger()
        left = [r for r in hospital.ledger() if r["direction"] == "out" and r["kind"] == "moved"]
        assert [r["peer"] for r in left] == [secure.id], hospital.ledger()
        assert torch.equal(moved.get(), torch.ones(3))
        del p
    finally:
        hospital.close()
        secure.close()
