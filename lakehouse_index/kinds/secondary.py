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

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.kinds.keys import check_key_type
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec

FILE_ID = "_file_id"
ROW = "_row"
VERSION = "_version"
OP = "_op"
PUT = 0
DEL = 1
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


def row_entries(
    rows: pa.Table, spec: IndexSpec, snapshot: Snapshot, file_id: int, ordinal: int, op: int
) -> pa.Table:
    """Index entries of individual rows of one file: ``rows`` holds the spec's columns and ``_row``."""
    n = rows.num_rows
    return pa.table(
        [
            *(rows[c] for c in spec.columns),
            pa.array(np.full(n, file_id), pa.int64()),
            rows[ROW],
            pa.array(np.full(n, ordinal), pa.int64()),
            pa.array(np.full(n, op), pa.int8()),
        ],
        schema=index_schema(spec, snapshot),
    )


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
    ordered = entries.take(order)
    fid = ordered[FILE_ID].to_numpy()
    row = ordered[ROW].to_numpy()
    first = np.ones(len(fid), dtype=bool)
    first[1:] = (fid[1:] != fid[:-1]) | (row[1:] != row[:-1])
    winners = ordered.filter(pa.array(first))
    return winners.filter(pc.equal(winners[OP], PUT))


def _unique_addresses(entries: pa.Table) -> bool:
    grouped = entries.group_by([FILE_ID, ROW]).aggregate([])
    return bool(grouped.num_rows == entries.num_rows)


def sort_columns(spec: IndexSpec) -> Sequence[str]:
    """Order of index rows within a file: key, then address, then version."""
    return (*spec.key, FILE_ID, ROW, VERSION)
