"""Spark's bucketing hash, computed in this process: ``pmod(hash(v), n)`` for Arrow arrays.

Spark buckets a table by ``HashPartitioning(columns, n).partitionIdExpression``:
``pmod(Murmur3Hash(columns, seed=42), n)``, Murmur3 x86 32-bit as Spark's
``Murmur3_x86_32`` implements it. Per type (Spark's ``HashExpression``):

* boolean, byte, short, int, date (days): ``hashInt`` of the 32-bit value (true = 1);
* long, timestamp and timestamp_ntz (microseconds): ``hashLong``;
* float: ``hashInt`` of ``floatToIntBits``, -0.0 as 0.0 and every NaN as the canonical NaN;
  double likewise with ``hashLong`` of ``doubleToLongBits``;
* decimal of precision <= 18: ``hashLong`` of the unscaled value; wider:
  ``hashUnsafeBytes`` of the unscaled value's minimal big-endian two's complement
  (``BigInteger.toByteArray``);
* string (UTF-8 bytes) and binary: ``hashUnsafeBytes``, which mixes the tail bytes one at a
  time as *signed* bytes (not the reference Murmur3 tail);
* null: the seed, unchanged.

Arrow types Spark reads as another type hash as that type: ``uint8``/``uint16`` as int,
``uint32`` as long, ``uint64`` as ``decimal(20, 0)``, ``date64`` as date, timestamps of any
unit as microseconds (finer units truncated). ``time32``/``time64`` (no Spark type) hash
their integer value as a long: consistent in process, never compared with Spark.

Everything is vectorised with numpy ``uint32`` arithmetic (wrapping, as Java's ``int``).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

SEED = 42

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_MIX = np.uint32(0xE6546B64)
_F1 = np.uint32(0x85EBCA6B)
_F2 = np.uint32(0xC2B2AE35)
_FLOAT_NAN = 0x7FC00000
_DOUBLE_NAN = 0x7FF8000000000000
#: Spark's ``Decimal.MAX_LONG_DIGITS``: wider decimals hash their bytes.
_MAX_LONG_DIGITS = 18


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def _mix_h1(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _rotl(h ^ k, 13) * np.uint32(5) + _MIX


def _fmix(h: np.ndarray, length: np.ndarray | int) -> np.ndarray:
    h = h ^ np.asarray(length, dtype=np.uint32)
    h = (h ^ (h >> np.uint32(16))) * _F1
    h = (h ^ (h >> np.uint32(13))) * _F2
    return h ^ (h >> np.uint32(16))


def hash_int(values: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashInt`` of 32-bit values (uint32 hashes)."""
    k = values.astype(np.int32).view(np.uint32)
    return _fmix(_mix_h1(np.full(len(k), seed, np.uint32), _mix_k1(k)), 4)


