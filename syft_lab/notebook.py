"""Where the names a person gave live: the notebook's namespace (in IPython), then the calling
frames outside syft_lab and torch. A leaf: every layer that names a value in its words (an error
that says ``cnn[0].weight``, the views, ``sy.explain``) looks here, through these two functions."""
from __future__ import annotations

import sys


def notebook_namespace() -> dict | None:
    """The notebook's namespace, or None outside IPython."""
    try:
        from IPython import get_ipython  # optional: outside IPython there is no notebook
    except ImportError:
        return None
    ip = get_ipython()
    return ip.user_ns if ip is not None else None


def user_scopes():
    """The notebook's namespace, then the locals of each calling frame that is not syft_lab's nor
    torch's, innermost first."""
    ns = notebook_namespace()
    if ns is not None:
        yield ns
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(("syft_lab", "torch")):
            yield frame.f_locals
        frame = frame.f_back


def and_list(names) -> str:
    """``alice``, ``alice and bob``, ``alice, bob and carol``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
