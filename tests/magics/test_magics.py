"""Every %syft magic in a real kernel: what it prints, what it binds, what it refuses."""
import pytest


@pytest.fixture(autouse=True)
def loaded(kernel):
    """Each test starts from the same kernel state (it passes alone and in any order): the
    extension loaded, ``x``, and the workers bob and alice."""
    kernel.reset()
    r = kernel.run("import torch\n%load_ext syft_lab\nimport syft_lab as sy\nx = torch.tensor([1., 2., 3.])\n"
                   "bob, alice = sy.VirtualWorker('bob'), sy.VirtualWorker('alice')")
    assert r["error"] is None, r


def test_help_lists_every_command(kernel):
    out = kernel.run("%syft help")["stdout"]
    for cmd in ("workers", "worker NAME", "send VAR WORKER", "get VAR", "move VAR WORKER", "show VAR", "inspect"):
        assert cmd in out


def test_worker_creates_and_binds_a_virtual_worker(kernel):
    r = kernel.run("%syft worker dave")
    assert r["stdout"].strip() == "dave = sy.VirtualWorker('dave')"
    assert kernel.eval("type(dave).__name__") == "VirtualWorker"
    again = kernel.run("%syft worker dave")
    assert "exists already" in again["stdout"]


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
    kernel.run("%syft send x bob as on_bob")
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
    ("%syft send x bob as print", "'print' is a Python builtin"),
    ("%syft send x bob as __class__", "is not a name"),
    ("%syft send x bob as lambda", "is not a name"),
    ("%syft worker print", "is not a name for a worker"),
    ("%syft worker len --port 0", "is not a name for a worker"),
    ("%syft worker bob --port nope", "--port takes a port number"),
    ("%syft show", "usage: %syft show VAR"),
    ("%syft show torch", "torch is a module: sy.show shows tensors"),
    ("%syft show nope", "no variable named 'nope'"),
    ("%syft show torch.ones", "'torch.ones' is not a variable name"),
])
def test_mistakes_print_one_line_and_change_nothing(kernel, line, message):
    before = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))"), kernel.eval("len(bob.objects)")
    r = kernel.run(line)
    assert r["error"] is None  # no traceback
    lines = [s for s in r["stderr"].splitlines() if s.strip()]
    assert len(lines) == 1 and lines[0].startswith("syft: ") and message in lines[0]
    after = kernel.eval("sorted(k for k in globals() if not k.startswith('_'))"), kernel.eval("len(bob.objects)")
    assert before == after


def test_a_bad_argument_that_fails_deep_inside_still_prints_one_line(kernel):
    kernel.run("class Odd:\n    @property\n    def _inspection_nodes(self):\n        return 1 / 0\nodd = Odd()")
    r = kernel.run("%syft show odd")
    assert r["error"] is None, r  # no traceback
    lines = [s for s in r["stderr"].splitlines() if s.strip()]
    assert lines == ["syft: ZeroDivisionError: division by zero (%tb shows where)"], r
    # the traceback is still there for whoever wants it
    tb = kernel.run("%tb")
    assert "ZeroDivisionError" in tb["stdout"] + tb["stderr"] + str(tb["error"]), tb


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


# --- names the magics bind -----------------------------------------------------------------------

def test_a_builtin_name_is_refused_and_print_still_works(kernel):
    kernel.run("%syft worker dan\nv = torch.tensor([4., 5.])")
    r = kernel.run("%syft send v dan as print")
    assert r["error"] is None and r["stderr"].startswith("syft: 'print' is a Python builtin")
    r = kernel.run("print('print still works')")
    assert r["error"] is None and r["stdout"] == "print still works\n"
    assert kernel.eval("'print' in globals(), len(dan.objects)") == (False, 0)


def test_sending_twice_binds_v_ptr_then_v_ptr_2_and_the_first_pointer_lives_on(kernel):
    kernel.run("%syft worker dan\nw = torch.tensor([1., 2.])")
    r = kernel.run("%syft send w dan")
    assert r["stdout"].startswith("w_ptr = w.send(dan)  # w_ptr is [PointerTensor"), r
    r = kernel.run("%syft send w dan")
    assert r["stdout"].startswith("w_ptr_2 = w.send(dan)  # w_ptr is taken by another PointerTensor; "
                                  "w_ptr_2 is [PointerTensor"), r
    assert kernel.eval("w_ptr.location.id, w_ptr.id_at_location in dan.objects, w_ptr_2.id_at_location in "
                       "dan.objects, w_ptr.id_at_location != w_ptr_2.id_at_location") == ("dan", True, True, True)
    assert kernel.eval("w_ptr.get().tolist(), w_ptr_2.get().tolist()") == ([1., 2.], [1., 2.])


def test_get_when_a_different_local_exists_binds_a_fresh_name_and_says_so(kernel):
    kernel.run("%syft worker dan\nu_ptr = torch.tensor([7.]).send(dan)\nu = 'my own u'")
    r = kernel.run("%syft get u_ptr")
    assert r["stdout"].startswith("u_2 = u_ptr.get()  # u is taken by another str; u_2 is tensor([7.])"), r
    assert kernel.eval("u, u_2.tolist()") == ("my own u", [7.])


def test_the_round_trip_send_then_get_binds_the_name_it_started_from(kernel):
    kernel.run("%syft worker dan\nr = torch.tensor([3., 4.])")
    kernel.run("%syft send r dan")
    out = kernel.run("%syft get r_ptr")["stdout"]
    assert out.startswith("r = r_ptr.get()  # r is tensor([3., 4.])"), out
    assert kernel.eval("r.tolist(), r_ptr._ref.released, len(dan.objects)") == ([3., 4.], True, 0)


def test_a_typed_name_rebinds_like_an_assignment(kernel):
    kernel.run("%syft worker dan\nq = torch.tensor([1.])\nlq = 'an older value'")
    r = kernel.run("%syft send q dan as lq")
    assert r["stdout"].startswith("lq = q.send(dan)  # lq is [PointerTensor"), r
    assert kernel.eval("lq.location.id") == "dan"


def test_get_never_overwrites_a_local_changed_in_place_since_it_was_sent(kernel):
    kernel.run("%syft worker dan\nr = torch.tensor([1., 2.])")
    kernel.run("%syft send r dan")
    kernel.run("r.add_(10)")
    r = kernel.run("%syft get r_ptr")
    assert r["error"] is None, r
    assert r["stdout"].startswith("r_2 = r_ptr.get()  # r changed since it was sent (an in-place op): kept as it "
                                  "is; r_2 is tensor([1., 2.])"), r
    assert kernel.eval("r.tolist(), r_2.tolist(), len(dan.objects)") == ([11., 12.], [1., 2.], 0)


def test_get_never_overwrites_a_local_rebound_since_it_was_sent(kernel):
    kernel.run("%syft worker dan\nr = torch.tensor([1., 2.])")
    kernel.run("%syft send r dan")
    kernel.run("r = torch.tensor([5.])")  # the same name, another tensor
    r = kernel.run("%syft get r_ptr")
    assert r["stdout"].startswith("r_2 = r_ptr.get()  # r is taken by another Tensor; r_2 is tensor([1., 2.])"), r
    assert kernel.eval("r.tolist(), r_2.tolist()") == ([5.], [1., 2.])
