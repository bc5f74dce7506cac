"""Tensor chain layers: each a real torch.Tensor subclass, outermost layer first.

``base.py`` holds the layer protocol (ChainLayer), ``registry.py`` the registered layer types
(importing this package registers LoggingTensor and PointerTensor); one file per layer type.
"""
from .base import ChainLayer, set_chain_repr
from .logging import LoggingTensor, OpLog, OpRecord
from .pointer import PointerSpec, PointerTensor
from .registry import iter_chain, layer_for_code, layer_for_kind, register_layer, registered_layers, stored_copy

__all__ = ["ChainLayer", "LoggingTensor", "OpLog", "OpRecord", "PointerSpec", "PointerTensor", "iter_chain",
           "layer_for_code", "layer_for_kind", "register_layer", "registered_layers", "set_chain_repr",
           "stored_copy"]
