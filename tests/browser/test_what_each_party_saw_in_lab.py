"""Issue 39, item 4, as a teacher sees it in JupyterLab: History steps say what a cell did
(sent, trained N clients, averaged, reconstructed) instead of "names or values changed", and the
aggregator's record names each hospital it received from, not "me"."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from lab_steps import run_cell

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = ["""\
import torch
from torch import nn
import syft_lab as sy
sy.hook()
hospitals = [sy.VirtualWorker(f"hospital_{i}") for i in range(4)]
secure = sy.VirtualWorker("secure")
alice, bob, carol = sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")
torch.manual_seed(0)
x = torch.randn(40, 2); y = (x[:, 0] > 0).long()
fds = sy.BaseDataset(x, y, name="wards").federate(hospitals)
fl = sy.federated.FedAvg(nn.Linear(2, 2), fds, lr=0.1, batch_size=5, plans=False, aggregator=secure)""",
         "sy.inspect()",
         "t_ptr = torch.ones(2).send(bob)",
         "result = fl.round(progress=False)",
         "sx = torch.tensor([0.5, -1.0]).fix_precision().share(alice, bob, crypto_provider=carol)",
         "v = sx.get()",
         "bob.ledger()[:1]"]


def test_history_names_each_step_and_the_ledger_shows_who_sent_what_to_whom(open_notebook, artifacts):
    nb = open_notebook("h4_class.ipynb", CELLS, run=False)
    for i in range(len(CELLS)):
        run_cell(nb, i)
    world = nb.output(1)
    world.locator(".syft-lane").first.wait_for()
    timeline = world.locator(".syft-timeline")
    timeline.locator("summary").click()
    steps = timeline.locator(".syft-step")
    expect(steps.filter(has_text="t_ptr = torch.ones(2).send(bob)")).to_contain_text("sent to bob (t_ptr)")
    round_step = steps.filter(has_text="fl.round(")
    expect(round_step).to_contain_text("trained 4 clients (round 1)")
    expect(round_step).to_contain_text("on secure")
    expect(steps.filter(has_text="v = sx.get()")).to_contain_text("reconstructed sx from 2 shares")
    texts = "\n".join(steps.all_inner_texts())
    assert "names or values changed" not in texts, texts
    assert "bob.ledger()" not in texts  # a cell that changed nothing makes no step
    # the aggregator's record: each hospital's weighted terms came from that hospital
    secure = world.locator(".syft-lane[data-worker='secure']")
    secure.locator(".syft-ledger-toggle").click()
    moved = secure.locator(".syft-ledger-in[data-kind='moved']")
    expect(moved.first).to_be_visible()
    peers = set(moved.locator(".syft-ledger-peer").all_inner_texts())
    assert peers == {f"hospital_{i}" for i in range(4)}, peers
    expect(moved.first).to_have_attribute("data-to", "secure")
    world.screenshot(path=str(artifacts / "history-names-steps.png"))
