"""Writes planned by an index: delete, update, upsert and overwrite touch only the rows an index finds.

A write uses an index when one answers lookups on the key the write pins: an upsert's
``on`` columns (the index keyed exactly on them), or a ``where`` whose access on the index
gives key values (``=`` / ``IN`` on the key, under AND / OR: ``IndexKind.access(...).keys``).
The index locates the matching live rows (file, position) at the transaction's snapshot
(a stale index repairs the difference by hybrid scan, as every lookup does); the whole
``where`` is checked again on exactly those rows, read by position; and the format's writer
commits the removal of exactly those rows and the new rows in one commit
(:meth:`~lakehouse_index.sink.contract.Transaction.commit_row_changes`): nothing else of the
table is read or written. The commit says where each rewritten file's rows came from, so the
indexes place the rewrites without reading them. A ``where`` holding scalar expressions
(``id % 7 = 1``) that no index pins is located the same way by a scan of this library's reader
(:func:`scan_located`): the format libraries would give its functions other meanings. Other
writes go through the format library (:mod:`.writes`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.context import IndexContext
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.matching import matched_rows
from lakehouse_index.io.parallel import each_file
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.derived import indexed_columns, on_index
from lakehouse_index.kinds.keys import ArrowKeys
from lakehouse_index.log.entry import IndexState
from lakehouse_index.query import index_queries
from lakehouse_index.read.datafiles import ROW_COLUMN, read_file
from lakehouse_index.read.scan import scan_files
from lakehouse_index.sink.contract import RowChanges, Transaction, WriteMode, WriteOperation
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.source import Snapshot

#: The columns a located row carries besides the table's: its data file and position.
FILE = "_file"


@dataclass(frozen=True)
class Located:
    """The live rows of a snapshot a write changes, found through index ``index`` (None: by a scan):
    ``rows`` holds the columns asked for, the row's data file (``_file``) and position in it (``_row``)."""

    index: str | None
    rows: pa.Table

    def _groups(self) -> dict[str, np.ndarray]:
        """Indices into :attr:`rows` of each data file's rows, by path (one sort for all files)."""
        if self.rows.num_rows == 0:
            return {}
        encoded = pc.dictionary_encode(self.rows[FILE]).combine_chunks()
        codes = encoded.indices.to_numpy()
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(len(encoded.dictionary) + 1))
        paths = encoded.dictionary.to_pylist()
        return {str(path): order[bounds[i] : bounds[i + 1]] for i, path in enumerate(paths)}

    def positions(self) -> dict[str, np.ndarray]:
        """The rows' positions (ascending), by data file path."""
        rows = self.rows[ROW_COLUMN].to_numpy()
        return {path: np.sort(rows[at]) for path, at in self._groups().items()}

    def by_file(self) -> dict[str, pa.Table]:
        """The rows (their columns and ``_row``) by data file path."""
        rows = self.rows.drop_columns([FILE])
        return {path: rows.take(pa.array(at)) for path, at in self._groups().items()}

    def table_rows(self) -> pa.Table:
        """The rows without ``_file`` and ``_row``."""
        return self.rows.drop_columns([FILE, ROW_COLUMN])


def _lookup_indexes(ctx: IndexContext) -> list[tuple[str, Any]]:
    """(name, spec) of every active index that answers lookups."""
    out = []
    for info in ctx.indexes():
        if info.state is IndexState.ACTIVE and kind_of(info.spec).answers_lookups:
            out.append((info.name, info.spec))
    return out


def index_on(ctx: IndexContext, columns: Sequence[str]) -> str | None:
    """An active index answering lookups keyed exactly on ``columns`` (in order), if any."""
    for name, spec in _lookup_indexes(ctx):
        if tuple(spec.key) == tuple(columns):
            return name
    return None


def index_pinning(ctx: IndexContext, predicate: Predicate) -> tuple[str, list[tuple[Any, ...]]] | None:
    """The active lookup index whose key ``predicate`` pins to the fewest values (an indexed
    expression's values for an expression index), and those values."""
    best: tuple[str, list[tuple[Any, ...]]] | None = None
    for name, spec in _lookup_indexes(ctx):
        keys = kind_of(spec).access(spec, on_index(predicate, spec)).keys
        if keys is not None and (best is None or len(keys) < len(best[1])):
            best = (name, list(keys))
    return best


