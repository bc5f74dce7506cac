"""Labels laid out by measured width (issue 26.10): with room to spare no label is cut, in a
lane as narrow as the 200px sidebar's every button (Get, Move…) stays whole and clickable, and
what gives way keeps its full text on hover. The widget runs alone in Chromium."""
from __future__ import annotations

import pytest

from test_world_view_narrow import CUT_BUTTONS
from widget_page import open_widget_page

pytestmark = [pytest.mark.browser]

LONG = "a_rather_long_pointer_name"


def world():
    return {"schema": "syft_lab.world", "version": 1, "rev": 1, "workers": [
        {"id": "me", "kind": "local", "state": "local", "objects": [
            {"id": 11, "kind": "pointer", "type": "PointerTensor", "location": "bob", "id_at_location": 5, "owning": True,
             "state": "ok", "names": [LONG], "actions": ["get", "move"], "shape": [1, 3], "dtype": "float32"},
            {"id": 12, "kind": "pointer", "type": "PointerTensor", "location": "bob", "id_at_location": 6, "owning": True,
             "state": "ok", "names": ["w"], "actions": ["get", "move"], "shape": [2, 2], "dtype": "float32"}]},
        {"id": "bob", "kind": "virtual", "state": "in-process", "objects": [
            {"id": 5, "kind": "tensor", "type": "Tensor", "shape": [1, 3], "dtype": "float32", "tags": [], "refcount": 1,
             "names": [], "actions": ["get", "move"]},
            {"id": 6, "kind": "tensor", "type": "Tensor", "shape": [2, 2], "dtype": "float32", "tags": [], "refcount": 1,
             "names": [], "actions": ["get", "move"], "held": True}]}]}


CUT_TEXT = """(root) => [...root.querySelectorAll('.syft-obj-main, .syft-pointed')]
  .filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => e.closest('.syft-obj').dataset.key + ' ' + e.className)"""


def test_labels_are_whole_with_room_and_buttons_whole_when_narrow(browser, artifacts):
    page = open_widget_page(browser)
    try:
        page.evaluate("(w) => window.mount('wide', w, 'width: 1300px')", world())
        wide = page.locator("#wide")
        page.wait_for_function("() => document.querySelectorAll('#wide .syft-arrow').length === 2")
        assert wide.evaluate(CUT_TEXT) == []  # room to spare: nothing cut ("← a_rather…" was)
        pointed = wide.locator(".syft-lane[data-worker='bob'] .syft-pointed").first
        assert LONG in pointed.inner_text() and LONG in pointed.get_attribute("title")
        wide.screenshot(path=str(artifacts / "world-labels-wide.png"))

        page.evaluate("(w) => window.mount('narrow', w, 'width: 200px')", world())
        narrow = page.locator("#narrow")
        narrow.scroll_into_view_if_needed()
        page.wait_for_function("() => document.querySelectorAll('#narrow .syft-obj').length === 4")
        page.evaluate("() => window.frames(3)")
        widths = narrow.evaluate("(r) => [...r.querySelectorAll('.syft-lane')].map((l) => l.getBoundingClientRect().width)")
        assert max(widths) <= 160, widths  # as narrow as the 200px sidebar's lanes
        result = page.evaluate(CUT_BUTTONS, narrow.element_handle())
        assert result["buttons"] == 8 and result["bad"] == [], result
        moves = narrow.locator("button[data-action=move]")
        assert all(m.inner_text() == "Move…" for m in moves.all())
        row = narrow.locator(f".syft-obj[data-names='{LONG}']")
        assert LONG in row.locator(".syft-obj-main").get_attribute("title")  # the full text on hover
        narrow.screenshot(path=str(artifacts / "world-labels-narrow.png"))
    finally:
        page.close()
