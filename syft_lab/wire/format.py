"""The syft_lab wire format, version 3: the only code that reads bytes received from a peer.

A message is a msgpack map (the header) plus raw tensor buffers. It travels as websocket
binary messages:

    first message  = prefix | header | (inline buffers)
    prefix         = b"SY" | u8 version | u8 flags | u32 header_len | u32 nbufs | nbufs x u64 len
    later messages = raw buffer bytes, at most CHUNK_SIZE each (only when flags has STREAMED)

Small messages carry their buffers inline in the first message; a message whose buffers are
larger than CHUNK_SIZE streams them in chunks, which the receiver copies straight into
tensors it allocated from the validated header, so neither side holds more than the tensor
plus one chunk. Values inside the header are msgpack types plus the ext types below; a tensor
is an ext naming its buffer, dtype (from the allow-list in syft_lab.dtypes) and shape, and
shape x itemsize must equal the buffer's length. Nothing is ever unpickled, evaluated or
loaded with torch.load. See docs/wire-format.md.

Chain layers travel generically: each registered layer type (syft_lab/tensors/registry.py)
has its own ext code, whose payload is ``[fields, children, tags, description]``; the decoder
checks ``fields`` against the layer's ``wire_schema`` and lets the layer's ``from_wire`` check
the values. A pointer decodes to a ``PointerSpec`` and a layer over one to a ``LayerSpec``:
data that never becomes a live pointer (a receiver refuses it with its own rule).
"""
from __future__ import annotations

import ctypes
import gc
import math
import struct

import msgpack
import torch

from ..commands import NewObject, Ref, SameAsArg
from ..dtypes import DTYPES, dtype_name
from ..errors import SyftError
from ..tensors.base import ChainLayer
from ..tensors.pointer import PointerSpec
from ..tensors.registry import LAYER_CODES, MAX_DIM_SIZE, MAX_DIMS, LayerSpec, is_registered, layer_for_code
from ..tensors.registry import MAX_TEXT  # tags, descriptions, op names, error messages (characters)
from .header_budget import (MAX_HEADER_DEPTH, MAX_HEADER_ELEMENTS, TOO_MANY, HeaderBudget, container_bytes,  # noqa: F401
                            header_reserve, python_size)

# 2: paged summary, sessions in hello, load, plan format 2 in store_plan/fetch
# 3: layers as [fields, children, tags, description] by their registered codes; log records carry the cell
WIRE_VERSION = 3
MAGIC = b"SY"
STREAMED = 0x01

CHUNK_SIZE = 4 * 2**20  # streamed buffers travel in messages of at most this size
MAX_HEADER_SIZE = 16 * 2**20  # the msgpack header of one message
MAX_BUFFERS = 4096  # tensors in one message
MAX_NESTING = 32  # ext values inside ext values (tuples, chains)
DEFAULT_MAX_MESSAGE_SIZE = 2**31  # header + buffers of one message; configurable per side
# The largest websocket message either side must accept: a header plus one chunk inline.
WS_MAX_SIZE = MAX_HEADER_SIZE + CHUNK_SIZE + 4096

_PREFIX = struct.Struct(">2sBBII")
_U64 = struct.Struct(">Q")
_NEWOBJ = struct.Struct(">QBB")  # id, dtype code, ndim; then ndim x u64 sizes

# dtype codes of the compact new-object ext: fixed for version 1 (append only)
WIRE_DTYPE_CODES = ("float64", "float32", "float16", "bfloat16", "complex64", "complex128",
                    "int64", "int32", "int16", "int8", "uint8", "bool")
_DTYPE_CODE = {DTYPES[n]: i for i, n in enumerate(WIRE_DTYPE_CODES) if n in DTYPES}

# ext type codes of the format's own values; layers have theirs in the registry (LAYER_CODES)
EXT_REF, EXT_TENSOR, EXT_TUPLE, EXT_DTYPE, EXT_DEVICE, EXT_ENUM, EXT_COMPLEX = 1, 2, 3, 4, 5, 6, 7
EXT_NEWOBJ, EXT_SAMEARG = 8, 9
assert EXT_SAMEARG < LAYER_CODES.start

