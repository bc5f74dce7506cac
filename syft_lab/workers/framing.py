"""The frames of a websocket client connection: websockets' sans-I/O protocol, with a short way
for the one frame almost every message is, each way.

``ClientFrames`` is the only code that reads or writes a websocket frame on the client side
(``websocket.py``'s connection moves bytes between it and a socket). Everything a frame may
mean (pings, closes, fragments, text, errors, the opening handshake) is websockets' own
``ClientProtocol``; this class only keeps it from parsing the usual frame, a whole binary
message, which costs a generator and several copies per reply. ``tests/workers/test_framing.py``
holds it equal to websockets' protocol alone, message by message and error by error, on random
frame sequences cut at random points.
"""
from __future__ import annotations

import collections
import os

from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode, apply_mask
from websockets.protocol import State

MASK_POOL = 4096  # bytes of os.urandom taken at a time for the frames' masking keys (4 bytes each)
ONE_WRITE = 64 * 2**10  # a frame up to this size goes out in one write (header and payload joined)
MAX_RESPONSE_HEAD = 64 * 2**10  # a handshake response's header held here before the protocol gets it all
_BINARY_FIN = 0x82  # first header byte of a whole binary frame: FIN, no reserved bits, opcode 2
_EVERYTHING = 2**64  # "every byte from now on goes to the protocol"
_OPCODES = frozenset(int(op) for op in Opcode)


def frame_header(buf) -> tuple[int, int] | None:
    """``(header length, payload length)`` of the frame at the start of ``buf`` (masking key
    included in the header), or None while its header is incomplete (RFC 6455 5.2)."""
    n = len(buf)
    if n < 2:
        return None
    size = buf[1] & 0x7F
    head = 6 if buf[1] & 0x80 else 2
    if size == 126:
        head += 2
        if n < head:
            return None
        size = int.from_bytes(buf[2:4], "big")
    elif size == 127:
        head += 8
        if n < head:
            return None
        size = int.from_bytes(buf[2:10], "big")
    return (head, size) if n >= head else None


