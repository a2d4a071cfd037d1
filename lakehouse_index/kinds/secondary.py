"""The secondary index kind (Hudi RFC-77 semantics, keyed by row address).

An index row is ``(key…, record_key…, _file_id, _row, _version, _op)``:

* ``key…`` the secondary key columns, ``record_key…`` the declared record key (payload);
* ``(_file_id, _row)`` the row address: file id from the log's file-id map and the row
  position in that file. Entries are merged per (key, row address), so two live rows
  with the same declared record key never collapse into one entry (Delta and Iceberg
  do not enforce key uniqueness);
* ``_version`` the table ordinal of the change, ``_op`` PUT (0) or DEL (1, tombstone).

Files are an LSM: base files (sorted by key, PUTs only) plus delta files (one per
incremental refresh, tombstones allowed). A reader at ordinal v keeps entries with
``_version <= v`` and, per row address, the one with the highest ``(_version, _op)``:
DEL wins over PUT within a version. Files that left the table are filtered by lineage
(``SourceFile.removed_ordinal``) instead of writing a tombstone per row.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.io import join_uri
from lakehouse_index.kinds.base import DEL as DEL
from lakehouse_index.kinds.base import PUT as PUT
from lakehouse_index.kinds.base import Access, BuildContext, IndexKind, IndexWork, WriteTimeEntries
from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.kinds.keys import check_key_type
from lakehouse_index.kinds.layout import Layout
from lakehouse_index.log.entry import Content, IndexFile, Level, LogEntry, SourceState
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec, SecondaryIndex

if TYPE_CHECKING:
    from lakehouse_index.expressions import Predicate

FILE_ID = "_file_id"
ROW = "_row"
VERSION = "_version"
OP = "_op"
META_COLUMNS = (FILE_ID, ROW, VERSION, OP)
META_TYPES = {FILE_ID: pa.int64(), ROW: pa.int64(), VERSION: pa.int64(), OP: pa.int8()}


def validate_spec(spec: IndexSpec, snapshot: Snapshot) -> None:
    """The spec's columns exist in the table, keys are scalar, names do not clash with ours."""
    require_columns(spec.name, spec.columns, snapshot, META_COLUMNS)
    for col in spec.key:
        check_key_type(col, snapshot.column(col).type)


def index_schema(spec: IndexSpec, snapshot: Snapshot) -> pa.Schema:
    """Arrow schema of the index rows."""
    fields = [pa.field(c, snapshot.column(c).type) for c in spec.columns]
    fields += [pa.field(name, typ, nullable=False) for name, typ in META_TYPES.items()]
    return pa.schema(fields)


def entry_table(rows: pa.Table, columns: Sequence[str], file_id: int, ordinal: int, op: int) -> pa.Table:
    """Entries of rows of one file: ``rows`` holds ``columns`` and ``_row``."""
    n = rows.num_rows
    return pa.table(
        [
            *(rows[c] for c in columns),
            pa.array(np.full(n, file_id), pa.int64()),
            rows[ROW],
            pa.array(np.full(n, ordinal), pa.int64()),
            pa.array(np.full(n, op), pa.int8()),
        ],
        names=[*columns, *META_COLUMNS],
    )


def put_entries(columns: Sequence[str], rows: pa.Table, file_id: int, ordinal: int) -> pa.Table:
    """PUT entries of rows of one file (``rows`` holds ``columns`` and ``_row``)."""
    return entry_table(rows, columns, file_id, ordinal, PUT)


def row_entries(
    rows: pa.Table, spec: IndexSpec, snapshot: Snapshot, file_id: int, ordinal: int, op: int
) -> pa.Table:
    """Index entries of individual rows of one file: ``rows`` holds the spec's columns and ``_row``."""
    return entry_table(rows, spec.columns, file_id, ordinal, op).cast(index_schema(spec, snapshot))


#: Largest ``string``/``binary`` column (bytes) gathered by one ``take``: 32-bit offsets.
MAX_ARRAY_BYTES = 2**31 - 1
#: Rows gathered per ``take`` once a column is too large for that (see :func:`take_rows`).
TAKE_SLICE_ROWS = 1 << 20