def locate(
    ctx: IndexContext,
    snap: Snapshot,
    index: str,
    keys: Sequence[Any] | ArrowKeys,
    columns: Sequence[str] | None,
    predicate: Predicate | None = None,
) -> Located:
    """The live rows of ``snap`` whose ``index`` key is one of ``keys`` and where ``predicate``
    holds, with ``columns`` (None: every column) read by position from their data files, or
    taken from the index's entries when they hold every column asked for and every column
    ``predicate`` reads (a delete or update whose ``where`` is on the key alone)."""
    where = index_queries.locate(ctx, index, keys, lambda: snap)
    wanted = list(columns) if columns is not None else list(snap.schema.names)
    read = list(dict.fromkeys([*wanted, *(predicate.columns if predicate is not None else ())]))
    expression = predicate.to_pyarrow() if predicate is not None else None
    schema = pa.schema(
        [*(snap.schema.field(c) for c in wanted), (FILE, pa.string()), (ROW_COLUMN, pa.int64())]
    )
    if set(read) <= _held_columns(ctx, index, where, snap):
        # The entries hold the values of those columns at those rows: nothing to read.
        rows = where.select(read).cast(pa.schema([snap.schema.field(c) for c in read]))
        rows = pa.Table.from_arrays(
            [*rows.columns, where[FILE], where[ROW_COLUMN]], names=[*read, FILE, ROW_COLUMN]
        )
        if expression is not None:
            rows = rows.filter(expression)
        return Located(index, rows.select([*wanted, FILE, ROW_COLUMN]).cast(schema))

    def one(item: tuple[str, np.ndarray]) -> pa.Table:
        path, positions = item
        rows = read_file(ctx.source, snap, snap.files[path], read, positions=positions, with_positions=True)
        if expression is not None:
            rows = rows.filter(expression)
        rows = rows.select([*wanted, ROW_COLUMN])
        rows = rows.add_column(len(wanted), FILE, pa.array([path] * rows.num_rows, pa.string()))
        return rows.cast(schema)

    parts = each_file(one, list(Located(index, where.select([FILE, ROW_COLUMN])).positions().items()))
    return Located(index, pa.concat_tables(parts) if parts else schema.empty_table())


def _held_columns(ctx: IndexContext, index: str, where: pa.Table, snap: Snapshot) -> set[str]:
    """The table columns whose values the located entries ``where`` of ``index`` hold: its key
    and record-key columns that are columns of the table (not indexed expressions)."""
    latest = ctx.log(index).latest()
    assert latest is not None  # the index just located the rows
    spec = latest.spec
    return {
        c
        for c in (*spec.key, *spec.record_key)
        if c not in spec.expressions and c in snap.schema.names and c in where.column_names
    }


def tombstone_columns(ctx: IndexContext, snap: Snapshot) -> list[str]:
    """The table columns every active index with row-level entries reads to write a deleted
    row's tombstone: what a merge-on-read write's located rows carry, so that the indexes
    follow it without reading the rows again (``maintenance.refresh``)."""
    out: dict[str, None] = {}
    for info in ctx.indexes():
        if info.state is IndexState.ACTIVE and kind_of(info.spec).row_level:
            out.update(dict.fromkeys(indexed_columns(info.spec, snap).sources))
    return list(out)


def scan_located(
    ctx: IndexContext, snap: Snapshot, predicate: Predicate, columns: Sequence[str] | None
) -> Located:
    """The live rows of ``snap`` where ``predicate`` holds, with ``columns`` (None: every column),
    found by a scan of every file its partition values do not rule out."""
    wanted = list(columns) if columns is not None else list(snap.schema.names)
    rows = scan_files(ctx.source, snap, snap.files.values(), wanted, predicate, with_lineage=True)
    rows = rows.rename_columns([*wanted, FILE, ROW_COLUMN]).select([*wanted, FILE, ROW_COLUMN])
    return Located(None, rows)


