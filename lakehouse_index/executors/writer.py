"""Writing index files with pyarrow, in this process and inside Spark tasks, in one layout.

Index files are written by pyarrow everywhere, also when Spark computes them
(``mapInArrow``): row groups are bounded by *row count* (small groups keep a point
lookup to a few KB of decoding; Spark's writer bounds them by bytes only), columns get
exactly the index schema's Arrow types, the page index is written, and any storage
pyarrow reaches works (S3 without Hadoop's S3 jars). Both executors hand their sorted
rows to :class:`FileWriter`, so a file's cut, row groups and bucket directories do not
depend on which executor ran.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.faults import crash_point
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds.base import WriteTarget, relative_to
from lakehouse_index.kinds.entries import FILE_ID, OP, VERSION, take_rows
from lakehouse_index.kinds.keys import file_bounds
from lakehouse_index.kinds.layout import BUCKET_COLUMN, bucket_file_name, bucket_from_path, bucket_ids
from lakehouse_index.log.entry import IndexFile

#: Columns dictionary-encoded: the version and op stamps (few distinct values). Keys and
#: payloads are mostly distinct values, for which a dictionary page makes files larger and
#: decoding slower.
_DICTIONARY = (VERSION, OP)


def _write_options(schema: pa.Schema) -> dict[str, object]:
    """How index files are encoded: integer and timestamp columns as ``DELTA_BINARY_PACKED``
    (sorted keys, file ids and row numbers pack into a few bits a value), then LZ4_RAW.

    Not zstd: a read takes a few row groups of a few thousand rows, and pyarrow sets up a zstd
    decoder for every column chunk it decompresses, which costs more than the chunk's bytes.
    250,000 entries of a key index in 62 groups decode in 22.6 ms with zstd (0.6 MB), 2.6 ms
    delta-packed (0.07 MB); a multi-column index file of 552 groups in 243 ms with zstd
    (10.7 MB), 40 ms delta-packed with lz4 (9.8 MB). Spark (3.3 and later), DuckDB and
    pyarrow read these encodings.
    """
    packed = {
        f.name: "DELTA_BINARY_PACKED"
        for f in schema
        if f.name not in _DICTIONARY
        and (pa.types.is_integer(f.type) or pa.types.is_timestamp(f.type) or pa.types.is_date(f.type))
    }
    return {
        "compression": "lz4",
        "write_page_index": True,
        "use_dictionary": list(_DICTIONARY),
        "column_encoding": packed,
    }


@dataclass(frozen=True)
class FileWriter:
    """Writes sorted index rows to files under ``data_dir``: picklable, so Spark tasks run it too.

    Rows arrive sorted (by bucket, then by the layout's sort columns). A new file starts
    when the bucket changes (named as Spark names bucket files, or with ``bucket_dirs`` in one
    ``bucket=<n>/`` directory per bucket: ``kinds.layout``) or a file reaches
    ``config.rows_per_index_file`` rows. Row groups hold exactly
    ``config.index_row_group_rows`` rows (the last of a file fewer), whatever the size of
    the batches; with ``aligned`` (an int64 sort column whose bit prefixes are boxes of a
    space-filling curve), at most that many, cut where that column changes in its most
    significant bit (:func:`aligned_groups`). As a ``DataFrame.mapInArrow`` function it
    yields one row per file written: its path.
    """

    storage: Storage
    data_dir: str
    schema: pa.Schema
    config: ExecutorConfig
    #: The column of the incoming batches holding each row's bucket (dropped on write).
    bucket_column: str | None = None
    #: Buckets as ``bucket=<n>/`` directories (layout 1) instead of Spark's bucket file names.
    bucket_dirs: bool = False
    #: Row groups cut at this column's most significant changes (``Layout.aligned``).
    aligned: str | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        written = self.write(batches)
        yield pa.RecordBatch.from_pydict({"path": written}, schema=pa.schema([("path", pa.string())]))

    def write(self, batches: Iterable[pa.RecordBatch]) -> list[str]:
        """Write every row of ``batches``; the paths of the files written."""
        written: list[str] = []
        out: _GroupWriter | None = None
        current: object = None
        limit = self.config.rows_per_index_file
        for batch in batches:
            for bucket, part in self._split(batch):
                while part.num_rows:
                    if out is None or bucket != current or out.rows >= limit:
                        if out is not None:
                            out.close()
                            crash_point("index_data.file_written")
                        out, path = self._open(bucket)
                        written.append(path)
                        current = bucket
                    room = limit - out.rows
                    out.write(part.slice(0, room))
                    part = part.slice(room)
        if out is not None:
            out.close()
            crash_point("index_data.file_written")
        return written

    def _split(self, batch: pa.RecordBatch) -> Iterator[tuple[int | None, pa.RecordBatch]]:
        """(bucket, rows cast to the index schema) runs of a sorted batch."""
        if self.bucket_column is None:
            yield None, _cast(batch, self.schema)
            return
        buckets = batch.column(self.bucket_column).to_pylist()
        body = _cast(batch.drop_columns([self.bucket_column]), self.schema)
        start = 0
        for i in range(1, len(buckets) + 1):
            if i == len(buckets) or buckets[i] != buckets[start]:
                yield buckets[start], body.slice(start, i - start)
                start = i

    def _open(self, bucket: int | None) -> tuple[_GroupWriter, str]:
        token = uuid.uuid4().hex
        if bucket is None:
            path = join_uri(self.data_dir, f"part-{token}.parquet")
        elif self.bucket_dirs:
            path = join_uri(self.data_dir, f"bucket={bucket}", f"part-{token}.parquet")
        else:
            path = join_uri(self.data_dir, bucket_file_name(token, bucket))
        fs, inner = self.storage.arrow(path)
        fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
        writer = pq.ParquetWriter(inner, self.schema, filesystem=fs, **_write_options(self.schema))
        return _GroupWriter(writer, self.config.index_row_group_rows, self.aligned), path


#: Rows, or bytes, held before they are written as whole row groups: one write call per few
#: row groups costs more than the writing itself (4,096-row groups from 4,096-row batches:
#: 1.06 s for 5M entries, against 0.67 s written in large calls). The byte bound keeps wide
#: covering rows from piling up when the batches are new memory (a Spark task's).
_FLUSH_ROWS = 1 << 18
_FLUSH_BYTES = 64 << 20


class _GroupWriter:
    """One index file being written: rows are held back until they fill whole row groups
    (written once ``_FLUSH_ROWS`` rows or ``_FLUSH_BYTES`` bytes are held); with ``aligned``,
    groups of :func:`aligned_groups` of that column."""

    def __init__(self, writer: pq.ParquetWriter, group_rows: int, aligned: str | None = None) -> None:
        self._writer = writer
        self._group_rows = group_rows
        self._aligned = aligned
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self._held_bytes = 0
        self.rows = 0  # rows given to the file so far

    def write(self, batch: pa.RecordBatch) -> None:
        self._held.append(batch)
        self._held_rows += batch.num_rows
        self._held_bytes += batch.nbytes
        self.rows += batch.num_rows
        if self._held_rows >= self._group_rows and (
            self._held_rows >= _FLUSH_ROWS or self._held_bytes >= _FLUSH_BYTES
        ):
            held = pa.Table.from_batches(self._held)
            whole = self._write_groups(held, final=False)
            self._held = held.slice(whole).to_batches()
            self._held_rows -= whole
            self._held_bytes = sum(b.nbytes for b in self._held)

    def _write_groups(self, held: pa.Table, final: bool) -> int:
        """Write the whole row groups of ``held`` (every row when ``final``); the rows written."""
        if self._aligned is None:
            whole = held.num_rows if final else held.num_rows - held.num_rows % self._group_rows
            self._writer.write_table(held.slice(0, whole), row_group_size=self._group_rows)
            return whole
        keys = np.asarray(held[self._aligned].to_numpy(), dtype=np.int64)
        at = 0
        for size in aligned_groups(keys, self._group_rows, final):
            self._writer.write_table(held.slice(at, size), row_group_size=size)
            at += size
        return at

    def close(self) -> None:
        if self._held_rows:
            self._write_groups(pa.Table.from_batches(self._held), final=True)
        self._writer.close()


def aligned_groups(keys: np.ndarray, most: int, final: bool) -> list[int]:
    """Sizes of consecutive row groups of the sorted int64 ``keys``: each of at most ``most``
    rows and, bar the last, at least a third of that, ending where the keys change in their
    most significant bit within that window (among equal changes, the largest group).

    Bit prefixes of a Z-order cell are boxes of the indexed columns: a group ending at a
    prefix's change holds whole boxes, so its bounds stay tight, where a group cut at a fixed
    count straddles a jump of the curve and spans half a dimension. Without ``final``, the
    rows after the last group that has a whole window are left for the next call.
    """
    m = len(keys)
    least = max(1, most // 3)
    change = (keys[1:] ^ keys[:-1]).view(np.uint64)
    # The highest bit that changes before each row (-1: no change); a float exponent is exact
    # to the bit below 2**53, and at most one level high above it.
    level = np.where(change == 0, -1, np.frexp(change.astype(np.float64))[1] - 1)
    sizes: list[int] = []
    start = 0
    while m - start > most:
        window = level[start + least - 1 : start + most]  # changes before rows start+least..start+most
        best = len(window) - 1 - int(np.argmax(window[::-1]))  # the last of the highest
        sizes.append(least + best)
        start += least + best
    if final and m > start:
        sizes.append(m - start)
    return sizes


def write_entries(
    entries: pa.Table, target: WriteTarget, config: ExecutorConfig, *, in_address_order: bool = False
) -> list[str]:
    """Sort ``entries`` as the target's layout says (by bucket first when bucketed) and write
    them with :class:`FileWriter`; the paths written. The in-process executor writes this
    way, and so do the distributed append's Spark tasks (each its own files).

    ``in_address_order``: the entries come ordered by row address and share one version,
    so a (stable) sort by the layout's columns ahead of the address gives the layout's order.
    """
    layout = target.layout
    sort = layout.sort[: layout.sort.index(FILE_ID)] if in_address_order else layout.sort
    order = [(c, "ascending") for c in sort]
    bucket_col = None
    if layout.buckets is not None:
        bucket_col = BUCKET_COLUMN
        buckets = bucket_ids(entries[layout.buckets.column], layout.buckets)
        entries = entries.append_column(bucket_col, pa.array(buckets, pa.int32()))
        order = [(bucket_col, "ascending"), *order]
    writer = writer_for(target, config, bucket_col)
    return writer.write(sorted_batches(entries, order))


def writer_for(target: WriteTarget, config: ExecutorConfig, bucket_column: str | None) -> FileWriter:
    """The :class:`FileWriter` of ``target``'s layout (``bucket_column``: the rows' buckets), its
    row groups of the layout's ``group_rows`` when it has them."""
    buckets = target.layout.buckets
    if target.layout.group_rows is not None:
        config = dataclasses.replace(config, index_row_group_rows=target.layout.group_rows)
    dirs = buckets is not None and not buckets.spark
    return FileWriter(
        target.storage, target.data_dir, target.schema, config, bucket_column, dirs, target.layout.aligned
    )


