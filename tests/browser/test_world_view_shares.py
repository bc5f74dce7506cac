"""Secret-shared tensors in the views (issues 17 and 18), in a real JupyterLab: the chain view
draws FixedPrecision > AdditiveSharing > one branch per share, each on its worker, the crypto
provider named, no share value anywhere on the page; in the world view the shares of one secret
light up together across lanes (hover, or a click that pins it), the crypto provider's lane
says what it is. Screenshots go to test-artifacts/; the README's docs/images/shared-tensor.png
and world-shares.png are rewritten with SYFT_LAB_UPDATE_SCREENSHOTS=1 (or written when missing)."""
from __future__ import annotations


import pytest
from playwright.sync_api import expect
from lab_steps import update_readme_image

pytestmark = [pytest.mark.browser, pytest.mark.slow]


CELLS = ["""\
import torch
import syft_lab as sy
sy.hook()
alice, bob, carol = sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")
x = torch.tensor([0.1, -0.2, 0.3])
sx = x.fix_precision().share(alice, bob, crypto_provider=carol)
shares = [int(v) for p in sx.child.layer_children() for v in p.location.objects[p.id_at_location].reshape(-1)]""",
         "sx", "sy.inspect()"]


def test_a_shared_tensor_is_a_tree_of_shares_on_their_workers(open_notebook, artifacts):
    nb = open_notebook("shares.ipynb", CELLS)
    page = nb.page
    shares = [int(v) for v in nb.kernel_eval("shares").strip("[]").split(",")]
    assert len(shares) == 6
    # the chain view: a tree with one branch per share, on its worker, and the crypto provider
    chain = nb.output(1)
    chain.locator(".syft-chain-block, .syft-chain").first.wait_for()
    text = chain.inner_text()
    for words in ("FixedPrecisionTensor", "AdditiveSharingTensor", "alice", "bob", "carol"):
        assert words in text, words
    # no one holds the secret (issue 26.7): the head is held by nobody, one line says what
    # reconstructing takes, its Get reads Reconstruct, and the shares sit side by side evenly
    assert "held by nobody" in text and "on me" not in chain.locator(".syft-box-fixed_precision").inner_text()
    expect(chain.locator(".syft-reconstruct-note")).to_have_text(
        "reconstructing needs every share: alice + bob (alone, each reveals nothing)")
    expect(chain.locator(".syft-box-fixed_precision [data-action=get]")).to_have_text("Reconstruct")
    boxes = [b.bounding_box() for b in chain.locator(".syft-branches > .syft-branch").all()]
    assert len(boxes) == 2 and boxes[0]["y"] == boxes[1]["y"] and abs(boxes[0]["width"] - boxes[1]["width"]) < 1
    chain.screenshot(path=str(artifacts / "shared-tensor.png"))
    update_readme_image(artifacts / "shared-tensor.png", "shared-tensor.png")
    assert_no_share_value(page, shares)


def assert_no_share_value(page, shares):
    """No share value is on the page (a share alone reveals nothing, and none is shown)."""
    body = page.locator("body").inner_text()
    for v in shares:
        if abs(v) >= 1000:  # small numbers turn up anywhere (counts, sizes)
            assert str(v) not in body, v


def test_the_shares_of_one_secret_light_up_together_across_lanes(open_notebook, artifacts):
    nb = open_notebook("shares_world.ipynb", CELLS)
    page = nb.page
    shares = [int(v) for v in nb.kernel_eval("shares").strip("[]").split(",")]
    # the world view: the shares of sx on alice and bob light up together, with sx
    world = nb.output(2)
    world.locator(".syft-lane").first.wait_for()
    share_rows = world.locator(".syft-obj[data-group]")
    expect(share_rows.first).to_be_visible()
    on_alice = world.locator(".syft-lane[data-worker='alice'] .syft-obj[data-group]").first
    group = on_alice.get_attribute("data-group")
    on_alice.hover()
    lit = world.locator(f".syft-obj.syft-lit[data-group='{group}']")
    lanes = {r.get_attribute("data-key").rsplit(":", 1)[0] for r in lit.all()}
    assert {"alice", "bob", "me"} <= lanes, lanes
    # a click pins it: moving away keeps the siblings lit; a second click lets go
    on_alice.click()
    world.locator(".syft-lane[data-worker='carol'] .syft-lane-head").hover()
    expect(world.locator(".syft-lane[data-worker='bob'] .syft-obj.syft-lit[data-group]")).to_have_count(1)
    expect(world.locator(".syft-lane[data-worker='carol'] .syft-lane-role")).to_have_text("crypto provider")
    world.screenshot(path=str(artifacts / "world-shares.png"))
    update_readme_image(artifacts / "world-shares.png", "world-shares.png")
    on_alice.click()
    expect(world.locator(".syft-obj.syft-lit")).to_have_count(0)
    assert_no_share_value(page, shares)


MODULE_CELLS = ["""\
import torch
from torch import nn
import syft_lab as sy
sy.hook()
alice, bob, carol = sy.VirtualWorker("alice"), sy.VirtualWorker("bob"), sy.VirtualWorker("carol")
cnn = nn.Sequential(nn.Linear(3, 2))
cnn.fix_precision().share(alice, bob, crypto_provider=carol)
opt = torch.optim.SGD(cnn.parameters(), lr=0.1)
models = [cnn]""", "sy.inspect()"]


def test_the_shares_of_a_shared_module_are_shares_with_no_button(open_notebook, artifacts):
    """Issue 26.5: after cnn.fix_precision().share(...), every parameter share on alice and bob
    carries its badge, names its secret and offers no Get or Move alone."""
    nb = open_notebook("shares_module.ipynb", MODULE_CELLS)
    world = nb.output(1)
    world.locator(".syft-lane").first.wait_for()
    for worker in ("alice", "bob"):
        rows = world.locator(f".syft-lane[data-worker='{worker}'] .syft-obj")
        expect(rows).to_have_count(2)  # the weight's share and the bias's
        shown = set()
        for row in rows.all():
            assert row.locator(".syft-share").inner_text().startswith("share ")
            assert row.locator("button[data-action]").count() == 0
            # the name says whose share it is: whole, or cut to what tells the two apart (issue
            # 39.3) with the whole name one hover away
            text = row.inner_text()
            assert "share of cnn.0." in text or row.locator("[title*='share of cnn.0.']").count() >= 1, text
            shown.add(next(p for p in ("weight", "bias") if p in text))
        assert shown == {"weight", "bias"}
    world.screenshot(path=str(artifacts / "world-module-shares.png"))
