"""The index-kind plug-in protocol and the executor surface kinds compute on.

An index kind (secondary, covering, skipping, or a third party's) is a subclass of
:class:`IndexKind` registered under the entry-point group ``lakehouse_index.kinds``
(name = the kind's name, as in its spec's JSON), the one kind registry
(:mod:`lakehouse_index.kind_registry`). Maintenance and queries look the kind up with
:func:`kind_of` and call it; they never branch on which kind it is.

A kind answers a small set of questions (after Lance's scalar-index plug-ins: train,
load, search, and whether the answer is exact):

* :meth:`IndexKind.validate` — does a spec fit a table snapshot;
* :meth:`IndexKind.index_files` — compute and write the entries of some data files, on the
  :class:`Executor` the context sizes for the work (in process with pyarrow, or Spark),
  together with entries for individual rows (:meth:`IndexKind.row_entries`: DEL entries of
  row-level deletes, PUTs of rows that come back) for kinds with :attr:`IndexKind.row_level`;
  removed files need nothing from any kind: the file-id map's lineage drops them;
* :meth:`IndexKind.needs_optimize` / :meth:`IndexKind.optimize` — compact;
* :meth:`IndexKind.access` — how a predicate can use the index: the key values it pins
  (lookups, exact per key), whether the index's columns hold the whole predicate (its rows
  can be filtered), or a file-pruning function (a superset of the matching files);
  the planner costs each way (``query.planner``).

Executors implement :class:`Executor` (``lakehouse_index.executors``): both write the same
layout (:class:`Layout`), so which one ran is invisible to readers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pyarrow as pa

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kind_registry import ENTRY_POINT_GROUP, installed_kinds, plugin
from lakehouse_index.kinds.derived import IndexedColumns
from lakehouse_index.kinds.layout import Layout
from lakehouse_index.log.entry import Content, IndexFile, Level, LogEntry, SourceState
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import IndexSpec

if TYPE_CHECKING:
    from lakehouse_index.expressions import Predicate
    from lakehouse_index.kinds.moves import MoveMap


@dataclass(frozen=True)
class IndexJob:
    """The rows of one data file to index: PUT entries stamped with ``ordinal``.

    ``entry`` is the file as it was when added (its deletes then apply).
    """

    entry: FileEntry
    file_id: int
    ordinal: int


@dataclass(frozen=True)
class WriteTarget:
    """Where and how an executor writes index files: under ``data_dir``, in ``layout``."""

    storage: Storage
    index_dir: str
    data_dir: str
    layout: Layout
    schema: pa.Schema
    level: Level


@dataclass(frozen=True)
class IndexWork:
    """The data files (and individual rows) one operation indexes: for :meth:`IndexKind.index_files`.

    ``snapshot`` gives the schema files are read with. ``rows`` are entries of individual
    rows to write with them (kinds with :attr:`IndexKind.row_level`: DEL entries of
    row-level deletes, PUTs of rows that came back).
    """

    spec: IndexSpec
    snapshot: Snapshot
    jobs: Sequence[IndexJob]
    level: Level
    rows: pa.Table | None = None


@dataclass(frozen=True)
class WriteTimeEntries:
    """How a kind computes its entries of a data file from the file's rows while a write
    produces them (the distributed append runs this inside Spark tasks, so it pickles).

    ``entries(rows, file_id, ordinal)``: ``rows`` holds ``columns`` and ``_row`` (positions
    in the file); the result is written in ``layout`` with ``schema``.
    """

    columns: tuple[str, ...]
    layout: Layout
    schema: pa.Schema
    entries: Callable[[pa.Table, int, int], pa.Table]


#: A batch of index entries as an executor holds it (a pyarrow Table in process, a Spark
#: DataFrame on Spark); only the executor that made it looks inside.
Frame = Any


class Executor(ABC):
    """Where index entries are computed and written: in this process (pyarrow) or on Spark."""

    #: ``"local"`` or ``"spark"`` (reported in logs and tests).
    name: ClassVar[str]
    #: Its frames are pyarrow Tables in this process (they can be concatenated with other entries).
    in_memory: ClassVar[bool] = False

    @abstractmethod
    def entries(
        self, source: TableSource, snapshot: Snapshot, columns: IndexedColumns, jobs: Sequence[IndexJob]
    ) -> Frame:
        """PUT entries ``(columns…, _file_id, _row, _version, _op)`` for the live rows of the jobs'
        files: the stored columns, each an indexed expression's value or a table column."""

    @abstractmethod
    def map_batches(self, frame: Frame, fn: Callable[[pa.Table], pa.Table], schema: pa.Schema) -> Frame:
        """``frame`` through ``fn`` batch by batch (rows of ``schema`` out; on Spark ``fn`` runs in
        the tasks, so it pickles and sees each task's batches apart)."""

    @abstractmethod
    def sample(self, frame: Frame, columns: Sequence[str], fraction: float) -> pa.Table:
        """``columns`` of about ``fraction`` of ``frame``'s rows drawn uniformly (every row at 1),
        in this process."""

    @abstractmethod
    def read_index(self, storage: Storage, index_dir: str, files: Sequence[IndexFile]) -> Frame:
        """The rows of some index files."""

    @abstractmethod
    def compact(self, entries: Frame, moves: MoveMap, live_ids: Sequence[int]) -> Frame:
        """The live PUT entries of ``entries``: moved rows at their new address, per row address the
        newest entry, tombstones and entries of files outside ``live_ids`` dropped."""

    @abstractmethod
    def write(self, entries: Frame, target: WriteTarget, rows: int = 0) -> tuple[IndexFile, ...]:
        """Write ``entries`` (about ``rows`` rows) as ``target`` says; return the root index of the files."""


