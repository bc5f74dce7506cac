"""Names a projector can show (issue 39.3): a five-hospital class at 1280x720 in the large-font
mode. Every row keeps what tells it apart when its name is cut (the end of the path and its
index stay, the ellipsis is in the middle), a share keeps its number, the whole name is the
label's title, and a lane with more rows than it shows says how many more (a click shows them).
The widget runs alone in Chromium."""
from __future__ import annotations

import pytest

from widget_page import ROOT, open_widget_page

ARTIFACTS = ROOT / "test-artifacts"  # git-ignored

pytestmark = [pytest.mark.browser]

HOSPITALS = ["st_mary_hospital", "st_martin_hospital", "county_hospital", "riverside_hospital", "lakeside_hospital"]
PER_HOSPITAL = 4  # pointers to each hospital's tensors in the notebook's data dict


def world():
    me, lanes, next_id = [], [], [1000]

    def new_id():
        next_id[0] += 1
        return next_id[0]

    for h in HOSPITALS:
        objs = []
        for i in range(PER_HOSPITAL):
            target = new_id()
            objs.append({"id": target, "kind": "tensor", "type": "Tensor", "shape": [16, 64], "dtype": "float32",
                         "tags": [], "refcount": 1, "names": [], "actions": ["get", "move"]})
            me.append({"id": new_id(), "kind": "pointer", "type": "PointerTensor", "location": h, "id_at_location": target,
                       "owning": True, "state": "ok", "names": [], "held_in": [f"data['{h}'][{i}]"],
                       "actions": ["get", "move"], "shape": [16, 64], "dtype": "float32"})
        lanes.append({"id": h, "kind": "virtual", "state": "in-process", "objects": objs})
    # the two shares of one secret, on the first two hospitals: each row says which share it is
    for k, h in enumerate(HOSPITALS[:2]):
        target = new_id()
        lanes[k]["objects"].append({"id": target, "kind": "tensor", "type": "Tensor", "shape": [10], "dtype": "int64",
                                    "tags": [], "refcount": 1, "names": [], "actions": [], "group": 77,
                                    "share": {"index": k, "of": 2}})
        me.append({"id": new_id(), "kind": "pointer", "type": "PointerTensor", "location": h, "id_at_location": target,
                   "owning": True, "state": "ok", "names": [], "actions": [], "shape": [10], "dtype": "int64",
                   "group": 77, "share": {"index": k, "of": 2}, "secret": "global_model_weights_round_3"})
    return {"schema": "syft_lab.world", "version": 1, "rev": 1,
            "workers": [{"id": "me", "kind": "local", "state": "local", "objects": me}] + lanes}


# For each row in view: the name as it is on screen (the cut text, and whether all of it shows:
# no clipping by the label or the row), the full name and the label's title, the share chip
SEEN = """(root) => [...root.querySelectorAll('.syft-obj')].filter((r) => r.getBoundingClientRect().height > 0).map((r) => {
  const main = r.querySelector('.syft-obj-main').getBoundingClientRect();
  const body = r.closest('.syft-lane-body').getBoundingClientRect();
  const inside = (e) => { const b = e.getBoundingClientRect();
    return b.width > 0 && b.left >= main.left - 1 && b.right <= main.right + 1 && e.scrollWidth <= e.clientWidth + 1; };
  const label = r.querySelector('.syft-names');
  const cut = label && label.querySelector('.syft-cut');
  const share = r.querySelector('.syft-share');
  return {key: r.dataset.key, lane: r.closest('.syft-lane').dataset.worker,
          inView: r.getBoundingClientRect().bottom <= body.bottom + 1 && r.getBoundingClientRect().top >= body.top - 1,
          shown: cut ? cut.textContent : null, full: cut ? cut.dataset.full : null, whole: label ? inside(label) : null,
          title: label ? label.title : null,
          share: share ? share.textContent : null, shareWhole: share ? inside(share) : null};
})"""


