"""Ray workers in the world view (issues 15 and 18), in a real JupyterLab with a local Ray:
14 Ray workers fold into the overview of workers, grouped by kind, by the node (host) they run
on and by state; a worker's lane opens on demand and shows its node; when an actor dies, its
workers turn down (greyed, grouped apart) and the pointers to them dangle. Screenshots go to
test-artifacts/."""
from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect
from lab_steps import run_cell

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = ["""\
import torch
import syft_lab as sy
sy.hook()
sy.ray.init(num_cpus=2)
clients = sy.ray.workers(14, prefix="client", per_actor=7)  # two actor processes, 7 workers each
ptrs = [torch.ones(2).send(c) for c in clients]
node = clients[0].node""", "sy.inspect()", "import ray\nray.kill(clients[7].actor)  # the second actor: client7 ... client13",
         "sy.ray.shutdown()"]


def test_ray_workers_fold_into_an_overview_by_node_and_state(open_notebook, artifacts):
    nb = open_notebook("ray_world.ipynb", CELLS, run=False)
    try:
        run_cell(nb, 0, timeout=240_000)
        node = nb.kernel_eval("node").strip("'")
        assert re.fullmatch(r"[\w.:-]+", node), node
        run_cell(nb, 1, timeout=240_000)
        out = nb.output(1)
        out.locator(".syft-lane").first.wait_for()
        overview = out.locator(".syft-overview")
        chips = overview.locator(".syft-ov-worker")
        expect(chips).to_have_count(14)
        expect(overview.locator(".syft-ov-group[data-group='ray'] .syft-ov-worker")).to_have_count(14)
        # every chip says the node its worker runs on; grouped by node, they are one group
        expect(overview.locator(".syft-ov-worker[data-worker='client3'] .syft-ov-node")).to_have_text(f"@{node}")
        overview.locator(".syft-ov-group-by").select_option("node")
        expect(overview.locator(f".syft-ov-group[data-group='{node}'] .syft-ov-worker")).to_have_count(14)
        # a lane opens on demand: a Ray worker's header shows its kind, node and state
        chips.filter(has_text="client3").first.click()
        lane = out.locator(".syft-lane[data-worker='client3']")
        expect(lane.locator(".syft-lane-kind")).to_have_text("ray")
        expect(lane.locator(".syft-lane-node")).to_have_text(f"@{node}")
        expect(lane.locator(".syft-lane-state")).to_have_text("connected")
        expect(lane.locator(".syft-obj")).to_have_count(1)
        out.screenshot(path=str(artifacts / "world-ray-overview.png"))
        # an actor dies: its seven workers are down, grouped apart by state, greyed; their pointers dangle
        run_cell(nb, 2, timeout=240_000)
        overview.locator(".syft-ov-group-by").select_option("state")
        down = overview.locator(".syft-ov-group:not([data-group='connected']) .syft-ov-worker.syft-ov-down")
        expect(down).to_have_count(7, timeout=30_000)
        expect(overview.locator(".syft-ov-group[data-group='connected'] .syft-ov-worker")).to_have_count(7)
        assert {c.get_attribute("data-worker") for c in down.all()} == {f"client{i}" for i in range(7, 14)}
        me = out.locator(".syft-lane[data-worker='me']")
        expect(me.locator(".syft-obj[data-names='ptrs[0]'], .syft-obj-pointer").first).not_to_have_class(re.compile("dangling"))
        me.locator(".syft-lane-body").evaluate("b => { b.scrollTop = b.scrollHeight; }")
        last = me.locator(".syft-obj-pointer", has=nb.page.locator(".syft-worker-chip", has_text="client13"))
        expect(last).to_have_class(re.compile("syft-obj-dangling"))
        expect(last.locator("[data-action]")).to_have_count(0)
        out.screenshot(path=str(artifacts / "world-ray-actor-died.png"))
    finally:
        run_cell(nb, 3, timeout=240_000)
