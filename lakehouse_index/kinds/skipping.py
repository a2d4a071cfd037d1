"""The skipping index kind: per data file statistics that prune files for a predicate.

Layout
------
One row per source data file, stored as Parquet (one file per build or refresh)::

    _file_id  int64     the file id from the log's file-id map (lineage)
    _rows     int64     rows in the file (row-level deletes ignored, see below)
    <column>  struct    one per indexed column, named after it:
        min, max   <column type>   over the non-null, non-NaN values (null if there are none)
        nulls      int64           null count
        nans       int64           NaN count (floating columns; 0 otherwise)
        values     list<type>      the distinct non-null values, sorted, when there are at most
                                   ``spec.max_values`` of them (else null)
        bloom      binary          a split-block bloom filter of the distinct values when there are
                                   more than ``max_values`` of them (else null)

Full builds write a ``Level.BASE`` file, refreshes a ``Level.DELTA`` file with the rows of
the files they added; :func:`load` merges them (the later row for a file id wins) and
keeps only the ids live in the version being queried. Removed files need no tombstone:
lineage (the live ids) drops them. Row-level deletes (deletion vectors, position and
equality deletes) need nothing either: statistics over a superset of the live rows are
conservative, so files are read with ``apply_deletes=False`` and never re-read when their
deletes change. Files the index does not cover (appended since) are always kept.

Each file's Parquet metadata records the identity of every indexed column (physical
name, field id, type; :func:`column_identity`). Given the queried snapshot, :func:`load`
leaves out the statistics of a column that was since dropped and re-added, renamed
over, or retyped other than by widening: names alone would let an old column's
statistics prune the new column's files.

Why not the data files' own statistics (Delta ``stats``, Iceberg manifests, Parquet
bloom filters)? They are optional, truncated (strings), format specific, and no reader
of Parquet bloom filters exists in pyarrow; a side-car we write is uniform across
formats, can hold exact value lists, and is sized by the user.

Bloom filter
------------
The split-block bloom filter (SBBF) of the Parquet format: 256-bit blocks of eight
32-bit words; a 64-bit hash picks a block with its upper half and sets one bit per word
with its lower half times eight fixed odd salts. One cache line per probe, and both
insert and probe vectorise in numpy. Sized for ``spec.bloom_fpp`` from the filter's
expected rate (:func:`sbbf_fpp`; Parquet's closed-form sizing undershoots the target by
up to 2x, measured).
The hash is XXH64 (seed 0), as in Parquet, over a canonical byte encoding chosen so
that equal values hash equally across the physical widths a column may take over its
life (type widening): integers and booleans as int64, floats as float64 with -0.0
folded into 0.0, decimals as their 16-byte unscaled value, dates / timestamps as their
int64 storage value, strings and binaries as their bytes. Fixed-width values are
hashed with a numpy implementation of XXH64 for 8/16-byte inputs (tested against the
``xxhash`` package); variable-width values with ``xxhash`` itself.

Pruning
-------
:func:`prune` evaluates the predicate abstractly per file, in SQL three-valued logic:
for every file it computes which outcomes (true, false, null) the predicate may take
on *some* row of the file, as three boolean numpy arrays over all files at once, and
keeps the files where true is possible. Atoms use the exact value list where the file
has one (evaluated with pyarrow, the same kernels the pyarrow executor uses), else
min/max and the bloom filter (``=`` and ``IN`` only). AND / OR / NOT combine the
outcome sets; anything not understood (column-to-column comparisons, columns not in
the index, a pyarrow-expression predicate) may take any outcome. Every step only ever
adds outcomes, so a file holding a matching row is never dropped.

NaN: pyarrow compares NaN as unequal and unordered, Spark as equal to itself and
greater than everything. Files with NaNs in a column therefore keep every outcome
either engine could give them (true for ``!=``, ``>``, ``>=``, ``NOT IN``,
``NOT BETWEEN``); min/max ignore NaNs. Signed zeros: pyarrow's ``IN`` matches floats
by bit pattern (``-0.0 IN (0.0)`` is false) while ``=`` and Spark compare values, so
zeros are evaluated under both signs.

Example::

    from lakehouse_index.kinds import skipping

    rows = skipping.build_rows(source, snapshot, spec, [(entry, file_id), ...])
    index_file = skipping.write_skipping_file(rows, storage, index_dir, "data/<uuid>/skipping.parquet")
    data = skipping.load(storage, index_dir, log_entry.content.files, live_ids, snapshot)
    keep = skipping.prune(data, predicate, live_ids)   # file ids to scan
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from lakehouse_index.errors import InvalidIndexSpecError, TableFormatError
from lakehouse_index.expressions import And as AndNode
from lakehouse_index.expressions import (
    Between,
    Col,
    Compare,
    Const,
    In,
    IsNull,
    Like,
    Lit,
    Node,
    Not,
    Or,
    Predicate,
)
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.log.entry import IndexFile, Level
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import SkippingIndex

__all__ = [
    "FILE_ID",
    "ROWS",
    "BloomSet",
    "SkippingData",
    "bloom_build",
    "bloom_may_contain",
    "bloom_num_blocks",
    "bloom_probe",
    "build_files",
    "build_rows",
    "column_identity",
    "hash_values",
    "load",
    "prune",
    "rows_schema",
    "sbbf_fpp",
    "stats_row",
    "validate_spec",
    "write_skipping_file",
]

FILE_ID = "_file_id"
ROWS = "_rows"
RESERVED = (FILE_ID, ROWS)
#: Parquet key-value metadata of a skipping file: JSON of :func:`column_identity`.
IDENTITY_KEY = b"lakehouse_index.skipping.columns"

#: Rows per row group of skipping files (one row per data file: a few groups at most).
ROW_GROUP_ROWS = 65_536
#: Parquet's cap on a bloom filter; a file with more distinct values gets a fuller filter.
MAX_BLOOM_BYTES = 128 << 20

# --------------------------------------------------------------------------- types


def _family(t: pa.DataType) -> str | None:
    """The canonical hash encoding of a type; None when the type cannot be indexed.

    Two types with the same family encode equal values identically, so a bloom filter
    built under one answers probes made under the other (type widening).
    """
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_float32(t) or pa.types.is_float64(t):
        return "float"
    if pa.types.is_decimal128(t):
        assert isinstance(t, pa.Decimal128Type)
        return f"decimal:{t.scale}"
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return str(t)
    if pa.types.is_timestamp(t):
        assert isinstance(t, pa.TimestampType)
        return f"timestamp:{t.unit}:{t.tz is not None}"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "utf8"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "bytes"
    if pa.types.is_fixed_size_binary(t):
        return "bytes"
    return None


def validate_spec(spec: SkippingIndex, snapshot: Snapshot) -> None:
    """Every column exists, is a type the index can summarise, and no name clashes with ours."""
    require_columns(spec.name, spec.columns, snapshot, RESERVED)
    for col in spec.columns:
        t = snapshot.column(col).type
        if _family(t) is None:
            raise InvalidIndexSpecError(
                f"index {spec.name!r}: column {col!r} has type {t}, which a skipping index cannot "
                "summarise (use numbers, decimals, strings, binaries, booleans, dates or timestamps)"
            )


def _column_type(t: pa.DataType) -> pa.StructType:
    return pa.struct(
        [
            pa.field("min", t),
            pa.field("max", t),
            pa.field("nulls", pa.int64(), nullable=False),
            pa.field("nans", pa.int64(), nullable=False),
            pa.field("values", pa.list_(t)),
            pa.field("bloom", pa.binary()),
        ]
    )


def column_identity(snapshot: Snapshot, columns: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What identifies each indexed column beyond its name: physical name, field id, type.

    Recorded in the skipping file's Parquet metadata (key :data:`IDENTITY_KEY`) so that
    :func:`load` can refuse statistics of a column that was dropped and re-added, or
    renamed over another one, since they were computed.
    """
    out = {}
    for name in columns:
        col = snapshot.column(name)
        out[name] = {"storedName": col.stored_name, "fieldId": col.field_id, "type": str(col.type)}
    return out


