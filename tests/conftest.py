import ast
import gc
import os
import queue
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch
from hypothesis.configuration import set_hypothesis_home_dir
from jupyter_client.manager import start_new_kernel

import syft_lab as sy
import syft_lab.ray as sy_ray
from syft_lab.widget import live
from syft_lab.widget.widgets import SyftWidget
from contract.kinds import LEAK_CHECKED, leak_checked, leaked, ray_clients
from syft_lab.ray.starting import start_hosts
from kernel_census import MAX_KERNELS, KernelCensus
from venv_kernel import install_kernelspec

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts"  # git-ignored: the only place in the tree tests write to

# Hypothesis keeps its example database and caches in ./.hypothesis by default.
set_hypothesis_home_dir(ARTIFACTS / "hypothesis")

_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def hooked():
    sy.hook()
    yield


@pytest.fixture
def workers(request):
    """Fresh bob and alice (VirtualWorkers) for one test, leak-checked."""
    return leak_checked(request, sy.VirtualWorker("bob"), sy.VirtualWorker("alice"))


@pytest.fixture
def bob(workers):
    return workers[0]


@pytest.fixture
def alice(workers):
    return workers[1]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_CALL_FAILED] = report.failed
    return report


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """The leak detector, for every worker fixture (``leak_checked``): once the test and all its
    fixtures (widgets, namespaces) are gone, their workers store nothing. Not checked after a
    failed test (its traceback keeps its pointers alive). The workers are closed after."""
    result = yield
    checked = item.stash.get(LEAK_CHECKED, [])
    leaks = []
    try:
        if checked and not item.stash.get(_CALL_FAILED, False):
            item.funcargs.clear()  # the fixtures' values (pytest drops them right after this hook)
            gc.collect()
            leaks = [entry for w in checked for entry in leaked(w)]
    finally:
        for w in checked:
            w.close()  # a remote session ends: the worker releases what it still held for it
        checked.clear()
    if leaks:
        pytest.fail(f"objects left on the test's workers after it ended ({len(leaks)}): " + "; ".join(leaks),
                    pytrace=False)
    return result


# --- widgets: closed after the test that made them -------------------------------------------

@pytest.fixture(autouse=True)
def close_new_widgets():
    """The views a test made (any test: an inspection test's world view too) are closed at its
    end, so no later test's refresh also refreshes them (tests/widget/conftest.py also idles the
    scheduler around its tests)."""
    before = set(map(id, live.widgets()))
    yield
    for w in live.widgets():
        if id(w) not in before and isinstance(w, SyftWidget):  # the sidebar's one view stays: its comm closes it
            w.close()


# --- the browser: one headless Chromium per test process, for tests/browser and tests/install ----
# (one fixture for both: a second sync_playwright() in a process refuses to start while the first
# runs, which failed the wheel's browser tests in a fresh-clone run)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    from playwright.sync_api import sync_playwright  # optional: only the browser tiers need it

    pw = sync_playwright().start()
    profile = tmp_path_factory.mktemp("chromium-profile")
    ctx = pw.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
    ctx.set_default_timeout(30_000)
    yield ctx
    ctx.close()
    pw.stop()


# --- Ray: one local Ray for the whole test session (started on first use, stopped at the end) ---

@pytest.fixture(scope="session")
def ray_runtime():
    runtime = sy_ray.init(num_cpus=2)
    yield runtime
    sy_ray.shutdown()


@pytest.fixture(scope="session")
def ray_hosts(ray_runtime):
    """The session's actors, started once (in parallel): bob's, and alice's that hosts carol too."""
    bob, alice = start_hosts([["bob"], ["alice", "carol"]])
    return {"bob": bob, "alice": alice, "carol": alice}


@pytest.fixture
def ray_pair(ray_hosts, request):
    """bob and alice on the session's Ray actors (a fresh client session per test, as the
    websocket tests' ``remote``), leak-checked."""
    return leak_checked(request, *ray_clients(ray_hosts, "bob", "alice"))