def take_rows(
    table: pa.Table,
    indices: pa.Array,
    *,
    max_array_bytes: int = MAX_ARRAY_BYTES,
    slice_rows: int = TAKE_SLICE_ROWS,
) -> pa.Table:
    """``table.take(indices)``, also when a ``string``/``binary`` column holds more than 2 GiB.

    ``take`` gathers a column's chunks into one array first, and such a column cannot be one
    array (offset overflow: an in-process index of 100M e-mail addresses). Its columns are
    then gathered as ``large_string``/``large_binary`` (64-bit offsets), one slice of
    ``indices`` at a time, each slice cast back to the table's types.
    """
    wide = {
        i: pa.large_string() if pa.types.is_string(f.type) else pa.large_binary()
        for i, f in enumerate(table.schema)
        if (pa.types.is_string(f.type) or pa.types.is_binary(f.type))
        and table.column(i).nbytes > max_array_bytes
    }
    if not wide:
        return table.take(indices)
    widened = pa.table(
        [table.column(i).cast(wide[i]) if i in wide else table.column(i) for i in range(table.num_columns)],
        names=table.column_names,
    ).combine_chunks()
    return pa.concat_tables(
        [
            widened.take(indices.slice(start, slice_rows)).cast(table.schema)
            for start in range(0, len(indices), slice_rows)
        ]
        or [table.schema.empty_table()]
    )


#: Kept runs per row above which :func:`filter_rows` copies instead of slicing: slices of
#: fewer rows than this on average would make too many chunks.
FILTER_SLICE_ROWS = 10_000


def filter_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """``table.filter(keep)`` for a boolean numpy mask. When the kept rows form few runs (an
    optimize dropping a few erased rows' entries) they are cut out as zero-copy slices
    instead of copying every column."""
    if keep.all():
        return table
    edges = np.flatnonzero(np.diff(np.concatenate(([0], keep.astype(np.int8), [0]))))
    starts, ends = edges[::2], edges[1::2]
    if not len(starts):
        return table.schema.empty_table()
    if len(starts) > 1 + len(keep) // FILTER_SLICE_ROWS:
        return table.filter(pa.array(keep))
    return pa.concat_tables([table.slice(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)])


def merge(entries: pa.Table, cap: int | None) -> pa.Table:
    """LSM merge: the live PUT entries as of ordinal ``cap`` (None: no cap).

    Per row address the entry with the highest ``(_version, _op)`` among those with
    ``_version <= cap`` wins; the result holds the winners that are PUTs.
    """
    if cap is not None:
        entries = entries.filter(pc.less_equal(entries[VERSION], cap))
    if entries.num_rows == 0:
        return entries
    if pc.all(pc.equal(entries[OP], PUT)).as_py() and _unique_addresses(entries):
        return entries
    order = pc.sort_indices(
        entries,
        sort_keys=[(FILE_ID, "ascending"), (ROW, "ascending"), (VERSION, "descending"), (OP, "descending")],
    )
    fid = entries[FILE_ID].take(order).to_numpy()
    row = entries[ROW].take(order).to_numpy()
    first = np.ones(len(fid), dtype=bool)
    first[1:] = (fid[1:] != fid[:-1]) | (row[1:] != row[:-1])
    winners = order.filter(pa.array(first))
    puts = pc.equal(entries[OP].take(winners), PUT)
    return take_rows(entries, winners.filter(puts))


def _unique_addresses(entries: pa.Table) -> bool:
    """Whether no two entries share a row address (file id, row)."""
    fid = entries[FILE_ID].to_numpy()
    row = entries[ROW].to_numpy()
    if len(fid) < 2:
        return True
    # Number the addresses densely (file by file, up to each file's highest row) and count
    # them: a bincount instead of a sort, when the numbering is not much sparser than the entries.
    top = np.zeros(int(fid.max()) + 1, dtype=np.int64)
    np.maximum.at(top, fid, row)
    start = np.concatenate(([0], np.cumsum(top + 1)[:-1]))
    if int(start[-1] + top[-1]) < 4 * len(fid) + (1 << 20):
        return int(np.bincount(start[fid] + row).max()) <= 1
    order = np.lexsort((row, fid))
    fid, row = fid[order], row[order]
    return not bool(np.any((fid[1:] == fid[:-1]) & (row[1:] == row[:-1])))


def sort_columns(spec: IndexSpec) -> Sequence[str]:
    """Order of index rows within a file: key, then address, then version."""
    return (*spec.key, FILE_ID, ROW, VERSION)


