"""Test-side helpers: read a snapshot's live rows the way the core does, and pyiceberg's answer.

Rows of our side are read from the data files by Parquet field id (so renamed columns
resolve), then the connector's position deletes / DVs and equality deletes are
applied. The oracle side is pyiceberg's own scan (or Spark's). Both are compared as
multisets of tuples.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from lakehouse_index_iceberg import IcebergSource

from lakehouse_index.io import Storage
from lakehouse_index.source import Column, FileEntry, Snapshot


def open_path(path: str) -> IcebergSource:
    """Open a table folder through the connector, with the project's Storage as FileIO."""
    return IcebergSource.open(path, Storage.for_uri(path))


def read_by_field_id(src: IcebergSource, entry: FileEntry, columns: Sequence[Column]) -> pa.Table:
    """The columns of one data file, matched by Parquet field id, logical names and types."""
    fs, p = src.io.arrow(entry.path)
    pf = pq.ParquetFile(p, filesystem=fs)
    by_id = {}
    for fld in pf.schema_arrow:
        fid = (fld.metadata or {}).get(b"PARQUET:field_id")
        if fid is not None:
            by_id[int(fid)] = fld.name
    present = [by_id[c.field_id] for c in columns if c.field_id in by_id]
    raw = pf.read(columns=present)
    arrays = []
    for c in columns:
        if c.field_id in by_id:
            arrays.append(raw[by_id[c.field_id]].cast(c.type))
        else:
            arrays.append(pa.nulls(raw.num_rows, c.type))
    return pa.table(arrays, names=[c.name for c in columns])


def live_file_rows(
    src: IcebergSource, snap: Snapshot, entry: FileEntry, with_positions: bool = False
) -> pa.Table:
    """Live rows of one file of the snapshot (deletes applied)."""
    cols = list(snap.columns)
    t = read_by_field_id(src, entry, cols)
    t = t.append_column("_pos", pa.array(range(t.num_rows), pa.int64()))
    if entry.deletes is not None:
        deleted = src.deleted_positions(entry)
        assert len(deleted) == entry.deletes.cardinality
        t = t.filter(pc.invert(pc.is_in(t["_pos"], pa.array(list(deleted), pa.int64()))))
    for eq in entry.equality_deletes:
        dels = src.equality_delete_rows(eq, cols)
        keys = {tuple(r) for r in zip(*[dels[c].to_pylist() for c in eq.columns], strict=True)}
        mine = list(zip(*[t[c].to_pylist() for c in eq.columns], strict=True))
        t = t.filter(pa.array([k not in keys for k in mine], pa.bool_()))
    if not with_positions:
        t = t.drop_columns(["_pos"])
    return t


def live_rows(src: IcebergSource, snap: Snapshot) -> Counter[tuple[Any, ...]]:
    """Multiset of the snapshot's live rows (columns in schema order)."""
    out: Counter[tuple[Any, ...]] = Counter()
    for entry in snap.files.values():
        t = live_file_rows(src, snap, entry)
        out.update(zip(*[t[c].to_pylist() for c in t.column_names], strict=True))
    return out


def rows_of(table: pa.Table, names: Sequence[str]) -> Counter[tuple[Any, ...]]:
    """Multiset of rows of an Arrow table (columns in ``names`` order)."""
    return Counter(zip(*[table[n].to_pylist() for n in names], strict=True))


def pyiceberg_rows(table: Any, snapshot_id: int, names: Sequence[str]) -> Counter[tuple[Any, ...]]:
    """pyiceberg's own scan of a snapshot."""
    return rows_of(table.scan(snapshot_id=snapshot_id).to_arrow(), names)


def pyiceberg_files(table: Any, snapshot_id: int) -> set[str]:
    """Data file paths pyiceberg plans for a snapshot (normalised like the connector's)."""
    from lakehouse_index_iceberg.deletes import normalize_path

    return {normalize_path(t.file.file_path) for t in table.scan(snapshot_id=snapshot_id).plan_files()}


def row_ids(src: IcebergSource, entry: FileEntry, positions: Sequence[int]) -> list[int | None]:
    """v3 row ids of the given positions: the materialized ``_row_id`` else first_row_id + position."""
    from lakehouse_index_iceberg.schema import ROW_ID_FIELD_ID

    fs, p = src.io.arrow(entry.path)
    pf = pq.ParquetFile(p, filesystem=fs)
    materialized: list[Any] = [None] * pf.metadata.num_rows
    for fld in pf.schema_arrow:
        if (fld.metadata or {}).get(b"PARQUET:field_id") == str(ROW_ID_FIELD_ID).encode():
            materialized = pf.read(columns=[fld.name])[fld.name].to_pylist()
    base = entry.first_row_id
    return [
        m if m is not None else (None if base is None else base + pos)
        for m, pos in ((materialized[q], q) for q in positions)
    ]
