"""The row-address entry format shared by the kinds that answer lookups, and its merge rule.

Every kind that answers lookups (``IndexKind.answers_lookups``: secondary, covering) stores
index rows ``(columns…, _file_id, _row, _version, _op)``; the lookup engine (``query.lookup``,
``query.index_reader``), both executors and the lineage remap read and write them:

* ``columns…`` the spec's columns (``IndexSpec.columns``: the key, then the payload);
* ``(_file_id, _row)`` the row address: the file's id in the log's file-id map and the row's
  position in that file. Entries are merged per row address, so two live rows with the same
  key or declared record key never collapse into one entry (Delta and Iceberg do not
  enforce key uniqueness);
* ``_version`` the table ordinal of the change that wrote the entry;
* ``_op`` :data:`PUT` (the row is indexed) or :data:`DEL` (a tombstone: the row was deleted).

Files are an LSM: base files (PUTs only) plus delta files (one per incremental refresh,
tombstones allowed); inside a file, entries are sorted by key, then row address, then
version (:func:`sort_columns`). A reader at ordinal v keeps the entries with
``_version <= v`` and, per row address, the one with the highest ``(_version, _op)``: a DEL
wins over a PUT of the same version. The winners that are PUTs are the live rows
(:func:`merge`). Files that left the table are filtered by lineage
(``SourceFile.removed_ordinal``) instead of a tombstone per row, and entries of rewritten
files are read at their rows' new addresses (:mod:`lakehouse_index.kinds.moves`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec

#: ``_op`` of an entry: the row is indexed (PUT) or deleted (DEL, a tombstone).
PUT = 0
DEL = 1

FILE_ID = "_file_id"
ROW = "_row"
VERSION = "_version"
OP = "_op"
#: The columns every entry has after the spec's, and their types.
META_COLUMNS = (FILE_ID, ROW, VERSION, OP)
META_TYPES = {FILE_ID: pa.int64(), ROW: pa.int64(), VERSION: pa.int64(), OP: pa.int8()}


def index_schema(spec: IndexSpec, snapshot: Snapshot) -> pa.Schema:
    """Arrow schema of the index rows (an indexed expression's column of its value's type)."""
    fields = list(indexed_columns(spec, snapshot).schema)
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


def in_file_ids(file_ids: np.ndarray, ids: np.ndarray | Sequence[int]) -> np.ndarray:
    """``np.isin(file_ids, ids)`` for file ids (small non-negative integers): one gather from a
    dense table of the ids instead of a pass over ``file_ids`` per id or a sort of both."""
    wanted = np.asarray(ids, dtype=np.int64)
    if not len(wanted) or not len(file_ids):
        return np.zeros(len(file_ids), dtype=bool)
    low, high = int(min(wanted.min(), file_ids.min())), int(max(wanted.max(), file_ids.max()))
    if low < 0 or high >= 1 << 26:  # not file ids: no dense table
        return np.isin(file_ids, wanted)
    table = np.zeros(high + 1, dtype=bool)
    table[wanted] = True
    return table[file_ids]


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