def _find(
    ctx: IndexContext, tx: Transaction, predicate: Predicate, columns: Sequence[str] | None, use_indexes: bool
) -> Located | None:
    """The rows ``predicate`` selects at ``tx``'s snapshot, through the index pinning its key, or by
    a scan when it holds expressions; None when the format library should find them."""
    pinned = index_pinning(ctx, predicate) if use_indexes else None
    if pinned is not None:
        return locate(ctx, tx.snapshot, pinned[0], pinned[1], columns, predicate)
    if predicate.has_expressions:
        return scan_located(ctx, tx.snapshot, predicate, columns)
    return None


@dataclass(frozen=True)
class PlannedWrite:
    """A write whose rows an index found: what to commit, and what to report."""

    located: Located
    changes: RowChanges
    rows_updated: int | None = None
    rows_written: int | None = None


def _changes(
    tx: Transaction,
    operation: WriteOperation,
    located: Located,
    added: pa.Table | None,
    mode: WriteMode | None,
    reads: ReadSet,
) -> RowChanges:
    return RowChanges(operation, located.positions(), added, mode or tx.write_mode(operation), reads)


def plan_delete(
    ctx: IndexContext, tx: Transaction, predicate: Predicate, mode: WriteMode | None, use_indexes: bool = True
) -> PlannedWrite | None:
    """The rows of ``tx``'s snapshot a delete removes, when an index pins ``predicate``'s key
    (``use_indexes``) or the predicate holds expressions."""
    mode = mode or tx.write_mode(WriteOperation.DELETE)
    # Marked rows become the indexes' tombstones: they carry what those are made of.
    carried = tombstone_columns(ctx, tx.snapshot) if mode is WriteMode.MERGE_ON_READ else []
    located = _find(ctx, tx, predicate, carried, use_indexes)
    if located is None:
        return None
    return PlannedWrite(
        located, _changes(tx, WriteOperation.DELETE, located, None, mode, ReadSet.where(predicate))
    )


def plan_update(
    ctx: IndexContext,
    tx: Transaction,
    predicate: Predicate,
    values: Mapping[str, Any],
    mode: WriteMode | None,
    use_indexes: bool = True,
) -> PlannedWrite | None:
    """The rows an update replaces (located through an index, or a scan) and their new versions."""
    located = _find(ctx, tx, predicate, None, use_indexes)
    if located is None:
        return None
    rows = located.table_rows()
    schema = tx.snapshot.schema
    for name, value in values.items():
        field = schema.field(name)
        rows = rows.set_column(
            rows.schema.get_field_index(name), field, pa.array([value] * rows.num_rows, field.type)
        )
    changes = _changes(tx, WriteOperation.UPDATE, located, rows, mode, ReadSet.where(predicate))
    return PlannedWrite(located, changes, rows_updated=rows.num_rows, rows_written=0)


def plan_upsert(
    ctx: IndexContext, tx: Transaction, data: pa.Table, on: Sequence[str], mode: WriteMode | None
) -> PlannedWrite | None:
    """The rows an upsert replaces (located through an index keyed on ``on``), and the rows it writes:
    for each matched target row the data row with its key (a key held by several target rows
    replaces each, as a SQL MERGE does), then the data rows matching none."""
    index = index_on(ctx, on)
    if index is None:
        return None
    # The data's key columns as Arrow keys: typed and matched without a Python step per row.
    located = locate(ctx, tx.snapshot, index, data.select(list(on)), list(on))
    matched = matched_rows(data, located.rows, on)
    unmatched = np.ones(data.num_rows, dtype=bool)
    unmatched[matched] = False
    inserted = np.flatnonzero(unmatched)
    added = data.take(pa.array(np.concatenate([matched, inserted]), pa.int64()))
    changes = _changes(tx, WriteOperation.UPSERT, located, added, mode, ReadSet.matching(data, tuple(on)))
    return PlannedWrite(located, changes, rows_updated=len(matched), rows_written=len(inserted))


def plan_overwrite(
    ctx: IndexContext,
    tx: Transaction,
    data: pa.Table,
    predicate: Predicate,
    mode: WriteMode | None,
    use_indexes: bool = True,
) -> PlannedWrite | None:
    """The rows an overwrite(where) replaces (located through an index, or a scan) and ``data``."""
    located = _find(ctx, tx, predicate, [], use_indexes)
    if located is None:
        return None
    changes = _changes(tx, WriteOperation.OVERWRITE, located, data, mode, ReadSet.where(predicate))
    return PlannedWrite(located, changes, rows_written=data.num_rows)
