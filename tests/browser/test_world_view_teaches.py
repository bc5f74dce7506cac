"""The world view as a learner watches it, in a real JupyterLab (headless Chromium): arrows that
never cross a row they do not point to, stale views after a kernel restart, views that hold what
they show weakly, workers that close or die, pointers in containers, double clicks, and the
capabilities built for issue 18 (change and history, the legend, worlds of any size).
Screenshots go to test-artifacts/; the README's (docs/images/world-*.png) are rewritten with
SYFT_LAB_UPDATE_SCREENSHOTS=1, or written when missing."""
from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from playwright.sync_api import expect
from lab_steps import run_cell, update_readme_image

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

SETUP = """\
import torch
import syft_lab as sy
sy.hook()
bob = sy.VirtualWorker("bob")
alice = sy.VirtualWorker("alice")
carol = sy.VirtualWorker("carol")"""


def world_of(nb, index):
    out = nb.output(index)
    out.locator(".syft-lane").first.wait_for()
    return out


def lane(world, worker):
    return world.locator(f".syft-lane[data-worker='{worker}']")


# Every arrow sampled along its length: no point may fall inside a row other than its own two.
CROSSINGS = """(root) => {
  const rows = [...root.querySelectorAll('.syft-obj')].map((r) => ({key: r.dataset.key, rect: r.getBoundingClientRect()}));
  const bad = [];
  const paths = [...root.querySelectorAll('path.syft-arrow')];
  for (const p of paths) {
    const m = p.getScreenCTM();
    const len = p.getTotalLength();
    for (let d = 0; d <= len; d += 2) {
      const q = p.getPointAtLength(d);
      const x = m.a * q.x + m.c * q.y + m.e, y = m.b * q.x + m.d * q.y + m.f;
      for (const r of rows) {
        if (r.key === p.dataset.from || r.key === p.dataset.to) continue;
        const b = r.rect;
        if (x > b.left + 1 && x < b.right - 1 && y > b.top + 1 && y < b.bottom - 1) bad.push([p.dataset.from, r.key]);
      }
    }
  }
  return {arrows: paths.length, crossings: [...new Set(bad.map((b) => b.join(' over ')))]};
}"""

ARROW_CELLS = [SETUP + """
a_rather_long_variable_name_for_the_pointer = torch.ones(2, 3).send(alice)
zeta = torch.zeros(4).send(bob)
alpha = torch.ones(1).send(bob)
middle = torch.ones(5).send(carol)
beta = torch.ones(3).send(alice)
stored_on_bob = [bob.core.store(torch.randn(2)) for _ in range(3)]""", "sy.inspect()"]


def test_arrows_never_cross_rows_lanes_fit_and_targets_name_their_pointers(open_notebook, artifacts):
    nb = open_notebook("arrows.ipynb", ARROW_CELLS)
    world = world_of(nb, 1)
    page = nb.page
    expect(world.locator(".syft-arrow")).to_have_count(5)
    world.screenshot(path=str(artifacts / "world-arrows.png"))
    update_readme_image(artifacts / "world-arrows.png", "world-view.png")
    root = world.locator(".syft-world").element_handle()
    result = page.evaluate(CROSSINGS, root)
    assert result["arrows"] == 5
    assert result["crossings"] == []
    # the lanes fit the notebook's width (no fixed 420 px lanes cut off at the right)
    scroller = world.locator(".syft-world-scroll")
    assert page.evaluate("(s) => s.scrollWidth <= s.clientWidth + 1", scroller.element_handle())
    # target rows say which variables point at them
    ones = lane(world, "alice").locator(".syft-obj", has_text="float32[2, 3]")
    # (a long name is cut in the middle, keeping both ends; the whole name is its title: issue 39.3)
    pointed = ones.locator(".syft-pointed")
    expect(pointed).to_contain_text("← a_rather_long")
    expect(pointed).to_contain_text("_pointer")
    expect(pointed).to_have_attribute("title", re.compile("a_rather_long_variable_name_for_the_pointer"))
    # a pointer's target chip is never cut: it sits inside its row, outside the part that ellipsises
    for row in lane(world, "me").locator(".syft-obj-pointer").all():
        chip, box = row.locator(".syft-where").bounding_box(), row.bounding_box()
        assert chip["x"] + chip["width"] <= box["x"] + box["width"] + 0.5
        assert page.evaluate("(w) => w.scrollWidth <= w.clientWidth + 1", row.locator(".syft-where").element_handle())
    # "me": pointers grouped by target worker (in lane order), sorted by name in each group
    me = lane(world, "me")
    items = page.evaluate("""(l) => [...l.querySelectorAll('.syft-group, .syft-obj')]
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((r) => r.classList.contains('syft-group') ? 'group:' + r.textContent.trim().split(/\\s+/)[0]
                                                      : r.dataset.names)""", me.element_handle())
    assert items == ["group:bob", "alpha", "zeta", "group:alice", "a_rather_long_variable_name_for_the_pointer",
                     "beta", "group:carol", "middle"]
    # hovering a pointer lights it, its target and the arrow between them
    me.locator(".syft-obj[data-names='beta']").hover()
    expect(lane(world, "alice").locator(".syft-obj.syft-lit")).to_have_count(1)
    expect(world.locator("path.syft-arrow.syft-lit")).to_have_count(1)
    world.screenshot(path=str(artifacts / "world-arrows-routed.png"))


