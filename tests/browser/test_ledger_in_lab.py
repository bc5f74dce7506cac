"""What each party sees, in a real JupyterLab (#26.8, #26.9): every lane's header opens its
record (kind, direction, peer, bytes, cell; never a value); for a secure product alice's lists
the masked values she opened and the dealer rows she received, carol's the material she made;
a shared value's Explain says the value is the sum of every share mod 2^64 and who must send
theirs, and no share value is on the page. Screenshots go to test-artifacts/; the README's docs/images/world-ledger.png and
world-explain.png are written when missing, or rewritten with SYFT_LAB_UPDATE_SCREENSHOTS=1."""
from __future__ import annotations

import pytest
from playwright.sync_api import expect
from lab_steps import update_readme_image

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = ["""\
import torch
import syft_lab as sy
from syft_lab.smpc import provider
sy.hook()
provider.clear_pool()
alice, bob, carol = sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")
sx = torch.tensor([0.1, -0.2, 0.3]).fix_precision().share(alice, bob, crypto_provider=carol)
shares = [int(v) for p in sx.child.layer_children() for v in p.location.objects[p.id_at_location].reshape(-1)]""",
         "y = sx * sx",
         "sy.inspect()"]


def assert_no_share_value(page, shares):
    body = page.locator("body").inner_text()
    for v in shares:
        if abs(v) >= 1000:  # small numbers turn up anywhere (counts, sizes)
            assert str(v) not in body, v


def test_each_lane_opens_its_record_and_a_shared_value_explains_its_reconstruction(open_notebook, artifacts):
    nb = open_notebook("ledger.ipynb", CELLS)
    page = nb.page
    shares = [int(v) for v in nb.kernel_eval("shares").strip("[]").split(",")]
    world = nb.output(2)
    world.locator(".syft-lane").first.wait_for()
    alice = world.locator(".syft-lane[data-worker='alice']")
    toggle = alice.locator(".syft-ledger-toggle")
    expect(toggle).to_have_text("record ↓5 ↑1")  # stored, 2 ops, dealer rows, opened sum; 1 opened value: x - a (x * x takes a square pair) (its result share of the product is computed from its own pieces and stored: one op)
    expect(alice.locator(".syft-ledger")).to_have_count(0)
    toggle.click()
    panel = alice.locator(".syft-ledger")
    expect(panel).to_be_visible()
    dealer = panel.locator(".syft-ledger-rec[data-kind='dealer material']")
    expect(dealer).to_have_count(1)
    expect(dealer).to_contain_text("↓ from")
    expect(dealer.locator(".syft-ledger-peer")).to_have_text("carol")
    expect(dealer.locator(".syft-ledger-bytes")).to_have_text("48 B")  # a and a^2
    expect(dealer.locator(".syft-ledger-cell")).to_have_text("[2]")  # the cell of y = sx * sx
    opened = panel.locator(".syft-ledger-out[data-kind='opened value']")
    expect(opened).to_have_count(1)
    expect(opened.first.locator(".syft-ledger-peer")).to_have_text("me")
    expect(panel.locator(".syft-ledger-in[data-kind='opened value']")).to_have_count(1)
    carol = world.locator(".syft-lane[data-worker='carol']")
    carol.locator(".syft-ledger-toggle").click()
    expect(carol.locator(".syft-ledger-material")).to_have_text("material made: 16 Beaver square (mul)")
    expect(carol.locator(".syft-ledger-out[data-kind='dealer material']")).to_have_count(2)  # the a and a^2 blocks
    world.screenshot(path=str(artifacts / "world-ledger.png"))
    update_readme_image(artifacts / "world-ledger.png", "world-ledger.png")
    # the record stays open and current when the world changes (a lane patch, not a fresh render)
    nb.page.evaluate("""async () => {
        const k = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
        await k.requestExecute({code: "z = sx + sx"}).done; }""")
    nb.wait_idle()
    expect(toggle).to_have_text("record ↓6 ↑1")
    expect(alice.locator(".syft-ledger .syft-ledger-rec").first).to_contain_text("add")
    toggle.click()
    expect(alice.locator(".syft-ledger")).to_have_count(0)
    # Explain on sx's row: the value is the sum of every share mod 2^64; alice and bob must send theirs
    row = world.locator(".syft-lane[data-worker='me'] .syft-obj[data-names='sx']")
    row.locator(".syft-explain-btn").click()
    box = world.locator(".syft-explain")
    expect(box).to_be_visible()
    expect(box.locator(".syft-explain-title b")).to_have_text("Reconstructing sx")
    expect(box).to_contain_text("sx = (share 1 (on alice) + share 2 (on bob)) mod 2^64, then / 1000")
    expect(box).to_contain_text("alice and bob must each send theirs to me")
    expect(box).to_contain_text("no lane holds sx")
    expect(box.locator(".syft-explain-party")).to_have_text(["alice: share 1/2", "bob: share 2/2", "carol: no share"])
    for party in ("alice", "bob"):  # its shares light up on alice and bob
        expect(world.locator(f".syft-lane[data-worker='{party}'] .syft-obj.syft-lit[data-group]")).not_to_have_count(0)
    world.screenshot(path=str(artifacts / "world-explain.png"))
    update_readme_image(artifacts / "world-explain.png", "world-explain.png")
    assert_no_share_value(page, shares)
    box.locator(".syft-explain-close").click()
    expect(world.locator(".syft-explain")).to_have_count(0)