class ClientFrames:
    """The frames of one websocket client connection: ``protocol`` (websockets'
    ``ClientProtocol``) plus the short way for a whole binary frame.

    **The invariant**: the protocol is given the server's bytes only from the start of
    something it is to read whole: the handshake response up to its blank line, then frame by
    frame, each frame's bytes in order (``_through`` says how many of the one it reads are
    still to come). So whenever no frame is passing through, the protocol waits at the start
    of a frame, exactly where ``_buffer`` starts; and a frame there that is complete, binary,
    unfragmented, unmasked, without reserved bits and within the size limit, while the
    connection is open and no fragmented message is in progress, is taken as it is: the
    protocol would make exactly that message of it and change none of its state. Every other
    frame (control frames, fragments, text, anything malformed, anything after a close) passes
    through to the protocol, which answers, closes and fails as it would alone (and as early:
    a frame whose first two bytes it refuses, masked or of an unknown opcode, goes on at once
    with everything after it, which the failed protocol discards).

    Writing: ``frame(data)`` is one binary message as one masked frame, what
    ``protocol.send_binary(data)`` would write (a whole data frame changes none of its state
    either); only while the connection is open (the caller checks ``protocol.state``).

    ``short`` counts the frames taken the short way, ``through`` those the protocol read."""

    def __init__(self, protocol: ClientProtocol):
        self.protocol = protocol
        self.messages: collections.deque = collections.deque()  # whole messages received, in order
        self._parts: list | None = None  # a fragmented message's frames so far
        self._buffer = bytearray()  # received bytes not given on yet: the start of a frame
        self._through = 0  # bytes of the frame the protocol is reading, still to give it
        self._connecting = protocol.state is State.CONNECTING
        self.response = None  # the opening handshake's response, once the protocol read it
        self._masks, self._mask_at = b"", MASK_POOL
        self.short = self.through = 0

    # --- reading ---------------------------------------------------------------------------
    def receive_data(self, data) -> None:
        """Bytes from the server: whole messages go to ``messages``; what the protocol must
        answer (pongs, the closing handshake) waits in ``protocol.data_to_send()``."""
        if not self._buffer and not self._through and not self._connecting and self._take_whole(data):
            return  # the usual reply: one read, one whole frame
        self._buffer += data
        if self._connecting:
            self._take_response()
        self._read_frames()

    def receive_eof(self) -> None:
        """The server closed the connection: what is held goes to the protocol, then the end."""
        held, self._buffer = bytes(self._buffer), bytearray()
        if held:
            self._give(held)
        self.protocol.receive_eof()

    def _take_whole(self, data) -> bool:
        """``data`` is exactly one frame of the short kind: taken (the protocol waits at the
        start of a frame: the invariant)."""
        if len(data) < 2 or data[0] != _BINARY_FIN or data[1] & 0x80:
            return False
        framed = frame_header(data)
        if framed is None:
            return False
        head, size = framed
        if len(data) != head + size or not self._may_take(size):
            return False
        self.messages.append(data[head:])
        self.short += 1
        return True

    def _may_take(self, size: int) -> bool:
        """A whole binary frame of ``size`` bytes is a message without the protocol: open, no
        fragmented message in progress, no extension, within the protocol's size limits."""
        p = self.protocol
        if p.state is not State.OPEN or p.current_size is not None or p.extensions:
            return False
        limit = p.max_message_size
        if limit is not None and size > limit:
            return False
        limit = p.max_fragment_size
        return limit is None or size <= limit

    def _read_frames(self) -> None:
        buf = self._buffer
        while buf and not self._connecting:
            if self._through:  # the rest of the frame the protocol reads
                k = min(self._through, len(buf))
                chunk = buf[:k]
                del buf[:k]
                self._through -= k
                self._give(chunk)
                continue
            if len(buf) >= 2 and (buf[1] & 0x80 or buf[0] & 0x0F not in _OPCODES):
                # a masked frame or an unknown opcode: the protocol fails on these two bytes, as
                # it would alone, and discards whatever it is given after them
                self._through = _EVERYTHING
                continue
            framed = frame_header(buf)
            if framed is None:
                return  # its header is still arriving
            head, size = framed
            if buf[0] == _BINARY_FIN and not buf[1] & 0x80 and self._may_take(size):
                end = head + size
                if len(buf) < end:
                    return  # the rest is still arriving
                self.short += 1
                if len(buf) == end:  # (a streamed chunk's last read) the buffer becomes the message
                    self._buffer = bytearray()
                    del buf[:head]
                    self.messages.append(buf)
                    return
                self.messages.append(buf[head:end])
                del buf[:end]
            else:
                self._through = head + size
                self.through += 1

    def _take_response(self) -> None:
        """The opening handshake: the response goes to the protocol up to its blank line only,
        so the protocol then waits at the start of a frame (a 101 response has no body)."""
        buf = self._buffer
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_RESPONSE_HEAD:  # the protocol refuses it
                self._connecting, self._through = False, _EVERYTHING
            return
        end += 4
        head = bytes(buf[:end])
        del buf[:end]
        self._give(head)
        self._connecting = False
        if self.protocol.state is not State.OPEN:  # refused, or a response with a body: all to the protocol
            self._through = _EVERYTHING

    def _give(self, data: bytes) -> None:
        """Bytes to the protocol; the frames it makes of them, in order."""
        p = self.protocol
        p.receive_data(data)
        for event in p.events_received():
            if type(event) is Frame:
                self._take(event)
            else:  # the handshake's response
                self.response = event

    def _take(self, frame) -> None:
        """A frame the protocol read: a message, or part of one (control frames are the
        protocol's: it answers pings and closes by itself)."""
        op = frame.opcode
        if op is Opcode.BINARY or op is Opcode.TEXT:
            if frame.fin:
                self.messages.append(frame.data)
            else:
                self._parts = [frame.data]
        elif op is Opcode.CONT and self._parts is not None:
            self._parts.append(frame.data)
            if frame.fin:
                self.messages.append(b"".join(self._parts))
                self._parts = None

    # --- writing ---------------------------------------------------------------------------
    def frame(self, data) -> tuple:
        """The bytes to write for ``data`` as one binary message: one frame (FIN, binary,
        masked with a fresh key), as one piece up to ONE_WRITE bytes, else the header apart
        (a large payload is not copied to join it)."""
        n = data.nbytes if type(data) is memoryview else len(data)
        if n < 126:
            head = bytes((_BINARY_FIN, 0x80 | n))
        elif n < 65536:
            head = bytes((_BINARY_FIN, 0xFE)) + n.to_bytes(2, "big")
        else:
            head = bytes((_BINARY_FIN, 0xFF)) + n.to_bytes(8, "big")
        mask = self._mask()
        if n <= ONE_WRITE:
            return (b"".join((head, mask, apply_mask(data, mask))),)
        return head + mask, apply_mask(data, mask)

    def _mask(self) -> bytes:
        """A fresh masking key (RFC 6455 5.3: unpredictable; from os.urandom, taken in bulk)."""
        at = self._mask_at
        if at >= MASK_POOL:
            self._masks, at = os.urandom(MASK_POOL), 0
        self._mask_at = at + 4
        return self._masks[at:at + 4]
