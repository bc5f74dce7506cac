"""Plans: traced on fake tensors, serialised as validated JSON, run remotely in one message."""
from .batch import batch
from .graph import PlanBuilds, PlanFormatError, PlanGraph
from .plan import Plan, func2plan, plan
from .pointer import PlanPointer
from .trace import TraceError

__all__ = ["Plan", "PlanBuilds", "PlanFormatError", "PlanGraph", "PlanPointer", "TraceError", "batch", "func2plan", "plan"]
