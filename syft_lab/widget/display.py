"""Rich display of syft objects: ``sy.show(obj)``, ``sy.inspect()`` and the IPython hooks.

In a Jupyter kernel, a LoggingTensor, a PointerTensor (any chain layer), a worker, a plan,
a plan pointer and the value of ``sy.world()`` display as the widget when they end a cell,
with ``text/plain`` from the inspection text renderer. Plain torch tensors keep torch's own
display: the hooks are registered for syft types only.

The handout: each display is two outputs, the view's static picture (``text/html``: the SVG of
svg.py, drawn from the same model as the widget) and then the widget. nbconvert, nbviewer and
GitHub show the picture: an output carrying the widget and the picture in one bundle shows
blank there whenever the notebook saved its widget state (``jupyter nbconvert --execute`` does,
nbclient's ``store_widget_state``), because nbconvert then prefers the widget, whose renderer
loads from a CDN. Where the widget draws (JupyterLab, Notebook 7), the widget's stylesheet hides
the picture just before it (js/widget/style.css ``.syft-lab-handout``); where it cannot (a
notebook reopened without its kernel), the picture stays.
"""
from __future__ import annotations

import weakref

import torch

from ..inspection.model import Chain, World
from ..inspection.text import render_world
from ..tensors.base import ChainLayer
from ..workers.base import BaseWorker
from . import live, svg
from .widgets import ChainWidget, PlanWidget, SyftWidget, WorldWidget

_world: dict = {"widget": None}
_worker_widgets: "weakref.WeakValueDictionary[str, WorldWidget]" = weakref.WeakValueDictionary()


def inspect(namespace: dict | None = None) -> WorldWidget:
    """The live world view: every worker, its objects and the pointers between them.

    One widget per kernel (displaying it twice shows two views of it); it updates after each
    cell and on worker events, sending only what changed."""
    w = _world["widget"]
    if namespace is not None:
        return WorldWidget(namespace=namespace)
    if w is None or w.comm is None:
        w = _world["widget"] = WorldWidget()
    else:
        w.refresh()
    return w


def _is_plan(obj) -> bool:
    kind = getattr(obj, "kind", None)
    return kind in ("plan", "plan_pointer") or type(obj).__name__ in ("Plan", "PlanPointer")


def widget_for(obj) -> SyftWidget:
    """The widget that shows ``obj``."""
    if isinstance(obj, SyftWidget):
        return obj
    if isinstance(obj, World):
        return inspect()
    if isinstance(obj, Chain) and obj.subject is not None:
        return widget_for(obj.subject)  # sy.chain(x): the view of x's chain
    if isinstance(obj, BaseWorker):
        w = _worker_widgets.get(obj.id)
        if w is None or w.comm is None:
            w = WorldWidget(focus=[obj.id])
            _worker_widgets[obj.id] = w
        else:
            w.refresh()
        return w
    if _is_plan(obj):
        return PlanWidget(obj)
    if isinstance(obj, torch.Tensor) or hasattr(obj, "_inspection_nodes"):
        return ChainWidget(obj)
    raise TypeError(f"sy.show shows tensors, chains, pointers, workers, plans and sy.world(), "
                    f"got {type(obj).__name__}")


HANDOUT_CLASS = "syft-lab-handout"  # js/widget/style.css hides it next to a live view


def mimebundle(obj) -> tuple[dict, dict]:
    """The display data of a syft object: the widget, its text and its static picture."""
    w = widget_for(obj)
    data, meta = w._repr_mimebundle_()
    if isinstance(obj, World):
        data["text/plain"] = render_world(obj)
        data["text/html"] = svg.world_svg(obj)
    elif isinstance(obj, BaseWorker):
        data["text/plain"] = repr(obj) + ("\n" + w.text() if w.text() else "")
    elif not isinstance(obj, SyftWidget):
        try:
            data["text/plain"] = repr(obj)
        except Exception:
            pass
    return data, meta


def handout_parts(obj) -> tuple[dict | None, tuple[dict, dict]]:
    """The two outputs of one display: the picture's bundle (None when the view has none) and
    the widget's bundle without it (one picture per output: the one ``mimebundle`` computed)."""
    data, meta = mimebundle(obj)
    data = dict(data)
    picture = data.pop("text/html", None)
    if not picture:
        return None, (data, meta)
    return {"text/html": f'<div class="{HANDOUT_CLASS}">{picture}</div>'}, (data, meta)


def _display_picture(picture: dict | None) -> None:
    """The picture as an output of its own, in an IPython shell only (a script has no outputs)."""
    if picture is None:
        return
    from IPython.core.interactiveshell import InteractiveShell  # optional: only in IPython
    from IPython.display import publish_display_data

    if InteractiveShell.initialized():
        publish_display_data(data=picture)


def show(obj) -> None:
    """Display ``obj`` as a widget (its chain, its plan graph, or the world for a worker)."""
    from IPython.display import display  # optional: only in IPython

    picture, (data, meta) = handout_parts(obj)
    _display_picture(picture)
    display(data, metadata=meta, raw=True)


def _formatter(obj):
    """A syft object ending a cell: its picture goes out first (a display of its own), the
    widget is the cell's result."""
    picture, bundle = handout_parts(obj)
    _display_picture(picture)
    return bundle


def _chain_formatter(chain: Chain):
    """``sy.chain(x)`` ending a cell: the chain view of ``x`` (its plain text the chain's tree);
    the text tree alone once ``x`` is gone."""
    if chain.subject is None:
        return None
    data, meta = _formatter(chain.subject)
    return {**data, "text/plain": repr(chain)}, meta


def install_display_hooks(ip=None) -> bool:
    """Register the rich display of syft types with IPython (only in a kernel). Idempotent."""
    if ip is None:
        try:
            from IPython import get_ipython  # optional: outside IPython, text reprs only
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None or getattr(ip, "kernel", None) is None:
        return False  # a terminal or a plain script: text reprs only
    f = ip.display_formatter.mimebundle_formatter
    for cls in (ChainLayer, BaseWorker, World):
        f.for_type(cls, _formatter)
    f.for_type(Chain, _chain_formatter)
    # Plans are registered by name: their module may be imported later (or not at all).
    for module, name in (("syft_lab.plans.plan", "Plan"), ("syft_lab.plans.pointer", "PlanPointer")):
        f.for_type_by_name(module, name, _formatter)
    live.install(ip)
    return True


def register_display(cls) -> None:
    """For other syft types: display instances of ``cls`` as a widget (in a kernel)."""
    try:
        from IPython import get_ipython  # optional: outside IPython nothing to register
    except ImportError:
        return
    ip = get_ipython()
    if ip is not None and getattr(ip, "kernel", None) is not None:
        ip.display_formatter.mimebundle_formatter.for_type(cls, _formatter)
