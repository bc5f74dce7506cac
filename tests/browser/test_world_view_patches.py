"""Lanes stay right after patches that arrive while they are out of view (issue 26.1): a view
patched while scrolled away, then scrolled back, draws exactly what a fresh view of the same
world draws (headers, rows, arrows). The widget runs alone in Chromium (widget_page.py)."""
from __future__ import annotations

import json

import pytest

from widget_page import SNAPSHOT, open_widget_page

pytestmark = [pytest.mark.browser]

WORKERS = ["bob", "alice", "carol", "dan", "erin", "frank", "grace"]


def entry(i, **kw):
    return {"id": i, "kind": "tensor", "type": "Tensor", "shape": [2, i % 5 + 1], "dtype": "float32",
            "tags": [], "refcount": 1, "names": [], "actions": ["get", "move"], **kw}


def pointer(i, worker, target, name):
    return {"id": i, "kind": "pointer", "type": "PointerTensor", "location": worker, "id_at_location": target,
            "owning": True, "state": "ok", "names": [name], "actions": ["get", "move"], "shape": [2], "dtype": "float32"}


def first_world():
    lanes, me, nid = [], [], 1000
    for k, w in enumerate(WORKERS):
        objects = [entry(100 * (k + 1) + j) for j in range(3 + 2 * k)]
        lanes.append({"id": w, "kind": "virtual", "state": "in-process", "objects": objects})
        for o in objects[:2]:
            nid += 1
            me.append(pointer(nid, w, o["id"], f"{w}_{o['id']}"))
    return {"schema": "syft_lab.world", "version": 1, "rev": 1,
            "workers": [{"id": "me", "kind": "local", "state": "local", "objects": me}] + lanes}


def patches():
    """Rows added to and removed from lanes in the second grid row and the first, a pointer and
    its target added together, a lane emptied: one patch each, revisions 2.."""
    out = []
    rev = 1
    def add(ops):
        nonlocal rev
        out.append({"type": "world_patch", "base": rev, "rev": rev + 1, "ops": ops})
        rev += 1
    add([["put", "grace", 0, entry(9001)], ["put", "grace", 1, entry(9002)]])
    add([["put", "me", 0, pointer(9101, "grace", 9001, "late_ptr")]])
    add([["del", "frank", 600 + j] for j in range(6)])
    add([["put", "erin", 3, entry(9003, names=["x"])], ["del", "bob", 100]])
    add([["put", "me", 1, pointer(9102, "frank", 610, "frank_tail")]])
    return out


def wait_drawn(page):
    page.evaluate("() => window.frames(3)")


def seen_at_top_and_bottom(page, view):
    """What the view shows with its scroller and its lanes at the top, its lanes scrolled to
    their bottom, then its scroller too."""
    seen = []
    for outer, lanes in (("0", "0"), ("0", "s.scrollHeight"), ("s.scrollHeight", "s.scrollHeight")):
        view.evaluate(f"(v) => {{ for (const s of v.querySelectorAll('.syft-lane-body')) s.scrollTop = {lanes};"
                      f" for (const s of v.querySelectorAll('.syft-world-scroll')) s.scrollTop = {outer}; }}")
        wait_drawn(page)
        seen.append(view.evaluate(SNAPSHOT))
    return seen


def test_patches_to_lanes_out_of_view_draw_as_a_fresh_view_does(browser, artifacts):
    page = open_widget_page(browser)
    try:
        page.evaluate("(w) => window.mount('patched', w)", first_world())
        view = page.locator("#patched")
        view.locator(".syft-lane").first.wait_for()
        view.scroll_into_view_if_needed()
        wait_drawn(page)
        # the second row of lanes is out of the view's own scroll, the page then scrolls away
        page.evaluate("() => window.scrollTo(0, 0)")
        wait_drawn(page)
        for p in patches():
            page.evaluate("(p) => window.patch('patched', p)", p)
            wait_drawn(page)
        world = page.evaluate("() => window.syftViews.patched.model.get('world')")
        assert world["rev"] == 1 + len(patches())  # every patch applied
        view.scroll_into_view_if_needed()
        wait_drawn(page)
        patched_views = seen_at_top_and_bottom(page, view)
        view.screenshot(path=str(artifacts / "world-patched-out-of-view.png"))

        page.evaluate("(w) => window.mount('fresh', w)", world)
        fresh_view = page.locator("#fresh")
        fresh_view.locator(".syft-lane").first.wait_for()
        fresh_view.scroll_into_view_if_needed()
        wait_drawn(page)
        fresh_views = seen_at_top_and_bottom(page, fresh_view)
        fresh_view.screenshot(path=str(artifacts / "world-fresh-render.png"))

        for patched, fresh in zip(patched_views, fresh_views):
            assert [lane["worker"] for lane in patched["lanes"]] == ["me"] + WORKERS
            assert all(lane["headVisible"] for lane in patched["lanes"])
            for a, b in zip(patched["lanes"], fresh["lanes"]):
                assert a == b, json.dumps([a, b], indent=1)
            assert patched["arrows"] == fresh["arrows"]
        # the late pointers' arrows reach their targets, in the lanes the patches changed
        bottom = [[f, t] for f, t, _d in patched_views[1]["arrows"]]  # the lanes at their bottom
        assert ["me:9101", "grace:9001"] in bottom and ["me:9102", "frank:610"] in bottom
    finally:
        page.close()
