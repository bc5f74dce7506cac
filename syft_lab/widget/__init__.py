"""The notebook widget: chain, world and plan views of the inspection model (anywidget).

    sy.show(x)          # display x's chain (or a plan's graph, or a worker's lane)
    sy.inspect()        # the live world view: workers, their objects, pointers between them

In a kernel, importing this module also makes syft objects display as the widget when they
end a cell (see display.py); plain torch tensors keep torch's display.
"""
from .display import inspect, install_display_hooks, mimebundle, register_display, show, widget_for
from .widgets import ChainWidget, PlanWidget, SyftWidget, WorldWidget

install_display_hooks()

__all__ = ["ChainWidget", "PlanWidget", "SyftWidget", "WorldWidget", "inspect", "install_display_hooks",
           "mimebundle", "register_display", "show", "widget_for"]
