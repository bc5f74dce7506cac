"""A view whose refresh fails says so in one line, in the view, and never puts a traceback in
the user's cell output (#24 item 2), in a real kernel driven over the widget's comm.

The failure is injected where every refresh goes (the world tracker's update raises what a dead
weak proxy raises): whatever the cause, the user's cell stays clean, the view keeps the world it
showed with one line on its "me" lane, and the next refresh that works clears it."""
import pytest

from syft_lab.widget import diff

from widget_kernel import WidgetComm, world_widget_comm

SETUP = """\
import torch
import syft_lab as sy
%load_ext syft_lab
bob = sy.VirtualWorker("bob")
x = torch.tensor([1., 2.])
w = sy.inspect()
w
"""
BREAK = """\
import syft_lab.widget.tracker as _tracker_module
def _broken_update(self):
    raise ReferenceError("weakly-referenced object no longer exists")
_tracker_module.WorldTracker.update = _broken_update
"""
MEND = "_tracker_module.WorldTracker.update = _tracker_module._real_update"
WORLD = ("{k: v for k, v in __import__('syft_lab.inspection.model', fromlist=['w']).world_dict(globals()).items()"
         " if k != 'rev'}")


def clean_run(kernel, code):
    """Run a cell; it must print nothing and raise nothing."""
    r = kernel.run(code)
    assert (r["error"], r["stderr"], r["stdout"]) == (None, "", ""), r
    return r


class View:
    """The browser's copy of the widget's world: its state, then every patch applied in order."""

    def __init__(self, kernel):
        start = len(kernel.comm_msgs)
        r = kernel.run(SETUP)
        assert r["error"] is None, r
        comm_id, self.world = world_widget_comm(kernel, start)
        self.comm = WidgetComm(kernel, comm_id)
        self.comm.custom({"type": "hello", "view": "v1"})  # rendered: the widget follows every cell
        self.sync()

    def sync(self) -> list[dict]:
        msgs = self.comm.sync()
        for m in msgs:
            if m.get("type") == "world_patch":
                assert m["base"] == self.world["rev"]
                self.world = diff.apply(self.world, m)
            elif m.get("type") == "world_reset":
                self.world = m["world"]
        return msgs

    def me(self) -> dict:
        return next(lane for lane in self.world["workers"] if lane["id"] == "me")


@pytest.fixture
def view(kernel):
    kernel.reset()
    kernel.run("import syft_lab.widget.tracker as _t\n_t._real_update = _t.WorldTracker.update", silent=True)
    yield View(kernel)
    kernel.run("import syft_lab.widget.tracker as _t\n_t.WorldTracker.update = _t._real_update", silent=True)


def test_a_failing_refresh_is_one_line_in_the_view_and_nothing_in_the_cell(view, kernel):
    shown = [o["names"] for o in view.me()["objects"]]
    clean_run(kernel, BREAK)  # the refresh after this very cell fails already
    clean_run(kernel, "x_ptr = x.send(bob)")
    view.sync()
    error = view.me()["error"]
    assert "\n" not in error and "ReferenceError: weakly-referenced object no longer exists" in error, error
    assert [o["names"] for o in view.me()["objects"]] == shown  # the world as it was
    assert kernel.eval("x_ptr.location.id") == "bob"  # the user's code ran as written
    # once refreshing works again, the next cell clears the line and the view is right
    clean_run(kernel, MEND)
    view.sync()
    assert "error" not in view.me()
    assert {k: v for k, v in view.world.items() if k not in ("rev", "step")} == kernel.eval(WORLD)


def test_a_view_opened_while_refreshing_fails_still_opens_and_says_why(view, kernel):
    clean_run(kernel, BREAK)
    start = len(kernel.comm_msgs)
    r = kernel.run("w2 = sy.inspect(namespace=globals())\nw2")
    assert (r["error"], r["stderr"]) == (None, ""), r
    assert r["data"] and "application/vnd.jupyter.widget-view+json" in r["data"][0]
    _, world = world_widget_comm(kernel, start)
    (me,) = world["workers"]
    assert "ReferenceError" in me["error"] and me["objects"] == []
    clean_run(kernel, MEND)