_kernelspec_dir = None


_census: KernelCensus | None = None  # the main process's (not an xdist worker's)
# scripts/test-other-torch names its own file: the whole suite's census stays beside it
_CENSUS_FILE = ARTIFACTS / os.environ.get("SYFT_LAB_KERNEL_CENSUS", "kernels.json")


def pytest_configure(config):
    global _kernelspec_dir, _census
    config.addinivalue_line("markers", "ray: uses the session's local Ray (-m ray selects the Ray parts)")
    torch.manual_seed(0)
    # Kernels started by tests (jupyter_client, nbclient) run this interpreter: JUPYTER_PATH
    # comes first in the kernelspec search, before the user's own "python3".
    _kernelspec_dir = tempfile.mkdtemp(prefix="syft-lab-kernels-")
    install_kernelspec(Path(_kernelspec_dir))
    os.environ["JUPYTER_PATH"] = os.pathsep.join(p for p in (_kernelspec_dir, os.environ.get("JUPYTER_PATH")) if p)
    if "PYTEST_XDIST_WORKER" not in os.environ:  # the main process sees its xdist workers' kernels too
        _census = KernelCensus()


# --- kernels: how many are alive at once (tests/kernel_census.py) ----------------------------

def pytest_runtest_logstart(nodeid, location):
    if _census is not None:  # in the main process, xdist reports its workers' tests here too
        _census.running[nodeid] = time.monotonic()


def pytest_runtest_logfinish(nodeid, location):
    if _census is not None:
        _census.running.pop(nodeid, None)


def pytest_sessionfinish(session):
    """test-artifacts/kernels.json says how many kernels were alive at once; past the limit the
    run fails (a test left its kernels running: on 2 cores, the rest of the run swaps)."""
    if _census is None:
        return
    _census.stop()
    _census.sample()
    _census.write(_CENSUS_FILE)
    if _census.verdict() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _census is None:
        return
    verdict = _census.verdict()
    terminalreporter.write_sep("-", f"Jupyter kernels alive at once: at most {_census.peak} "
                                    f"(limit {MAX_KERNELS}; test-artifacts/{_CENSUS_FILE.name})", red=bool(verdict))
    if verdict:
        terminalreporter.write_line("FAILED: " + verdict, red=True)


def pytest_unconfigure(config):
    if _kernelspec_dir is not None:
        shutil.rmtree(_kernelspec_dir, ignore_errors=True)


# What Kernel.reset runs: the kernel as a fresh one would be, without a restart (the closed
# workers and widgets are gone from every view; syft_lab stays imported and loaded).
RESET = """\
from syft_lab.widget import live as _live
from syft_lab.widget.widgets import SyftWidget as _SyftWidget
from syft_lab.workers import registry as _registry
for _w in _live.widgets():
    if isinstance(_w, _SyftWidget):  # not the sidebar's panels (closed by their comm)
        _w.close()
for _w in _registry.all_workers():
    if _w.kind != "local":  # "me" stays
        _w.close()
get_ipython().run_line_magic("reset", "-f")
"""


