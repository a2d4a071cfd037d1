"""What the ``lakehouse_index`` Spark source reads: the planner's choice, cut into partitions.

No pyspark here: Spark's planning worker calls :func:`plan_source_read` once per query
(after filter pushdown), its tasks call :func:`read_part` once per partition, and
:func:`explain_spark_source` shows the same plan on the driver without Spark.

* The pushed filters, bound to the version's schema, form one :class:`Predicate`; the
  read planner ``Table.read`` and ``Table.scan`` use (``Table.explain(where=...)``) weighs
  every index against a plain scan for it.
* The chosen candidate's files become one :class:`FilePart` each (a plain scan: every live
  file whose partition values the predicate does not rule out). A part carries everything
  its task needs: the file's log entry, its deleted positions and the rows of its equality
  deletes, read when planned. The task reads the file with :func:`read_part` (pyarrow,
  predicate applied exactly, three-valued) and opens no table, reads no log, plans nothing.
* When a secondary or covering index pins the predicate's keys and stores every column the
  query needs, the lookup is answered when planned, from the index alone, and its rows are
  the one :class:`RowsPart`.

Tables and snapshots are cached per process (Spark reuses its Python workers), keyed by
the options that identify the table and by version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import cachetools
import pyarrow as pa
from pyroaring import BitMap64

from lakehouse_index.api import Table, open_table
from lakehouse_index.config import Config, PlannerConfig
from lakehouse_index.expressions import And, Node, Predicate
from lakehouse_index.expressions.spark import to_spark_sql
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.query.planner import Plan
from lakehouse_index.read.scan import prune_files, scan_files
from lakehouse_index.source import Column, EqualityDeletes, FileEntry, FileIO, Snapshot, TableSource
from lakehouse_index.spark_source.options import SourceOptions, parse_options
from lakehouse_index.spark_source.time_travel import pinned_version

__all__ = [
    "FilePart",
    "Part",
    "ReadShape",
    "RowsPart",
    "SourceRead",
    "conjunction",
    "explain_spark_source",
    "open_cached",
    "plan_source_read",
    "read_part",
    "read_shape",
    "resolve_version",
    "snapshot_at",
]


@dataclass(frozen=True)
class FilePart:
    """One data file of the version, read whole (deletes applied, then the predicate)."""

    entry: FileEntry
    #: Positions deleted by its deletion vector or position deletes (None: it has none).
    deleted: BitMap64 | None = None
    #: The rows of each equality-delete file that applies to it, by that file's path.
    equality_rows: tuple[tuple[str, pa.Table], ...] = ()


@dataclass(frozen=True)
class RowsPart:
    """The rows of a lookup of ``keys`` key(s) answered from index ``index`` alone when planned."""

    index: str
    keys: int
    rows: pa.Table


Part = FilePart | RowsPart


@dataclass(frozen=True)
class SourceRead:
    """The plan of one read through the source: version, predicate, partitions and the planner's choice."""

    path: str
    version: int
    predicate: Predicate | None
    parts: tuple[Part, ...]
    #: The planner's decision (None: no predicate to plan with, or useIndexes=false).
    plan: Plan | None
    live_files: int

    @property
    def answer(self) -> str:
        """One line: what answers the read."""
        if self.parts and isinstance(self.parts[0], RowsPart):
            part = self.parts[0]
            return f"index {part.index!r} alone (lookup of {part.keys} key(s))"
        chosen = self.plan.chosen if self.plan is not None else None
        via = "plain scan" if chosen is None or chosen.index is None else f"index {chosen.label!r}"
        return f"{len(self.parts)} of {self.live_files} files via {via}"

    def __str__(self) -> str:
        where = str(self.predicate) if self.predicate is not None else "(none)"
        lines = [
            f"lakehouse_index read of {self.path} at version {self.version}: {self.answer}",
            f"  planned with: {where}",
        ]
        if self.plan is not None:
            lines += ["  " + line for line in str(self.plan).splitlines()]
        return "\n".join(lines)


_K = TypeVar("_K")
_V = TypeVar("_V")
_lock = threading.Lock()
_tables: cachetools.LRUCache[tuple[object, ...], Table] = cachetools.LRUCache(maxsize=8)
_snapshots: cachetools.LRUCache[tuple[object, ...], Snapshot] = cachetools.LRUCache(maxsize=8)


def _cached(cache: cachetools.LRUCache[_K, _V], key: _K, make: Callable[[], _V]) -> _V:
    with _lock:
        if key in cache:
            return cache[key]
    value = make()
    with _lock:
        cache[key] = value
    return value


def open_cached(options: SourceOptions) -> Table:
    """The table ``options`` name, opened once per process."""

    def make() -> Table:
        config = Config()
        if options.force_index:
            config = config.replace(planner=PlannerConfig(force_index=True))
        return open_table(
            options.path,
            catalog=options.catalog,
            storage_options=dict(options.storage_options) or None,
            index_root=options.index_root,
            config=config,
        )

    return _cached(_tables, options.table_key, make)


def resolve_version(options: SourceOptions) -> int:
    """The version a read with ``options`` pins: latest, or what its time-travel options name."""
    return pinned_version(open_cached(options), options)