def sorted_batches(table: pa.Table, order: list[tuple[str, str]], **take: int) -> Iterator[pa.RecordBatch]:
    """The rows of ``table`` sorted by ``order``, as record batches.

    Not ``Table.sort_by``: it gathers every column into one array, which fails for a
    ``string``/``binary`` column of more than 2 GiB; :func:`~lakehouse_index.kinds.entries.take_rows`
    does not (``take``: its keyword arguments). Rows already in that order (a full optimize
    of a unique key's index) are not gathered again.
    """
    if in_order(table, order):
        yield from table.to_batches()
        return
    yield from take_rows(table, pc.sort_indices(table, sort_keys=order), **take).to_batches()


#: Rows compared first by :func:`in_order`, spread over a table of more than
#: ``_ORDER_SAMPLE_FROM`` rows: most unsorted tables fail there. Smaller tables are compared
#: whole at once (cheaper than cutting the sample out of them).
_ORDER_SAMPLE = 1024
_ORDER_SAMPLE_FROM = 1 << 16


def in_order(table: pa.Table, order: list[tuple[str, str]]) -> bool:
    """Whether the rows of ``table`` are sorted by ``order`` already (nulls and NaNs: never)."""
    n = table.num_rows
    if n > _ORDER_SAMPLE_FROM:
        # One-row slices, not ``take``: take gathers each column into one array first, which
        # fails for a string column of more than 2 GiB (an in-process index of 100M e-mails).
        keys = table.select([name for name, _ in order])
        rows = np.linspace(0, n - 1, _ORDER_SAMPLE).astype(np.int64).tolist()
        if not _sorted(pa.concat_tables([keys.slice(i, 1) for i in rows]), order):
            return False
    return _sorted(table, order)