class InProcessExecutor(Executor):
    """The executor of this process: its frames are pyarrow Tables, and it rewrites index files."""

    in_memory: ClassVar[bool] = True

    @abstractmethod
    def filter_files(
        self,
        storage: Storage,
        index_dir: str,
        files: Sequence[IndexFile],
        first: Sequence[str],
        keep_of: Callable[[pa.Table], np.ndarray | None],
        target_of: Callable[[IndexFile], WriteTarget],
    ) -> list[tuple[IndexFile, ...] | None]:
        """Per index file, the rows ``keep_of`` keeps, given the file's ``first`` columns (None:
        every row, and the file stays as it is). A file losing rows is written again with the
        others to ``target_of(file)``, on its own (its rows keep their order, so its key and
        version bounds only narrow). Per file, the files written in its place (None: kept)."""


@dataclass(frozen=True)
class BuildContext:
    """What a kind needs to write index data for one operation."""

    source: TableSource
    storage: Storage
    index_dir: str
    #: A fresh directory owned by the operation (``ctx.data_uri`` of the lifecycle).
    data_dir: str
    config: ExecutorConfig
    #: The executor for work of about this many rows of entries of this schema (in process
    #: while they fit in memory, else Spark: ``executors.sizing``).
    executor_for: Callable[[int, pa.Schema], Executor]
    #: The executor for an optimize merging about this many index entries of this schema (no
    #: data file read).
    compactor_for: Callable[[int, pa.Schema], Executor]
    #: The in-process executor (entries already in memory are written with it).
    local: InProcessExecutor

    def data_path(self, *parts: str) -> str:
        """A URI under the operation's data directory."""
        return join_uri(self.data_dir, *parts)

    def target(self, layout: Layout, schema: pa.Schema, level: Level, *parts: str) -> WriteTarget:
        """A write target under the operation's data directory (``parts``: a sub-directory)."""
        return WriteTarget(self.storage, self.index_dir, self.data_path(*parts), layout, schema, level)


def relative_to(index_dir: str, uri: str) -> str:
    """``uri`` relative to the index directory (how the log names index files)."""
    return uri[len(index_dir.rstrip("/")) + 1 :]


@dataclass(frozen=True)
class IndexLocation:
    """Where a query reads an index, and the table version it asks about."""

    storage: Storage
    index_dir: str
    target: Snapshot


@dataclass(frozen=True)
class Access:
    """How a predicate can use one index (:meth:`IndexKind.access`)."""

    #: Key tuples the predicate pins the index key to (a lookup of each answers exactly).
    keys: Sequence[tuple[object, ...]] | None = None
    #: The index holds every column of the predicate: filtering its rows finds the files.
    covers: bool = False
    #: The kind prunes files for the predicate (:meth:`IndexKind.prune`).
    prunes: bool = False
    #: The index holds every column of the predicate and prunes its own row groups by their
    #: statistics on any of them: the read takes only those row groups' entries, answering
    #: from the index when it holds the columns asked for (``query.index_scan``).
    scans: bool = False

    @property
    def usable(self) -> bool:
        """Whether the index can help at all."""
        return self.keys is not None or self.covers or self.prunes or self.scans