def _widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether statistics recorded as ``old`` values stay valid when read as ``new`` (type widening).

    The widenings Delta and Iceberg allow: within integers, floats, decimals (the cast is
    exact), integers to floats or decimals, dates to timestamps.
    """
    if old.equals(new):
        return True
    fo, fn = _family(old), _family(new)
    if fo is None or fn is None:
        return False
    if fo == fn:
        return True
    if fo == "int" and (fn == "float" or fn.startswith("decimal")):
        return True
    if fo.startswith("decimal") and fn.startswith("decimal"):
        return True
    return fo == "date32" and fn.startswith("timestamp")


def rows_schema(columns: Mapping[str, pa.DataType]) -> pa.Schema:
    """Arrow schema of skipping rows for indexed ``columns`` (name → type)."""
    fields = [pa.field(FILE_ID, pa.int64(), nullable=False), pa.field(ROWS, pa.int64(), nullable=False)]
    fields += [pa.field(name, _column_type(t), nullable=False) for name, t in columns.items()]
    return pa.schema(fields)


# --------------------------------------------------------------------------- hashing

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
    fam = _family(t)
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


# --------------------------------------------------------------------------- bloom filter

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


# --------------------------------------------------------------------------- building


def _column_stats(arr: pa.Array, t: pa.DataType, spec: SkippingIndex) -> pa.StructArray:
    """The one-element struct summarising ``arr`` (one file's values of one column)."""
    if not arr.type.equals(t):
        arr = arr.cast(t)
    nulls = arr.null_count
    present = arr.drop_null() if nulls else arr
    nans = 0
    if pa.types.is_floating(t) and len(present):
        nans = int(pc.sum(pc.is_nan(present)).as_py() or 0)
    if len(present) > nans:
        mm = pc.min_max(present)
        lo, hi = pa.array([mm["min"]], type=t), pa.array([mm["max"]], type=t)
    else:  # only nulls / NaNs: no ordered value to bound
        lo = hi = pa.nulls(1, type=t)
    distinct = pc.unique(present)
    if len(distinct) <= spec.max_values:
        distinct = distinct.take(pc.sort_indices(distinct))
        values = pa.ListArray.from_arrays(pa.array([0, len(distinct)], pa.int32()), distinct)
        bloom = pa.nulls(1, type=pa.binary())
    else:
        values = pa.nulls(1, type=pa.list_(t))
        bloom = pa.array([bloom_build(hash_values(distinct), spec.bloom_fpp)], type=pa.binary())
    return pa.StructArray.from_arrays(
        [lo, hi, pa.array([nulls], pa.int64()), pa.array([nans], pa.int64()), values, bloom],
        fields=list(_column_type(t)),
    )


def stats_row(
    data: pa.Table, file_id: int, spec: SkippingIndex, types: Mapping[str, pa.DataType]
) -> pa.Table:
    """The skipping row of one data file whose (indexed) columns are ``data``.

    ``types`` maps each indexed column to the type to record (the snapshot's).
    """
    schema = rows_schema({c: types[c] for c in spec.columns})
    arrays: list[pa.Array] = [pa.array([file_id], pa.int64()), pa.array([data.num_rows], pa.int64())]
    for c in spec.columns:
        arrays.append(_column_stats(data.column(c).combine_chunks(), types[c], spec))
    return pa.Table.from_arrays(arrays, schema=schema)


def _threads(n_jobs: int) -> int:
    return max(1, min(n_jobs, 2 * (os.cpu_count() or 1), 16))


def build_rows(
    source: TableSource,
    snapshot: Snapshot,
    spec: SkippingIndex,
    jobs: Sequence[tuple[FileEntry, int]],
    *,
    threads: int | None = None,
) -> pa.Table:
    """Skipping rows (sorted by ``_file_id``) for ``jobs``: pairs of (data file, its file id).

    Reads only the indexed columns of each file, in the snapshot's logical schema, in a
    thread pool (pyarrow releases the GIL while decoding). Row-level deletes are not
    applied: statistics over a superset of the live rows stay valid whatever is deleted.
    """
    validate_spec(spec, snapshot)
    types = {c: snapshot.column(c).type for c in spec.columns}
    schema = rows_schema(types)
    if not jobs:
        return schema.with_metadata(
            {IDENTITY_KEY: json.dumps(column_identity(snapshot, spec.columns))}
        ).empty_table()

    def one(job: tuple[FileEntry, int]) -> pa.Table:
        entry, file_id = job
        data = read_file(source, snapshot, entry, columns=list(spec.columns), apply_deletes=False)
        return stats_row(data, file_id, spec, types)

    with ThreadPoolExecutor(max_workers=threads or _threads(len(jobs))) as pool:
        parts = list(pool.map(one, jobs))
    rows = pa.concat_tables(parts).sort_by(FILE_ID).combine_chunks()
    return rows.replace_schema_metadata({IDENTITY_KEY: json.dumps(column_identity(snapshot, spec.columns))})


def write_skipping_file(
    rows: pa.Table, storage: Storage, index_dir: str, rel_path: str, level: Level = Level.BASE
) -> IndexFile:
    """Write ``rows`` as one Parquet file at ``index_dir/rel_path``; its root-index record.

    ``rel_path`` is relative to the index directory (``ctx.data_path("skipping.parquet")``
    in an operation body) and is what the returned :class:`IndexFile` names.
    """
    uri = join_uri(index_dir, rel_path)
    fs, inner = storage.arrow(uri)
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    pq.write_table(rows, inner, filesystem=fs, row_group_size=ROW_GROUP_ROWS, compression="zstd")
    size = storage.stat(uri).size
    return IndexFile(path=rel_path, rows=rows.num_rows, size=size, level=level)


def build_files(
    source: TableSource,
    snapshot: Snapshot,
    spec: SkippingIndex,
    jobs: Sequence[tuple[FileEntry, int]],
    storage: Storage,
    index_dir: str,
    rel_path: str,
    level: Level,
) -> tuple[IndexFile, ...]:
    """:func:`build_rows` then :func:`write_skipping_file`; ``()`` when there is nothing to index."""
    validate_spec(spec, snapshot)
    if not jobs:
        return ()
    rows = build_rows(source, snapshot, spec, jobs)
    return (write_skipping_file(rows, storage, index_dir, rel_path, level),)


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class SkippingData:
    """The skipping rows of the files live in one version: one row per file id, sorted by it.

    ``rows`` has the layout of the module docstring (compaction writes it back as is).
    """

    rows: pa.Table
    file_ids: np.ndarray
    #: Column statistics prepared for pruning, per (column, type the predicate reads it as).
    _views: dict[tuple[str, str], _ColumnView | None] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @classmethod
    def of(cls, rows: pa.Table) -> SkippingData:
        """Wrap skipping rows that hold at most one row per file id (e.g. from :func:`build_rows`)."""
        rows = rows.sort_by(FILE_ID).combine_chunks()
        ids = np.asarray(rows.column(FILE_ID).to_numpy(), dtype=np.int64)
        if len(ids) > 1 and (np.diff(ids) == 0).any():
            raise ValueError("skipping rows hold two rows for one file id; use load() to merge them")
        return cls(rows, ids)

    @property
    def columns(self) -> tuple[str, ...]:
        """The indexed columns."""
        return tuple(n for n in self.rows.column_names if n not in RESERVED)

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return int(self.rows.nbytes)


def load(
    storage: Storage,
    index_dir: str,
    files: Sequence[IndexFile],
    live_ids: Iterable[int],
    snapshot: Snapshot | None = None,
) -> SkippingData:
    """Read the skipping files ``files`` (in log order); keep the rows of ``live_ids``.

    When two files hold a row for the same file id, the later file's row wins. With
    ``snapshot`` (the table version being queried), the statistics of a column are left
    out (so it prunes nothing) when the snapshot no longer has the column, or has
    another column under its name (dropped and re-added, renamed over: different
    physical name or field id), or a type the recorded one does not widen to.
    """
    tables = []
    for f in files:
        uri = join_uri(index_dir, f.path)
        fs, inner = storage.arrow(uri)
        try:
            tables.append(pq.read_table(inner, filesystem=fs))
        except FileNotFoundError as e:
            raise TableFormatError(f"skipping index file {uri} is missing") from e
        except (pa.ArrowInvalid, OSError) as e:
            raise TableFormatError(f"skipping index file {uri} is not readable: {e}") from e
    live = np.fromiter(live_ids, dtype=np.int64)
    if not tables:
        empty = pa.schema([pa.field(FILE_ID, pa.int64()), pa.field(ROWS, pa.int64())]).empty_table()
        return SkippingData(empty, np.zeros(0, dtype=np.int64))
    if snapshot is not None:
        stale = set().union(*(_stale_columns(t, snapshot) for t in tables))
        tables = [t.drop_columns([c for c in t.column_names if c in stale]) for t in tables]
    try:
        rows = pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TableFormatError(f"skipping index files under {index_dir} do not share a schema: {e}") from e
    ids = np.asarray(rows.column(FILE_ID).to_numpy(), dtype=np.int64)
    # Last occurrence of every id: first occurrence in the reversed order.
    rev_unique, rev_first = np.unique(ids[::-1], return_index=True)
    last = len(ids) - 1 - rev_first
    keep = last[np.isin(rev_unique, live)]
    keep.sort()
    # Keep the column identities (later files win) so that compaction can write ``rows`` back.
    identity: dict[str, Any] = {}
    for t in tables:
        raw = (t.schema.metadata or {}).get(IDENTITY_KEY)
        identity.update(json.loads(raw) if raw else {})
    identity = {c: v for c, v in identity.items() if c in rows.column_names}
    rows = rows.take(pa.array(keep, pa.int64())).replace_schema_metadata(
        {IDENTITY_KEY: json.dumps(identity)} if identity else None
    )
    return SkippingData.of(rows)


def _stale_columns(table: pa.Table, snapshot: Snapshot) -> set[str]:
    """Indexed columns of one skipping file whose statistics do not describe ``snapshot``'s column."""
    raw = (table.schema.metadata or {}).get(IDENTITY_KEY)
    identity: dict[str, dict[str, Any]] = json.loads(raw) if raw else {}
    stale = set()
    for name in table.column_names:
        if name in RESERVED:
            continue
        try:
            col = snapshot.column(name)
        except KeyError:
            stale.add(name)
            continue
        recorded = identity.get(name)
        if recorded is not None and (
            recorded.get("storedName") != col.stored_name or recorded.get("fieldId") != col.field_id
        ):
            stale.add(name)
            continue
        stored_type = table.schema.field(name).type.field("min").type
        if not _widens(stored_type, col.type):
            stale.add(name)
    return stale


# --------------------------------------------------------------------------- pruning


@dataclass(frozen=True)
class _Tri:
    """Per file: may the predicate be true / false / null on some row of it."""

    t: np.ndarray
    f: np.ndarray
    n: np.ndarray

    def negate(self) -> _Tri:
        return _Tri(self.f, self.t, self.n)


def _const(n: int, t: bool, f: bool, null: bool) -> _Tri:
    return _Tri(np.full(n, t), np.full(n, f), np.full(n, null))


def _and(a: _Tri, b: _Tri) -> _Tri:
    return _Tri(a.t & b.t, a.f | b.f, (a.n & (b.t | b.n)) | (b.n & (a.t | a.n)))


def _or(a: _Tri, b: _Tri) -> _Tri:
    return _Tri(a.t | b.t, a.f & b.f, (a.n & (b.f | b.n)) | (b.n & (a.f | a.n)))


def _bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean result array as numpy, nulls as False."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True)
class _ColumnView:
    """The statistics of one indexed column over all files, cast to the predicate's column type."""

    name: str
    type: pa.DataType
    min: pa.Array
    max: pa.Array
    nulls: np.ndarray
    nans: np.ndarray
    rows: np.ndarray
    values: pa.ListArray
    has_values: np.ndarray
    blooms: BloomSet
    #: Whether the recorded bloom filters can be probed with hashes of ``type`` values.
    bloom_usable: bool

    @property
    def has_null(self) -> np.ndarray:
        return self.nulls > 0

    @property
    def has_range(self) -> np.ndarray:
        return np.asarray(self.min.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _view(data: SkippingData, name: str, current: pa.DataType) -> _ColumnView:
    col = data.rows.column(name).combine_chunks()
    assert isinstance(col, pa.StructArray)
    stored = col.type.field("min").type
    if not _widens(stored, current):
        raise pa.ArrowTypeError(f"{stored} does not widen to {current}")

    def conv(a: pa.Array) -> pa.Array:
        return a if a.type.equals(current) else a.cast(current, safe=True)

    values = col.field("values")
    assert isinstance(values, pa.ListArray)
    if not stored.equals(current):
        values = pa.ListArray.from_arrays(
            values.offsets, conv(values.values), type=pa.list_(current), mask=values.is_null()
        )
    return _ColumnView(
        name=name,
        type=current,
        min=conv(col.field("min")),
        max=conv(col.field("max")),
        nulls=np.asarray(col.field("nulls").to_numpy(zero_copy_only=False), dtype=np.int64),
        nans=np.asarray(col.field("nans").to_numpy(zero_copy_only=False), dtype=np.int64),
        rows=np.asarray(data.rows.column(ROWS).to_numpy(), dtype=np.int64),
        values=values,
        has_values=np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
        blooms=BloomSet.of(col.field("bloom")),
        bloom_usable=_family(stored) == _family(current),
    )


class _Evaluator:
    """Abstract evaluation of one predicate over the statistics of all loaded files."""

    def __init__(self, data: SkippingData, predicate: Predicate) -> None:
        self.data = data
        self.schema = predicate.schema
        self.n = len(data.file_ids)

    def view(self, name: str) -> _ColumnView | None:
        if name not in self.data.columns or name not in self.schema.names:
            return None
        current = self.schema.field(name).type
        key = (name, str(current))
        cache = self.data._views
        if key not in cache:
            try:
                cache[key] = _view(self.data, name, current)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                cache[key] = None  # recorded type no longer converts: the column prunes nothing
        return cache[key]

    def unknown(self) -> _Tri:
        return _const(self.n, True, True, True)

    def eval(self, node: Node) -> _Tri:
        if isinstance(node, AndNode):
            out = self.eval(node.parts[0])
            for p in node.parts[1:]:
                out = _and(out, self.eval(p))
            return out
        if isinstance(node, Or):
            out = self.eval(node.parts[0])
            for p in node.parts[1:]:
                out = _or(out, self.eval(p))
            return out
        if isinstance(node, Not):
            return self.eval(node.part).negate()
        if isinstance(node, Const):
            return _const(self.n, node.value, not node.value, False)
        if isinstance(node, IsNull):
            v = self.view(node.column.name)
            if v is None:
                return self.unknown()
            out = _Tri(v.nulls > 0, v.nulls < v.rows, np.zeros(self.n, dtype=bool))
            return out.negate() if node.negated else out
        column = _atom_column(node)
        if column is None:
            return self.unknown()
        v = self.view(column)
        if v is None:
            return self.unknown()
        try:
            return self.atom(node, v)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
            return self.unknown()

    # ------------------------------------------------------------------ atoms

    def atom(self, node: Node, v: _ColumnView) -> _Tri:
        """A null-propagating single-column atom (comparison with a literal, IN, BETWEEN, LIKE)."""
        lits = _literals(node)
        if any(isinstance(x.value, float) and math.isnan(x.value) for x in lits):
            return self.unknown()
        rt, rf = self.by_range(node, v)
        vt, vf = self.by_values(node, v)
        t = np.where(v.has_values, vt, rt)
        f = np.where(v.has_values, vf, rf)
        has_nan = v.nans > 0
        if has_nan.any():
            f = f | has_nan
            if _nan_may_match(node):
                t = t | has_nan
        return _Tri(t, f, v.has_null.copy())

    def by_values(self, node: Node, v: _ColumnView) -> tuple[np.ndarray, np.ndarray]:
        """Exact outcomes over the value lists (evaluated with the pyarrow executor's kernels)."""
        t = np.zeros(self.n, dtype=bool)
        f = np.zeros(self.n, dtype=bool)
        if not v.has_values.any():
            return t, f
        flat = v.values.flatten()
        if len(flat) == 0:
            return t, f
        parents = np.asarray(pc.list_parent_indices(v.values).to_numpy(), dtype=np.int64)
        if _family(v.type) == "float":
            # pyarrow's IN hashes floats by bit pattern (-0.0 NOT IN (0.0)), its = and Spark
            # compare values (-0.0 = 0.0): evaluate each zero under both signs.
            zeros = np.flatnonzero(_bools(pc.equal(flat, 0.0)))
            if len(zeros):
                flat = pa.concat_arrays([flat, pc.negate(flat.take(pa.array(zeros)))])
                parents = np.concatenate([parents, parents[zeros]])
        table = pa.table({v.name: flat})
        expr = Predicate(node, pa.schema([pa.field(v.name, v.type)])).to_pyarrow()
        result = _evaluate(table, expr)
        t[parents[_bools(result)]] = True
        f[parents[_bools(pc.invert(result))]] = True
        return t, f

    def by_range(self, node: Node, v: _ColumnView) -> tuple[np.ndarray, np.ndarray]:
        """Possible outcomes over the non-null values from min/max (and bloom filters for = / IN)."""
        has = v.has_range
        lo, hi = v.min, v.max
        if isinstance(node, Compare):
            assert isinstance(node.right, Lit)
            lit = _scalar(node.right)
            op = node.op
            if op in ("=", "!="):
                inside = _bools(pc.less_equal(lo, lit)) & _bools(pc.greater_equal(hi, lit))
                maybe_eq = inside & self.bloom(v, node.right)
                all_eq = _bools(pc.equal(lo, lit)) & _bools(pc.equal(hi, lit))
                eq_t, eq_f = maybe_eq, has & ~all_eq
                return (eq_t, eq_f) if op == "=" else (eq_f, eq_t)
            if op == "<":
                return _bools(pc.less(lo, lit)), _bools(pc.greater_equal(hi, lit))
            if op == "<=":
                return _bools(pc.less_equal(lo, lit)), _bools(pc.greater(hi, lit))
            if op == ">":
                return _bools(pc.greater(hi, lit)), _bools(pc.less_equal(lo, lit))
            if op == ">=":
                return _bools(pc.greater_equal(hi, lit)), _bools(pc.less(lo, lit))
            raise AssertionError(op)
        if isinstance(node, In):
            any_in = np.zeros(self.n, dtype=bool)
            single = _bools(pc.equal(lo, hi))
            pinned = np.zeros(self.n, dtype=bool)  # min == max == one of the values
            for x in node.values:
                s = _scalar(x)
                inside = _bools(pc.less_equal(lo, s)) & _bools(pc.greater_equal(hi, s))
                any_in |= inside & self.bloom(v, x)
                # A zero never pins: pyarrow's IN tells -0.0 from 0.0 (see by_values).
                if not (_family(v.type) == "float" and x.value == 0):
                    pinned |= single & _bools(pc.equal(lo, s))
            in_t, in_f = any_in, has & ~pinned
            return (in_f, in_t) if node.negated else (in_t, in_f)
        if isinstance(node, Between):
            low, high = _scalar(node.low), _scalar(node.high)
            bt = _bools(pc.greater_equal(hi, low)) & _bools(pc.less_equal(lo, high))
            bf = _bools(pc.less(lo, low)) | _bools(pc.greater(hi, high))
            return (bf, bt) if node.negated else (bt, bf)
        if isinstance(node, Like):
            lt = has.copy()
            prefix = _like_prefix(node.pattern)
            if prefix and _family(v.type) == "utf8":
                p = pa.scalar(prefix, pa.string())
                lo_s = lo.cast(pa.string())
                head = pc.utf8_slice_codeunits(lo_s, 0, len(prefix))
                # A value starting with p is >= p, and truncating min keeps it <= p.
                lt = _bools(pc.greater_equal(hi.cast(pa.string()), p)) & _bools(pc.less_equal(head, p))
            lf = has.copy()
            return (lf, lt) if node.negated else (lt, lf)
        raise AssertionError(node)

    def bloom(self, v: _ColumnView, lit: Lit) -> np.ndarray:
        """Per file: whether a value equal to ``lit`` may be in it per its bloom filter."""
        if not v.bloom_usable or not lit.type.equals(v.type):
            return np.ones(self.n, dtype=bool)  # no exact hash for this literal: only min/max prune
        return v.blooms.may_contain_any(hash_values(pa.array([lit.value], type=v.type)))


def _evaluate(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    """``expr`` (boolean) evaluated on every row of ``table``."""
    import pyarrow.dataset as ds

    out = ds.dataset(table).to_table(columns={"r": expr})
    return out.column("r")


def _scalar(lit: Lit) -> pa.Scalar:
    return pa.scalar(lit.value, type=lit.type)


def _atom_column(node: Node) -> str | None:
    """The column of a single-column atom against literals; None for anything else."""
    if isinstance(node, Compare):
        if isinstance(node.left, Col) and isinstance(node.right, Lit):
            return node.left.name
        return None  # column-to-column comparisons: not summarised
    if isinstance(node, (In, Between, Like)):
        return node.column.name
    return None


def _literals(node: Node) -> list[Lit]:
    if isinstance(node, Compare):
        return [o for o in (node.left, node.right) if isinstance(o, Lit)]
    if isinstance(node, In):
        return list(node.values)
    if isinstance(node, Between):
        return [node.low, node.high]
    return []


def _nan_may_match(node: Node) -> bool:
    """Whether a NaN value may satisfy the atom in pyarrow (NaN unordered) or Spark (NaN largest)."""
    if isinstance(node, Compare):
        return node.op in ("!=", ">", ">=")
    if isinstance(node, (In, Between, Like)):
        return node.negated
    return True


def _like_prefix(pattern: str) -> str:
    """The literal text before the first wildcard of a LIKE pattern (``\\`` escapes)."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
            continue
        if c in "%_":
            break
        out.append(c)
        i += 1
    return "".join(out)


def prune(data: SkippingData, predicate: Predicate | None, file_ids: Iterable[int]) -> set[int]:
    """The ids among ``file_ids`` whose files may hold a row matching ``predicate``.

    Files without a skipping row (not covered by the index) are always kept, as is
    everything for a predicate given as a pyarrow Expression (no AST to reason about).
    Never drops a file that holds a matching row (see the module docstring).
    """
    ids = np.unique(np.fromiter(file_ids, dtype=np.int64))
    if predicate is None or predicate.node is None or data.file_ids.size == 0 or ids.size == 0:
        return {int(i) for i in ids}
    pos = np.searchsorted(data.file_ids, ids)
    pos_c = np.minimum(pos, data.file_ids.size - 1)
    covered = data.file_ids[pos_c] == ids
    tri = _Evaluator(data, predicate).eval(predicate.node)
    keep = ~covered | tri.t[pos_c]
    return {int(i) for i in ids[keep]}
