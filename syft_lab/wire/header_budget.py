"""The header budget of the wire format: one rule for a worker reading a request and a client
reading a reply (docs/wire-format.md, "The header budget").

A header's values cost Python objects and time beyond their bytes (a 1-byte empty list is a
56-byte list): a header holds at most MAX_HEADER_ELEMENTS values nested at most
MAX_HEADER_DEPTH deep. ``HeaderBudget`` is the part of format.py's header decoder that checks
them, as msgpack makes each container; ``header_reserve`` is what a worker counts a large header
at while it decodes, ``python_size`` what it takes once decoded.
"""
from __future__ import annotations

import sys

# The header budget, one rule for both sides (a worker reading a request, a client reading a
# reply): besides its bytes, a header's values cost Python objects (an empty list is 1 byte on
# the wire and 64 bytes decoded) and time (16 MiB of empty lists took 23 s and 2.7 GB), so a
# header holds at most MAX_HEADER_ELEMENTS values (every container counts once, and once more
# for each item it holds, a map twice per entry) nested at most MAX_HEADER_DEPTH containers deep
# (lists, maps and tuples, through ext values). Decoding stops at the first value past either.
MAX_HEADER_ELEMENTS = 2**20
MAX_HEADER_DEPTH = 128

# the type bytes of msgpack containers (fixmap, fixarray, array 16/32, map 16/32): a header
# holding at most MAX_HEADER_DEPTH such bytes cannot nest deeper, so its depth is not tracked
_CONTAINER_BYTES = bytes(range(0x80, 0xA0)) + bytes(range(0xDC, 0xE0))


def container_bytes(head) -> int:
    """How many containers ``head`` may hold at most: its bytes that may be a container's type
    (counted at C speed; bytes inside strings and numbers may count too, never fewer)."""
    return len(head) - len(bytes(head).translate(None, _CONTAINER_BYTES))


_NESTED = (list, dict, tuple)
NO_HOOKS: dict = {}
TOO_MANY = f"a message header holds at most {MAX_HEADER_ELEMENTS} values (lists, maps and what they hold)"


class HeaderBudget:
    """The header budget's checks, for format's ``_HeaderDecoder``: ``begin(head)`` before each
    header, ``hooks`` (msgpack's list and map hooks, while a header could break the budget) to
    unpack with, ``end()`` after.

    Both checks cost nothing for a header that cannot break them (at most MAX_HEADER_ELEMENTS
    bytes: every value takes a byte; at most MAX_HEADER_DEPTH container bytes): every op's usual
    message. Otherwise msgpack calls ``_list`` / ``_map`` with each container it made (innermost
    first), which count its values and, from its children's depths, its own."""

    def __init__(self):
        self.left = None  # values the header may still hold (None: its size bounds them already)
        self.deep = None  # id -> (depth, container) of containers at least 2 deep (None: not tracked)
        self.hooks = NO_HOOKS

    def refuse(self, message: str):
        """Raise the decoder's error for a header past the budget (format.py: a WireError)."""
        raise NotImplementedError

    def begin(self, head, containers: int | None = None) -> None:
        """Before decoding ``head`` (``containers``: its container_bytes, if counted already)."""
        n = len(head)
        self.depth = 0  # (the decoder's ext nesting starts afresh too)
        if n <= MAX_HEADER_DEPTH:  # the usual message: nothing to check
            return
        many = n > MAX_HEADER_ELEMENTS
        self.left = MAX_HEADER_ELEMENTS if many else None
        deep = (container_bytes(head) if containers is None else containers) > MAX_HEADER_DEPTH
        self.deep = {} if deep else None
        if many or deep:  # (msgpack's own limit on a declared length is the header's size, else)
            self.hooks = {"list_hook": self._list, "object_hook": self._map,
                          "max_array_len": MAX_HEADER_ELEMENTS, "max_map_len": MAX_HEADER_ELEMENTS}

    def end(self) -> None:
        self.left = self.deep = None  # (the entries of ``deep`` keep the header's containers alive)
        self.hooks = NO_HOOKS

    def _list(self, v):
        left = self.left
        if left is not None:
            left -= len(v) + 1
            if left < 0:
                self.refuse(TOO_MANY)
            self.left = left
        if self.deep is not None and v:
            self._nest(v, v)
        return v

    def _map(self, v):
        left = self.left
        if left is not None:
            left -= 2 * len(v) + 1
            if left < 0:
                self.refuse(TOO_MANY)
            self.left = left
        if self.deep is not None and v:
            self._nest(v, v.values())
        return v

    def _nest(self, container, items) -> None:
        """Record ``container``'s depth (1 + its deepest child's) if it is 2 or more."""
        get = self.deep.get
        d = 1
        for x in items:
            if type(x) in _NESTED:
                e = get(id(x))
                if e is None:
                    if d < 2:
                        d = 2
                elif e[0] >= d:
                    d = e[0] + 1
        if d > 1:
            if d > MAX_HEADER_DEPTH:
                self.refuse(f"a message header nests lists, maps and tuples at most {MAX_HEADER_DEPTH} deep")
            self.deep[id(container)] = (d, container)  # the reference keeps the id from being reused


# Decoded msgpack takes more memory as Python objects than as bytes (a 3-byte string is a
# 50-byte str, a 1-byte empty list a 56-byte list): a large header is counted while it decodes
# at header_reserve, then at its measured size while it waits for the command thread.
HEADER_EXPANSION = 8  # bytes a header's scalars and strings take decoded, per byte on the wire
CONTAINER_SIZE = 192  # bytes a decoded list or map may take besides its items (a 1-entry dict: 184)


def header_reserve(nbytes: int, containers: int) -> int:
    """What the decoded values of a header of ``nbytes`` holding at most ``containers`` lists
    and maps (container_bytes) are counted at while it decodes: 8 bytes a byte, and
    CONTAINER_SIZE a container (at most MAX_HEADER_ELEMENTS of them)."""
    return HEADER_EXPANSION * nbytes + CONTAINER_SIZE * min(containers, MAX_HEADER_ELEMENTS)


def python_size(value) -> int:
    """Bytes of the Python objects of a decoded header (containers, strings, numbers)."""
    total, stack = 0, [value]
    getsizeof = sys.getsizeof
    while stack:
        v = stack.pop()
        total += getsizeof(v)
        tp = type(v)
        if tp is dict:
            stack.extend(v.values())
            stack.extend(v.keys())
        elif tp is list or tp is tuple:
            stack.extend(v)
    return total