class IndexKind(ABC):
    """One kind of index: its rules for building, maintaining, compacting and answering."""

    #: The kind's name: its entry-point name and its specs' ``"kind"`` in JSON.
    name: ClassVar[str]
    #: The spec class users declare indexes of this kind with (specs of this kind are parsed
    #: from JSON into it: the kind registry has no other record of spec classes).
    spec_type: ClassVar[type[IndexSpec]]
    #: Offers ``lookup``/``locate`` by key (and its entries name rows, not just files).
    answers_lookups: ClassVar[bool] = False
    #: Row-level deletes become entries (:meth:`row_entries`); otherwise only the file map changes.
    row_level: ClassVar[bool] = False
    #: The log records the identity of the spec's columns (:class:`ColumnIdentity`): entries
    #: computed from a column renamed over, or dropped and added again under its name, answer
    #: for another column, so queries leave such snapshots out and refreshes refuse to mix
    #: them (:func:`~lakehouse_index.kinds.columns.changed_columns`). Kinds that record it in
    #: their own files instead (skipping) set this False.
    tracks_column_identity: ClassVar[bool] = True
    #: Its entries carry each row's sampling weight (``_weight``, see
    #: ``kinds.multicolumn.weights``) and row-group bounds on it: ``Table.sample`` reads it.
    samples: ClassVar[bool] = False

    def sample_identity(self, spec: IndexSpec) -> tuple[str, ...]:
        """The columns a row's sampling weight is a hash of (kinds with :attr:`samples`)."""
        raise NotImplementedError(f"{self.name} indexes keep no sampling weights")

    @abstractmethod
    def validate(self, spec: IndexSpec, snapshot: Snapshot) -> None:
        """Raise ``InvalidIndexSpecError`` if ``spec`` does not fit the table ``snapshot``."""

    @abstractmethod
    def index_files(self, ctx: BuildContext, work: IndexWork) -> tuple[IndexFile, ...]:
        """Compute and write the entries of ``work``'s files and rows."""

    def row_entries(
        self, rows: pa.Table, spec: IndexSpec, snapshot: Snapshot, file_id: int, ordinal: int, op: int
    ) -> pa.Table:
        """Entries of individual rows of one file (kinds with :attr:`row_level`); ``rows`` holds
        the spec's columns and ``_row``."""
        raise NotImplementedError(f"{self.name} indexes keep no row-level entries")

    def write_time_entries(self, spec: IndexSpec, snapshot: Snapshot) -> WriteTimeEntries | None:
        """How entries of newly written files come from their rows, or None when the kind
        cannot take entries computed by the write (its indexes then follow by refresh)."""
        return None

    @abstractmethod
    def needs_optimize(self, stable: LogEntry, mode: str) -> bool:
        """Whether ``optimize(mode)`` would change anything."""

    @abstractmethod
    def optimize(self, ctx: BuildContext, stable: LogEntry, mode: str) -> tuple[SourceState, Content]:
        """Compact the snapshot ``stable`` (``mode``: ``quick`` or ``full``)."""

    def purge(self, ctx: BuildContext, stable: LogEntry) -> tuple[SourceState, Content] | None:
        """The snapshot ``stable`` without any entry of a row that is not live (deleted, or in a
        removed file no move carries it from), rewriting only the index files that hold one: the
        purge of an erase, once every file physically holding a subject has been removed. None
        (the default) when the kind cannot tell those files; the caller optimizes ``full``."""
        return None

    @abstractmethod
    def access(self, spec: IndexSpec, predicate: Predicate) -> Access:
        """How ``predicate`` can use an index of this kind."""

    def prune(
        self, at: IndexLocation, entry: LogEntry, predicate: Predicate, covered: dict[int, FileEntry]
    ) -> frozenset[int]:
        """The ids among ``covered`` (covered file id → the queried version's file) whose files
        may hold rows matching ``predicate``. Only kinds whose :meth:`access` says ``prunes``."""
        raise NotImplementedError(f"{self.name} indexes do not prune files")

    def buckets(
        self, spec: IndexSpec, keys: Sequence[tuple[Any, ...]], key_type: pa.DataType
    ) -> frozenset[int] | None:
        """The buckets holding ``keys`` (None: every bucket)."""
        return None


def _kind(name: str) -> IndexKind:
    """The registry's plug-in of ``name``, which must be an :class:`IndexKind`."""
    found = plugin(name)
    if not isinstance(found, IndexKind):
        raise InvalidIndexSpecError(
            f"entry point {name!r} in {ENTRY_POINT_GROUP} is not an IndexKind: {type(found).__qualname__}"
        )
    return found


def kinds() -> dict[str, IndexKind]:
    """Every installed index kind by name (each plug-in loaded)."""
    return {name: _kind(name) for name in installed_kinds()}


def kind_of(spec: IndexSpec) -> IndexKind:
    """The kind plug-in that maintains indexes declared by ``spec`` (from the kind registry,
    :mod:`lakehouse_index.kind_registry`)."""
    return _kind(spec.kind)