def hash_long(values: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashLong`` of 64-bit values (low word first)."""
    v = values.astype(np.int64).view(np.uint64)
    low = (v & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (v >> np.uint64(32)).astype(np.uint32)
    h = _mix_h1(np.full(len(v), seed, np.uint32), _mix_k1(low))
    return _fmix(_mix_h1(h, _mix_k1(high)), 8)


def hash_bytes(data: np.ndarray, offsets: np.ndarray, seed: int = SEED) -> np.ndarray:
    """Spark's ``Murmur3_x86_32.hashUnsafeBytes`` of the byte strings ``data[offsets[i]:offsets[i+1]]``.

    Whole little-endian 4-byte words first, one pass per word position over the strings that
    long; then each remaining byte, sign-extended, mixed as a word of its own.
    """
    starts = offsets[:-1].astype(np.int64)
    lengths = (offsets[1:] - offsets[:-1]).astype(np.int64)
    h = np.full(len(starts), seed, np.uint32)
    words = lengths // 4
    padded = np.concatenate([data, np.zeros(4, np.uint8)])  # reads past the last string's end
    for i in range(int(words.max(initial=0))):
        rows = np.nonzero(words > i)[0]
        at = starts[rows] + 4 * i
        word = (
            padded[at].astype(np.uint32)
            | (padded[at + 1].astype(np.uint32) << np.uint32(8))
            | (padded[at + 2].astype(np.uint32) << np.uint32(16))
            | (padded[at + 3].astype(np.uint32) << np.uint32(24))
        )
        h[rows] = _mix_h1(h[rows], _mix_k1(word))
    tails = lengths - 4 * words
    for j in range(3):
        rows = np.nonzero(tails > j)[0]
        byte = padded[starts[rows] + 4 * words[rows] + j].view(np.int8).astype(np.int32).view(np.uint32)
        h[rows] = _mix_h1(h[rows], _mix_k1(byte))
    return _fmix(h, lengths.astype(np.uint32))


def spark_hash(values: pa.Array | pa.ChunkedArray, seed: int = SEED) -> np.ndarray:
    """Spark's ``hash(v)`` (seed 42) of every value, as int32; nulls hash to the seed."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    assert isinstance(values, pa.Array)
    hashed = _hash_valid(values, seed).view(np.int32)
    if values.null_count:
        hashed = np.where(values.is_null().to_numpy(zero_copy_only=False), np.int32(seed), hashed)
    return hashed


def spark_buckets(values: pa.Array | pa.ChunkedArray, count: int) -> np.ndarray:
    """Spark's bucket ``pmod(hash(v), count)`` of every value, as int32."""
    return (spark_hash(values).astype(np.int64) % count).astype(np.int32)


def _numbers(values: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """The values as numpy (nulls as zeros: their hash is replaced by the seed)."""
    return values.fill_null(0).to_numpy(zero_copy_only=False).astype(dtype)


def _hash_valid(values: pa.Array, seed: int) -> np.ndarray:
    t = values.type
    if pa.types.is_null(t):
        return np.full(len(values), seed, np.uint32)
    if pa.types.is_boolean(t):
        return hash_int(_numbers(values.cast(pa.int32()), np.int32), seed)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return hash_int(_numbers(values, np.int32), seed)
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return hash_int(_numbers(values.cast(pa.int32()), np.int32), seed)
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return hash_long(_numbers(values.cast(pa.int64()), np.int64), seed)
    if pa.types.is_uint64(t):
        return _hash_decimal(values.cast(pa.decimal128(20, 0)), seed)
    if pa.types.is_floating(t):
        return _hash_float(values, seed)
    if pa.types.is_date32(t):
        return hash_int(_numbers(values.view(pa.int32()), np.int32), seed)
    if pa.types.is_date64(t):
        return hash_int(_numbers(values.cast(pa.date32()).view(pa.int32()), np.int32), seed)
    if pa.types.is_timestamp(t):
        micros = values.cast(pa.timestamp("us", t.tz), safe=False).view(pa.int64())
        return hash_long(_numbers(micros, np.int64), seed)
    if pa.types.is_time(t):
        return hash_long(
            _numbers(values.view(pa.int64() if t.bit_width == 64 else pa.int32()), np.int64), seed
        )
    if pa.types.is_decimal(t):
        return _hash_decimal(values, seed)
    if pa.types.is_string(t) or pa.types.is_binary(t):
        return _hash_var(values, np.int32, seed)
    if pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        return _hash_var(values, np.int64, seed)
    if pa.types.is_fixed_size_binary(t) or pa.types.is_binary_view(t):
        return _hash_var(values.cast(pa.large_binary()), np.int64, seed)
    if pa.types.is_string_view(t):
        return _hash_var(values.cast(pa.large_string()), np.int64, seed)
    raise TypeError(f"Spark's bucketing hash is not defined here for values of type {t}")


def _hash_var(values: pa.Array, offset_type: type[np.generic], seed: int) -> np.ndarray:
    """Strings or binary (nulls have empty slots in Arrow, so no fill is needed)."""
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=offset_type)[values.offset : values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return hash_bytes(data, offsets.astype(np.int64), seed)


def _hash_float(values: pa.Array, seed: int) -> np.ndarray:
    if values.type.bit_width == 32:
        f = _numbers(values, np.float32)
        bits = np.where(np.isnan(f), np.int32(_FLOAT_NAN), f.view(np.int32))
        return hash_int(np.where(f == 0, np.int32(0), bits), seed)
    if values.type.bit_width == 16:
        return _hash_float(values.cast(pa.float32()), seed)
    d = _numbers(values, np.float64)
    bits = np.where(np.isnan(d), np.int64(_DOUBLE_NAN), d.view(np.int64))
    return hash_long(np.where(d == 0, np.int64(0), bits), seed)


def _hash_decimal(values: pa.Array, seed: int) -> np.ndarray:
    t = values.type
    if not pa.types.is_decimal128(t):
        values = values.cast(pa.decimal128(t.precision, t.scale))
    words = np.frombuffer(values.buffers()[1], dtype=np.int64)[
        2 * values.offset : 2 * (values.offset + len(values))
    ]
    low = words[0::2]
    if t.precision <= _MAX_LONG_DIGITS:
        return hash_long(low, seed)  # the unscaled value fits in its low 64 bits
    high = words[1::2]
    unscaled = [(int(hi) << 64) | (int(lo) & 0xFFFFFFFFFFFFFFFF) for lo, hi in zip(low, high, strict=True)]
    big_endian = [
        u.to_bytes((u if u >= 0 else ~u).bit_length() // 8 + 1, "big", signed=True) for u in unscaled
    ]
    return _hash_var(pa.array(big_endian, pa.large_binary()), np.int64, seed)
