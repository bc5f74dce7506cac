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
