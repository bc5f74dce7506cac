"""Progress bars only where a person sees them: one rule for every bar syft_lab draws.

A bar is drawn in a notebook (an IPython kernel: the bar is a widget in the cell's output) or
in a terminal (stderr is a tty). Anywhere else (a log file, a pipe, a worker process, CI) it
is not: a script that ran a benchmark once wrote about 1 MB of bars to its log.

    bar = progress.bar(total, desc="send → bob", unit="B")   # tqdm, or a silent stand-in
    bar.update(n); bar.close()

``show``: None (the default) follows the rule above; True draws a bar anyway (where tqdm
can); False never does.
"""
from __future__ import annotations

import sys


def someone_watches() -> bool:
    """True in a Jupyter kernel (a notebook, or any front end showing its output) or when
    stderr, where tqdm writes, is a terminal."""
    ipython = sys.modules.get("IPython")  # not imported here: a plain script has no IPython
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if shell is not None and type(shell).__name__ == "ZMQInteractiveShell":  # ipykernel's shell
        return True
    stream = sys.stderr
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class _Quiet:
    """What ``bar`` returns when no bar is drawn: the calls a bar gets, doing nothing."""

    n = 0

    def update(self, n=1):
        return None

    def refresh(self):
        return None

    def close(self):
        return None


def bar(total, *, show: bool | None = None, **tqdm_options):
    """A tqdm progress bar (tqdm.auto: a widget in a notebook, text in a terminal) when it is
    shown, else a silent stand-in with the same ``update``, ``refresh``, ``close`` and ``n``."""
    if show is False or (show is None and not someone_watches()):
        return _Quiet()
    try:
        from tqdm.auto import tqdm  # optional dependency: no bars without it
    except ImportError:
        return _Quiet()
    return tqdm(total=total, **tqdm_options)
