"""XXH64 over canonical encodings of column values (for bloom filters).

The hash is XXH64 (seed 0), as in Parquet, over a canonical byte encoding chosen so
that equal values hash equally across the physical widths a column may take over its
life (type widening): integers and booleans as int64, floats as float64 with -0.0
folded into 0.0, decimals as their 16-byte unscaled value, dates / timestamps as their
int64 storage value, strings and binaries as their bytes. Fixed-width values are
hashed with a numpy implementation of XXH64 for 8/16-byte inputs (tested against the
``xxhash`` package); variable-width values with ``xxhash`` itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import xxhash

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.expressions.types import Family, family


def encoding(t: pa.DataType) -> str | None:
    """The canonical hash encoding of a type; None when the type cannot be indexed.

    Two types with the same encoding encode equal values identically, so a bloom filter
    built under one answers probes made under the other (type widening).
    """
    f = family(t)
    if f is Family.FLOAT:
        return "float" if pa.types.is_float32(t) or pa.types.is_float64(t) else None
    if f is Family.DECIMAL:
        return f"decimal:{t.scale}" if isinstance(t, pa.Decimal128Type) else None
    if f is Family.TIMESTAMP:
        assert isinstance(t, pa.TimestampType)
        return f"timestamp:{t.unit}:{t.tz is not None}"
    if f is Family.DATE:
        return str(t)
    if f is Family.BOOLEAN:
        return "bool"
    if f is Family.INTEGER:
        return "int"
    if f is Family.STRING:
        return "utf8"
    if f in (Family.BINARY, Family.FIXED_BINARY):
        return "bytes"
    return None


_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _xxh64_lanes(lanes: Sequence[np.ndarray]) -> np.ndarray:
    """XXH64 (seed 0) of inputs made of 1..3 little-endian 64-bit lanes (8..24 bytes), vectorised.

    Inputs shorter than 32 bytes skip XXH64's stripe loop: each lane is mixed in turn,
    then the avalanche. Arithmetic wraps modulo 2**64 like the reference.
    """
    assert 1 <= len(lanes) <= 3
    h = np.full(len(lanes[0]), _P5 + np.uint64(8 * len(lanes)), dtype=np.uint64)
    for lane in lanes:
        k = _rotl(lane.astype(np.uint64, copy=False) * _P2, 31) * _P1
        h = _rotl(h ^ k, 27) * _P1 + _P4
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


def hash_pair(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """XXH64 of the 16 bytes ``a[i] ‖ b[i]`` (uint64 each): combines two columns' hashes."""
    return _xxh64_lanes([a, b])


def _int64_storage(arr: pa.Array) -> np.ndarray:
    t = arr.type
    if pa.types.is_boolean(t):
        return np.asarray(arr.cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)
    if pa.types.is_integer(t):
        return np.asarray(arr.cast(pa.int64(), safe=False).to_numpy(zero_copy_only=False), dtype=np.int64)
    width = pa.int32() if t.bit_width == 32 else pa.int64()
    return np.asarray(arr.view(width).cast(pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def hash_values(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """XXH64 of the canonical encoding of every value of ``arr`` (no nulls), as uint64."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError("hash_values takes no nulls")
    t = arr.type
    fam = encoding(t)
    if fam is None:
        raise InvalidIndexSpecError(f"values of type {t} cannot be hashed")
    if fam in ("utf8", "bytes"):
        data = arr.cast(pa.large_binary()) if not pa.types.is_fixed_size_binary(t) else arr
        return np.fromiter(
            (xxhash.xxh64_intdigest(v) for v in data.to_pylist()), dtype=np.uint64, count=len(arr)
        )
    if fam == "float":
        f = np.asarray(arr.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64).copy()
        f[f == 0.0] = 0.0  # -0.0 == 0.0: one hash
        f[np.isnan(f)] = np.nan
        return _xxh64_lanes([f.view(np.uint64)])
    if fam.startswith("decimal"):
        buf = arr.buffers()[1]
        assert buf is not None
        words = np.frombuffer(buf, dtype="<u8")[2 * arr.offset : 2 * (arr.offset + len(arr))]
        return _xxh64_lanes([words[0::2], words[1::2]])
    return _xxh64_lanes([_int64_storage(arr).view(np.uint64)])
