"""The Spark task of the distributed append: data files and their index entries in one pass.

Each task (``DataFrame.mapInArrow``) checks its rows against the table schema, writes
them with pyarrow into the table location (one file per partition value it holds, in
the format's layout: :class:`DataFileFormat`), keeps the columns the indexes need with
each row's position in its file, and after closing its data files writes every
index's entries for them into that index's operation directory (sorted in the index's
layout by :func:`~lakehouse_index.executors.writer.write_entries`). Only one small row
per task goes back to the driver: a pickled :class:`TaskOutput` (its data files' commit
metadata and the index files it wrote; a failed attempt's files are named by none).

File ids: the ``j``-th file of task ``p`` (of ``n`` tasks) gets ``first_id + j * n + p``
in each index, so tasks pick ids without talking to each other; the driver records the
same ids in the index's file-id map when it logs the refresh of the commit.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors.writer import write_entries
from lakehouse_index.kinds.base import WriteTarget, WriteTimeEntries
from lakehouse_index.kinds.entries import ROW
from lakehouse_index.sink.contract import DataFileFormat, OpenDataFile, PartitionKey, WrittenFile
from lakehouse_index.sink.partitions import split
from lakehouse_index.workflows.data import conform

#: The one column of the row a task returns: its pickled :class:`TaskOutput`.
RESULT_COLUMN = "written"
RESULT_SCHEMA = pa.schema([(RESULT_COLUMN, pa.binary())])
RESULT_DDL = f"{RESULT_COLUMN} binary"


@dataclass(frozen=True)
class TaskOutput:
    """What one task wrote: data files, and per index name the index files."""

    files: tuple[WrittenFile, ...]
    index_files: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True)
class IndexShare:
    """One index's part of the job: how its entries come from rows, and where they go."""

    name: str
    entries: WriteTimeEntries
    target: WriteTarget
    config: ExecutorConfig
    first_id: int
    #: The table ordinal the commit is expected to get (the entries' ``_version``).
    ordinal: int

    def file_id(self, task: int, tasks: int, seq: int) -> int:
        """The id of the ``seq``-th file of task ``task`` of ``tasks``."""
        return self.first_id + seq * tasks + task


#: Rows a task gathers before handing them to a data file's writer (one row group each
#: at most; Spark's batches of 10,000 rows would otherwise make as many tiny row groups).
GROUP_ROWS = 1 << 20
#: ... or this many bytes, whichever comes first.
GROUP_BYTES = 128 << 20


@dataclass
class _File:
    seq: int
    out: OpenDataFile
    rows: int = 0
    index_rows: list[pa.Table] = field(default_factory=list)
    held: list[pa.Table] = field(default_factory=list)
    held_rows: int = 0
    held_bytes: int = 0

    def add(self, rows: pa.Table) -> None:
        self.held.append(rows)
        self.held_rows += rows.num_rows
        self.held_bytes += rows.nbytes
        self.rows += rows.num_rows
        if self.held_rows >= GROUP_ROWS or self.held_bytes >= GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.held:
            self.out.write(pa.concat_tables(self.held))
        self.held, self.held_rows, self.held_bytes = [], 0, 0

    def close(self) -> WrittenFile:
        self.flush()
        return self.out.close()


@dataclass(frozen=True)
class AppendTask:
    """The function each Spark task runs (``mapInArrow``): see the module docstring."""

    schema: pa.Schema
    table_uri: str
    files: DataFileFormat
    indexes: tuple[IndexShare, ...]
    #: Partitions of the DataFrame (the ``n`` of the file-id rule).
    tasks: int
    #: Threads a task writes its files and index entries on.
    threads: int = 1

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        yield self.run(context.partitionId(), batches)

    def run(self, task: int, batches: Iterable[pa.RecordBatch]) -> pa.RecordBatch:
        """Check the task's rows against the table schema, write them and their entries; the
        pickled :class:`TaskOutput` as the task's one result row."""
        rows = (
            conform(pa.Table.from_batches([b]), self.schema, self.table_uri) for b in batches if b.num_rows
        )
        out = self.write(task, rows)
        return pa.RecordBatch.from_pydict({RESULT_COLUMN: [pickle.dumps(out)]}, schema=RESULT_SCHEMA)

    def write(self, task: int, tables: Iterable[pa.Table]) -> TaskOutput:
        """Write ``tables`` (rows already in the table schema) as task ``task``: the data files,
        then each index's entries for them, on ``threads`` threads (pyarrow's writes, sorts
        and statistics release the GIL, so the index entries are computed and written while
        the data files are)."""
        needed = list(dict.fromkeys(c for i in self.indexes for c in i.entries.columns))
        opened: dict[PartitionKey, _File] = {}
        for rows in tables:
            for key, part in split(rows, self.files.partition_columns):
                f = opened.get(key)
                if f is None:
                    f = opened[key] = _File(len(opened), self.files.open(key))
                if needed:
                    positions = pa.array(np.arange(f.rows, f.rows + part.num_rows, dtype=np.int64))
                    f.index_rows.append(part.select(needed).append_column(ROW, positions))
                f.add(part)
        files = list(opened.values())
        with ThreadPoolExecutor(max(1, self.threads)) as pool:
            # The index jobs first: each is one long sort and write that the file closes overlap.
            index_jobs = [pool.submit(self._index_files, share, task, files) for share in self.indexes]
            closes = [pool.submit(f.close) for f in files]
            index_files = tuple(
                (share.name, tuple(j.result())) for share, j in zip(self.indexes, index_jobs, strict=True)
            )
            written = tuple(
                replace(
                    c.result(),
                    file_ids=tuple((i.name, i.file_id(task, self.tasks, f.seq)) for i in self.indexes),
                )
                for f, c in zip(files, closes, strict=True)
            )
        return TaskOutput(written, index_files)

    def _index_files(self, share: IndexShare, task: int, files: list[_File]) -> list[str]:
        """Write ``share``'s entries of ``files``; the index files' paths."""
        parts = [
            share.entries.entries(
                pa.concat_tables(f.index_rows), share.file_id(task, self.tasks, f.seq), share.ordinal
            )
            for f in files
        ]
        if not parts:
            return []
        # Files in id order, rows in position order: the entries are in address order.
        return write_entries(pa.concat_tables(parts), share.target, share.config, in_address_order=True)


def task_outputs(rows: Iterable[Any]) -> list[TaskOutput]:
    """The outputs of collected task results (Spark ``Row`` objects of :data:`RESULT_SCHEMA`)."""
    out = []
    for row in rows:
        got = pickle.loads(row[RESULT_COLUMN])
        assert isinstance(got, TaskOutput)
        out.append(got)
    return out
