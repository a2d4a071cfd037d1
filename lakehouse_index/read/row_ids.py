"""Stable row ids of the rows of one data file, as the table formats define them.

The value of the file's materialized row-id column (Iceberg v3 ``_row_id``, found by its
reserved field id; Delta's physical column named by
``delta.rowTracking.materializedRowIdColumnName``, found by name) where it is not null,
else ``first_row_id + position``; null when the file has no ``first_row_id``
(:func:`row_ids`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import QueryError
from lakehouse_index.read.columns import cast_column
from lakehouse_index.read.datafiles import read_rows
from lakehouse_index.read.footers import FileAccess, FileLayout, file_layout, open_file
from lakehouse_index.source import FileEntry, Snapshot

__all__ = ["ICEBERG_ROW_ID_FIELD_ID", "row_id_column", "row_ids"]


#: Field id Iceberg reserves for the materialized ``_row_id`` column of v3 data files
#: (spec, "Row Lineage"); no user column can carry it.
ICEBERG_ROW_ID_FIELD_ID = 2147483540


def row_id_column(snapshot: Snapshot, layout: FileLayout) -> str | None:
    """The top-level Parquet column of one file holding materialized row ids, if any.

    Iceberg v3 writes it with the reserved field id :data:`ICEBERG_ROW_ID_FIELD_ID`; Delta
    row tracking stores it under the physical name :attr:`Snapshot.row_id_column` (never
    the stored name of a logical column). None when the snapshot has no row ids or the
    file has no such column (its row ids are all ``first_row_id + position``).
    """
    name = snapshot.row_id_column
    if name is None:
        return None
    by_id = layout.by_field_id.get(ICEBERG_ROW_ID_FIELD_ID)
    if by_id is not None:
        return by_id
    if name not in layout.names:
        return None
    if any(c.in_data_files and c.stored_name == name for c in snapshot.columns):
        return None  # a table column of that name, not a row-id column
    return name


def row_ids(
    source: FileAccess, snapshot: Snapshot, entry: FileEntry, positions: Sequence[int] | np.ndarray
) -> pa.Array:
    """Stable row ids (int64) of the rows at ``positions`` of one data file, in the given order.

    As the formats define them (Delta protocol "Row Tracking", Iceberg v3 "Row Lineage"):
    the file's materialized row-id column (:func:`row_id_column`) at that position when it
    is not null, else ``entry.first_row_id + position``; null when neither exists (and
    for every row when the snapshot has no row ids). Positions are physical row positions
    (deleted rows count); deletes are not applied. The materialized column is read only
    at the wanted positions, and not at all in row groups whose statistics say it is all
    null; a file without it costs its (cached) footer only.
    """
    pos = np.asarray(positions, dtype=np.int64)
    n = len(pos)
    if snapshot.row_id_column is None:
        return pa.nulls(n, pa.int64())
    base = entry.first_row_id
    inherited = pa.array(pos + base, pa.int64()) if base is not None else pa.nulls(n, pa.int64())
    if n == 0:
        return inherited
    layout = file_layout(source, entry)
    stored = row_id_column(snapshot, layout)
    if stored is None:
        return inherited
    uniq, inverse = np.unique(pos, return_inverse=True)
    if uniq[0] < 0 or uniq[-1] >= layout.num_rows:
        bad = int(uniq[0]) if uniq[0] < 0 else int(uniq[-1])
        raise QueryError(f"row position {bad} is outside {entry.path}, which has {layout.num_rows} rows")
    starts = layout.row_group_starts
    groups = np.searchsorted(starts, uniq, side="right") - 1
    wanted = ~np.isin(groups, _all_null_groups(layout, stored, np.unique(groups)))
    values = pa.nulls(len(uniq), pa.int64())
    if wanted.any():
        opened = open_file(source, entry)
        try:
            _, data = read_rows(opened, entry, [stored], uniq[wanted], None)
        finally:
            opened.close()
        read = cast_column(data.column(stored), pa.int64(), entry.path, stored)
        read = read.combine_chunks() if isinstance(read, pa.ChunkedArray) else read
        if bool(wanted.all()):
            values = read
        else:
            at = np.full(len(uniq), -1, dtype=np.int64)
            at[np.nonzero(wanted)[0]] = np.arange(len(read), dtype=np.int64)
            values = read.take(pa.array(at, mask=at < 0))
    return pc.coalesce(values.take(pa.array(inverse, pa.int64())), inherited)


def _all_null_groups(layout: FileLayout, stored: str, groups: np.ndarray) -> np.ndarray:
    """The row groups among ``groups`` whose footer statistics say ``stored`` is null in every row."""
    md = layout.metadata
    index = next((i for i in range(md.num_columns) if md.schema.column(i).path == stored), None)
    if index is None:
        return np.zeros(0, dtype=np.int64)
    out = []
    for g in groups.tolist():
        rg = md.row_group(g)
        stats = rg.column(index).statistics
        if stats is not None and stats.has_null_count and stats.null_count == rg.num_rows:
            out.append(g)
    return np.array(out, dtype=np.int64)
