"""scripts/demo (issue 26.12): it sets up, starts JupyterLab on the tour notebook, and its last
lines are the notebook's URL and how to stop it; the URL opens the notebook; Ctrl+C stops the
server. scripts/setup's output stays short (pip's and npm's output goes to a log file)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_setup_output_is_a_few_lines_of_its_own():
    out = subprocess.run(["./scripts/setup"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = (out.stdout + out.stderr).splitlines()
    assert lines and all(line.startswith("[setup] ") for line in lines), lines
    assert lines[-1].startswith("[setup] ready:")


def test_demo_prints_the_notebooks_url_last_and_stops_on_ctrl_c(browser, artifacts):
    env = dict(os.environ, BROWSER="true")  # nothing to open a window with here
    # as from a terminal: Ctrl+C reaches the script even when this run was started with SIGINT
    # ignored (a background job, as CI runners and nohup start it; bash cannot trap an ignored signal)
    proc = subprocess.Popen(["./scripts/demo"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines = []
    try:
        deadline = time.monotonic() + 600
        while not (lines and lines[-1].startswith("[demo] stop it with")):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            line = proc.stdout.readline()
            if line:
                lines.append(line.rstrip("\n"))
        url = re.fullmatch(r"\[demo\] the tour notebook: (\S+)", lines[-2]).group(1)
        assert "/lab/tree/notebooks/00_tour.ipynb?token=" in url
        assert "Ctrl+C" in lines[-1]
        with urllib.request.urlopen(url, timeout=60) as r:
            assert r.status == 200
        page = browser.new_page()
        try:
            page.goto(url)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
            title = page.evaluate("() => window.document.title")
            page.screenshot(path=str(artifacts / "demo-tour.png"))
        finally:
            page.close()
        assert "00_tour" in title
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl+C in its terminal sends
        assert proc.wait(timeout=180) == 0  # a loaded machine takes a while to stop jupyter
        rest = proc.stdout.read()
        assert "[demo] stopped" in rest
        with pytest.raises(OSError):
            urllib.request.urlopen(url, timeout=3)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
