"""The sidebar's comm protocol in a real kernel (syft_lab/sidebar.py), driven the way the lab
extension drives it: a silent bootstrap, a comm to "syft_lab.sidebar", a snapshot, patches
pushed after cells, actions and worker events, and errors (with no change) for bad messages."""
import pytest

from syft_lab.widget import diff

from sidebar_kernel import BOOTSTRAP, Comm

WORLD = ("{k: v for k, v in __import__('syft_lab.inspection.model', fromlist=['w']).world_dict(globals()).items()"
         " if k != 'rev'}")


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

    def follow(self) -> list[dict]:
        """Apply what arrived (reading iopub a little longer); returns the patches applied."""
        self.kernel.drain(0.2)
        return self._apply(self.comm.new())

    def wait_patch(self, timeout=20) -> list[dict]:
        """Wait for a patch; returns it and every patch after it that arrived (applied)."""
        d, before = self.comm.wait(lambda d: d.get("type") in ("world_patch", "snapshot"), timeout)
        return self._apply(before) + self._apply([d]) + self.follow()

    def request(self, msg, timeout=30) -> dict:
        self.comm.send(msg)
        reply, before = self.comm.wait(lambda d: d.get("type") == "reply", timeout)
        self._apply(before)
        self.follow()
        return reply

    def lane(self, worker):
        return next((l for l in self.world["workers"] if l["id"] == worker), None)

    def entry(self, worker, name):
        lane = self.lane(worker)
        return next((o for o in (lane or {}).get("objects", []) if name in o.get("names", [])), None)

    def matches_kernel(self):
        mine = {k: v for k, v in self.world.items() if k != "rev"}
        return mine == self.kernel.eval(WORLD)


@pytest.fixture(scope="module")
def booted(kernel):
    r = kernel.run(BOOTSTRAP, silent=True)
    assert r["reply"]["status"] == "ok", r
    return kernel


@pytest.fixture(scope="module")
def panel(booted):
    p = Panel(booted)
    p.open()
    return p


def test_bootstrap_is_silent_binds_nothing_and_can_run_again(kernel):
    before = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))")
    for _ in range(2):
        r = kernel.run(BOOTSTRAP, silent=True)
        assert r["reply"]["status"] == "ok" and r["stdout"] == "" and r["error"] is None
    assert kernel.eval("sorted(k for k in globals() if not k.startswith('_'))") == before
    assert kernel.eval("__import__('syft_lab.sidebar', fromlist=['x'])._state['registered']") is True


def test_open_sends_a_snapshot_of_the_world(booted):
    p = Panel(booted)
    snap = p.open()
    assert [l["id"] for l in snap["world"]["workers"]] == ["me"]
    assert snap["world"]["schema"] == "syft_lab.world"
    assert p.matches_kernel()
    p.comm.close()


def test_a_cell_running_syft_send_pushes_the_change(panel, kernel):
    r = kernel.run("import torch\n%load_ext syft_lab\nx = torch.tensor([1., 2., 3.])\n%syft worker bob")
    assert r["error"] is None, r
    patches = panel.wait_patch()
    assert patches[0]["type"] == "world_patch"
    assert panel.lane("bob") is not None and panel.entry("me", "x") is not None
    r = kernel.run("%syft send x bob")
    assert r["stdout"].startswith("x_ptr = x.send(bob)"), r
    panel.wait_patch()
    ptr = panel.entry("me", "x_ptr")
    assert ptr["kind"] == "pointer" and ptr["location"] == "bob"
    assert [o["id"] for o in panel.lane("bob")["objects"]] == [ptr["id_at_location"]]
    assert panel.matches_kernel()


def test_plain_code_pushes_only_what_changed(panel, kernel):
    kernel.run("y_ptr = x_ptr * 2")
    patches = panel.wait_patch()
    # the new pointer and the new object on bob; x, x_ptr and x's object are not resent
    sent = [op[3]["id"] for p in patches for op in p["ops"] if op[0] == "put"]
    assert panel.entry("me", "y_ptr")["id"] in sent
    assert panel.entry("me", "x_ptr")["id"] not in sent and panel.entry("me", "x")["id"] not in sent
    assert panel.matches_kernel()


def test_a_cell_that_changes_nothing_pushes_nothing(panel, kernel):
    panel.follow()
    kernel.run("1 + 1")
    assert panel.follow() == []


