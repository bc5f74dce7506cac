"""The header budget (issue 37, item 4): one rule for a worker reading a request and a client
reading a reply. A header holds at most MAX_HEADER_ELEMENTS values nested at most
MAX_HEADER_DEPTH deep; past either it is refused by request id, cheaply, and the decoder stays
in step. Headers of ordinary size and shape decode as before."""
import struct
import time

import msgpack
import pytest

from syft_lab.errors import QuotaExceededError
from syft_lab.wire.format import (_PREFIX, MAGIC, MAX_HEADER_DEPTH, MAX_HEADER_ELEMENTS, WIRE_VERSION, Decoder,
                                  RejectedMessage, container_bytes, encode_bytes, header_reserve,
                                  python_size)

MiB = 2**20


def frame(head: bytes) -> bytes:
    return _PREFIX.pack(MAGIC, WIRE_VERSION, 0, len(head), 0) + head


def with_rid(rid: int, value: bytes) -> bytes:
    """The header ``{"r": rid, "x": value}`` (value: raw msgpack bytes)."""
    return b"\x82\xa1r" + msgpack.packb(rid) + b"\xa1x" + value


def lists_of_empty_lists(n_lists: int, each: int = 60000, item: bytes = b"\x90") -> bytes:
    inner = b"\xdc" + struct.pack(">H", each) + item * each
    return b"\xdc" + struct.pack(">H", n_lists) + inner * n_lists


class Budget:
    """What a worker's memory budget does, recorded: reserve refuses past ``limit``."""

    def __init__(self, limit=2**40):
        self.limit, self.held, self.peak = limit, 0, 0

    def reserve(self, nbytes, what):
        if self.held + nbytes > self.limit:
            raise QuotaExceededError(f"{what} needs {nbytes} bytes")
        self.held += nbytes
        self.peak = max(self.peak, self.held)

    def release(self, nbytes):
        self.held -= nbytes


def decoders():
    return [("client", Decoder()), ("worker", Decoder(budget=Budget()))]


@pytest.mark.parametrize("side", ["client", "worker"])
@pytest.mark.parametrize("item", [b"\x90", b"\x80", b"\xc0"], ids=["empty lists", "empty maps", "nils"])
def test_more_values_than_the_budget_are_refused_by_request_id_and_the_decoder_goes_on(side, item):
    d = dict(decoders())[side]
    head = with_rid(9, lists_of_empty_lists(MAX_HEADER_ELEMENTS // 60000 + 2, item=item))
    t0 = time.monotonic()
    with pytest.raises(RejectedMessage, match=f"at most {MAX_HEADER_ELEMENTS} values") as info:
        d.feed(frame(head))
    assert time.monotonic() - t0 < 20  # the whole header took 3 s and 130 MB before; the budget stops it
    assert info.value.rid == 9 and not d.broken
    assert d.feed(encode_bytes({"c": "ping", "r": 10})) == {"c": "ping", "r": 10}
    if side == "worker":
        assert d.budget.held == 0  # what the refused header reserved is given back


def test_one_container_declared_longer_than_the_budget_is_refused_before_it_is_made():
    n = 4 * MAX_HEADER_ELEMENTS
    head = with_rid(3, b"\xdd" + struct.pack(">I", n) + b"\x90" * n)
    with pytest.raises(RejectedMessage, match=f"at most {MAX_HEADER_ELEMENTS} values") as info:
        Decoder().feed(frame(head))
    assert info.value.rid == 3


def test_values_inside_ext_values_count_too():
    # 120,000 tuples of 10 values: each tuple an ext value decoded on its own, counted in one budget
    tuples = [tuple(range(10))] * 120_000
    head = encode_bytes({"r": 4, "x": tuples})
    with pytest.raises(RejectedMessage, match="values") as info:
        Decoder().feed(head)
    assert info.value.rid == 4


@pytest.mark.parametrize("side", ["client", "worker"])
def test_a_header_nested_past_the_depth_budget_is_refused(side):
    d = dict(decoders())[side]
    ok = [1]
    for _ in range(MAX_HEADER_DEPTH - 2):  # the header map, then MAX_HEADER_DEPTH - 1 lists
        ok = [ok]
    assert d.feed(encode_bytes({"r": 1, "x": ok}))["x"] == ok
    for too_deep in ([ok], (ok,), {"k": ok}):
        with pytest.raises(RejectedMessage, match=f"at most {MAX_HEADER_DEPTH} deep") as info:
            d.feed(encode_bytes({"r": 2, "x": too_deep}))
        assert info.value.rid == 2 and not d.broken


def test_depth_counts_through_tuples_and_maps_inside_lists():
    v = 0
    for i in range(MAX_HEADER_DEPTH):  # 26 tuples (ext values nest up to 32), maps and lists between
        v = (v,) if i % 5 == 0 else {"k": v} if i % 5 == 1 else [v]
    with pytest.raises(RejectedMessage, match=f"at most {MAX_HEADER_DEPTH} deep"):
        Decoder().feed(encode_bytes({"r": 1, "x": v}))
    assert Decoder().feed(encode_bytes({"r": 1, "x": v[0]}))["r"] == 1  # one level less: the map makes 128


def test_ordinary_large_headers_decode_as_before():
    # a summary page of 10,000 entries (23 values each), and a wide, shallow header of many values
    entry = {"id": 1, "kind": "tensor", "type": "Tensor", "shape": [3, 4], "dtype": "float32", "requires_grad": False,
             "tags": [], "description": None, "refcount": 1, "names": []}
    page = {"r": 5, "ok": {"total": 10_000, "objects": [dict(entry, id=i) for i in range(10_000)]}}
    for _, d in decoders():
        assert d.feed(encode_bytes(page)) == page
    wide = {"r": 6, "x": [[1.5, 2, "a"]] * 200_000}  # 1 M values, just under the budget, 3 MiB
    assert Decoder(budget=Budget()).feed(encode_bytes(wide)) == wide


def test_a_worker_reserves_what_a_large_header_may_take_before_decoding_it():
    head = with_rid(8, lists_of_empty_lists(17))  # 1 MiB of empty lists: ~1 M Python lists
    budget = Budget()
    d = Decoder(budget=budget)
    header = d.feed(frame(head))
    assert len(header["x"]) == 17
    reserve = header_reserve(len(head), container_bytes(head))
    assert budget.peak >= reserve >= python_size(header)  # counted first, at no less than they take
    small = Decoder(budget=Budget(limit=reserve - 1))
    with pytest.raises(RejectedMessage, match="needs") as info:
        small.feed(frame(head))
    assert info.value.rid == 8 and small.budget.held == 0
