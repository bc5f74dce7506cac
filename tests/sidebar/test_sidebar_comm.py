"""The sidebar's comm protocol in a real kernel (syft_lab/sidebar.py), driven the way the lab
extension drives it: a silent bootstrap, a comm to "syft_lab.sidebar", a snapshot, patches
pushed after cells, actions and worker events, and errors (with no change) for bad messages.

The kernel is shared by the module (a start costs seconds) and reset at the start of every
test, which then makes what it needs: each test passes alone and in any order. That nothing was
pushed is checked with a sentinel message (Comm.sync), never by waiting a while."""
import pytest

from syft_lab.widget import diff

from sidebar_kernel import BOOTSTRAP, Comm

WORLD = ("{k: v for k, v in __import__('syft_lab.inspection.model', fromlist=['w']).world_dict(globals()).items()"
         " if k != 'rev'}")
NAMES = "get_ipython().run_line_magic('who_ls', '')"
PANELS = "len(__import__('syft_lab.sidebar', fromlist=['x']).panels())"
BOB_X = "import torch\n%load_ext syft_lab\n%syft worker bob\nx = torch.tensor([1., 2., 3.])"
BOB_X_PTR = BOB_X + "\nx_ptr = x.send(bob)"


class Panel:
    """The browser's copy of the world: the snapshot, then every patch applied in order."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.comm = Comm(kernel)
        self.world = None

    def open(self):
        self.comm.open()
        snap, _ = self.comm.wait(lambda d: d.get("type") == "snapshot")
        assert snap["protocol"] == 1
        self.world = snap["world"]
        return snap

    def _apply(self, msgs) -> list[dict]:
        applied = []
        for d in msgs:
            if d.get("type") == "world_patch":
                assert d["base"] == self.world["rev"], "patches arrive in order, each on the last"
                self.world = diff.apply(self.world, d)
                assert self.world["rev"] == d["rev"]
                applied.append(d)
            elif d.get("type") == "snapshot":
                self.world = d["world"]
                applied.append(d)
        return applied

    def sync(self) -> list[dict]:
        """Apply every message the kernel sent so far (a sentinel marks the end); returns them."""
        msgs = self.comm.sync()
        self._apply(msgs)
        return msgs

    def wait_patch(self, timeout=20) -> list[dict]:
        """Wait for a patch pushed without a request (a worker event); returns it and the rest."""
        d, before = self.comm.wait(lambda d: d.get("type") in ("world_patch", "snapshot"), timeout)
        return self._apply(before) + self._apply([d]) + self._apply(self.comm.sync())

    def request(self, msg, timeout=30) -> dict:
        """Send a message, wait for its reply, and apply what was pushed before and after it."""
        self.comm.send(msg)
        reply, before = self.comm.wait(lambda d: d.get("type") == "reply", timeout)
        self._apply(before)
        self.sync()
        return reply

    def lane(self, worker):
        return next((l for l in self.world["workers"] if l["id"] == worker), None)

    def entry(self, worker, name):
        lane = self.lane(worker)
        return next((o for o in (lane or {}).get("objects", []) if name in o.get("names", [])), None)

    def matches_kernel(self):
        """The panel's world (a snapshot plus every patch since) equals the kernel's world computed
        afresh. Reading the kernel's world runs code there, which may release objects (garbage
        collection) and so push a patch: the panel applies what was pushed before comparing."""
        kernel_world = self.kernel.eval(WORLD)
        self.sync()
        mine = {k: v for k, v in self.world.items() if k != "rev"}
        if mine != kernel_world:
            import difflib, json  # noqa: E401  (only to explain a failure)
            a, b = (json.dumps(w, indent=1, sort_keys=True).splitlines() for w in (mine, kernel_world))
            print("\n".join(difflib.unified_diff(a, b, "panel", "kernel", lineterm="", n=2)))
        return mine == kernel_world


def run(kernel, code):
    r = kernel.run(code)
    assert r["error"] is None, r
    return r


@pytest.fixture
def fresh(kernel):
    """The shared kernel with nothing left from earlier tests."""
    kernel.reset()
    return kernel


@pytest.fixture
def booted(fresh):
    r = fresh.run(BOOTSTRAP, silent=True)
    assert r["reply"]["status"] == "ok", r
    return fresh


@pytest.fixture
def panel(booted):
    p = Panel(booted)
    p.open()
    yield p
    p.comm.close()


def test_bootstrap_is_silent_binds_nothing_and_can_run_again(fresh):
    run(fresh, "x = 1")
    before = fresh.eval(NAMES)
    for _ in range(2):
        r = fresh.run(BOOTSTRAP, silent=True)
        assert r["reply"]["status"] == "ok" and r["stdout"] == "" and r["error"] is None
    assert fresh.eval(NAMES) == before == ["x"]
    assert fresh.eval("__import__('syft_lab.sidebar', fromlist=['x'])._state['registered']") is True


def test_open_sends_a_snapshot_of_the_world(booted):
    p = Panel(booted)
    snap = p.open()
    assert [l["id"] for l in snap["world"]["workers"]] == ["me"]
    assert snap["world"]["schema"] == "syft_lab.world"
    assert p.matches_kernel()
    p.comm.close()


def test_a_cell_running_syft_send_pushes_the_change(panel, kernel):
    run(kernel, BOB_X)
    patches = panel.sync()
    assert patches and patches[0]["type"] == "world_patch"
    assert panel.lane("bob") is not None and panel.entry("me", "x") is not None
    r = run(kernel, "%syft send x bob")
    assert r["stdout"].startswith("x_ptr = x.send(bob)"), r
    assert panel.sync()
    ptr = panel.entry("me", "x_ptr")
    assert ptr["kind"] == "pointer" and ptr["location"] == "bob"
    assert [o["id"] for o in panel.lane("bob")["objects"]] == [ptr["id_at_location"]]
    assert panel.matches_kernel()


def test_plain_code_pushes_only_what_changed(panel, kernel):
    run(kernel, BOB_X_PTR)
    panel.sync()
    run(kernel, "y_ptr = x_ptr * 2")
    patches = panel.sync()
    # the new pointer and the new object on bob; x, x_ptr and x's object are not resent
    sent = [op[3]["id"] for p in patches for op in p["ops"] if op[0] == "put"]
    assert panel.entry("me", "y_ptr")["id"] in sent
    assert panel.entry("me", "x_ptr")["id"] not in sent and panel.entry("me", "x")["id"] not in sent
    assert panel.matches_kernel()


def test_a_cell_that_changes_nothing_pushes_nothing(panel, kernel):
    run(kernel, BOB_X_PTR)
    assert panel.sync()
    shown = panel.world
    run(kernel, "1 + 1")
    assert panel.sync() == [] and panel.world is shown
    assert panel.matches_kernel()


def test_worker_events_between_cells_push_without_a_cell(panel, kernel):
    """A tensor sent from another thread after the cell ended: the event alone brings the patch."""
    run(kernel, BOB_X + "\nimport threading\ngo = threading.Event()\nlate = torch.tensor([7.])\n"
                "threading.Thread(target=lambda: go.wait(60) and globals().__setitem__('late_ptr', late.send(bob)),"
                " daemon=True).start()")
    panel.sync()  # the cell's own change (late, on me)
    assert panel.lane("bob")["objects"] == []
    # a silent execute runs no cell hooks (as the lab extension's own requests): it only lets the thread go
    r = kernel.run("go.set()", silent=True)
    assert r["reply"]["status"] == "ok", r
    panel.wait_patch()
    assert [o["shape"] for o in panel.lane("bob")["objects"]] == [[1]], panel.lane("bob")
    assert panel.matches_kernel()


def test_get_action_runs_through_actions_perform_and_pushes(panel, kernel):
    run(kernel, BOB_X_PTR + "\ny_ptr = x_ptr * 2")
    panel.sync()
    ptr = panel.entry("me", "y_ptr")
    reply = panel.request({"type": "action", "req": "s-1", "action": "get",
                           "target": {"worker": "me", "id": ptr["id"]}})
    assert reply["ok"] is True and reply["req"] == "s-1", reply
    assert reply["code"] == "y = y_ptr.get()"
    assert kernel.eval("y.tolist()") == [2.0, 4.0, 6.0]
    gone = panel.entry("me", "y_ptr")  # still bound: a gone row, with no buttons; its object left bob
    assert gone["state"] == "gone" and gone["actions"] == []
    assert [o["id"] for o in panel.lane("bob")["objects"]] == [panel.entry("me", "x_ptr")["id_at_location"]]
    assert panel.matches_kernel()


def test_send_and_move_actions(panel, kernel):
    run(kernel, BOB_X + "\n%syft worker alice")
    panel.sync()
    x = panel.entry("me", "x")
    reply = panel.request({"type": "action", "req": 2, "action": "send",
                           "target": {"worker": "me", "id": x["id"]}, "worker": "alice", "name": "x_on_alice"})
    assert reply["ok"] and reply["code"] == "x_on_alice = x.send(alice)", reply
    on_alice = panel.entry("me", "x_on_alice")
    assert on_alice["location"] == "alice"
    reply = panel.request({"type": "action", "req": 3, "action": "move",
                           "target": {"worker": "me", "id": on_alice["id"]}, "worker": "bob"})
    assert reply["ok"] and reply["code"] == "x_on_alice = x_on_alice.move(bob)", reply
    assert panel.entry("me", "x_on_alice")["location"] == "bob"
    assert panel.matches_kernel()


BAD = [
    ("not an object", "malformed message"),
    ({"type": "frobnicate"}, "malformed message"),
    ({"no": "type"}, "malformed message"),
    ({"type": "action", "req": 9, "action": "rm -rf", "target": {"worker": "me", "id": 1}}, "unknown action"),
    ({"type": "action", "req": 9, "action": "get", "target": {"worker": "me", "id": 12345}}, "unknown object"),
    ({"type": "action", "req": 9, "action": "get", "target": {"worker": "me"}}, "target must be"),
    ({"type": "action", "req": 9, "action": "get", "target": {"worker": "me", "id": -1}}, "positive integer"),
    ({"type": "action", "req": 9, "action": "send", "target": {"worker": "me", "id": 1}, "worker": "bob; import os"},
     "worker id"),
    ({"type": "action", "req": 9, "action": "get", "target": {"worker": "me", "id": 1}, "code": "import os"},
     "unknown field"),
    ({"type": "action", "req": 9, "action": "get", "target": {"worker": "me", "id": 1}, "x": "a" * 70000},
     "larger than"),
]


@pytest.mark.parametrize("msg, error", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_messages_get_an_error_reply_and_change_nothing(panel, kernel, msg, error):
    run(kernel, BOB_X_PTR)
    panel.sync()
    names = kernel.eval(NAMES)
    world = kernel.eval(WORLD)
    panel.comm.send(msg)
    reply, before = panel.comm.wait(lambda d: d.get("type") == "reply")
    assert reply["ok"] is False and error in reply["error"], reply
    assert before == [] and panel.sync() == []
    assert kernel.eval(NAMES) == names
    assert kernel.eval(WORLD) == world


def test_a_refused_action_on_a_known_object_changes_nothing(panel, kernel):
    run(kernel, BOB_X)
    panel.sync()
    x = panel.entry("me", "x")
    names = kernel.eval(NAMES)
    for msg, error in [
        ({"type": "action", "req": "a", "action": "get", "target": {"worker": "me", "id": x["id"]}},
         "works on a pointer"),
        ({"type": "action", "req": "b", "action": "send", "target": {"worker": "me", "id": x["id"]},
          "worker": "carol"}, "no worker named 'carol'"),
        ({"type": "action", "req": "c", "action": "send", "target": {"worker": "me", "id": x["id"]},
          "worker": "bob", "name": "__import__('os')"}, "not a name"),
    ]:
        reply = panel.request(msg)
        assert reply["ok"] is False and error in reply["error"], reply
    assert kernel.eval(NAMES) == names
    assert panel.matches_kernel()


def test_resync_sends_a_fresh_snapshot(panel, kernel):
    run(kernel, BOB_X_PTR)
    panel.sync()
    panel.world = None  # the panel lost track
    panel.comm.send({"type": "resync"})
    snap, before = panel.comm.wait(lambda d: d.get("type") == "snapshot")
    assert before == [] and snap["protocol"] == 1
    panel.world = snap["world"]
    assert panel.entry("me", "x_ptr")["location"] == "bob"
    assert panel.matches_kernel()


def test_two_panels_follow_the_same_kernel_and_closed_ones_are_dropped(panel, kernel):
    other = Panel(kernel)
    other.open()
    assert kernel.eval(PANELS) == 2
    run(kernel, "import torch\nz = torch.ones(2)")
    panel.sync()
    other.sync()
    assert other.entry("me", "z") is not None and panel.entry("me", "z") is not None
    other.comm.close()
    # the kernel handles the close before the next request on the same channel
    assert kernel.eval(PANELS) == 1
    run(kernel, "z2 = torch.ones(3)")
    assert panel.sync() and panel.entry("me", "z2") is not None
    assert other.comm.new() == []  # everything up to panel's sentinel has arrived: none for the closed one


def test_widget_actions_show_in_the_sidebar_too(panel, kernel):
    """An action from a notebook world widget (the same runtime): the sidebar follows."""
    run(kernel, BOB_X + "\n%syft worker alice\nz = torch.ones(2)")
    panel.sync()
    run(kernel, "import syft_lab as sy\nfrom syft_lab.ids import tensor_id\nw = sy.inspect()\n"
                "r = w.handle_message({'type': 'action', 'req': 1, 'action': 'send',"
                " 'target': {'worker': 'me', 'id': tensor_id(z)}, 'worker': 'alice'})")
    assert kernel.eval("r['ok']") is True
    panel.sync()
    assert panel.entry("me", "z_ptr")["location"] == "alice"


@pytest.mark.parametrize("name", ["get_ipython", "In", "Out", "exit", "display"])
def test_a_get_may_not_bind_a_name_ipython_keeps(panel, kernel, name):
    """Between cells IPython's own builtins (get_ipython, display) are absent: binding one would
    break every later magic. They are refused as builtins are; the same get with a free name works."""
    run(kernel, BOB_X_PTR)
    panel.sync()
    ptr = panel.entry("me", "x_ptr")
    reply = panel.request({"type": "action", "req": "r", "action": "get",
                           "target": {"worker": "me", "id": ptr["id"]}, "name": name})
    assert reply["ok"] is False and f"{name!r} is a name IPython keeps" in reply["error"], reply
    assert kernel.eval(f"type(globals().get({name!r})).__name__") != "Tensor"  # nothing was bound
    r = run(kernel, "%syft workers")  # magics still work
    assert "bob (virtual)" in r["stdout"]
    assert kernel.eval("(type(In).__name__, type(Out).__name__)") == ("list", "dict")
    reply = panel.request({"type": "action", "req": "ok", "action": "get",
                           "target": {"worker": "me", "id": ptr["id"]}, "name": f"my_{name}"})
    assert reply["ok"] is True and kernel.eval(f"my_{name}.tolist()") == [1.0, 2.0, 3.0]


def test_the_cell_number_of_a_step_and_of_an_op_is_the_cell_s_in_number(panel, kernel):
    """History's steps and a LoggingTensor's op log name the cell as the notebook numbers it
    (In[n], the execution_count the kernel replies with), so "cell [n]" scrolls to it."""
    run(kernel, BOB_X + "\nimport syft_lab as sy\nlx = sy.LoggingTensor(torch.ones(2))")
    panel.sync()
    for _ in range(2):  # a second cell: the number follows each cell, not the first one
        r = run(kernel, "y = lx + 1\ny_ptr = x.send(bob)")
        n = r["reply"]["execution_count"]
        steps = [p["step"] for p in panel.sync() if p.get("type") == "world_patch"]
        # (a mid-cell flush may make the cell two steps: each names it)
        assert steps and {s["cell"] for s in steps} == {n} and steps[0]["code"].startswith("y = lx + 1"), steps
        assert kernel.eval("lx.log[-1].to_dict()['cell']") == n


def test_a_failing_refresh_is_one_line_in_the_panel_and_nothing_in_the_cell(panel, kernel):
    """Whatever makes a refresh fail (here the tracker's update raises what a dead weak proxy
    raises), the user's cell prints nothing; the panel keeps its world with one line on "me"."""
    run(kernel, BOB_X)
    panel.sync()
    kernel.run("import syft_lab.widget.tracker as _t\n_t._real_update = _t.WorldTracker.update\n"
               "def _broken(self):\n    raise ReferenceError('weakly-referenced object no longer exists')\n"
               "_t.WorldTracker.update = _broken", silent=True)
    try:
        r = run(kernel, "x_ptr = x.send(bob)")
        assert (r["stderr"], r["stdout"]) == ("", ""), r
        panel.sync()
        error = panel.lane("me")["error"]
        assert "\n" not in error and "ReferenceError: weakly-referenced object no longer exists" in error
        assert panel.entry("me", "x_ptr") is None  # the world as it was
    finally:
        kernel.run("_t.WorldTracker.update = _t._real_update", silent=True)
    run(kernel, "y = 1")
    panel.sync()
    assert "error" not in panel.lane("me") and panel.entry("me", "x_ptr")["location"] == "bob"
    assert panel.matches_kernel()
