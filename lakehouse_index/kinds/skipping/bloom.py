"""The split-block bloom filter (SBBF) of the Parquet format.

256-bit blocks of eight
32-bit words; a 64-bit hash picks a block with its upper half and sets one bit per word
with its lower half times eight fixed odd salts. One cache line per probe, and both
insert and probe vectorise in numpy. Sized for ``spec.bloom_fpp`` from the filter's
expected rate (:func:`sbbf_fpp`; Parquet's closed-form sizing undershoots the target by
up to 2x, measured). Hashes come from :mod:`.hashing`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_index.errors import TableFormatError

#: Parquet's cap on a bloom filter; a file with more distinct values gets a fuller filter.
MAX_BLOOM_BYTES = 128 << 20


_SALT = np.array(
    [0x47B6137B, 0x44974D91, 0x8824AD5B, 0xA2B7289D, 0x705495C7, 0x2DF1424B, 0x9EFC4947, 0x5C6BFB31],
    dtype=np.uint32,
)
_BLOCK_BYTES = 32


def sbbf_fpp(ndv: int, num_blocks: int) -> float:
    """Expected false-positive rate of a split-block bloom filter holding ``ndv`` values.

    Insertions spread over blocks as Poisson(ndv / num_blocks); a block holding ``j`` values
    answers a foreign probe wrongly when the probe's bit is set in all eight words, each
    of which had ``j`` chances in 32: ``(1 - (31/32) ** j) ** 8``.
    """
    if ndv <= 0:
        return 0.0
    lam = ndv / num_blocks
    top = int(lam + 12 * math.sqrt(lam) + 32)
    j = np.arange(top + 1, dtype=np.float64)
    log_pmf = j * math.log(lam) - lam - np.array([math.lgamma(x + 1) for x in j])
    return float(np.sum(np.exp(log_pmf) * (1.0 - (31.0 / 32.0) ** j) ** 8))


def bloom_num_blocks(ndv: int, fpp: float) -> int:
    """256-bit blocks for ``ndv`` distinct values at false-positive rate at most ``fpp``.

    Starts from Parquet's sizing formula, which underestimates the rate of small blocks
    by up to 2x (measured), and grows until :func:`sbbf_fpp` meets the target.
    """
    cap = MAX_BLOOM_BYTES // _BLOCK_BYTES
    if ndv <= 0:
        return 1
    bits = -8.0 * ndv / math.log(1.0 - fpp ** (1.0 / 8.0))
    lo = max(1, min(math.ceil(bits / (8 * _BLOCK_BYTES)), cap))
    if sbbf_fpp(ndv, lo) <= fpp:
        return lo
    hi = lo
    while hi < cap and sbbf_fpp(ndv, hi) > fpp:
        lo, hi = hi, min(cap, hi * 2)
    while hi - lo > max(1, hi // 64):  # 1.5% precision is plenty
        mid = (lo + hi) // 2
        if sbbf_fpp(ndv, mid) <= fpp:
            hi = mid
        else:
            lo = mid
    return hi


def _block_and_shifts(hashes: np.ndarray, num_blocks: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Block index per hash and the (n, 8) bit numbers (0..31) it sets in that block's words."""
    block = ((hashes >> np.uint64(32)) * np.asarray(num_blocks, dtype=np.uint64)) >> np.uint64(32)
    key = (hashes & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    shifts = (key[:, None] * _SALT[None, :]) >> np.uint32(27)  # wraps mod 2**32, as the spec says
    return block.astype(np.int64), shifts.astype(np.int64)


def _block_and_masks(hashes: np.ndarray, num_blocks: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Block index per hash and the (n, 8) uint32 bit masks it sets in that block's words."""
    block, shifts = _block_and_shifts(hashes, num_blocks)
    return block, (np.uint32(1) << shifts.astype(np.uint32)).astype(np.uint32)


def bloom_build(hashes: np.ndarray, fpp: float) -> bytes:
    """A split-block bloom filter holding ``hashes`` (uint64), sized for ``len(hashes)`` values."""
    num_blocks = bloom_num_blocks(len(hashes), fpp)
    # One flag per filter bit, word-major and least significant bit first: packing it
    # little-endian bitwise gives the little-endian 32-bit words (scatter, no ufunc.at).
    bits = np.zeros(num_blocks * 8 * 32, dtype=bool)
    if len(hashes):
        block, shifts = _block_and_shifts(np.asarray(hashes, dtype=np.uint64), num_blocks)
        word = block[:, None] * 8 + np.arange(8, dtype=np.int64)[None, :]
        bits[(word * 32 + shifts).ravel()] = True
    return np.packbits(bits, bitorder="little").tobytes()


@dataclass(frozen=True)
class BloomSet:
    """The bloom filters of many files (a binary column, nulls where a file has none), ready to probe."""

    n: int
    #: Positions (in the column) of files that have a filter.
    with_filter: np.ndarray
    #: Per such file: first 32-bit word of its filter in ``words``, and its block count.
    start: np.ndarray
    blocks: np.ndarray
    words: np.ndarray

    @classmethod
    def of(cls, filters: pa.Array | pa.ChunkedArray) -> BloomSet:
        """Index the filters of a binary / large_binary array."""
        arr = filters.combine_chunks() if isinstance(filters, pa.ChunkedArray) else filters
        arr = arr.cast(pa.large_binary())
        n = len(arr)
        none = np.zeros(0, dtype=np.int64)
        offsets_buf, data_buf = arr.buffers()[1], arr.buffers()[2]
        if n == 0 or offsets_buf is None or data_buf is None:
            return cls(n, none, none, none.astype(np.uint64), np.zeros(0, dtype=np.uint32))
        offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset : arr.offset + n + 1]
        lengths = np.diff(offsets)
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        bad = valid & ((lengths < _BLOCK_BYTES) | (lengths % _BLOCK_BYTES != 0) | (offsets[:-1] % 4 != 0))
        if bad.any():
            raise TableFormatError(f"malformed bloom filter in skipping row {int(np.flatnonzero(bad)[0])}")
        idx = np.flatnonzero(valid)
        words = np.frombuffer(data_buf, dtype="<u4", count=len(data_buf) // 4)
        return cls(n, idx, offsets[idx] // 4, (lengths[idx] // _BLOCK_BYTES).astype(np.uint64), words)

    def may_contain_any(self, hashes: np.ndarray) -> np.ndarray:
        """Per file: whether any of ``hashes`` (uint64) may be in its filter (True without one)."""
        out = np.ones(self.n, dtype=bool)
        if len(self.with_filter) == 0:
            return out
        hit = np.zeros(len(self.with_filter), dtype=bool)
        hashes = np.asarray(hashes, dtype=np.uint64)
        # Probe files x hashes in chunks of ~1M cells to bound memory on long IN lists.
        step = max(1, (1 << 20) // len(self.with_filter))
        for i in range(0, len(hashes), step):
            h = hashes[i : i + step]
            grid_h = np.broadcast_to(h[None, :], (len(self.with_filter), len(h))).ravel()
            grid_b = np.broadcast_to(self.blocks[:, None], (len(self.with_filter), len(h))).ravel()
            block, masks = _block_and_masks(grid_h, grid_b)
            base = np.repeat(self.start, len(h)) + block * 8
            ok = np.ones(len(base), dtype=bool)
            for j in range(8):
                ok &= (self.words[base + j] & masks[:, j]) != 0
            hit |= ok.reshape(len(self.with_filter), len(h)).any(axis=1)
        out[self.with_filter] = hit
        return out


def bloom_probe(bloom: bytes, hashes: np.ndarray) -> np.ndarray:
    """Per hash of ``hashes`` (uint64): whether it may be in the one filter ``bloom``."""
    if len(bloom) < _BLOCK_BYTES or len(bloom) % _BLOCK_BYTES:
        raise TableFormatError(f"malformed bloom filter of {len(bloom)} bytes")
    words = np.frombuffer(bloom, dtype="<u4").reshape(-1, 8)
    block, masks = _block_and_masks(np.asarray(hashes, dtype=np.uint64), len(words))
    return np.all((words[block] & masks) != 0, axis=1)


def bloom_may_contain(filters: pa.Array, h: int) -> np.ndarray:
    """Per filter of ``filters`` (binary, nulls allowed): whether hash ``h`` may be in it.

    A null filter answers True (no filter: anything may be there).
    """
    return BloomSet.of(filters).may_contain_any(np.array([h], dtype=np.uint64))