def test_a_view_whose_kernel_restarted_says_so_and_turns_its_buttons_off(open_notebook, artifacts):
    nb = open_notebook("restart.ipynb", [SETUP + "\nx = torch.ones(2)\nx_ptr = x.send(bob)", "sy.inspect()"])
    page = nb.page
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    world = world_of(nb, 1)
    get = lane(world, "me").locator(".syft-obj[data-names='x_ptr'] [data-action=get]")
    expect(get).to_be_enabled()
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart()")
    nb.wait_idle()
    expect(world.locator(".syft-root.syft-disabled")).to_have_count(1)
    expect(world.locator(".syft-dead-banner")).to_contain_text("kernel of this view is gone")
    assert world.inner_text().count("kernel of this view is gone") == 1  # said once, not in two places
    expect(get).to_be_disabled()
    get.click(force=True)
    expect(world.locator(".syft-status")).not_to_have_text(re.compile(r"get…"))
    assert not [e for e in errors if "Cannot send" in e]
    world.screenshot(path=str(artifacts / "world-kernel-gone.png"))


def test_a_displayed_pointer_is_released_when_its_variable_goes(open_notebook):
    nb = open_notebook("weak.ipynb", [SETUP, "t = torch.ones(1).send(alice)", "t",
                                      "import gc\ndel t\ngc.collect()"], run=False)
    for i in range(3):
        run_cell(nb, i)
    nb.output(2).locator(".syft-chain-block").wait_for()
    assert nb.kernel_eval("len(alice.objects)") == "1"
    run_cell(nb, 3)
    # Out caching is on (the default): Out[3] and _3 keep the displayed value weakly
    assert nb.kernel_eval("len(alice.objects)") == "0"
    assert "Proxy" in nb.kernel_eval("type(Out[3]).__name__")
    expect(nb.output(2).locator(".syft-state-bad")).to_have_text("gone")


def _start_worker(token_file: Path):
    cmd = [sys.executable, "-m", "syft_lab.worker", "--id", "remote", "--port", "0", "--threads", "1",
           "--token-file", str(token_file)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("SYFT_LAB_TOKEN", None)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=str(ROOT))
    line = [None]
    t = threading.Thread(target=lambda: line.__setitem__(0, proc.stdout.readline()), daemon=True)
    t.start()
    t.join(60)
    if not line[0] or "listening on" not in line[0]:
        proc.kill()
        pytest.fail(f"the worker did not start: {line[0]!r}")
    return proc, line[0].split("listening on", 1)[1].strip()


