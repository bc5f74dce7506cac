"""Tensor chain layers: each a real torch.Tensor subclass, outermost layer first."""
from .base import ChainLayer
from .logging import LoggingTensor, OpLog, OpRecord

__all__ = ["ChainLayer", "LoggingTensor", "OpLog", "OpRecord"]