def _sorted(table: pa.Table, order: list[tuple[str, str]]) -> bool:
    """:func:`in_order`, comparing every adjacent pair of rows."""
    n = table.num_rows
    if n < 2:
        return True
    tied: pa.ChunkedArray | pa.Array | None = None  # adjacent pairs equal on every column so far
    for name, direction in order:
        column = table[name]
        if column.null_count:
            return False
        a, b = column.slice(0, n - 1), column.slice(1)
        if direction == "descending":
            a, b = b, a
        equal = pc.equal(a, b)
        ok = pc.or_(pc.less(a, b), equal)
        if not pc.all(ok if tied is None else pc.or_(pc.invert(tied), ok)).as_py():
            return False
        tied = equal if tied is None else pc.and_(tied, equal)
        if not pc.any(tied).as_py():
            return True
    return True


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in schema], schema=schema)


def read_root_index(target: WriteTarget, paths: Iterable[str] | None = None) -> tuple[IndexFile, ...]:
    """Per Parquet file written to the target (or of ``paths`` only): rows, size, key bounds and
    version bounds (from footers); by bucket, then lowest key, so files of disjoint key
    ranges read back in the layout's order."""
    storage = target.storage
    out = []
    if paths is None:
        found = [(s.path, s.size) for s in storage.list_tree(target.data_dir) if s.path.endswith(".parquet")]
    else:
        found = [(p, storage.stat(p).size) for p in paths]
    for uri, size in sorted(found):
        fs, path = storage.arrow(uri)
        meta = pq.read_metadata(path, filesystem=fs)
        if meta.num_rows == 0:
            continue
        lo, hi = file_bounds(meta, target.layout.key)
        vlo, vhi = file_bounds(meta, [VERSION])
        out.append(
            IndexFile(
                path=relative_to(target.index_dir, uri),
                rows=meta.num_rows,
                size=size,
                level=target.level,
                min_key=lo,
                max_key=hi,
                min_ordinal=int(vlo[0]) if vlo[0] is not None else None,
                max_ordinal=int(vhi[0]) if vhi[0] is not None else None,
                bucket=bucket_from_path(uri),
            )
        )
    return tuple(sorted(out, key=_key_order))


def _key_order(f: IndexFile) -> tuple[object, ...]:
    """Sort key of one write's files: bucket, lowest key (null components last), path."""
    low = tuple((v is None, 0 if v is None else v) for v in f.min_key or ())
    return (-1 if f.bucket is None else f.bucket, low, f.path)
