"""The secondary index kind (Hudi RFC-77 semantics, keyed by row address).

An index row is ``(key…, record_key…, _file_id, _row, _version, _op)``: the secondary key
columns, the declared record key as payload, then the row address, version and op of the
entry format shared by the kinds that answer lookups (:mod:`lakehouse_index.kinds.entries`:
an LSM of base and delta files, merged per row address). Files hold key ranges that do not
overlap; row-level deletes become DEL entries.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.io import join_uri
from lakehouse_index.kinds.base import (
    Access,
    BuildContext,
    Executor,
    Frame,
    IndexKind,
    IndexWork,
    WriteTimeEntries,
)
from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.kinds.entries import (
    FILE_ID,
    META_COLUMNS,
    ROW,
    entry_table,
    in_file_ids,
    index_schema,
    put_entries,
    sort_columns,
)
from lakehouse_index.kinds.keys import check_key_type
from lakehouse_index.kinds.layout import Layout
from lakehouse_index.log.entry import Content, IndexFile, Level, LogEntry, SourceState
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec, SecondaryIndex

if TYPE_CHECKING:
    from lakehouse_index.expressions import Predicate


def derived_put_entries(stored: IndexedColumns, rows: pa.Table, file_id: int, ordinal: int) -> pa.Table:
    """PUT entries of rows of one file holding the stored columns' sources and ``_row``."""
    return put_entries(stored.names, stored.derive(rows), file_id, ordinal)


class SecondaryKind(IndexKind):
    """The secondary index plug-in: entries computed on an executor, an LSM of base and delta files."""

    name = "secondary"
    spec_type: ClassVar[type[IndexSpec]] = SecondaryIndex
    answers_lookups = True
    row_level = True

    def validate(self, spec: IndexSpec, snapshot: Snapshot) -> None:
        """The spec's columns exist in the table (an expression's: it binds to the table's
        schema), keys are scalar, names do not clash with ours."""
        stored = indexed_columns(spec, snapshot)
        require_columns(spec.name, stored.sources, snapshot, META_COLUMNS)
        for col in spec.key:
            check_key_type(col, stored.schema.field(col).type)

    def layout(self, spec: IndexSpec) -> Layout:
        """Files hold key ranges that do not overlap, sorted by key then row address."""
        return Layout(key=spec.key, sort=tuple(sort_columns(spec)))

    def entry_schema(self, spec: IndexSpec, snapshot: Snapshot) -> pa.Schema:
        """The schema of the kind's entries (the spec's columns, then the address and stamps)."""
        return index_schema(spec, snapshot)

    def stored(self, ex: Executor, spec: IndexSpec, entries: Frame, schema: pa.Schema, rows: int) -> Frame:
        """The entries ``ex`` computed (about ``rows``) as they are stored: as computed here (a kind
        with columns derived from them adds those)."""
        return entries

    def index_files(self, ctx: BuildContext, work: IndexWork) -> tuple[IndexFile, ...]:
        spec, snapshot = work.spec, work.snapshot
        layout, schema = self.layout(spec), self.entry_schema(spec, snapshot)
        n = ctx.config.estimate_rows(j.entry for j in work.jobs)
        out: tuple[IndexFile, ...] = ()
        parts = [] if work.rows is None or work.rows.num_rows == 0 else [work.rows.cast(schema)]
        if work.jobs:
            ex = ctx.executor_for(n, schema)
            computed = ex.entries(ctx.source, snapshot, indexed_columns(spec, snapshot), work.jobs)
            entries = self.stored(ex, spec, computed, schema, n)
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
        stored = indexed_columns(spec, snapshot).derive(rows)
        return entry_table(stored, spec.columns, file_id, ordinal, op).cast(index_schema(spec, snapshot))

    def write_time_entries(self, spec: IndexSpec, snapshot: Snapshot) -> WriteTimeEntries | None:
        """Entries of a written file are its rows' key (and payload) columns at their positions
        (an indexed expression computed from the rows)."""
        stored = indexed_columns(spec, snapshot)
        return WriteTimeEntries(
            columns=tuple(stored.sources),
            layout=self.layout(spec),
            schema=index_schema(spec, snapshot),
            entries=functools.partial(derived_put_entries, stored),
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
            ex = ctx.compactor_for(n, schema)
            merged = ex.write(
                ex.read_index(ctx.storage, ctx.index_dir, deltas), ctx.target(layout, schema, Level.DELTA), n
            )
            bases = tuple(f for f in stable.content.files if f.level is Level.BASE)
            return src, Content(bases + merged, stable.content.base_ordinal)
        state = src.without_removed()
        live_ids = [f.id for f in state.files]
        if not stable.content.files or not live_ids:
            return state, Content((), src.ordinal)
        ex = ctx.compactor_for(stable.content.rows, schema)
        entries = ex.read_index(ctx.storage, ctx.index_dir, stable.content.files)
        live = ex.compact(entries, MoveMap.of(src.files, src.ordinal), live_ids)
        files = ex.write(live, ctx.target(layout, schema, Level.BASE), stable.content.rows)
        return state, Content(files, src.ordinal)

    def purge(self, ctx: BuildContext, stable: LogEntry) -> tuple[SourceState, Content]:
        """Rewrite only the index files holding an entry of a row that is not live (its address,
        moves followed, is deleted or in a file the source state no longer has), without those
        entries, each file on its own and the files concurrently. The others, the file map and
        its moves stay: live entries are not moved. Every file's address columns are read,
        nothing else of files that hold no such entry, the others' other columns once."""
        from lakehouse_index.kinds.moves import MoveMap

        src = stable.source
        layout, schema = self.layout(stable.spec), self._stored_schema(ctx, stable)
        moves = MoveMap.of(src.files, src.ordinal)
        live = [f.id for f in src.files if f.removed_ordinal is None]

        def keep_of(address: pa.Table) -> np.ndarray | None:
            fids, _, alive = moves.resolve(address[FILE_ID].to_numpy(), address[ROW].to_numpy())
            keep = alive & in_file_ids(fids, live)
            return None if keep.all() else keep

        files = stable.content.files
        targets = {level: ctx.target(layout, schema, level, level.value) for level in Level}
        written = ctx.local.filter_files(
            ctx.storage, ctx.index_dir, files, [FILE_ID, ROW], keep_of, lambda f: targets[f.level]
        )
        out: list[IndexFile] = []
        for level in Level:
            at_level = [(f, w) for f, w in zip(files, written, strict=True) if f.level is level]
            out += [f for f, w in at_level if w is None]
            out += [n for _, w in at_level if w is not None for n in w]
        return src, Content(tuple(out), stable.content.base_ordinal)

    @staticmethod
    def _stored_schema(ctx: BuildContext, stable: LogEntry) -> pa.Schema:
        """The index schema as the snapshot's newest index file has it (types as indexed)."""
        fs, path = ctx.storage.arrow(join_uri(ctx.index_dir, stable.content.files[-1].path))
        return pq.read_schema(path, filesystem=fs)

    def access(self, spec: IndexSpec, predicate: Predicate) -> Access:
        return Access(keys=predicate.key_values(spec.key), covers=predicate.columns <= set(spec.columns))
