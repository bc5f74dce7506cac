"""A semi-honest party records what it is sent and attacks the dealer's generator (issue 29, 1).

torch's CPU generator is a Mersenne Twister: 312 raw int64 draws of ``randint(-2^63, 2^63 - 1)``
are 624 tempered 32-bit outputs, which give its whole state, and then every later draw. The
attack below recovers that state and predicts; it must predict a torch.Generator exactly (so
it is a working attack), and must predict nothing of what a party receives from the dealer.
"""
import torch

from syft_lab.smpc import provider
from syft_lab.workers import randomness
from syft_lab.tensors.base import ChainLayer

M32 = 0xFFFFFFFF
N = 624


def _undo_right(y, s):
    x = y
    for _ in range(32 // s + 1):
        x = y ^ (x >> s)
    return x & M32


def _undo_left(y, s, mask):
    x = y
    for _ in range(32 // s + 1):
        x = y ^ ((x << s) & mask)
    return x & M32


def untemper(y):
    y = _undo_right(y, 18)
    y = _undo_left(y, 15, 0xEFC60000)
    y = _undo_left(y, 7, 0x9D2C5680)
    return _undo_right(y, 11)


def temper(y):
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & M32


def predict(words, count):
    """The ``count`` int64 words that follow ``words`` (312 of them) if they are raw draws of
    torch's ``randint(-2^63, 2^63 - 1)``: each is (mt() << 32) | mt(), less 2^63."""
    outs = []
    for w in words[:N // 2]:
        u = int(w) + 2**63
        outs += [u >> 32, u & M32]
    mt = [untemper(o) for o in outs]
    i = N
    out = []

    def nxt():
        nonlocal i
        if i >= N:
            for k in range(N):
                y = (mt[k] & 0x80000000) | (mt[(k + 1) % N] & 0x7FFFFFFF)
                mt[k] = mt[(k + 397) % N] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            i = 0
        y = mt[i]
        i += 1
        return temper(y)

    for _ in range(count):
        hi, lo = nxt(), nxt()
        out.append(((hi << 32) | lo) - 2**63)
    return out


def attack(stream, count=64):
    """Recover from the first 312 words of ``stream`` and predict the next ``count``: how many
    predictions come true, and the predicted words."""
    guess = predict(stream[:N // 2], count)
    actual = stream[N // 2:N // 2 + count]
    return sum(g == a for g, a in zip(guess, actual)), guess


class Recorder:
    """Every int64 value in the messages one in-process party's service receives: what that
    party sees (its shares' ops, its dealer pieces, the opened values sent back to it)."""

    def __init__(self, worker):
        self.worker = worker
        self.tensors = []
        self._result = worker.transport._result  # every request the in-process service answers
        worker.transport._result = self.call

    def call(self, msg, holder):
        self._walk([msg.get("a"), msg.get("k"), msg.get("o")])
        return self._result(msg, holder)

    def _walk(self, v):
        if isinstance(v, torch.Tensor) and not isinstance(v, ChainLayer):
            if v.dtype == torch.int64 and v.numel():
                self.tensors.append(v.detach().reshape(-1).tolist())
        elif isinstance(v, (list, tuple)):
            for x in v:
                self._walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                self._walk(x)

    def close(self):
        self.worker.transport._result = self._result


def test_the_attack_predicts_a_torch_generator():
    """The recovery works: 312 raw draws of a torch.Generator predict its next 400 exactly."""
    g = torch.Generator().manual_seed(int.from_bytes(randomness.random_words([1]).numpy().tobytes(), "little") >> 1)
    draws = torch.randint(-2**63, 2**63 - 1, (712,), generator=g, dtype=torch.int64).tolist()
    hits, _ = attack(draws, 400)
    assert hits == 400


def _attack_all(seen, others):
    """Every recorded value long enough, at several offsets; predictions that come true, and
    predicted words found among what the other parties received."""
    hits, found = 0, 0
    other_words = {w for t in others for w in t}
    for t in seen:
        for start in range(0, len(t) - N // 2 - 8, 97):
            h, guess = attack(t[start:], 8)
            hits += h
            found += len(other_words.intersection(predict(t[start:start + N // 2], 512)))
    return hits, found


def test_a_party_that_records_its_material_predicts_nothing(parties2):
    """alice records every value she is sent during products and a relu (her dealer pieces
    inline, the opened e and d) and runs the recovery on all of it: no prediction of her next
    words and none of bob's pieces; the same attack on raw torch draws of the same length works."""
    alice, bob, carol = parties2
    provider.clear_pool()
    rec_a, rec_b = Recorder(alice), Recorder(bob)
    try:
        x = torch.randn(400).fix_precision().share(alice, bob, crypto_provider=carol)
        y = torch.randn(400).fix_precision().share(alice, bob, crypto_provider=carol)
        for _ in range(3):
            (x * y).get()
        x.relu().get()
        (x > y).get()
        del x, y
    finally:
        rec_a.close()
        rec_b.close()
        provider.clear_pool()
    long_enough = [t for t in rec_a.tensors if len(t) >= N // 2 + 8]
    assert sum(len(t) for t in long_enough) > 10_000  # alice saw plenty: her pieces of 400-element items
    hits, found = _attack_all(long_enough, rec_b.tensors)
    assert (hits, found) == (0, 0)
    raw = torch.randint(-2**63, 2**63 - 1, (len(long_enough[0]),), dtype=torch.int64).tolist()
    assert _attack_all([raw], [])[0] > 0  # the same search finds a Mersenne Twister stream


def test_three_parties_relu_material_predicts_nothing(parties3):
    alice, bob, dave, carol = parties3
    rec = Recorder(alice)
    try:
        x = torch.randn(20, 20).fix_precision().share(alice, bob, dave, crypto_provider=carol)
        x.relu().get()
        (x * x).get()
        del x
    finally:
        rec.close()
        provider.clear_pool()
    long_enough = [t for t in rec.tensors if len(t) >= N // 2 + 8]
    assert long_enough
    assert _attack_all(long_enough, [])[0] == 0


def test_the_generator_and_its_fallback_fill_uniform_words():
    """Both backends (AES-256-CTR, and os.urandom where libcrypto is missing) give words whose
    bytes are uniform (every byte value within a wide band of its expected count) and that never
    repeat between draws; random_below stays below its bound."""
    fallback = randomness._Keystream()
    fallback.lib = None
    for fill in (randomness._stream.fill, fallback.fill):
        a, b = torch.empty(20_000, dtype=torch.int64), torch.empty(20_000, dtype=torch.int64)
        fill(a)
        fill(b)
        assert not set(a.tolist()) & set(b.tolist())
        counts = torch.bincount(a.view(torch.uint8).long(), minlength=256).double()
        assert counts.min() > 475 and counts.max() < 775  # expected 625 each, sigma 25: a 6-sigma band
    low = randomness.random_below([10_000], 62)
    assert int(low.min()) >= 0 and int(low.max()) < 2**62 and int(low.max()) > 2**61
    bits = randomness.random_below([10_000], 1)
    assert set(bits.tolist()) == {0, 1} and 4_600 < int(bits.sum()) < 5_400
