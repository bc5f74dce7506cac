"""The client's websocket frames (workers/framing.py's ClientFrames) against websockets' own
sans-I/O protocol: fed the same bytes, cut at the same random points, the two give the same
messages at the same moment, write the same answers (pongs, closes) and end in the same state
with the same error, on random sequences of frames of every length form (7, 16 and 64-bit,
minimal or not), masked or not, control frames between data frames and between the fragments
of a message, text, malformed frames and frames over the size limit. The frames the class
writes are what websockets reads as the same message; and the short way is taken for every
whole binary frame, so the speed it exists for does not go quietly."""
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode, apply_mask
from websockets.protocol import Protocol, Side, State
from websockets.server import ServerProtocol
from websockets.uri import parse_uri

from syft_lab.workers.framing import ClientFrames

CONT, TEXT, BINARY, CLOSE, PING, PONG = 0, 1, 2, 8, 9, 10
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def raw_frame(opcode: int, payload: bytes, *, fin=True, rsv=0, masked=False, form=None) -> bytes:
    """A frame's bytes as RFC 6455 lays them out, whatever they mean (malformed ones too);
    ``form``: the length field's width (7, 16 or 64 bits; None: the shortest)."""
    n = len(payload)
    if form is None:
        form = 7 if n < 126 else 16 if n < 65536 else 64
    head = bytes([(0x80 if fin else 0) | rsv << 4 | opcode])
    bit = 0x80 if masked else 0
    if form == 7:
        head += bytes([bit | n])
    elif form == 16:
        head += bytes([bit | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([bit | 127]) + n.to_bytes(8, "big")
    if masked:
        key = b"\x01\x02\x03\x04"
        return head + key + apply_mask(payload, key)
    return head + payload


def forms(n: int) -> list:
    """The length forms that can carry n bytes (the shortest first)."""
    return [f for f in (7, 16, 64) if f == 64 or (f == 16 and n < 65536) or (f == 7 and n < 126)]


lengths = st.one_of(st.integers(0, 140), st.sampled_from([125, 126, 127, 65535, 65536, 65537]),
                    st.integers(0, 70_000))


@st.composite
def data_message(draw, valid_only=False):
    """One message as frames: binary or text, whole or in fragments, pings or pongs between
    its fragments, each frame in any length form that fits."""
    n = draw(lengths)
    payload = random.Random(draw(st.integers(0, 2**32))).randbytes(n)
    opcode = BINARY if valid_only else draw(st.sampled_from([BINARY, BINARY, BINARY, TEXT]))
    parts = draw(st.integers(1, 3)) if n >= 3 else 1
    cuts = sorted(draw(st.lists(st.integers(1, n - 1), min_size=parts - 1, max_size=parts - 1))) if parts > 1 else []
    pieces = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, n])]
    frames = []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        form = draw(st.sampled_from(forms(len(piece))))
        frames.append(raw_frame(opcode if i == 0 else CONT, piece, fin=last, form=form))
        if not last and draw(st.booleans()):
            frames.append(raw_frame(draw(st.sampled_from([PING, PONG])), draw(st.binary(max_size=125))))
    return frames


control = st.builds(lambda op, body: [raw_frame(op, body)], st.sampled_from([PING, PONG]), st.binary(max_size=125))
close = st.sampled_from([[raw_frame(CLOSE, (1000).to_bytes(2, "big") + b"bye")], [raw_frame(CLOSE, b"")],
                         [raw_frame(CLOSE, (4000).to_bytes(2, "big"))], [raw_frame(CLOSE, b"\x03")]])
malformed = st.sampled_from([
    [raw_frame(BINARY, b"abc", rsv=4)],  # a reserved bit (no extension agreed)
    [raw_frame(BINARY, b"abc", masked=True)],  # a server's frame must not be masked
    [raw_frame(3, b"abc")],  # a reserved opcode
    [raw_frame(PING, b"x" * 126)],  # a control frame over 125 bytes
    [raw_frame(PING, b"x", fin=False)],  # a fragmented control frame
    [raw_frame(CONT, b"abc")],  # a continuation with no message started
    [raw_frame(BINARY, b"ab", fin=False), raw_frame(BINARY, b"cd")],  # a new message inside a fragmented one
    [raw_frame(BINARY, b"ab", fin=False), raw_frame(CLOSE, (1000).to_bytes(2, "big"))],  # closed mid-message
])
any_frames = st.lists(st.one_of(data_message(), data_message(), control, close, malformed), max_size=8)


def split(stream: bytes, points: list) -> list:
    cuts = sorted({p for p in points if 0 < p < len(stream)})
    return [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)])]


def written(protocol) -> list:
    """What the protocol wrote (masked client frames, or the end of the stream), unmasked."""
    out = []
    for data in protocol.data_to_send():
        if not data:
            out.append("EOF")
            continue
        head, size = 2, data[1] & 0x7F
        if size == 126:
            head, size = 4, int.from_bytes(data[2:4], "big")
        elif size == 127:
            head, size = 10, int.from_bytes(data[2:10], "big")
        key = data[head:head + 4]
        out.append((data[0], bytes(apply_mask(data[head + 4:head + 4 + size], key))))
    return out


def outcome(protocol) -> tuple:
    exc = protocol.parser_exc
    return (protocol.state, type(exc).__name__, str(exc), protocol.close_rcvd, protocol.close_sent,
            protocol.current_size, protocol.handshake_exc is None)