class SecondaryKind(IndexKind):
    """The secondary index plug-in: entries computed on an executor, an LSM of base and delta files."""

    name = "secondary"
    spec_type: ClassVar[type[IndexSpec]] = SecondaryIndex
    answers_lookups = True
    row_level = True

    def validate(self, spec: IndexSpec, snapshot: Snapshot) -> None:
        validate_spec(spec, snapshot)

    def layout(self, spec: IndexSpec) -> Layout:
        """Files hold key ranges that do not overlap, sorted by key then row address."""
        return Layout(key=spec.key, sort=tuple(sort_columns(spec)))

    def index_files(self, ctx: BuildContext, work: IndexWork) -> tuple[IndexFile, ...]:
        spec, snapshot = work.spec, work.snapshot
        layout, schema = self.layout(spec), index_schema(spec, snapshot)
        n = ctx.config.estimate_rows(j.entry for j in work.jobs)
        out: tuple[IndexFile, ...] = ()
        parts = [] if work.rows is None or work.rows.num_rows == 0 else [work.rows.cast(schema)]
        if work.jobs:
            ex = ctx.executor_for(n)
            entries = ex.entries(ctx.source, snapshot, spec.columns, work.jobs)
            if ex.in_memory:  # written in one go with the row entries
                parts.append(entries.cast(schema))
            else:
                out += ex.write(entries, ctx.target(layout, schema, work.level, "files"), n)
        if parts:
            out += ctx.local.write(pa.concat_tables(parts), ctx.target(layout, schema, work.level, "rows"))
        return out

    def row_entries(
        self, rows: pa.Table, spec: IndexSpec, snapshot: Snapshot, file_id: int, ordinal: int, op: int
    ) -> pa.Table:
        return row_entries(rows, spec, snapshot, file_id, ordinal, op)

    def write_time_entries(self, spec: IndexSpec, snapshot: Snapshot) -> WriteTimeEntries:
        """Entries of a written file are its rows' key (and payload) columns at their positions."""
        return WriteTimeEntries(
            columns=tuple(spec.columns),
            layout=self.layout(spec),
            schema=index_schema(spec, snapshot),
            entries=functools.partial(put_entries, tuple(spec.columns)),
        )

    def needs_optimize(self, stable: LogEntry, mode: str) -> bool:
        deltas = [f for f in stable.content.files if f.level is Level.DELTA]
        if mode == "quick":
            return len(deltas) > 1
        return bool(deltas) or any(f.removed_ordinal is not None for f in stable.source.files)

    def optimize(self, ctx: BuildContext, stable: LogEntry, mode: str) -> tuple[SourceState, Content]:
        """``quick`` merges the delta files into one (versions and tombstones kept: the exact window
        is unchanged); ``full`` writes a new base of the live entries (moved rows at their new
        address, newest entry per row address, no tombstones, no removed files)."""
        from lakehouse_index.kinds.moves import MoveMap

        src = stable.source
        layout, schema = self.layout(stable.spec), self._stored_schema(ctx, stable)
        if mode == "quick":
            deltas = [f for f in stable.content.files if f.level is Level.DELTA]
            n = sum(f.rows for f in deltas)
            ex = ctx.compactor_for(n)
            merged = ex.write(
                ex.read_index(ctx.storage, ctx.index_dir, deltas), ctx.target(layout, schema, Level.DELTA), n
            )
            bases = tuple(f for f in stable.content.files if f.level is Level.BASE)
            return src, Content(bases + merged, stable.content.base_ordinal)
        state = src.without_removed()
        live_ids = [f.id for f in state.files]
        if not stable.content.files or not live_ids:
            return state, Content((), src.ordinal)
        ex = ctx.compactor_for(stable.content.rows)
        entries = ex.read_index(ctx.storage, ctx.index_dir, stable.content.files)
        live = ex.compact(entries, MoveMap.of(src.files, src.ordinal), live_ids)
        files = ex.write(live, ctx.target(layout, schema, Level.BASE), stable.content.rows)
        return state, Content(files, src.ordinal)

    @staticmethod
    def _stored_schema(ctx: BuildContext, stable: LogEntry) -> pa.Schema:
        """The index schema as the snapshot's newest index file has it (types as indexed)."""
        fs, path = ctx.storage.arrow(join_uri(ctx.index_dir, stable.content.files[-1].path))
        return pq.read_schema(path, filesystem=fs)

    def access(self, spec: IndexSpec, predicate: Predicate) -> Access:
        return Access(keys=predicate.key_values(spec.key), covers=predicate.columns <= set(spec.columns))