_DEVICES = {"cpu": torch.device("cpu"), "meta": torch.device("meta")}
_ENUMS = {
    "layout.strided": torch.strided,
    "memory_format.contiguous_format": torch.contiguous_format,
    "memory_format.preserve_format": torch.preserve_format,
    "memory_format.channels_last": torch.channels_last,
    "memory_format.channels_last_3d": torch.channels_last_3d,
}
_ENUM_NAMES = {v: k for k, v in _ENUMS.items()}
_DTYPE_NAMES = {v: k for k, v in DTYPES.items()}


class WireError(SyftError):
    """A message that breaks the wire format: wrong version, truncated, oversized, malformed."""


class RejectedMessage(WireError):
    """A well-formed frame whose content is refused (a shape of 65 sizes, an unknown dtype, a
    budget it does not fit): the decoder stays in step, so the receiver answers request ``rid``
    with ``error`` on the same connection and reads on."""

    def __init__(self, rid: int, error: SyftError):
        super().__init__(str(error))
        self.rid, self.error = rid, error


def _request_id(head) -> int | None:
    """The request id ``r`` of a header whose values could not all be decoded, if it has one.
    Reads only the top map's keys and ``r``: every other value is skipped without being built
    (the header may be the one that broke the budget)."""
    try:
        reader = msgpack.Unpacker(raw=False, max_buffer_size=max(len(head), 1), max_str_len=64, max_bin_len=0,
                                  max_array_len=0, max_map_len=0, max_ext_len=0)
        reader.feed(head)
        for _ in range(reader.read_map_header()):
            if reader.unpack() == "r":
                rid = reader.unpack()
                return rid if type(rid) is int and rid > 0 else None
            reader.skip()
    except Exception:  # not even msgpack, or no readable r: the frame itself is broken
        return None
    return None


# --- encoding ------------------------------------------------------------------------------