class Kernel:
    """A real IPython kernel driven through jupyter_client, as a notebook front end drives it."""

    def __init__(self, client):
        self.client = client
        self.comm_msgs: list[dict] = []  # every comm message from the kernel, in order

    def _collect(self, msg) -> None:
        if msg["msg_type"] in ("comm_msg", "comm_close", "comm_open"):
            self.comm_msgs.append(msg)

    def run(self, code: str, timeout: float = 120, silent: bool = False) -> dict:
        """Execute code; returns {"stdout", "stderr", "error", "data" (display bundles), "reply"}.
        Every iopub message the cell caused (its comm messages too) has been read on return."""
        msg_id = self.client.execute(code, silent=silent, store_history=not silent)
        out = {"stdout": "", "stderr": "", "error": None, "data": []}
        while True:
            try:
                msg = self.client.get_iopub_msg(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"kernel did not finish: {code!r}")
            self._collect(msg)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            t, c = msg["msg_type"], msg["content"]
            if t == "stream":
                out[c["name"]] += c["text"]
            elif t == "error":
                out["error"] = f"{c['ename']}: {c['evalue']}"
            elif t in ("display_data", "execute_result"):
                out["data"].append(c["data"])
            elif t == "status" and c["execution_state"] == "idle":
                break
        while True:
            reply = self.client.get_shell_msg(timeout=timeout)
            if reply["parent_header"].get("msg_id") == msg_id:
                out["reply"] = reply["content"]
                return out

    def eval(self, expr: str):
        """The value of a Python expression in the kernel (through its repr)."""
        r = self.run(f"print(repr(({expr})))")
        assert r["error"] is None, r["error"]
        return ast.literal_eval(r["stdout"].strip())

    def read_iopub(self, timeout: float) -> None:
        """Read iopub messages for up to ``timeout`` seconds (used only while waiting for one)."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                self._collect(self.client.get_iopub_msg(timeout=left))
            except queue.Empty:
                return

    def reset(self) -> None:
        """Forget every variable, worker and widget of earlier tests."""
        r = self.run(RESET, silent=True)
        assert r["error"] is None and r["reply"]["status"] == "ok", r
        assert self.eval("get_ipython().run_line_magic('who_ls', '')") == []
        assert self.eval("[w.id for w in __import__('syft_lab').all_workers()]") == ["me"]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    """One real kernel per test module (magics, sidebar comm), of the venv's kernelspec, in a
    temporary working directory. Tests that must not see earlier tests' state call reset()."""
    km, kc = start_new_kernel(kernel_name="python3", cwd=str(tmp_path_factory.mktemp("kernel")))
    try:
        yield Kernel(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# scripts/test runs the suite in 2 processes (pytest-xdist, --dist loadgroup). A group runs in
# one process, in order: a test file by default, so its module fixtures start once. The browser
# tests share one JupyterLab, and whatever starts a local Ray (tests/ray, notebook 08, the Ray
# world view, the Ray benchmark) runs in one process, so two Ray clusters never compete for the 2 cores.
_HEAVY_FIRST = ("tests/install/test_wheel.py",  # first in its process: Playwright's sync API refuses a process
                # where an earlier test left an asyncio loop running (seen in a fresh-clone run)
                "browser", "ray", "tests/notebooks/test_notebooks.py",  # the longest groups start first
                "tests/benchmarks/test_benchmark_command.py")


def _xdist_group(item) -> str:
    if item.get_closest_marker("ray"):  # e.g. the contract suite's Ray worker
        return "ray"
    path = Path(str(item.path)).resolve().relative_to(ROOT).as_posix()
    if path.startswith("tests/ray/") or path == "tests/browser/test_world_view_ray.py" \
            or item.name.endswith(("[08_ray_workers]", "[bench_ray]")):
        return "ray"
    if path.startswith("tests/browser/"):
        return "browser"
    return path


def _name_group(item, group: str) -> None:
    """What xdist's loadgroup schedules by is the "@group" suffix of a test's node id. xdist 3.8
    writes it into ``item._nodeid``, which pytest 9 no longer reads (``item._id``): without
    this, every test was scheduled alone and a group's tests ran in both processes (two
    JupyterLabs, two local Rays, each module kernel started twice)."""
    if "@" in item.nodeid:
        return
    try:
        from _pytest.nodeid import coerce_node_id  # pytest 9
    except ImportError:  # an older pytest reads what xdist writes
        return
    item._id = coerce_node_id(f"{item.nodeid}@{group}")


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    loadgroup = bool(config.getvalue("loadgroup")) if hasattr(config.option, "loadgroup") else False
    for item in items:
        item.add_marker(pytest.mark.xdist_group(_xdist_group(item)))
        if loadgroup:
            _name_group(item, _xdist_group(item))
    rank = {g: i for i, g in enumerate(_HEAVY_FIRST)}
    items.sort(key=lambda it: rank.get(_xdist_group(it), len(rank)))  # stable: files keep their order
