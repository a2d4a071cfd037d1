"""The multi-column index plug-in: the secondary index's entries plus ``_weight`` and ``_cell``.

Entries are ``(indexed…, included…, record_key…, _weight, _cell, _file_id, _row, _version,
_op)``: the row-address entry format (:mod:`lakehouse_index.kinds.entries`) with two more
columns before the address, so the build, LSM merge, lineage remap, row-level deletes (DEL
entries), optimize and purge of :class:`~lakehouse_index.kinds.secondary.SecondaryKind`
apply unchanged, on either executor. Files are sorted by ``_cell`` (weight tier, then a
Z-order curve of the indexed columns: :mod:`.curve`) and cut into row groups of at most the
spec's ``block_rows`` rows where the cell's high bits change (whole boxes of the curve),
whose Parquet statistics of every indexed column and of ``_weight`` are what queries prune
by (``query.index_scan``).

Weights and cells are numpy code (:func:`with_cells`) run on the entries batch by batch
(:meth:`~lakehouse_index.kinds.base.Executor.map_batches`: in process, or in Spark's
tasks), so both executors store the same weights. The curve's ranks are taken against a
uniform sample of the indexed columns of the rows written (every row up to
:data:`REFERENCE_ROWS`), collected once, so every batch of a Spark job places rows on one
curve.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.kinds.base import Access, Executor, Frame, WriteTimeEntries
from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.kinds.entries import FILE_ID, META_COLUMNS, ROW, VERSION, entry_table, index_schema
from lakehouse_index.kinds.layout import Layout
from lakehouse_index.kinds.multicolumn.curve import CELL, cells
from lakehouse_index.kinds.multicolumn.spec import MultiColumnIndex
from lakehouse_index.kinds.multicolumn.weights import WEIGHT, weights
from lakehouse_index.kinds.secondary import SecondaryKind, derived_put_entries
from lakehouse_index.kinds.skipping.hashing import encoding
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec

if TYPE_CHECKING:
    from lakehouse_index.expressions import Predicate

#: The columns the kind adds to the entry format, before the row address.
EXTRA_COLUMNS = (WEIGHT, CELL)


def multicolumn_schema(spec: IndexSpec, snapshot: Snapshot) -> pa.Schema:
    """The entry schema: the spec's columns, ``_weight``, ``_cell``, then the address and stamps."""
    base = index_schema(spec, snapshot)
    at = len(spec.columns)
    base = base.insert(at, pa.field(WEIGHT, pa.float64(), nullable=False))
    return base.insert(at + 1, pa.field(CELL, pa.int64(), nullable=False))


#: Rows of the indexed columns the curve's ranks are taken against (a uniform sample of the
#: rows written when they are more): about 0.1% of an indexed column per rank step at most.
REFERENCE_ROWS = 1 << 17


def with_cells(
    spec: MultiColumnIndex, entries: pa.Table, schema: pa.Schema, reference: pa.Table | None = None
) -> pa.Table:
    """``entries`` (the spec's columns and the address) with each row's weight and cell, in
    ``schema``; the curve's ranks are against ``reference`` (rows of the indexed columns;
    default: ``entries`` themselves). Values are cast to ``schema`` first, so the weights do
    not depend on the types an executor read them as."""
    base = pa.schema([f for f in schema if f.name not in EXTRA_COLUMNS])
    entries = entries.select(base.names).cast(base)
    w = weights(entries, spec.columns)
    at = len(spec.columns)
    out = entries.add_column(at, WEIGHT, pa.array(w, pa.float64()))
    out = out.add_column(at + 1, CELL, cells(entries, spec.indexed, spec.columns, w, reference))
    return out.select(schema.names).cast(schema)


def _written_entries(
    spec: MultiColumnIndex,
    stored: IndexedColumns,
    schema: pa.Schema,
    rows: pa.Table,
    file_id: int,
    ordinal: int,
) -> pa.Table:
    """The entries of one written file's ``rows`` (the stored columns' sources and ``_row``)."""
    return with_cells(spec, derived_put_entries(stored, rows, file_id, ordinal), schema)


class MultiColumnKind(SecondaryKind):
    """Ranges on any subset of the indexed columns, and samples by weight."""

    name = "multicolumn"
    spec_type = MultiColumnIndex
    samples = True

    def validate(self, spec: IndexSpec, snapshot: Snapshot) -> None:
        """The columns exist, hold values the weight can hash, and names do not clash with ours."""
        require_columns(spec.name, spec.columns, snapshot, (*META_COLUMNS, *EXTRA_COLUMNS))
        for col in spec.columns:
            t = snapshot.column(col).type
            if encoding(t) is None:
                raise InvalidIndexSpecError(
                    f"index {spec.name!r}: column {col!r} has type {t}, which a multi-column index "
                    "cannot hold (use numbers, decimals, strings, binaries, booleans, dates or timestamps)"
                )

    def layout(self, spec: IndexSpec) -> Layout:
        """Sorted by cell (weight tier, then Z-order), then row address, files holding cell ranges;
        bounds of the indexed columns."""
        assert isinstance(spec, MultiColumnIndex)
        return Layout(
            key=spec.key,
            sort=(CELL, FILE_ID, ROW, VERSION),
            group_rows=spec.block_rows,
            ranges=(CELL,),
            aligned=CELL,
        )

    def entry_schema(self, spec: IndexSpec, snapshot: Snapshot) -> pa.Schema:
        return multicolumn_schema(spec, snapshot)

    def stored(self, ex: Executor, spec: IndexSpec, entries: Frame, schema: pa.Schema, rows: int) -> Frame:
        """With weights and cells, ranked against a sample of the rows' indexed columns."""
        assert isinstance(spec, MultiColumnIndex)
        reference = ex.sample(entries, spec.indexed, min(1.0, REFERENCE_ROWS / max(rows, 1)))
        laid_out = functools.partial(with_cells, spec, schema=schema, reference=reference)
        return ex.map_batches(entries, laid_out, schema)

    def row_entries(
        self, rows: pa.Table, spec: IndexSpec, snapshot: Snapshot, file_id: int, ordinal: int, op: int
    ) -> pa.Table:
        assert isinstance(spec, MultiColumnIndex)
        entries = entry_table(rows, spec.columns, file_id, ordinal, op)
        return with_cells(spec, entries, multicolumn_schema(spec, snapshot))

    def write_time_entries(self, spec: IndexSpec, snapshot: Snapshot) -> WriteTimeEntries | None:
        """The secondary index's entries of a written file with their weights and cells, the
        curve ranked against the file's own rows (the bounds queries prune by are exact either way)."""
        assert isinstance(spec, MultiColumnIndex)
        stored = indexed_columns(spec, snapshot)
        schema = multicolumn_schema(spec, snapshot)
        return WriteTimeEntries(
            columns=tuple(stored.sources),
            layout=self.layout(spec),
            schema=schema,
            entries=functools.partial(_written_entries, spec, stored, schema),
        )

    def access(self, spec: IndexSpec, predicate: Predicate) -> Access:
        """Keys pinned on every indexed column are lookups; any predicate on the index's columns
        scans the row groups its bounds keep."""
        return Access(keys=predicate.key_values(spec.key), scans=predicate.columns <= set(spec.columns))

    def sample_identity(self, spec: IndexSpec) -> tuple[str, ...]:
        """Every column the index stores (see :mod:`.weights`)."""
        return spec.columns
