"""Writing index files with pyarrow: on the driver (small outputs) and inside Spark tasks.

Index files are written by pyarrow everywhere, also when Spark computes them
(``mapInArrow``): row groups are bounded by *row count* (small groups keep a point
lookup to a few KB of decoding; Spark's writer bounds them by bytes only), columns get
exactly the index schema's Arrow types, the page index is written, and any storage
pyarrow reaches works (S3 without Hadoop's S3 jars).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds import secondary as sec
from lakehouse_index.spec import IndexSpec

#: Rows per row group of index files: a point lookup decodes one group of this size (about
#: 0.3 MB of a secondary index, 1 ms to decode); smaller groups would grow the footer that
#: a cold lookup parses.
ROW_GROUP_ROWS = 4_096
#: Rows per index file before a task starts a new one.
ROWS_PER_FILE = 4_000_000


def _write_options() -> dict[str, object]:
    # Dictionary encoding only for the version and op stamps: keys and payloads are mostly
    # distinct values, for which a dictionary page makes files larger and decoding slower.
    return {
        "compression": "zstd",
        "write_page_index": True,
        "use_dictionary": [sec.VERSION, sec.OP],
    }


def write_entries(entries: pa.Table, spec: IndexSpec, storage: Storage, path: str) -> None:
    """Sort ``entries`` like Spark-built index files and write them as one Parquet file at ``path``."""
    ordered = entries.sort_by([(c, "ascending") for c in sec.sort_columns(spec)])
    fs, inner = storage.arrow(path)
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    pq.write_table(ordered, inner, filesystem=fs, row_group_size=ROW_GROUP_ROWS, **_write_options())


@dataclass(frozen=True)
class TaskWriter:
    """A picklable function for ``DataFrame.mapInArrow``: writes one task's sorted rows.

    Rows arrive sorted (by bucket, then key). A new file starts when ``bucket_column``
    changes (covering indexes: one directory per bucket) or a file reaches
    ``ROWS_PER_FILE``. Row groups hold exactly ``ROW_GROUP_ROWS`` rows (the last of a
    file fewer), whatever the size of the Arrow batches Spark sends. Yields one row
    per file written: its path.
    """

    storage: Storage
    data_dir: str
    schema: pa.Schema
    bucket_column: str | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        written: list[str] = []
        out: _GroupWriter | None = None
        current: object = None
        for batch in batches:
            for bucket, part in self._split(batch):
                if out is None or bucket != current or out.rows >= ROWS_PER_FILE:
                    if out is not None:
                        out.close()
                    out, path = self._open(bucket)
                    written.append(path)
                    current = bucket
                out.write(part)
        if out is not None:
            out.close()
        yield pa.RecordBatch.from_pydict({"path": written}, schema=pa.schema([("path", pa.string())]))

    def _split(self, batch: pa.RecordBatch) -> Iterator[tuple[object, pa.RecordBatch]]:
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

    def _open(self, bucket: object) -> tuple[_GroupWriter, str]:
        name = f"part-{uuid.uuid4().hex}.parquet"
        path = (
            join_uri(self.data_dir, f"bucket={bucket}", name)
            if bucket is not None
            else join_uri(self.data_dir, name)
        )
        fs, inner = self.storage.arrow(path)
        fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
        return _GroupWriter(pq.ParquetWriter(inner, self.schema, filesystem=fs, **_write_options())), path


class _GroupWriter:
    """One index file being written: rows are held back until they fill a whole row group."""

    def __init__(self, writer: pq.ParquetWriter) -> None:
        self._writer = writer
        self._held: list[pa.RecordBatch] = []
        self._held_rows = 0
        self.rows = 0  # rows given to the file so far

    def write(self, batch: pa.RecordBatch) -> None:
        self._held.append(batch)
        self._held_rows += batch.num_rows
        self.rows += batch.num_rows
        if self._held_rows >= ROW_GROUP_ROWS:
            held = pa.Table.from_batches(self._held)
            whole = self._held_rows - self._held_rows % ROW_GROUP_ROWS
            self._writer.write_table(held.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
            self._held = held.slice(whole).to_batches()
            self._held_rows -= whole

    def close(self) -> None:
        if self._held_rows:
            self._writer.write_table(pa.Table.from_batches(self._held), row_group_size=ROW_GROUP_ROWS)
        self._writer.close()


def _cast(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([batch.column(f.name).cast(f.type) for f in schema], schema=schema)
