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
