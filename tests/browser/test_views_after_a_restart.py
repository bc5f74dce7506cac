"""Issue 39, item 5: after a kernel restart a frozen world view said its worker was "connected"
under the "kernel is gone" banner, and the sidebar kept the dead kernel's History."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect

from lab_steps import run_cell

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SETUP = """\
import torch
import syft_lab as sy
sy.hook()
bob = sy.VirtualWorker("bob")
x = torch.ones(2)
x_ptr = x.send(bob)"""
PANEL = "#syft-lab-sidebar"


def test_after_a_restart_no_view_claims_the_old_kernel_s_workers_or_steps(open_notebook, artifacts):
    nb = open_notebook("h4_restart.ipynb", [SETUP, "sy.inspect()", "y_ptr = x_ptr * 2"], run=False)
    page = nb.page
    run_cell(nb, 0)
    run_cell(nb, 1)
    world = nb.output(1)
    bob = world.locator(".syft-lane[data-worker='bob']")
    bob.wait_for()
    page.evaluate("() => window.jupyterapp.commands.execute('syft-lab:show-panel')")
    panel = page.locator(PANEL)
    expect(panel).to_have_attribute("data-state", "connected", timeout=60_000)
    expect(panel.locator(".syft-lane[data-worker='bob']")).to_have_count(1)
    run_cell(nb, 2)
    steps = panel.locator(".syft-timeline .syft-step")
    expect(steps.filter(has_text="x_ptr * 2")).to_have_count(1)

    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    nb.wait_idle()
    expect(world.locator(".syft-dead-banner")).to_contain_text("kernel of this view is gone")
    # the frozen view does not vouch for a worker of a kernel that is gone
    expect(bob.locator(".syft-lane-state")).to_have_text("unknown")
    assert "connected" not in world.locator(".syft-lane-state").all_inner_texts()
    # the sidebar follows the new kernel: none of the old kernel's steps
    expect(panel).to_have_attribute("data-state", "connected", timeout=60_000)
    expect(panel.locator(".syft-lane[data-worker='bob']")).to_have_count(0)
    expect(steps.filter(has_text="x_ptr * 2")).to_have_count(0)
    expect(steps).to_have_count(1)  # the world when the panel met this kernel
    page.screenshot(path=str(artifacts / "views-after-restart.png"))
