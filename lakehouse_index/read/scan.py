"""Plain pyarrow scan of a snapshot: every live row, deletes applied, no JVM.

This is ``Table.scan`` and the "no index" executor of the planner; the hybrid scan
uses :func:`scan_files` for the files an index snapshot does not cover.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate, Where
from lakehouse_index.io.parallel import DECODE_THREADS
from lakehouse_index.read.datafiles import ROW_COLUMN, read_file
from lakehouse_index.read.footers import FileAccess
from lakehouse_index.source import FileEntry, Snapshot

__all__ = ["prune_files", "scan_files", "scan_snapshot"]


def prune_files(files: Iterable[FileEntry], predicate: Predicate | None) -> list[FileEntry]:
    """The files whose partition values do not rule ``predicate`` out."""
    if predicate is None:
        return list(files)
    return [f for f in files if predicate.might_match(f.partition_dict)]


def scan_snapshot(
    source: FileAccess,
    snapshot: Snapshot,
    columns: Sequence[str] | None = None,
    where: Where | None = None,
) -> pa.Table:
    """Every live row of ``snapshot`` matching ``where``, with ``columns`` (default all).

    Row-level deletes are applied, files are pruned on their partition values, and the
    result has the snapshot's column order (or the order of ``columns``). Rows come
    file by file in the snapshot's file order.
    """
    return scan_files(source, snapshot, snapshot.files.values(), columns, where)


def scan_files(
    source: FileAccess,
    snapshot: Snapshot,
    files: Iterable[FileEntry],
    columns: Sequence[str] | None = None,
    where: Where | None = None,
    *,
    with_lineage: bool = False,
) -> pa.Table:
    """Like :func:`scan_snapshot`, over a subset of the snapshot's files.

    ``with_lineage`` adds ``_file_path`` (the FileEntry path) and ``_row`` (position
    in the file) to every row.
    """
    schema = snapshot.schema
    out_cols = list(dict.fromkeys(columns)) if columns is not None else list(schema.names)
    unknown = [c for c in out_cols if c not in schema.names]
    if unknown:
        raise QueryError(f"unknown column(s) {unknown}; the table has {', '.join(schema.names)}")
    predicate = Predicate.of(where, schema)
    read_cols = list(out_cols)
    if predicate is not None:
        read_cols += [c for c in schema.names if c in predicate.columns and c not in out_cols]
    expression = predicate.to_pyarrow() if predicate is not None else None

    def one(entry: FileEntry) -> pa.Table:
        t = read_file(source, snapshot, entry, read_cols, with_positions=with_lineage)
        if expression is not None:
            t = t.filter(expression)
        t = t.select(out_cols + ([ROW_COLUMN] if with_lineage else []))
        if with_lineage:
            paths = pa.array([entry.path] * t.num_rows, type=pa.string())
            t = t.add_column(len(out_cols), "_file_path", paths)
        return t

    todo = prune_files(files, predicate)
    if len(todo) <= 1:
        parts = [one(f) for f in todo]
    else:
        with ThreadPoolExecutor(min(DECODE_THREADS, len(todo))) as pool:
            parts = list(pool.map(one, todo))
    result_schema = pa.schema([schema.field(c) for c in out_cols])
    if with_lineage:
        result_schema = result_schema.append(pa.field("_file_path", pa.string(), False))
        result_schema = result_schema.append(pa.field(ROW_COLUMN, pa.int64(), False))
    if not parts:
        return result_schema.empty_table()
    return pa.concat_tables([p.cast(result_schema) for p in parts])