# the "← names" label of each row of a lane: as shown, whether all of it shows, its title
POINTED = """(lane) => [...lane.querySelectorAll('.syft-obj .syft-pointed')].map((p) => {
  const row = p.closest('.syft-obj').getBoundingClientRect(); const b = p.getBoundingClientRect();
  return {title: p.title, shown: p.textContent,
          whole: b.width > 0 && b.right <= row.right + 1 && p.scrollWidth <= p.clientWidth + 1};
})"""


# rows below what the me lane's body shows (rows are BIG_ROW_H = 36px in the large-font mode)
BELOW = """(lane) => { const b = lane.querySelector('.syft-lane-body');
  const n = Math.round(b.querySelector('.syft-objects').offsetHeight / 36);
  return n - Math.floor((b.scrollTop + b.clientHeight) / 36); }"""


def test_a_class_at_1280x720_in_large_font_keeps_names_apart(browser):
    page = open_widget_page(browser, viewport=(1280, 720))
    try:
        page.evaluate("(w) => window.mount('class', w, 'width: 1240px')", world())
        root = page.locator("#class")
        root.scroll_into_view_if_needed()
        root.locator(".syft-big-toggle").click()
        page.wait_for_function("() => document.querySelector('#class .syft-classroom .syft-obj') !== null")
        page.evaluate("() => window.frames(3)")
        me_lane = root.locator(".syft-lane[data-worker='me']")
        rows = [r for r in me_lane.evaluate(f"(l) => ({SEEN})(l)") if r["inView"]]
        data_rows = [r for r in rows if r["full"] and r["full"].startswith("data[")]
        assert len(data_rows) >= 4, rows
        for r in data_rows:
            index = r["full"][r["full"].rindex("["):]
            assert r["whole"] and r["shown"].endswith(index), r  # "…y_ho…[2]": the index shows
            assert r["title"].startswith(r["full"]), r  # the whole name is one hover away
        # where the hospitals' names differ shows: "…y_ho…[0]" (st_mary) is not "…tin_…[0]" (st_martin)
        assert len({r["shown"] for r in data_rows}) == len(data_rows), [r["shown"] for r in data_rows]
        for lane in (me_lane, root.locator(f".syft-lane[data-worker='{HOSPITALS[0]}']")):
            shares = [r for r in lane.evaluate(f"(l) => ({SEEN})(l)") if r["share"] is not None and r["inView"]]
            assert shares and all(r["share"] in ("share 1/2", "share 2/2") and r["shareWhole"] for r in shares), shares

        # a hospital's rows say who points at them: "← data['st_mar…[2]", the index whole
        pointed = [p for p in root.locator(f".syft-lane[data-worker='{HOSPITALS[1]}']").evaluate(POINTED)
                   if "data[" in p["title"]]
        assert len(pointed) == PER_HOSPITAL and all(p["whole"] and p["shown"].endswith("]") for p in pointed), pointed
        assert len({p["shown"] for p in pointed}) == PER_HOSPITAL, pointed

        # the me lane holds 22 rows and shows fewer: it says how many more, and a click shows them
        more = me_lane.locator(".syft-lane-more")
        assert more.is_visible(), "the me lane hides rows without saying so"
        below = me_lane.evaluate(BELOW)
        assert below > 0 and more.inner_text() == f"▾ {below} more", (more.inner_text(), below)
        for _ in range(40):
            if not more.is_visible():
                break
            more.click()
            page.evaluate("() => window.frames(2)")
        last = f"data['{HOSPITALS[-1]}'][{PER_HOSPITAL - 1}]"
        seen = [r for r in me_lane.evaluate(f"(l) => ({SEEN})(l)") if r["inView"]]
        assert any(r["full"] == last for r in seen), seen  # the last row is on screen now
        assert not more.is_visible()
        ARTIFACTS.mkdir(exist_ok=True)
        root.screenshot(path=str(ARTIFACTS / "world-projector-1280.png"))
    finally:
        page.close()