def test_closed_and_killed_workers_stay_greyed_and_their_pointers_dangle(open_notebook, tmp_path, artifacts):
    token = secrets.token_urlsafe(16)
    token_file = tmp_path / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    proc, url = _start_worker(token_file)
    try:
        nb = open_notebook("down.ipynb", [
            SETUP + f"\nremote = sy.WebSocketWorker({url!r}, id='remote', token={token!r}, progress=False)"
            "\nr = torch.ones(2).send(remote)\na = torch.ones(3).send(alice)\nb = torch.ones(4).send(bob)",
            "sy.inspect()", "alice.close()"], run=False)
        run_cell(nb, 0)
        run_cell(nb, 1)
        world = world_of(nb, 1)
        expect(lane(world, "remote").locator(".syft-lane-state")).to_have_text("connected")
        # a closed worker keeps its lane, greyed; the pointer to it dangles and has no buttons
        run_cell(nb, 2)
        expect(lane(world, "alice")).to_have_class(re.compile("syft-lane-down"))
        a_row = lane(world, "me").locator(".syft-obj[data-names='a']")
        expect(a_row).to_have_class(re.compile("syft-obj-dangling"))
        expect(a_row.locator("[data-action]")).to_have_count(0)
        # a killed worker process: the kernel notices by itself (keepalive) and the view says so,
        # with no cell run and no click
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        expect(lane(world, "remote")).to_have_class(re.compile("syft-lane-down"), timeout=20_000)
        expect(lane(world, "me").locator(".syft-obj[data-names='r']")).to_have_class(re.compile("syft-obj-dangling"))
        # the Move menu offers only the workers that can be reached
        b_row = lane(world, "me").locator(".syft-obj[data-names='b']")
        b_row.locator("[data-action=move]").click()
        items = [i.get_attribute("data-worker") for i in b_row.locator(".syft-menu-item").all()]
        assert items == ["carol"]
        world.screenshot(path=str(artifacts / "world-workers-down.png"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_pointers_in_containers_are_named_and_double_clicks_send_once(open_notebook):
    nb = open_notebook("containers.ipynb", [
        SETUP + "\ndata = {'bob': torch.ones(2).send(bob)}\nparts = [torch.zeros(3).send(alice)]"
        "\nx_ptr = torch.ones(4).send(carol)", "sy.inspect()"])
    world = world_of(nb, 1)
    me = lane(world, "me")
    expect(me.locator(".syft-held-in", has_text="data['bob']")).to_have_count(1)
    expect(me.locator(".syft-held-in", has_text="parts[0]")).to_have_count(1)
    row = me.locator(".syft-obj", has=nb.page.locator(".syft-held-in", has_text="data['bob']"))
    row.locator("[data-action=get]").click()
    status = world.locator(".syft-status")
    expect(status).to_have_class(re.compile("syft-ok"))
    assert "no longer bound" not in status.inner_text()
    assert nb.kernel_eval("len(bob.objects)") == "0"
    # a double click on Get: one request, one success, no error after it
    me.locator(".syft-obj[data-names='x_ptr'] [data-action=get]").dblclick()
    expect(status).to_have_text("x = x_ptr.get()")
    # the fetched pointer is still named by x_ptr: its row stays, gone, saying where its object went
    gone = me.locator(".syft-obj[data-names='x_ptr']")
    expect(gone).to_have_class(re.compile("syft-obj-gone"))
    expect(gone.locator(".syft-badge-gone")).to_have_text("gone: fetched")
    expect(gone.locator("[data-action]")).to_have_count(0)
    assert nb.kernel_eval("1") == "1"  # the kernel answered every message sent before this one
    expect(status).to_have_text("x = x_ptr.get()")
    assert nb.kernel_eval("x.tolist(), len(carol.objects)") == "([1.0, 1.0, 1.0, 1.0], 0)"


GONE_CELLS = [SETUP + "\nx_ptr = torch.ones(2).send(bob)\ny_ptr = torch.ones(3).send(bob)", "sy.inspect()",
              "x = x_ptr.get()", "on_alice = y_ptr.move(alice)", "z = torch.zeros(1)", "del x_ptr"]


def test_a_fetched_or_moved_pointer_a_name_holds_stays_as_a_gone_row(open_notebook, artifacts):
    nb = open_notebook("gone.ipynb", GONE_CELLS, run=False)
    for i in range(3):
        run_cell(nb, i)
    world = world_of(nb, 1)
    me = lane(world, "me")
    x_row = me.locator(".syft-obj[data-names='x_ptr']")
    expect(x_row).to_have_class(re.compile("syft-obj-gone"))
    expect(x_row.locator(".syft-badge-gone")).to_have_text("gone: fetched")
    expect(x_row.locator("[data-action]")).to_have_count(0)
    run_cell(nb, 3)
    y_row = me.locator(".syft-obj[data-names='y_ptr']")
    expect(y_row.locator(".syft-badge-gone")).to_have_text("gone: moved to alice")
    expect(y_row.locator("[data-action]")).to_have_count(0)
    # a gone pointer has no arrow: the new pointer on_alice has the only one
    expect(world.locator("path.syft-arrow")).to_have_count(1)
    expect(world.locator(f"path.syft-arrow[data-from^='me:']")).to_have_count(1)
    # they stay while their names are bound, whatever else runs (no ghost that fades away)
    run_cell(nb, 4)
    expect(x_row).to_have_count(1)
    expect(y_row).to_have_count(1)
    expect(me.locator(".syft-ghost")).to_have_count(0)
    world.screenshot(path=str(artifacts / "world-gone-rows.png"))
    # once nothing names it, it leaves as a brief ghost, as anything else that leaves
    run_cell(nb, 5)
    expect(x_row).to_have_count(0)
    expect(me.locator(".syft-ghost", has_text="x_ptr")).to_have_count(1)
    expect(y_row).to_have_count(1)


HISTORY_CELLS = [SETUP + "\nx = torch.tensor([1., 2., 3.])", "sy.inspect()", "x_ptr = x.send(bob)",
                 "x_ptr = x_ptr.move(alice)",
                 "@sy.plan\ndef double(v):\n    return v * 2\n\ndouble(torch.ones(3))\ndouble_ptr = double.send(alice)",
                 "y_ptr = double_ptr(x_ptr)"]


def test_change_and_history_highlight_ghosts_and_replay(open_notebook, artifacts):
    nb = open_notebook("history.ipynb", HISTORY_CELLS, run=False)
    for i in range(3):
        run_cell(nb, i)
    world = world_of(nb, 1)
    expect(lane(world, "bob").locator(".syft-obj.syft-mark-new")).to_have_count(1)
    run_cell(nb, 3)
    # what moved: new on alice, a ghost on bob saying where it went
    expect(lane(world, "alice").locator(".syft-obj.syft-mark-new")).to_have_count(1)
    ghost = lane(world, "bob").locator(".syft-ghost")
    expect(ghost).to_contain_text("moved to alice")
    world.screenshot(path=str(artifacts / "world-change.png"))
    update_readme_image(artifacts / "world-change.png", "world-change.png")
    run_cell(nb, 4)
    run_cell(nb, 5)
    timeline = world.locator(".syft-timeline")
    timeline.locator("summary").click()
    steps = timeline.locator(".syft-step")
    texts = [s.inner_text() for s in steps.all()]
    joined = "\n".join(texts)
    assert "x_ptr = x.send(bob)" in joined and "sent to bob" in joined
    assert "x_ptr = x_ptr.move(alice)" in joined and "moved bob → alice" in joined
    assert "plan ran on alice" in joined and "y_ptr = double_ptr(x_ptr)" in joined
    cell_numbers = [re.match(r"\[(\d+)\]", t).group(1) for t in texts if t.startswith("[")]
    assert cell_numbers == sorted(cell_numbers, key=int, reverse=True)  # newest first
    world.screenshot(path=str(artifacts / "world-timeline.png"))
    update_readme_image(artifacts / "world-timeline.png", "world-timeline.png")
    # the world as it was after the send: x on bob, nothing on alice; then back to now
    steps.filter(has_text="x_ptr = x.send(bob)").locator("button").click()
    expect(world.locator(".syft-replay")).to_contain_text("as it was after")
    expect(lane(world, "bob").locator(".syft-obj")).to_have_count(1)
    expect(lane(world, "alice").locator(".syft-obj")).to_have_count(0)
    world.screenshot(path=str(artifacts / "world-replay.png"))
    world.locator(".syft-replay-back").click()
    expect(world.locator(".syft-replay")).to_be_hidden()
    expect(lane(world, "bob").locator(".syft-obj")).to_have_count(0)
    expect(lane(world, "alice").locator(".syft-obj[data-kind=plan]")).to_have_count(1)


def test_the_legend_explains_the_marks(open_notebook, artifacts):
    nb = open_notebook("legend.ipynb", [SETUP + "\nx_ptr = torch.ones(2).send(bob)", "sy.inspect()"])
    world = world_of(nb, 1)
    legend = world.locator(".syft-legend-box")
    legend.locator("summary").click()
    text = legend.inner_text()
    for words in ("pointer", "weak", "owning", "held", "gone", "dangling", "one colour per worker", "connected",
                  "unreachable", "appeared, changed, or left"):
        assert words in text, words
    world.screenshot(path=str(artifacts / "world-legend.png"))
    update_readme_image(artifacts / "world-legend.png", "world-legend.png")


BIG_CELLS = ["""\
import torch
import syft_lab as sy
sy.hook()
workers = [sy.VirtualWorker(f"w{i:02d}") for i in range(50)]
ptrs = {}
for i in range(600):
    w = workers[i % 50]
    ptrs_name = f"t{i}"
    globals()[ptrs_name] = torch.ones(2).tag(f"#batch{i % 7}").send(w)
del ptrs_name""", "sy.inspect()", "workers[5].close()\nworkers[6].close()"]


def test_a_world_of_50_workers_folds_into_a_searchable_grouped_overview(open_notebook, artifacts):
    nb = open_notebook("big.ipynb", BIG_CELLS, run=False)
    run_cell(nb, 0)
    run_cell(nb, 1)
    world = world_of(nb, 1)
    page = nb.page
    overview = world.locator(".syft-overview")
    chips = overview.locator(".syft-ov-worker")
    # 50 lanes do not fit a page: one chip per worker, grouped (by kind: all virtual), and only
    # the notebook's own lane open
    expect(chips).to_have_count(50)
    expect(overview.locator(".syft-ov-title")).to_contain_text("50 workers")
    expect(world.locator(".syft-lane")).to_have_count(1)
    expect(overview.locator(".syft-ov-group")).to_have_count(1)
    # 50 distinct worker colours, on the chips as on the lanes
    colours = page.evaluate("""(o) => [...o.querySelectorAll('.syft-ov-worker')]
        .map((c) => getComputedStyle(c).borderLeftColor)""", overview.element_handle())
    assert len(set(colours)) == 50
    assert page.evaluate("(s) => s.scrollWidth <= s.clientWidth + 1", world.locator(".syft-world-scroll").element_handle())
    # "me" groups its 600 pointers by target worker
    me = lane(world, "me")
    expect(me.locator(".syft-group").first).to_contain_text("pointers to w00")
    # a chip opens its worker's lane (on demand), its × closes it again
    overview.locator(".syft-ov-worker[data-worker='w00']").click()
    w00 = lane(world, "w00")
    expect(w00.locator(".syft-obj")).to_have_count(12)
    expect(overview.locator(".syft-ov-worker[data-worker='w00']")).to_have_attribute("aria-pressed", "true")
    # and its lane collapses and expands as any lane
    w00.locator(".syft-lane-toggle").click()
    expect(w00.locator(".syft-lane-body")).to_be_hidden()
    w00.locator(".syft-lane-toggle").click()
    expect(w00.locator(".syft-obj")).to_have_count(12)
    # hovering a pointer to it lights its target in the open lane
    me.locator(".syft-obj[data-names='t0']").hover()
    expect(w00.locator(".syft-obj.syft-lit")).to_have_count(1)
    world.screenshot(path=str(artifacts / "world-50-workers.png"))
    w00.locator(".syft-lane-close").click()
    expect(world.locator(".syft-lane")).to_have_count(1)
    # a pointer's worker chip opens the lane it points to
    me.locator(".syft-obj[data-names='t1'] .syft-where").click()
    expect(lane(world, "w01").locator(".syft-obj")).to_have_count(12)
    # search: the overview keeps the workers that hold a match (or what a matching name points to)
    search = world.locator(".syft-search")
    search.fill("t599")
    expect(me.locator(".syft-lane-count")).to_have_text("1 of 600 objects")
    expect(chips).to_have_count(1)
    expect(chips.first).to_have_attribute("data-worker", "w49")
    expect(chips.first).to_contain_text("1 of 12")
    search.fill("#batch3")
    expect(chips).to_have_count(50)
    expect(overview.locator(".syft-ov-worker[data-worker='w03']")).to_contain_text("2 of 12")
    # a search that leaves 12 workers or fewer shows their lanes directly
    search.fill("#batch3 worker:w03")
    expect(overview).to_be_hidden()
    expect(world.locator(".syft-lane")).to_have_count(1)
    expect(lane(world, "w03").locator(".syft-lane-count")).to_have_text("2 of 12 objects")
    search.fill("")
    world.locator(".syft-filter-worker").select_option("w07")
    expect(world.locator(".syft-lane")).to_have_count(1)
    world.locator(".syft-filter-worker").select_option("")
    expect(chips).to_have_count(50)
    # grouped by state: the two closed workers stand apart (gone, greyed)
    run_cell(nb, 2)
    overview.locator(".syft-ov-group-by").select_option("state")
    expect(overview.locator(".syft-ov-group[data-group='gone'] .syft-ov-worker")).to_have_count(2)
    expect(overview.locator(".syft-ov-group[data-group='gone'] .syft-ov-down")).to_have_count(2)
    expect(overview.locator(".syft-ov-group[data-group='in-process'] .syft-ov-worker")).to_have_count(48)
    overview.screenshot(path=str(artifacts / "world-50-workers-overview.png"))
    # every lane, if one asks for it
    overview.locator(".syft-ov-all").click()
    expect(world.locator(".syft-lane")).to_have_count(51)