class Reference:
    """websockets' protocol alone, its frames made into messages as a client would."""

    def __init__(self, protocol):
        self.protocol, self.parts, self.messages = protocol, None, []

    def receive(self, data):
        self.protocol.receive_data(data)
        self._assemble()

    def eof(self):
        self.protocol.receive_eof()
        self._assemble()

    def _assemble(self):
        for f in self.protocol.events_received():
            if not isinstance(f, Frame):
                continue
            if f.opcode in (Opcode.TEXT, Opcode.BINARY):
                if f.fin:
                    self.messages.append(bytes(f.data))
                else:
                    self.parts = [f.data]
            elif f.opcode is Opcode.CONT and self.parts is not None:
                self.parts.append(f.data)
                if f.fin:
                    self.messages.append(b"".join(self.parts))
                    self.parts = None


def drained(frames: ClientFrames) -> list:
    out = [bytes(m) for m in frames.messages]
    frames.messages.clear()
    return out


def run_both(chunks, make_protocol, eof):
    """Each chunk to both; after each, the messages and what was written must be the same."""
    ref, ours = Reference(make_protocol()), ClientFrames(make_protocol())
    for chunk in chunks:
        ref.receive(chunk)
        ours.receive_data(chunk)
        assert drained(ours) == ref.messages, "messages differ"
        ref.messages = []
        assert written(ours.protocol) == written(ref.protocol), "writes differ"
        assert outcome(ours.protocol) == outcome(ref.protocol)
    if eof:
        ref.eof()
        ours.receive_eof()
        assert drained(ours) == ref.messages
        assert written(ours.protocol) == written(ref.protocol)
    assert outcome(ours.protocol) == outcome(ref.protocol)
    return ours


@SETTINGS
@given(items=any_frames, max_size=st.sampled_from([None, 2**20, 1000, 126, 65536]), eof=st.booleans(),
       data=st.data())
def test_any_frames_cut_anywhere_give_what_websockets_gives(items, max_size, eof, data):
    stream = b"".join(f for item in items for f in item)
    points = data.draw(st.lists(st.integers(0, max(len(stream), 1)), max_size=12))
    run_both(split(stream, points), lambda: Protocol(Side.CLIENT, max_size=max_size), eof)


@SETTINGS
@given(items=st.lists(st.one_of(data_message(valid_only=True), control), max_size=8), data=st.data())
def test_every_whole_binary_frame_takes_the_short_way(items, data):
    stream = b"".join(f for item in items for f in item)
    points = data.draw(st.lists(st.integers(0, max(len(stream), 1)), max_size=12))
    ours = run_both(split(stream, points), lambda: Protocol(Side.CLIENT, max_size=2**20), False)
    whole = sum(1 for item in items if len(item) == 1 and item[0][0] == 0x80 | BINARY)
    assert ours.short == whole
    assert ours.through == sum(len(item) for item in items) - whole  # control frames and fragments


def _handshake_pair():
    """Two client protocols that sent the same request, and the server's accepting response."""
    ours = ClientProtocol(parse_uri("ws://127.0.0.1:1/"), max_size=2**20)
    request = ours.connect()
    ours.send_request(request)
    server = ServerProtocol()
    server.receive_data(b"".join(ours.data_to_send()))
    response = server.accept(server.events_received()[0])
    server.send_response(response)
    ref = ClientProtocol(parse_uri("ws://127.0.0.1:1/"), max_size=2**20)
    ref.key = ours.key  # the response answers this key
    return ours, ref, b"".join(server.data_to_send())


@SETTINGS
@given(items=st.lists(st.one_of(data_message(valid_only=True), control, close), max_size=6), data=st.data())
def test_frames_in_the_reads_of_the_opening_handshake_are_read_and_the_short_way_stays_on(items, data):
    ours_p, ref_p, response = _handshake_pair()
    made = iter([ours_p, ref_p])
    frames = [f for item in items for f in item]
    stream = response + b"".join(frames)
    points = data.draw(st.lists(st.integers(0, len(stream)), max_size=8))
    ours = run_both(split(stream, points), lambda: next(made), False)
    assert ours.response is not None and ours.protocol.state in (State.OPEN, State.CLOSING)
    before_close = []
    for f in frames:
        if f[0] & 0x0F == CLOSE:
            break
        before_close.append(f)
    assert ours.short == sum(1 for f in before_close if f[0] == 0x80 | BINARY)


def test_a_refused_handshake_reads_the_response_body_as_websockets_does():
    response = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 5\r\n\r\nnope!" + raw_frame(BINARY, b"x")
    for cut in range(len(response) + 1):
        ours_p, ref_p, _ = _handshake_pair()
        made = iter([ours_p, ref_p])
        ours = run_both(split(response, [cut]), lambda: next(made), True)
        assert ours.response is not None and ours.response.status_code == 401
        assert str(ours.protocol.handshake_exc) == str(ref_p.handshake_exc)
        assert ours.short == 0


@settings(max_examples=200, deadline=None)
@given(n=lengths, seed=st.integers(0, 2**32), view=st.booleans())
def test_a_written_frame_is_the_message_websockets_reads_in_websockets_own_length_form(n, seed, view):
    payload = random.Random(seed).randbytes(n)
    frames = ClientFrames(Protocol(Side.CLIENT))
    pieces = frames.frame(memoryview(payload) if view else payload)
    wire = b"".join(pieces)
    assert len(pieces) == (1 if n <= 64 * 2**10 else 2)
    server = Protocol(Side.SERVER, max_size=None)
    server.receive_data(wire)
    (got,) = server.events_received()
    assert (got.opcode, got.fin, bytes(got.data)) == (Opcode.BINARY, True, payload)
    assert server.state is State.OPEN and server.parser_exc is None
    assert len(wire) == len(Frame(Opcode.BINARY, payload).serialize(mask=True, extensions=[]))


def test_masking_keys_differ_from_frame_to_frame():
    frames = ClientFrames(Protocol(Side.CLIENT))
    keys = {frames.frame(b"x")[0][2:6] for _ in range(3000)}  # past one pool of keys
    assert len(keys) > 2990
