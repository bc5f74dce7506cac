"""The wire format (the only code that reads received bytes) and the op allow-list."""
from .allowlist import OpNotAllowedError, resolve
from .format import WIRE_VERSION, Decoder, LayerSpec, PointerSpec, WireError, decode, encode

__all__ = ["WIRE_VERSION", "Decoder", "LayerSpec", "OpNotAllowedError", "PointerSpec", "WireError", "decode", "encode",
           "resolve"]
