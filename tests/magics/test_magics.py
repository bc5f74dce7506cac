"""Every %syft magic in a real kernel: what it prints, what it binds, what it refuses."""
import pytest


@pytest.fixture(scope="module", autouse=True)
def loaded(kernel):
    r = kernel.run("import torch\n%load_ext syft_lab\nimport syft_lab as sy\nx = torch.tensor([1., 2., 3.])")
    assert r["error"] is None, r


def test_help_lists_every_command(kernel):
    out = kernel.run("%syft help")["stdout"]
    for cmd in ("workers", "worker NAME", "send VAR WORKER", "get VAR", "move VAR WORKER", "show VAR", "inspect"):
        assert cmd in out


def test_worker_creates_and_binds_a_virtual_worker(kernel):
    r = kernel.run("%syft worker bob")
    assert r["stdout"].strip() == "bob = sy.VirtualWorker('bob')"
    assert kernel.eval("type(bob).__name__") == "VirtualWorker"
    again = kernel.run("%syft worker bob")
    assert "exists already" in again["stdout"]
    kernel.run("%syft worker alice")


def test_send_get_move_bind_names_and_print_the_code(kernel):
    r = kernel.run("%syft send x bob")
    assert r["stdout"].startswith("x_ptr = x.send(bob)") and r["error"] is None
    assert kernel.eval("x_ptr.location.id, x_ptr.id_at_location in bob.objects") == ("bob", True)
    r = kernel.run("%syft move x_ptr alice")
    assert "x_ptr.move(alice)" in r["stdout"]
    assert kernel.eval("x_ptr.location.id, len(bob.objects), len(alice.objects)") == ("alice", 0, 1)
    r = kernel.run("%syft get x_ptr as back")
    assert r["stdout"].startswith("back = x_ptr.get()")
    assert kernel.eval("back.tolist(), len(alice.objects)") == ([1., 2., 3.], 0)
    r = kernel.run("%syft send x bob as on_bob")
    assert kernel.eval("on_bob.location.id") == "bob"


def test_workers_prints_the_table(kernel):
    out = kernel.run("%syft workers")["stdout"]
    assert "bob (virtual)" in out and "alice (virtual)" in out and "me (local)" in out
    assert "on_bob" in out


@pytest.mark.parametrize("line, message", [
    ("%syft send nope bob", "no variable named 'nope'"),
    ("%syft send x carol", "no worker named 'carol'"),
    ("%syft send x", "usage: %syft send VAR WORKER [as NAME]"),
    ("%syft get x", "get works on a pointer"),
    ("%syft frobnicate", "unknown command 'frobnicate'"),
    ("%syft send x bob as 2fast", "is not a name"),
    ("%syft worker bob --port nope", "--port takes a port number"),
    ("%syft show", "usage: %syft show VAR"),
])
def test_mistakes_print_one_line_and_change_nothing(kernel, line, message):
    before = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))"), kernel.eval("len(bob.objects)")
    r = kernel.run(line)
    assert r["error"] is None  # no traceback
    lines = [s for s in r["stderr"].splitlines() if s.strip()]
    assert len(lines) == 1 and lines[0].startswith("syft: ") and message in lines[0]
    after = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))"), kernel.eval("len(bob.objects)")
    assert before == after


def test_show_and_inspect_display_the_widget_views(kernel):
    kernel.run("lx = sy.LoggingTensor(torch.ones(2))")
    r = kernel.run("%syft show lx")
    assert r["error"] is None and r["data"]
    bundle = r["data"][0]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["text/plain"].startswith("LoggingTensor>")
    r = kernel.run("%syft inspect")
    assert r["error"] is None and "application/vnd.jupyter.widget-view+json" in r["data"][0]


def test_worker_with_port_starts_a_real_worker_process(kernel):
    r = kernel.run("%syft worker carol --port 0", timeout=120)
    assert r["error"] is None and r["stderr"] == "", r
    assert kernel.eval("type(carol).__name__, carol.state") == ("LocalProcessWorker", "connected")
    r = kernel.run("%syft send x carol")
    assert kernel.eval("x_ptr.get().tolist()") == [1., 2., 3.]
    kernel.run("carol.close()")
    assert kernel.eval("carol.process.poll() is not None") is True