def _byte_view(t: torch.Tensor) -> memoryview:
    """The bytes of a contiguous CPU tensor, without a copy (the caller keeps ``t`` alive)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return memoryview(b"")
    return memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B")


def _ext(code: int, data: bytes) -> msgpack.ExtType:
    return tuple.__new__(msgpack.ExtType, (code, data))  # skips ExtType's checks: both are ours


class _Encoder:
    __slots__ = ("buffers", "keep", "detach", "copy")

    def __init__(self, detach: bool = False, copy: bool = False):
        self.detach = detach  # send every tensor as not requiring grad (a stored copy)
        self.copy = copy  # buffers never point into the tensors given (a reply others may change)
        self.buffers: list = []  # memoryviews of tensor bytes
        self.keep: list = []  # the tensors those views point into

    def pack(self, obj) -> bytes:
        return msgpack.packb(obj, default=self.default, use_bin_type=True, strict_types=True)

    def default(self, obj):
        if isinstance(obj, Ref):
            return _ext(EXT_REF, _U64.pack(obj.id))
        tp = type(obj)
        if tp is torch.Tensor or tp is torch.nn.Parameter:
            return msgpack.ExtType(EXT_TENSOR, self.pack(self._tensor(obj)))
        if tp is tuple or tp is torch.Size:
            return msgpack.ExtType(EXT_TUPLE, self.pack(list(obj)))
        if tp is torch.dtype:
            return msgpack.ExtType(EXT_DTYPE, _dtype_to_name(obj).encode())
        if tp is torch.device:
            if obj.type not in _DEVICES:
                raise WireError(f"device {obj} cannot travel: workers compute on the CPU")
            return msgpack.ExtType(EXT_DEVICE, obj.type.encode())
        if tp is torch.layout or tp is torch.memory_format:
            if obj not in _ENUM_NAMES:
                raise WireError(f"{obj} cannot travel; allowed: {', '.join(_ENUMS)}")
            return msgpack.ExtType(EXT_ENUM, _ENUM_NAMES[obj].encode())
        if tp is complex:
            return msgpack.ExtType(EXT_COMPLEX, struct.pack(">dd", obj.real, obj.imag))
        if tp is NewObject:
            code = _DTYPE_CODE.get(obj.dtype)
            if code is None:
                raise WireError(f"dtype {obj.dtype} cannot travel; supported: {', '.join(DTYPES)}")
            shape = obj.shape
            return _ext(EXT_NEWOBJ, _NEWOBJ.pack(obj.id, code, len(shape))
                        + b"".join([_U64.pack(n) for n in shape]))
        if tp is SameAsArg:
            return msgpack.ExtType(EXT_SAMEARG, self.pack(obj.index))
        if isinstance(obj, ChainLayer):
            return self._layer(obj)
        if isinstance(obj, torch.Tensor):
            raise WireError(f"a {type(obj).__name__} cannot travel: syft_lab sends plain tensors and "
                            f"registered chain layers")
        if isinstance(obj, int) and not isinstance(obj, bool):  # e.g. a SymInt-free int subclass
            return int(obj)
        if isinstance(obj, float):
            return float(obj)
        raise WireError(f"a {type(obj).__name__} cannot travel on the wire")

    def _layer(self, layer: ChainLayer) -> msgpack.ExtType:
        cls = type(layer)
        if cls.wire_code is None or not is_registered(layer):
            raise WireError(f"a {cls.__name__} cannot travel: it is not a registered layer with a wire code")
        d = layer.__dict__
        return msgpack.ExtType(cls.wire_code, self.pack(
            [layer.wire_fields(), layer.layer_children(), sorted(d["tags"]) if d.get("tags") else None,
             d.get("description")]))

    def _tensor(self, t: torch.Tensor) -> list:
        if t.device.type != "cpu":
            raise WireError(f"only CPU tensors travel, got one on {t.device}")
        if t.layout != torch.strided:
            raise WireError(f"only dense tensors travel, got layout {t.layout}")
        d = t.__dict__
        rg = t.requires_grad and not self.detach
        data = t.detach().resolve_conj().resolve_neg().contiguous()
        if self.copy and data.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            data = data.clone()  # only where no copy was made already: one copy, never two
        index = len(self.buffers)
        self.buffers.append(_byte_view(data))
        self.keep.append(data)
        return [index, _dtype_to_name(t.dtype), list(t.shape), rg,
                sorted(d["tags"]) if d.get("tags") else None, d.get("description")]


def _dtype_to_name(dtype) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise WireError(f"dtype {dtype} cannot travel; supported: {', '.join(DTYPES)}") from None


class Encoded:
    """One encoded message: ``frames`` to send in order, and its total size in bytes."""

    __slots__ = ("frames", "size", "streamed", "_keep")

    def __init__(self, frames, size, streamed, keep):
        self.frames, self.size, self.streamed, self._keep = frames, size, streamed, keep


def encode(header: dict, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
           chunk_size: int = CHUNK_SIZE, detach: bool = False, copy: bool = False) -> Encoded:
    """Encode ``header`` (a dict whose values may hold tensors, chains, refs) for sending.

    With ``detach``, tensors travel as not requiring grad (what a worker stores on send). With
    ``copy``, the buffers are copies of the tensors' bytes taken now (a tensor that had to be
    made contiguous already is one), so the frames stay valid whatever happens to the tensors."""
    enc = _Encoder(detach, copy)
    try:
        head = msgpack.packb(header, default=enc.default, use_bin_type=True, strict_types=True)
    except WireError:
        raise
    except (TypeError, ValueError, OverflowError, struct.error) as e:
        raise WireError(f"cannot encode message: {e}") from None
    n = len(head)
    if n > MAX_HEADER_SIZE or n > max_message_size:
        raise WireError(f"message header of {n} bytes exceeds the limit of {MAX_HEADER_SIZE} "
                        f"(maximum message size {max_message_size})")
    if not enc.buffers:  # the common case: a command or a reply without tensors
        return Encoded([_PREFIX.pack(MAGIC, WIRE_VERSION, 0, n, 0) + head], n, False, None)
    bufs = enc.buffers
    if len(bufs) > MAX_BUFFERS:
        raise WireError(f"a message carries at most {MAX_BUFFERS} tensors, got {len(bufs)}")
    lengths = [b.nbytes for b in bufs]
    total = sum(lengths)
    size = len(head) + total
    if size > max_message_size:
        raise WireError(f"message of {size} bytes exceeds the maximum message size {max_message_size}")
    streamed = total > chunk_size
    prefix = _PREFIX.pack(MAGIC, WIRE_VERSION, STREAMED if streamed else 0, len(head), len(bufs))
    prefix += b"".join(_U64.pack(n) for n in lengths)
    if not streamed:
        return Encoded([b"".join([prefix, head, *bufs]) if bufs else prefix + head], size, False, None)
    frames = [prefix + head]
    for b in bufs:
        for off in range(0, b.nbytes, chunk_size):
            frames.append(b[off:off + chunk_size])
    return Encoded(frames, size, True, enc.keep)


# --- decoding ------------------------------------------------------------------------------

def _check_text(x, what: str) -> str:
    if type(x) is not str or len(x) > MAX_TEXT:
        raise WireError(f"{what} must be a string of at most {MAX_TEXT} characters")
    return x


def _check_int(x, what: str, lo: int = 0, hi: int = 2**64 - 1) -> int:
    if type(x) is not int or not lo <= x <= hi:
        raise WireError(f"{what} must be an integer in [{lo}, {hi}], got {type(x).__name__}")
    return x


def _check_dtype(name) -> torch.dtype:
    try:
        return DTYPES[name]
    except (KeyError, TypeError):
        raise WireError(f"dtype {name!r} is not allowed; allowed: {', '.join(DTYPES)}") from None


def _check_shape(shape) -> list:
    if type(shape) is not list or len(shape) > MAX_DIMS:
        raise WireError(f"a shape is a list of at most {MAX_DIMS} sizes")
    for s in shape:
        _check_int(s, "a dimension size", 0, MAX_DIM_SIZE)
    return shape


def _check_tags(tags):
    if tags is None:
        return None
    if type(tags) is not list or len(tags) > 256:
        raise WireError("tags must be a list of at most 256 strings")
    return {_check_text(t, "a tag") for t in tags}


def _apply_meta(obj, tags, description):
    tags = _check_tags(tags)
    if tags:
        obj.tags = tags
    if description is not None:
        obj.description = _check_text(description, "a description")
    return obj


class _Slot:
    """A buffer the header declared: its length and, once claimed, the tensor receiving it."""

    __slots__ = ("length", "tensor")

    def __init__(self, length: int):
        self.length = length
        self.tensor = None


class _HeaderDecoder(HeaderBudget):
    """Unpacks one header; ext values are validated as they are met, and the header budget
    (header_budget.py: MAX_HEADER_ELEMENTS, MAX_HEADER_DEPTH) is checked as containers are made:
    ``begin(head)`` before each header, ``end()`` after."""

    def __init__(self, slots: list[_Slot]):
        super().__init__()
        self.slots = slots
        self.depth = 0

    def refuse(self, message: str):
        raise WireError(message)

    def unpack(self, data: bytes):
        try:
            return msgpack.unpackb(data, ext_hook=self.ext_hook, raw=False, strict_map_key=True, use_list=True,
                                   **self.hooks)
        except ValueError as e:  # a container declared longer than the budget: refused before it is made
            if "exceeds max_" in str(e):
                raise WireError(TOO_MANY) from None
            raise

    def ext_hook(self, code: int, data: bytes):
        if code == EXT_REF:
            if len(data) != 8:
                raise WireError("a ref is 8 bytes")
            return Ref(_U64.unpack(data)[0])
        if code == EXT_DTYPE:
            return _check_dtype(data.decode("utf-8", "replace"))
        if code == EXT_DEVICE:
            try:
                return _DEVICES[data.decode("utf-8", "replace")]
            except KeyError:
                raise WireError("a device is 'cpu' or 'meta'") from None
        if code == EXT_ENUM:
            try:
                return _ENUMS[data.decode("utf-8", "replace")]
            except KeyError:
                raise WireError(f"unknown enum; allowed: {', '.join(_ENUMS)}") from None
        if code == EXT_COMPLEX:
            if len(data) != 16:
                raise WireError("a complex number is 16 bytes")
            return complex(*struct.unpack(">dd", data))
        if code == EXT_NEWOBJ:
            return _new_object(data)
        builtin = code in (EXT_TENSOR, EXT_TUPLE, EXT_SAMEARG)
        layer = None if builtin else layer_for_code(code)
        if not builtin and layer is None:
            raise WireError(f"unknown ext type {code}")
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise WireError(f"values nest deeper than {MAX_NESTING} levels")
        try:
            v = self.unpack(data)
        finally:
            self.depth -= 1
        if code == EXT_TUPLE:
            if type(v) is not list:
                raise WireError("a tuple ext holds a list")
            t = tuple(v)
            if self.deep is not None:  # a tuple nests as deep as the list it came from
                e = self.deep.pop(id(v), None)
                if e is not None:
                    self.deep[id(t)] = (e[0], t)
            return t
        if code == EXT_SAMEARG:
            return SameAsArg(_check_int(v, "an argument index", 0, 1024))
        if type(v) is not list:
            raise WireError(f"ext type {code} holds a list")
        if code == EXT_TENSOR:
            return self._tensor(v)
        return self._layer(layer, v)

    def _tensor(self, v):
        if len(v) != 6:
            raise WireError("a tensor ext is [buffer, dtype, shape, requires_grad, tags, description]")
        index, dtype, shape, rg, tags, desc = v
        _check_int(index, "a buffer index", 0, len(self.slots) - 1 if self.slots else -1)
        dtype = _check_dtype(dtype)
        shape = _check_shape(shape)
        slot = self.slots[index]
        if slot.tensor is not None:
            raise WireError(f"buffer {index} is claimed twice")
        itemsize = torch.empty((), dtype=dtype).element_size()
        nbytes = math.prod(shape) * itemsize
        if nbytes != slot.length:
            raise WireError(f"shape {shape} x {itemsize} bytes ({dtype_name(dtype)}) = {nbytes} bytes, "
                            f"but buffer {index} has {slot.length}")
        t = torch.empty(shape, dtype=dtype)
        if type(rg) is not bool:
            raise WireError("requires_grad is a bool")
        slot.tensor = t
        if rg:
            if not (dtype.is_floating_point or dtype.is_complex):
                raise WireError(f"a {dtype_name(dtype)} tensor cannot require grad")
            t.requires_grad_(True)  # a leaf: its data is filled in below, under no_grad
        return _apply_meta(t, tags, desc)

    def _layer(self, cls, v):
        """A registered layer: fields checked against its wire_schema, children tensors, then
        its own ``from_wire`` checks the values (its SyftError becomes a WireError)."""
        if len(v) != 4:
            raise WireError(f"a {cls.kind} layer ext is [fields, children, tags, description]")
        fields, children, tags, desc = v
        schema = cls.wire_schema
        if type(fields) is not dict or fields.keys() != schema.keys():
            raise WireError(f"a {cls.kind} layer's fields are {sorted(schema)}")
        for name, want in schema.items():
            if type(fields[name]) not in (want if type(want) is tuple else (want,)):
                raise WireError(f"field {name!r} of a {cls.kind} layer has the wrong type "
                                f"({type(fields[name]).__name__})")
        if type(children) is not list:
            raise WireError(f"a {cls.kind} layer's children are a list")
        if not all(isinstance(c, torch.Tensor) for c in children):
            for c in children:
                if not isinstance(c, (torch.Tensor, PointerSpec, LayerSpec)):
                    raise WireError(f"a {cls.kind} layer's children are tensors, layers or pointers, got a "
                                    f"{type(c).__name__}")
            # a chain over a pointer: data for the receiver's rules, never a live layer
            return LayerSpec(cls.kind, fields, children, _check_tags(tags),
                             None if desc is None else _check_text(desc, "a description"))
        try:
            obj = cls.from_wire(fields, children)
        except WireError:
            raise
        except SyftError as e:
            raise WireError(f"a {cls.kind} layer: {e}") from None
        return _apply_meta(obj, tags, desc)


def _new_object(data: bytes) -> NewObject:
    if len(data) < _NEWOBJ.size:
        raise WireError("a new-object ext is truncated")
    obj_id, code, ndim = _NEWOBJ.unpack_from(data)
    if len(data) != _NEWOBJ.size + 8 * ndim:
        raise WireError("a new-object ext's length disagrees with its number of dimensions")
    if code >= len(WIRE_DTYPE_CODES):
        raise WireError(f"unknown dtype code {code}")
    dtype = _check_dtype(WIRE_DTYPE_CODES[code])
    shape = list(struct.unpack_from(f">{ndim}Q", data, _NEWOBJ.size)) if ndim else []
    if ndim > MAX_DIMS or any(n > MAX_DIM_SIZE for n in shape):
        raise WireError(f"a shape has at most {MAX_DIMS} sizes of at most {MAX_DIM_SIZE}")
    return NewObject(obj_id, shape, dtype)


_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError, MemoryError,
                  UnicodeDecodeError, struct.error, msgpack.UnpackException, RuntimeError)
SMALL_HEADER = 64 * 2**10  # headers up to this size are not counted (a command's usual size)


class Decoder:
    """Sans-I/O decoder for one connection: ``feed`` each received websocket message.

    Returns the decoded header (a dict) once a message is complete, ``None`` while streamed
    buffers are still arriving. A frame that breaks the format raises WireError; the
    connection is then out of step and must be closed (``broken`` is set). A well-formed frame
    whose content is refused (a bad shape or dtype, a budget it does not fit) raises
    RejectedMessage naming its request id when the header has one: the decoder skips the rest
    of that message's buffers and stays in step. Dropping a decoder mid-message drops the
    tensors being filled: nothing partial escapes.

    ``budget``: an object with ``reserve(nbytes, what)`` (raises QuotaExceededError) and
    ``release(nbytes)``: the bytes of each message (its buffers, and a large header's Python
    objects) are reserved before they are allocated and stay reserved until ``release()`` (the
    receiver has handed the message on) or the next message starts.
    """

    def __init__(self, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, chunk_size: int = CHUNK_SIZE,
                 budget=None):
        self.max_message_size = max_message_size
        self.chunk_size = chunk_size
        self.budget = budget
        self.reserved = 0  # bytes reserved for the message being received or just handed on
        self._plain = _HeaderDecoder([])  # reused for messages without buffers
        self.broken = False
        self._pending = None  # (header, slots) while streamed buffers arrive
        self._skipping = 0  # buffer bytes of a rejected streamed message still to come
        self._slot = 0
        self._offset = 0
        self.expected = 0  # bytes of streamed buffers in the current message
        self.received = 0

    @property
    def in_message(self) -> bool:
        return self._pending is not None or self._skipping > 0

    def release(self) -> None:
        """Give back what was reserved for the last message (its receiver has handed it on)."""
        n, self.reserved = self.reserved, 0
        if n and self.budget is not None:
            self.budget.release(n)

    close = release  # a connection that ends gives back its message in progress too

    def feed(self, data):
        if self.broken:
            raise WireError("this connection sent a malformed message earlier")
        try:
            if self._skipping:
                return self._skip(data)
            if self._pending is None:
                self.release()
                return self._first(data)
            return self._chunk(data)
        except RejectedMessage:
            self._pending = None
            self.release()
            raise
        except WireError:
            self._fail()
            raise
        except _DECODE_ERRORS as e:
            self._fail()
            raise WireError(f"malformed message: {type(e).__name__}: {str(e)[:200]}") from None

    def _fail(self):
        self.broken = True
        self._pending = None
        self.release()

    def _reserve(self, nbytes: int, what: str) -> None:
        if self.budget is not None and nbytes:
            self.budget.reserve(nbytes, what)
            self.reserved += nbytes

    def _header(self, head, slots, rid_source, skip: int):
        """Decode a header whose frame is well formed; content it refuses is a RejectedMessage
        when the header names its request (then ``skip`` streamed bytes follow and are dropped)."""
        decoder = _HeaderDecoder(slots) if slots else self._plain
        try:
            containers = container_bytes(head) if len(head) > SMALL_HEADER else None
            large = header_reserve(len(head), containers) if containers is not None and self.budget is not None else 0
            if large:
                self._reserve(large, "a message header")
            decoder.begin(head, containers)
            # a header of many values (one the budget is checked on) decodes with the cyclic
            # collector paused: it would walk the growing header again and again (1 M empty lists
            # took 2.3 s with it, 0.4 s without); what it would find is collected once it resumes
            paused = bool(decoder.hooks) and gc.isenabled()
            if paused:
                gc.disable()
            try:
                header = decoder.unpack(head)
            finally:
                decoder.end()
                if paused:
                    gc.enable()
            if type(header) is not dict:
                raise WireError("a message header is a map")
            for i, s in enumerate(slots):
                if s.tensor is None:
                    raise WireError(f"buffer {i} is not claimed by any tensor")
            if large:  # counted at what it takes while it waits
                self.budget.release(large)
                self.reserved -= large
                self._reserve(python_size(header), "a message header")
            return header
        except SyftError as e:
            self._reject(rid_source, e, skip)
        except _DECODE_ERRORS as e:
            self._reject(rid_source, WireError(f"malformed message: {type(e).__name__}: {str(e)[:200]}"), skip)

    def _reject(self, head, error: SyftError, skip: int):
        rid = _request_id(head) if not isinstance(head, int) else head
        if rid is None:
            raise error if isinstance(error, WireError) else WireError(str(error))
        self._skipping = skip
        raise RejectedMessage(rid, error)

    def _first(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise WireError("syft_lab messages are binary websocket messages, got text")
        data = memoryview(data)
        if len(data) < _PREFIX.size:
            raise WireError(f"truncated message: {len(data)} bytes, shorter than the {_PREFIX.size}-byte prefix")
        magic, version, flags, head_len, nbufs = _PREFIX.unpack_from(data)
        if magic != MAGIC:
            raise WireError("not a syft_lab message (bad magic)")
        if version != WIRE_VERSION:
            raise WireError(f"wire format version {version} is not supported; this side speaks {WIRE_VERSION}")
        if flags & ~STREAMED:
            raise WireError(f"unknown flags {flags:#x}")
        if nbufs > MAX_BUFFERS:
            raise WireError(f"a message carries at most {MAX_BUFFERS} tensors, got {nbufs}")
        if head_len > MAX_HEADER_SIZE:
            raise WireError(f"header of {head_len} bytes exceeds the limit of {MAX_HEADER_SIZE}")
        pos = _PREFIX.size + 8 * nbufs
        if len(data) < pos + head_len:
            raise WireError("truncated message: shorter than its prefix says")
        if not nbufs:  # the common case: a command or reply without tensors
            if flags:
                raise WireError("a message without buffers is not streamed")
            if len(data) != pos + head_len:
                raise WireError(f"truncated or padded message: {len(data) - pos - head_len} extra bytes")
            if head_len > self.max_message_size:
                raise WireError(f"message of {head_len} bytes exceeds the maximum message size "
                                f"{self.max_message_size}")
            head = data[pos:]
            return self._header(head, [], head, 0)
        lengths = [_U64.unpack_from(data, _PREFIX.size + 8 * i)[0] for i in range(nbufs)]
        total = sum(lengths)
        if head_len + total > self.max_message_size:
            raise WireError(f"message of {head_len + total} bytes exceeds the maximum message size "
                            f"{self.max_message_size}")
        streamed = bool(flags & STREAMED)
        inline = len(data) - pos - head_len
        if streamed:
            if inline:
                raise WireError("a streamed message carries no inline bytes")
        elif inline != total:
            raise WireError(f"truncated or padded message: {inline} buffer bytes, expected {total}")
        head = data[pos:pos + head_len]
        skip = total if streamed else 0
        try:  # the buffers are reserved before the header allocates their tensors
            self._reserve(total, "a message's tensors")
        except SyftError as e:
            self._reject(head, e, skip)
        slots = [_Slot(n) for n in lengths]
        header = self._header(head, slots, head, skip)
        if not streamed:
            off = pos + head_len
            for s in slots:
                _fill(s.tensor, 0, data[off:off + s.length])
                off += s.length
            self._finish(slots, header)
            return header
        self._pending = (header, [s for s in slots if s.length])
        self._slot = self._offset = 0
        self.expected, self.received = total, 0
        if total == 0:
            return self._complete()
        return None

    def _check_chunk(self, data, remaining: int) -> memoryview:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise WireError("a buffer chunk is a binary message, got text")
        data = memoryview(data)
        if len(data) > self.chunk_size:
            raise WireError(f"a chunk of {len(data)} bytes exceeds the chunk size {self.chunk_size}")
        if not len(data):
            raise WireError("an empty chunk")
        if len(data) > remaining:
            raise WireError("more buffer bytes than the message declared")
        return data

    def _skip(self, data):
        """A chunk of a rejected streamed message: checked for framing, then dropped."""
        self._skipping -= len(self._check_chunk(data, self._skipping))
        return None

    def _chunk(self, data):
        data = self._check_chunk(data, self.expected - self.received)
        header, slots = self._pending
        pos = 0
        while pos < len(data):
            s = slots[self._slot]
            n = min(s.length - self._offset, len(data) - pos)
            _fill(s.tensor, self._offset, data[pos:pos + n])
            pos += n
            self._offset += n
            if self._offset == s.length:
                self._slot += 1
                self._offset = 0
        self.received += len(data)
        if self.received == self.expected:
            return self._complete()
        return None

    def _complete(self):
        header, slots = self._pending
        self._pending = None
        self._finish(slots, header)
        return header

    def _finish(self, slots, header) -> None:
        try:
            _finish(slots)
        except WireError as e:  # every byte has arrived: the connection is in step
            rid = header.get("r")
            self._reject(rid if type(rid) is int and rid > 0 else b"", e, 0)


def _fill(t: torch.Tensor, offset: int, data: memoryview) -> None:
    if len(data):
        dest = (ctypes.c_char * len(data)).from_address(t.data_ptr() + offset)
        memoryview(dest).cast("B")[:] = data


def _finish(slots) -> None:
    for s in slots:
        t = s.tensor
        if t.dtype is torch.bool and t.numel() and t.view(torch.uint8).max().item() > 1:
            raise WireError("a bool tensor holds bytes other than 0 and 1")


def decode(data) -> dict:
    """Decode one complete, non-streamed message (tests and tools; connections use Decoder)."""
    d = Decoder()
    out = d.feed(data)
    if out is None:
        raise WireError("a streamed message needs its chunks: use a Decoder")
    return out


def encode_bytes(header: dict) -> bytes:
    """Encode a message as one bytes object (inline or not); tests and tools."""
    e = encode(header, chunk_size=2**62)
    return bytes(e.frames[0])
