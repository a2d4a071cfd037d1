"""THE write contract: what a table format implements to be written (the read half is ``source.py``).

A format's connector package ships a :class:`TableWriter` and registers it under the
entry-point group ``lakehouse_index.writers`` with the format's name (the name its
``TableSource`` reports as ``format_name``); :func:`open_writer` picks it once per write.
The core writes through it and never branches on the format:

* :meth:`TableWriter.begin` checks, before anything is written, that the operation may
  commit to the table (writer features the format library cannot honour, append-only
  tables, tables opened without an atomic commit) and returns a :class:`Transaction` on
  the table's latest version (its ``snapshot``: the version the write builds on);
* a transaction commits once: ``append`` / ``overwrite`` / ``delete`` / ``update`` /
  ``upsert`` through the format library, ``commit_files`` of data files written by tasks
  (:class:`DataFileFormat`), ``commit_erase`` of the GDPR erase's rewrites; each returns
  the :class:`Commit`. A lost commit race runs the operation again on the newer version
  unless the winning commits conflict with it (:mod:`lakehouse_index.sink.conflicts`, the
  same rules for every format); a conflict is ``WriteConflictError``;
* ``commit_row_changes`` commits a write whose rows the caller already found (an index
  located them): exactly those rows of exactly those files are removed, by rewriting the
  files (:attr:`WriteMode.COPY_ON_WRITE`) or by marking the rows deleted
  (:attr:`WriteMode.MERGE_ON_READ`: Delta deletion vectors, Iceberg position deletes), and
  new rows are added, in one commit; the result says where every rewritten file's rows came
  from, so the indexes follow without reading them;
* :meth:`TableWriter.purge_blockers` and :meth:`TableWriter.purge_history` remove older
  versions for the erase's purge;
* :meth:`TableWriter.spark_writes` gives the format's own Spark writer (:class:`SparkWrites`:
  delta-spark, Iceberg's Spark runtime) when the Spark session has it: a Spark DataFrame is
  then appended or upserted by it, which enforces every writer feature the format defines;
  without it (:class:`SparkWriterMissing` says what is missing) the core writes the frame
  through ``data_files`` / ``commit_files`` or collects it.

Writers may use the core's modules at or below this layer (io, read, expressions, sink);
``tests/packaging/test_layers.py`` enforces it. Example (a third format)::

    class HudiWriter(TableWriter):
        def begin(self, operation): ...

    # pyproject.toml: [project.entry-points."lakehouse_index.writers"] hudi = "my_pkg.write:HudiWriter"
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import cache
from importlib.metadata import EntryPoint
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from lakehouse_index.errors import ReadOnlyTableError
from lakehouse_index.expressions import Predicate
from lakehouse_index.io import Storage
from lakehouse_index.sink.history import HistoryPurge
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.sink.rewrite import FileRewrite, Rewritten
from lakehouse_index.source import Snapshot, TableSource

#: The entry-point group of table writers (name: the format's name).
ENTRY_POINT_GROUP = "lakehouse_index.writers"

#: A partition: (column, value) pairs of the table's partition columns (empty: unpartitioned).
PartitionKey = tuple[tuple[str, Any], ...]


class WriteOperation(str, Enum):
    """What a transaction is opened for (the checks of :meth:`TableWriter.begin` depend on it)."""

    APPEND = "append"
    OVERWRITE = "overwrite"
    DELETE = "delete"
    UPDATE = "update"
    UPSERT = "upsert"
    ERASE = "erase"


class WriteMode(str, Enum):
    """How a write removes rows of files that stay: rewrite them, or mark the rows deleted."""

    #: The files holding removed rows are rewritten without them.
    COPY_ON_WRITE = "copy-on-write"
    #: The removed rows are marked deleted (Delta deletion vectors, Iceberg position deletes);
    #: no data file is rewritten.
    MERGE_ON_READ = "merge-on-read"


@dataclass(frozen=True)
class RowChanges:
    """A write whose rows are known: per data file of the transaction's snapshot, the positions
    of the live rows it removes, and the rows it adds (in the table schema); ``reads``: what
    the rows were found by (after a lost commit race, the conflict rules decide by it whether
    the same changes may commit on the newer version)."""

    operation: WriteOperation
    removed: Mapping[str, np.ndarray]
    added: pa.Table | None
    mode: WriteMode
    reads: ReadSet

    @property
    def rows_removed(self) -> int:
        """How many live rows the write removes."""
        return sum(len(p) for p in self.removed.values())


@dataclass(frozen=True)
class Commit:
    """What one commit made: the new table version and the rows the format library reports
    (None where it does not say); ``retries``: how many times the write ran again on a newer
    version after losing the commit race to commits it did not conflict with
    (:mod:`lakehouse_index.sink.conflicts`)."""

    version: int
    rows_written: int | None = None
    rows_deleted: int | None = None
    rows_updated: int | None = None
    retries: int = 0


@dataclass(frozen=True)
class RowChangeCommit:
    """What ``commit_row_changes`` committed: the commit, every rewritten data file (added path →
    where its rows came from; empty for merge-on-read), the files whose rows were marked deleted,
    and the data files holding the added rows."""

    commit: Commit
    rewritten: Mapping[str, Rewritten]
    marked: tuple[str, ...]
    added_files: tuple[str, ...]


class RowChangesRefused(Exception):
    """Raised by ``commit_row_changes`` before anything is written: the table holds something this
    commit does not write (the write then goes through the format library, which may)."""


class SparkWriterMissing(Exception):
    """Raised by :meth:`TableWriter.spark_writes` before anything is written: the format has a Spark
    writer, but this session cannot write the table through it; the message says what is missing
    (one sentence, e.g. "delta-spark is not in the Spark session")."""


class NotDistributable(Exception):
    """A table whose data files the tasks cannot write (the append then goes through the format library)."""


@dataclass(frozen=True)
class WrittenFile:
    """One data file a task wrote, as the commit needs it.

    ``path`` as the commit names it (Delta: relative to the table root, not URI-encoded;
    Iceberg: the full location); ``name`` its unique file name (how the driver finds it
    among the commit's files); ``commit_info`` the format's metadata of the file (Delta:
    the add action's statistics JSON; Iceberg: a pickled ``DataFile``); ``file_ids`` the
    id its entries carry, per index name.
    """

    name: str
    path: str
    size: int
    rows: int
    partition_values: tuple[tuple[str, str | None], ...]
    commit_info: bytes
    file_ids: tuple[tuple[str, int], ...] = ()


class OpenDataFile(Protocol):
    """A data file being written by a task."""

    def write(self, rows: pa.Table) -> None:
        """Append rows (in the table schema, partition columns included)."""

    def close(self) -> WrittenFile:
        """Finish the file; what the commit needs of it."""


class DataFileFormat(Protocol):
    """How a table format lays out new data files (picklable: tasks get a copy)."""

    @property
    def partition_columns(self) -> tuple[str, ...]:
        """Columns whose values split rows into separate files."""

    def open(self, partition: PartitionKey) -> OpenDataFile:
        """A new data file for rows of ``partition``."""


class Transaction(ABC):
    """One write to a table, on :attr:`snapshot` (the version it builds on); each method commits once."""

    snapshot: Snapshot

    @abstractmethod
    def append(self, rows: pa.Table) -> Commit:
        """Append ``rows`` (already in the table schema)."""

    @abstractmethod
    def overwrite(self, rows: pa.Table, predicate: Predicate | None) -> Commit:
        """Replace every row (``predicate`` None) or the rows where it is TRUE with ``rows``,
        in one commit."""

    @abstractmethod
    def delete(self, predicate: Predicate) -> Commit:
        """Delete the rows where ``predicate`` is TRUE (exactly the rows ``scan(where)`` returns)."""

    @abstractmethod
    def update(self, predicate: Predicate | None, values: Mapping[str, Any]) -> Commit:
        """Set columns to Python literals (checked against the schema) on the rows where
        ``predicate`` is TRUE (every row for None)."""

    @abstractmethod
    def upsert(self, rows: pa.Table, on: Sequence[str]) -> Commit:
        """Update the rows matching a row of ``rows`` on the ``on`` columns, insert the others
        (keys unique and not null in ``rows``)."""

    @abstractmethod
    def data_files(self) -> DataFileFormat:
        """How tasks write new data files of this table; NotDistributable for a layout they cannot write."""

    @abstractmethod
    def commit_files(self, files: Sequence[WrittenFile]) -> Commit:
        """Commit the data files tasks wrote as one append. The version returned may be
        after commits of other writers (callers find their commit by its files)."""

    @abstractmethod
    def write_mode(self, operation: WriteOperation) -> WriteMode:
        """How the table's own settings ask ``operation`` to remove rows (Delta: the
        ``deletionVectors`` feature and ``delta.enableDeletionVectors``; Iceberg v2:
        ``write.delete.mode`` / ``write.update.mode`` / ``write.merge.mode``)."""

    @abstractmethod
    def commit_row_changes(self, changes: RowChanges) -> RowChangeCommit:
        """One commit removing exactly ``changes.removed`` (in ``changes.mode``) and adding
        ``changes.added``; :class:`RowChangesRefused`, before anything is written, when the
        table holds a writer feature this commit does not honour."""

    @abstractmethod
    def commit_erase(self, rewrites: Sequence[FileRewrite], subjects: int) -> tuple[Commit, dict[str, str]]:
        """One commit removing every file of ``rewrites`` and adding its rewrite (when rows stay),
        recording no erased value in the table's metadata; the commit and, per rewritten
        file's URI, its replacement's URI. ``subjects``: how many data subjects (for the
        commit's own description)."""


class SparkWrites(ABC):
    """The format's own Spark writer for one table (delta-spark, Iceberg's Spark runtime), in the
    session of the frames it writes. It enforces every writer feature the format defines (Delta:
    constraints, generated and identity columns, invariants, row tracking, change data feed;
    Iceberg: required columns, the table's write modes and distribution, row lineage); a write it
    refuses commits nothing and raises :class:`~lakehouse_index.errors.WriteRefusedError`. Its
    commit is the one it made, found by a mark the commit carries (never the latest version:
    another writer may have committed before or after it)."""

    #: What writes (for the write's report): "delta-spark", "Iceberg's Spark writer".
    name: str
    #: The latest version when the writer was opened (the write builds on it or later).
    snapshot: Snapshot

    @abstractmethod
    def append(self, frame: Any) -> Commit:
        """Append the Spark DataFrame ``frame`` in one commit (columns matched by name)."""

    @abstractmethod
    def upsert(self, frame: Any, on: Sequence[str]) -> Commit:
        """Update the rows matching a row of ``frame`` on the ``on`` columns, insert the others,
        in one commit (keys unique and not null in ``frame``)."""


class TableWriter(ABC):
    """The write half of a table format for one table, over the core's storage of its indexes."""

    def __init__(self, source: TableSource, storage: Storage, index_root: str) -> None:
        self.source = source
        self.storage = storage
        self.index_root = index_root

    @property
    def uri(self) -> str:
        """The table root URI."""
        return self.source.uri

    @abstractmethod
    def begin(self, operation: WriteOperation) -> Transaction:
        """A transaction for ``operation`` on the table's latest version, after every check that
        can refuse it: nothing is written when this raises."""

    def spark_writes(self, spark: Any) -> SparkWrites | None:
        """The format's own Spark writer in session ``spark`` (after the checks that refuse the
        table's writes whoever makes them); None when the format has no Spark writer, and
        :class:`SparkWriterMissing` when it has one this session cannot use."""
        return None

    @abstractmethod
    def purge_blockers(self) -> list[str]:
        """Reasons, one sentence each naming the setting, why the table's retention forbids a purge;
        ``UnsupportedFeatureError`` for a table no purge can handle safely."""

    @abstractmethod
    def purge_history(
        self, keep_version: int, *, dry_run: bool, refresh_indexes: Callable[[], None]
    ) -> HistoryPurge:
        """Make ``keep_version`` the only readable version and remove every older trace (after the
        caller checked :meth:`purge_blockers`); ``refresh_indexes`` brings the indexes to a
        version the purge commits, when it commits one. A rerun after a crash completes it."""


@cache
def _writers() -> dict[str, EntryPoint]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def open_writer(source: TableSource, storage: Storage, index_root: str) -> TableWriter:
    """The writer of ``source``'s format (ReadOnlyTableError when no installed package writes it)."""
    ep = _writers().get(source.format_name)
    if ep is None:
        raise ReadOnlyTableError(f"writes to {source.format_name} tables are not supported")
    cls = ep.load()
    if not (isinstance(cls, type) and issubclass(cls, TableWriter)):
        raise TypeError(f"entry point {ep.value!r} in {ENTRY_POINT_GROUP} is not a TableWriter")
    writer: TableWriter = cls(source, storage, index_root)
    return writer