def test_worker_events_between_cells_push_without_a_cell(panel, kernel):
    """A tensor sent from a timer thread after the cell ended: the event alone brings the patch."""
    kernel.run("import threading\nlate = torch.tensor([7.])\n"
               "threading.Timer(0.5, lambda: globals().__setitem__('late_ptr', late.send(bob))).start()")
    panel.follow()  # the cell's own change (late, on me)
    assert not [o for o in panel.lane("bob")["objects"] if o.get("shape") == [1]]
    panel.wait_patch()
    # no cell ran since, yet the sidebar shows the object on bob
    assert [o for o in panel.lane("bob")["objects"] if o.get("shape") == [1]], panel.lane("bob")
    assert panel.matches_kernel()


def test_get_action_runs_through_actions_perform_and_pushes(panel, kernel):
    ptr = panel.entry("me", "y_ptr")
    reply = panel.request({"type": "action", "req": "s-1", "action": "get",
                           "target": {"worker": "me", "id": ptr["id"]}})
    assert reply["ok"] is True and reply["req"] == "s-1", reply
    assert reply["code"] == "y = y_ptr.get()"
    assert kernel.eval("y.tolist()") == [2.0, 4.0, 6.0]
    panel.follow()
    assert panel.entry("me", "y_ptr") is None  # a stale pointer leaves the world
    assert panel.matches_kernel()


def test_send_and_move_actions(panel, kernel):
    kernel.run("%syft worker alice")
    panel.wait_patch()
    x = panel.entry("me", "x")
    reply = panel.request({"type": "action", "req": 2, "action": "send",
                           "target": {"worker": "me", "id": x["id"]}, "worker": "alice", "name": "x_on_alice"})
    assert reply["ok"] and reply["code"] == "x_on_alice = x.send(alice)", reply
    panel.follow()
    on_alice = panel.entry("me", "x_on_alice")
    assert on_alice["location"] == "alice"
    reply = panel.request({"type": "action", "req": 3, "action": "move",
                           "target": {"worker": "me", "id": on_alice["id"]}, "worker": "bob"})
    assert reply["ok"] and reply["code"] == "x_on_alice = x_on_alice.move(bob)", reply
    panel.follow()
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
    panel.follow()
    names = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))")
    world = kernel.eval(WORLD)
    panel.comm.send(msg)
    reply, before = panel.comm.wait(lambda d: d.get("type") == "reply")
    assert reply["ok"] is False and error in reply["error"], reply
    assert before == [] and panel.follow() == []
    assert kernel.eval("sorted(k for k in globals() if not k.startswith('_'))") == names
    assert kernel.eval(WORLD) == world


def test_a_refused_action_on_a_known_object_changes_nothing(panel, kernel):
    x = panel.entry("me", "x")
    names = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))")
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
    assert kernel.eval("sorted(k for k in globals() if not k.startswith('_'))") == names
    assert panel.matches_kernel()


def test_resync_sends_a_fresh_snapshot(panel):
    panel.comm.send({"type": "resync"})
    panel.wait_patch()
    assert panel.matches_kernel()


def test_two_panels_follow_the_same_kernel_and_closed_ones_are_dropped(panel, kernel):
    other = Panel(kernel)
    other.open()
    n = kernel.eval("len(__import__('syft_lab.sidebar', fromlist=['x']).panels())")
    kernel.run("z = torch.ones(2)")
    panel.wait_patch()
    other.wait_patch()
    assert other.entry("me", "z") is not None and panel.entry("me", "z") is not None
    other.comm.close()
    kernel.drain(0.3)
    assert kernel.eval("len(__import__('syft_lab.sidebar', fromlist=['x']).panels())") == n - 1


def test_widget_actions_show_in_the_sidebar_too(panel, kernel):
    """An action from a notebook world widget (the same runtime): the sidebar follows."""
    panel.follow()
    r = kernel.run("import syft_lab as sy\nfrom syft_lab.ids import tensor_id\nw = sy.inspect()\n"
                   "r = w.handle_message({'type': 'action', 'req': 1, 'action': 'send',"
                   " 'target': {'worker': 'me', 'id': tensor_id(z)}, 'worker': 'alice'})")
    assert r["error"] is None and kernel.eval("r['ok']") is True, r
    panel.wait_patch()
    assert panel.entry("me", "z_ptr")["location"] == "alice"