def snapshot_at(options: SourceOptions, version: int) -> Snapshot:
    """The table's state at ``version`` (cached per process)."""
    return _cached(
        _snapshots, (*options.table_key, version), lambda: open_cached(options).source.snapshot(version)
    )


def conjunction(nodes: Sequence[Node], schema: pa.Schema) -> Predicate | None:
    """The AND of bound filter nodes as one predicate (None when there are none)."""
    if not nodes:
        return None
    node = nodes[0] if len(nodes) == 1 else And(tuple(nodes))
    return Predicate(node, schema, text=to_spark_sql(node))


def _rows_part(
    table: Table, version: int, plan: Plan, predicate: Predicate, columns: Sequence[str]
) -> RowsPart | None:
    """The chosen index as the whole answer, when it pins the keys and stores every needed column."""
    chosen = plan.chosen
    if chosen.entry is None or chosen.index is None:
        return None
    spec = chosen.entry.spec
    kind = kind_of(spec)
    if not kind.answers_lookups or not (set(columns) | predicate.columns) <= set(spec.columns):
        return None
    keys = kind.access(spec, predicate).keys
    if keys is None:
        return None
    values = [k[0] for k in keys] if len(spec.key) == 1 else list(keys)
    needed = list(dict.fromkeys([*columns, *sorted(predicate.columns)]))
    rows = table.lookup(chosen.index, values, version_as_of=version, columns=needed)
    rows = rows.filter(predicate.to_pyarrow()).select(list(columns))
    return RowsPart(chosen.index, len(values), rows)


def _file_part(source: TableSource, snap: Snapshot, entry: FileEntry) -> FilePart:
    """``entry`` with its deleted positions and equality-delete rows, read now (for a task)."""
    deleted = source.deleted_positions(entry) if entry.deletes is not None else None
    equality = tuple(
        (eq.path, source.equality_delete_rows(eq, [snap.column(c) for c in eq.columns]))
        for eq in entry.equality_deletes
    )
    return FilePart(entry, deleted, equality)


def plan_source_read(
    options: SourceOptions, version: int, predicate: Predicate | None, columns: Sequence[str]
) -> SourceRead:
    """The partitions of a read of ``columns`` at ``version`` with the pushed ``predicate``."""
    table = open_cached(options)
    snap = snapshot_at(options, version)
    plan = None
    files = None
    if predicate is not None and options.use_indexes:
        plan = table.explain(where=predicate, version_as_of=version)
        rows = _rows_part(table, version, plan, predicate, columns)
        if rows is not None:
            return SourceRead(options.path, version, predicate, (rows,), plan, len(snap.files))
        files = plan.chosen.files
    kept = prune_files(snap.files.values() if files is None else files, predicate)
    parts = tuple(_file_part(table.source, snap, f) for f in kept)
    return SourceRead(options.path, version, predicate, parts, plan, len(snap.files))


@dataclass(frozen=True)
class ReadShape:
    """What every task of one read shares: the data files' storage and the version's columns."""

    io: FileIO
    #: The version's snapshot without its file list (each part carries its own file).
    snapshot: Snapshot


def read_shape(options: SourceOptions, version: int) -> ReadShape:
    """The :class:`ReadShape` of a read of ``version`` (small: it travels with every task)."""
    return ReadShape(open_cached(options).source.io, replace(snapshot_at(options, version), files={}))


@dataclass(frozen=True)
class _CarriedAccess:
    """A part's deletes as :class:`FileAccess` wants them: read when planned, carried to the task."""

    io: FileIO
    part: FilePart

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        return self.part.deleted if self.part.deleted is not None else BitMap64()

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        return dict(self.part.equality_rows)[deletes.path]


def read_part(shape: ReadShape, predicate: Predicate | None, columns: Sequence[str], part: Part) -> pa.Table:
    """The rows of one partition: ``columns`` of the rows matching ``predicate`` (deletes applied).

    Opens no table and reads no log: the part and ``shape`` carry everything."""
    if isinstance(part, RowsPart):
        return part.rows
    access = _CarriedAccess(shape.io, part)
    return scan_files(access, shape.snapshot, [part.entry], columns=columns, where=predicate)


def explain_spark_source(
    path: str, where: str | None = None, columns: Sequence[str] | None = None, **options: str
) -> SourceRead:
    """The plan ``spark.read.format("lakehouse_index")`` follows for ``where`` (no Spark needed).

    ``columns``: those of a user-given schema (``.schema("k string, id long")``), every column
    by default. ``options`` are the reader's (``versionAsOf="3"``, ``useIndexes="false"``...).
    ``where`` is what the read is planned with: the ``where`` option, or, with
    ``pushFilters="true"``, a query's WHERE (this assumes Spark pushes all of it; it pushes the
    conjuncts on single columns), or the two joined by AND. ``print()`` the result: the
    version, the partitions and the planner's table of candidates (the same text the source
    logs when Spark plans the read).
    """
    opts = parse_options({"path": path, **options})
    version = resolve_version(opts)
    snap = snapshot_at(opts, version)
    predicate = Predicate.parse(where, snap.schema) if where else None
    return plan_source_read(opts, version, predicate, list(columns or snap.schema.names))
