"""Cryptographic randomness for shares and the dealer's material: an AES-256-CTR keystream.

Every random ring element syft_lab makes comes from here: a share (made in the notebook by
syft_lab.smpc.ring), and the crypto provider's triples, masks and bits, which the worker
service draws itself for a ``deal`` command (workers/service.py), so they never travel to it.
The generator is OpenSSL's AES-256 in counter mode (libcrypto, the library Python's own ``ssl``
and ``hashlib`` use), keyed with 32 bytes and started at a 16-byte counter from the operating
system (``os.urandom``); a new key after every 2^36 bytes, and in a forked child (the parent's
keystream must not repeat there). Its output cannot be told apart from uniform without the key,
and no amount of it says anything about later output: unlike torch's Mersenne Twister, whose
state 624 outputs give away (tests/smpc/test_dealer_randomness.py runs that attack).

Why not ``os.urandom`` for everything: on this machine class it gives ~80 MB/s against ~400 MB/s
for torch's ``randint`` and ~800 MB/s for AES-CTR (benchmarks/bench_smpc.py measures all three
side by side); a 100x100 relu needs ~3.7 MB of randomness. Where libcrypto cannot be loaded,
``os.urandom`` fills the words instead (correct, slower): ``BACKEND`` says which is in use.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

import torch

KEY_BYTES, IV_BYTES = 32, 16
REKEY_BYTES = 2**36  # far below AES-CTR's 2^64-block bound: a fresh key is cheap
_CHUNK = 2**30  # EVP_EncryptUpdate takes an int length


def _load_libcrypto():
    """libcrypto with the four EVP calls typed, or None."""
    names = ["libcrypto.so.3", "libcrypto.so.1.1", ctypes.util.find_library("crypto")]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib.EVP_CIPHER_CTX_new.restype = ctypes.c_void_p
            lib.EVP_CIPHER_CTX_new.argtypes = []
            lib.EVP_CIPHER_CTX_free.restype = None
            lib.EVP_CIPHER_CTX_free.argtypes = [ctypes.c_void_p]
            lib.EVP_aes_256_ctr.restype = ctypes.c_void_p
            lib.EVP_aes_256_ctr.argtypes = []
            lib.EVP_EncryptInit_ex.restype = ctypes.c_int
            lib.EVP_EncryptInit_ex.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                                               ctypes.c_char_p]
            lib.EVP_EncryptUpdate.restype = ctypes.c_int
            lib.EVP_EncryptUpdate.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                                              ctypes.c_void_p, ctypes.c_int]
            return lib
        except (OSError, AttributeError):
            continue
    return None


class _Keystream:
    """One AES-256-CTR stream per process; ``fill(t)`` overwrites a contiguous tensor's bytes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lib = _load_libcrypto()
        self.ctx = None
        self.used = 0
        self.pid = None

    def _rekey(self):
        lib = self.lib
        if self.ctx is not None:
            lib.EVP_CIPHER_CTX_free(self.ctx)
            self.ctx = None
        ctx = lib.EVP_CIPHER_CTX_new()
        if not ctx or lib.EVP_EncryptInit_ex(ctx, lib.EVP_aes_256_ctr(), None, os.urandom(KEY_BYTES),
                                             os.urandom(IV_BYTES)) != 1:
            raise RuntimeError("libcrypto could not start AES-256-CTR")
        self.ctx, self.used, self.pid = ctx, 0, os.getpid()

    def fill(self, t: torch.Tensor) -> None:
        nbytes = t.numel() * t.element_size()
        if self.lib is None:
            t.view(-1).view(torch.uint8).copy_(torch.frombuffer(bytearray(os.urandom(nbytes)), dtype=torch.uint8))
            return
        t.zero_()  # CTR: ciphertext of zeros is the keystream (in place)
        with self.lock:
            if self.ctx is None or self.pid != os.getpid() or self.used + nbytes > REKEY_BYTES:
                self._rekey()
            ptr, done, outl = t.data_ptr(), 0, ctypes.c_int()
            while done < nbytes:
                k = min(_CHUNK, nbytes - done)
                if self.lib.EVP_EncryptUpdate(self.ctx, ptr + done, ctypes.byref(outl), ptr + done, k) != 1 \
                        or outl.value != k:
                    raise RuntimeError("libcrypto's AES-256-CTR failed")
                done += k
            self.used += nbytes


_stream = _Keystream()
BACKEND = "aes-256-ctr (libcrypto)" if _stream.lib is not None else "os.urandom"


def _forget_after_fork():
    _stream.ctx = None  # the child must not continue the parent's keystream (the pointer is the parent's copy)
    _stream.lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def random_words(shape) -> torch.Tensor:
    """Uniform int64 words (every one of the 2^64 values equally likely) of ``shape``."""
    out = torch.empty(tuple(int(s) for s in shape), dtype=torch.int64)
    if out.numel():
        _stream.fill(out)
    return out


def random_below(shape, bits: int) -> torch.Tensor:
    """Uniform integers in [0, 2^bits) (0 < bits < 64): the low bits of uniform words."""
    return random_words(shape).bitwise_and_((1 << bits) - 1)
