"""Reading one data file of a snapshot with pyarrow, in the snapshot's logical schema.

Connectors describe data files (:class:`~lakehouse_index.source.FileEntry`); the core
reads them here (:func:`read_file`), for plain scans, the lookup fast path and index builds.
Each logical column is resolved in the file by :mod:`lakehouse_index.read.columns` (field
id, then stored name; absent → nulls; partition columns are constants) and its values
converted to the snapshot's type. Row-level deletes are applied unless
``apply_deletes=False`` (:mod:`lakehouse_index.read.deletes`).

The file is opened through the footer cache (:mod:`lakehouse_index.read.footers`). Point
reads decode only the row groups holding the rows, and in large row groups of files whose
pages can be located only the pages holding them (:mod:`lakehouse_index.read.page_reads`).
Read tuning: :class:`~lakehouse_index.config.ReadConfig`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.config import ReadConfig
from lakehouse_index.errors import QueryError, TableFormatError
from lakehouse_index.read.columns import constant_column, convert_column, resolve_columns
from lakehouse_index.read.deletes import deleted_positions_array, equality_delete_mask
from lakehouse_index.read.footers import DICTIONARIES, PAGE_INDEXES, FileAccess, OpenFile, open_file
from lakehouse_index.read.page_decode import plain_type
from lakehouse_index.read.page_index import (
    NO_PAGE_INDEX,
    UNINDEXED,
    PageIndexError,
    load_page_index,
    walk_page_headers,
)
from lakehouse_index.read.page_reads import read_group_rows
from lakehouse_index.source import FileEntry, Snapshot

__all__ = ["ROW_COLUMN", "read_file", "read_rows", "without_views"]


#: Name of the row-position column added by ``with_positions=True``.
ROW_COLUMN = "_row"

_DEFAULT_READ = ReadConfig()


def read_file(
    source: FileAccess,
    snapshot: Snapshot,
    entry: FileEntry,
    columns: Sequence[str] | None = None,
    *,
    positions: Sequence[int] | np.ndarray | None = None,
    with_positions: bool = False,
    apply_deletes: bool = True,
    config: ReadConfig | None = None,
) -> pa.Table:
    """Rows of one data file in the snapshot's logical schema.

    ``columns`` are logical names (default: every column, in schema order).
    ``positions`` restricts the read to those row positions (sorted, duplicates
    dropped; out of range → QueryError); only the row groups holding them are decoded.
    ``with_positions`` appends ``_row`` (int64 position in the file). With
    ``apply_deletes`` (default) rows deleted by the entry's deletion vector / position
    deletes / equality deletes are left out. ``config`` tunes point reads (default
    ``ReadConfig()``).
    """
    wanted = _check_columns(snapshot, columns)
    eq_cols: list[str] = []
    if apply_deletes and entry.equality_deletes:
        for eq in entry.equality_deletes:
            for c in eq.columns:
                if c not in snapshot.schema.names:
                    raise TableFormatError(f"equality delete {eq.path} names unknown column {c!r}")
                if c not in wanted and c not in eq_cols:
                    eq_cols.append(c)
    read_cols = wanted + eq_cols

    opened = open_file(source, entry, config)
    try:
        resolved = resolve_columns(snapshot, entry, opened.layout, read_cols)
        stored = list(dict.fromkeys(r.stored for r in resolved if r.stored is not None))
        rows, data = read_rows(opened, entry, stored, positions, source if apply_deletes else None, config)
    except (pa.ArrowException, OSError) as e:  # pages that do not decode (a corrupt file)
        raise TableFormatError(f"data file {entry.path} does not decode: {e}") from e
    finally:
        opened.close()

    n = len(rows)
    out: dict[str, pa.ChunkedArray | pa.Array] = {}
    for r in resolved:
        name = r.column.name
        if r.is_constant:
            out[name] = constant_column(r.constant, r.column.type, n, entry.path, name)
        elif r.stored is None:
            out[name] = pa.nulls(n, r.column.type)
        else:
            assert r.conversion is not None
            out[name] = convert_column(data.column(r.stored), r.conversion, entry.path, name)
    table = pa.table(out, schema=pa.schema([snapshot.schema.field(c) for c in read_cols]))
    if with_positions:
        table = table.append_column(ROW_COLUMN, pa.array(rows, type=pa.int64()))
    if apply_deletes and entry.equality_deletes:
        mask = equality_delete_mask(source, snapshot, entry, table)
        if mask is not None and mask.any():
            table = table.filter(pa.array(~mask))
    if eq_cols:
        table = table.drop_columns(eq_cols)
    return table


def read_rows(
    opened: OpenFile,
    entry: FileEntry,
    stored: list[str],
    positions: Sequence[int] | np.ndarray | None,
    deletes_from: FileAccess | None,
    config: ReadConfig | None = None,
) -> tuple[np.ndarray, pa.Table]:
    """(row positions, table of the ``stored`` columns for those rows) of an open file.

    ``stored`` are the file's own top-level column names; ``positions`` as for
    :func:`read_file` (None: every row). With ``deletes_from``, the positions its deletion
    vector / position deletes name are left out (equality deletes are :func:`read_file`'s).
    """
    pf, layout = opened.file, opened.layout
    total = layout.num_rows
    deleted = deleted_positions_array(deletes_from, entry) if deletes_from is not None else None

    if positions is None:
        if deleted is not None and len(deleted) and int(deleted[-1]) >= total:
            raise TableFormatError(
                f"deletes of {entry.path} name row {int(deleted[-1])} but the file has {total} rows"
            )
        data = without_views(pf.read(columns=stored)) if stored else pa.table({})
        rows = np.arange(total, dtype=np.int64)
        if deleted is not None and len(deleted):
            keep = np.ones(total, dtype=bool)
            keep[deleted] = False
            rows = rows[keep]
            data = data.filter(pa.array(keep)) if stored else data
        return rows, data

    pos = np.asarray(positions, dtype=np.int64)
    if not bool(np.all(pos[1:] > pos[:-1])):  # sorted and distinct already: the common case
        pos = np.unique(pos)
    if len(pos) and (pos[0] < 0 or pos[-1] >= total):
        bad = int(pos[0]) if pos[0] < 0 else int(pos[-1])
        raise QueryError(f"row position {bad} is outside {entry.path}, which has {total} rows")
    if deleted is not None and len(deleted):
        pos = pos[~np.isin(pos, deleted, assume_unique=True)]
    if len(pos) == 0 or not stored:
        return pos, pa.table({c: pa.array([], type=layout.schema.field(c).type) for c in stored})
    # Decode only the row groups that hold the wanted rows.
    starts = layout.row_group_starts
    groups = np.searchsorted(starts, pos, side="right") - 1
    bounds = np.searchsorted(groups, np.arange(layout.metadata.num_row_groups + 1))
    parts = []
    cfg = config or _DEFAULT_READ
    for g in np.nonzero(np.diff(bounds))[0]:
        local = pos[bounds[g] : bounds[g + 1]] - starts[g]
        parts.append(_read_group_rows(opened, int(g), local, stored, cfg))
    return pos, pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def _read_group_rows(
    opened: OpenFile,
    group: int,
    local: np.ndarray,
    stored: list[str],
    config: ReadConfig,
) -> pa.Table:
    """Rows ``local`` (sorted positions within the row group) of one row group.

    For a few rows of a large row group: only the pages holding them when the file has a
    page index (:mod:`lakehouse_index.read.page_reads`), column by column; the columns the
    page path cannot serve are read batch by batch up to the last wanted row (pyarrow 26
    has no page-level read), and so is every column when the page index or a page does not
    decode (:class:`~lakehouse_index.read.page_index.PageIndexError`). Thresholds:
    ``config.page_read_min_rows`` (below it, and above ``config.point_read_max_rows``
    wanted rows, the row group is decoded whole: that costs less than loading the page
    index), ``config.point_read_batch_rows``. Dictionaries are kept in the process's
    dictionary cache (:class:`~lakehouse_index.config.CacheConfig` ``dictionary_bytes``).
    """
    pf, handle, layout, key = opened.file, opened.handle, opened.layout, opened.key
    group_rows = int(layout.row_group_starts[group + 1] - layout.row_group_starts[group])
    if len(local) == group_rows:  # every row (local is sorted and distinct)
        return without_views(pf.read_row_group(group, columns=stored))
    if group_rows <= config.page_read_min_rows or len(local) > config.point_read_max_rows:
        return without_views(pf.read_row_group(group, columns=stored)).take(pa.array(local))
    try:
        concurrent = not opened.local
        pages = PAGE_INDEXES.get(key)
        if pages is None:
            pages = load_page_index(handle, layout.metadata, layout.schema, opened.tail)
            PAGE_INDEXES[key] = pages
        if pages is UNINDEXED:  # pyarrow's and pyiceberg's default: find the pages by their headers
            pages = PAGE_INDEXES.get((key, group))
            if pages is None:
                pages = walk_page_headers(
                    handle, layout.metadata, layout.schema, group, opened.tail, concurrent
                )
                PAGE_INDEXES[(key, group)] = pages
        read = read_group_rows(
            handle, pages, layout.schema, group, local, stored, DICTIONARIES, key, concurrent=concurrent
        )
        served = read.table
    except PageIndexError:
        PAGE_INDEXES[key] = NO_PAGE_INDEX  # the file will not decode better next time
        return _read_batches(pf, group, local, stored, config.point_read_batch_rows)
    rest = [c for c in stored if c not in served.column_names]
    if not rest:
        return served
    other = _read_batches(pf, group, local, rest, config.point_read_batch_rows)
    parts = {c: served for c in served.column_names} | {c: other for c in rest}
    fields = [parts[c].schema.field(c) for c in stored]
    return pa.Table.from_arrays([parts[c].column(c) for c in stored], schema=pa.schema(fields))


def _read_batches(
    pf: pq.ParquetFile, group: int, local: np.ndarray, columns: list[str], batch_rows: int
) -> pa.Table:
    """Rows ``local`` of ``columns``, decoding the row group only up to the batch holding the last.

    On average half the decode work of the whole row group for a point read.
    """
    last = int(local[-1])
    batches = []
    seen = 0
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns):
        batches.append(batch)
        seen += batch.num_rows
        if seen > last:
            break
    return without_views(pa.Table.from_batches(batches)).take(pa.array(local))


def without_views(data: pa.Table) -> pa.Table:
    """``data`` with its string_view/binary_view columns, nested ones included, cast to the
    plain types (:func:`~lakehouse_index.read.page_decode.plain_type`)."""
    schema = pa.schema([f.with_type(plain_type(f.type)) for f in data.schema], metadata=data.schema.metadata)
    return data if schema.equals(data.schema) else data.cast(schema)


def _check_columns(snapshot: Snapshot, columns: Sequence[str] | None) -> list[str]:
    names = snapshot.schema.names
    if columns is None:
        return list(names)
    missing = [c for c in columns if c not in names]
    if missing:
        raise QueryError(f"unknown column(s) {missing}; the table has {', '.join(names)}")
    return list(dict.fromkeys(columns))
