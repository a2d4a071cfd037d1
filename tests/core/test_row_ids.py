"""``read.row_ids.row_ids``: stable row ids at chosen positions, against values computed here.

Real Parquet files written with pyarrow, described by hand as one snapshot (the
``MemSource`` contract double); the expected ids follow the formats' definition directly:
the materialized value when not null, else ``first_row_id + position``, else null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from core_helpers import MemSource
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.errors import QueryError, TableFormatError
from lakehouse_index.read.footers import clear_footer_cache, file_layout
from lakehouse_index.read.row_ids import ICEBERG_ROW_ID_FIELD_ID, row_id_column, row_ids
from lakehouse_index.source import Column, FileEntry, Snapshot

FID = b"PARQUET:field_id"


def expected_ids(materialized: list[Any] | None, first: int | None, positions: list[int]) -> list[Any]:
    out = []
    for p in positions:
        m = materialized[p] if materialized is not None else None
        out.append(m if m is not None else (None if first is None else first + p))
    return out


def write(path: Path, columns: dict[str, tuple[pa.Array, int | None]], row_group_size: int) -> FileEntry:
    """A Parquet file of ``columns`` (name → (values, field id or None)); its FileEntry."""
    fields = [
        pa.field(n, a.type, metadata=None if fid is None else {FID: str(fid).encode()})
        for n, (a, fid) in columns.items()
    ]
    table = pa.table([a for a, _ in columns.values()], schema=pa.schema(fields))
    pq.write_table(table, path, row_group_size=row_group_size)
    return FileEntry(path=f"file://{path}", size=path.stat().st_size, num_records=table.num_rows)


def one_file_source(tmp: Path, entry: FileEntry, columns: tuple[Column, ...], row_id_col: str | None) -> Any:
    snap = Snapshot(1, 1, 0, columns, {entry.path: entry}, row_id_column=row_id_col)
    return MemSource(f"file://{tmp}", snap), snap


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    values=st.lists(st.one_of(st.none(), st.integers(0, 10**12)), min_size=1, max_size=40),
    first=st.one_of(st.none(), st.integers(0, 10**9)),
    layout=st.sampled_from(["iceberg", "delta", "absent"]),
    row_group_size=st.integers(1, 16),
    data=st.data(),
)
def test_row_ids_match_the_definition(
    tmp_path_factory: pytest.TempPathFactory,
    values: list[Any],
    first: int | None,
    layout: str,
    row_group_size: int,
    data: st.DataObject,
) -> None:
    tmp = tmp_path_factory.mktemp("rowids")
    n = len(values)
    key = pa.array(range(n), pa.int64())
    mat = pa.array(values, pa.int64())
    if layout == "iceberg":  # found by the reserved field id, whatever its name
        cols: dict[str, tuple[pa.Array, int | None]] = {
            "k": (key, 1),
            "renamed": (mat, ICEBERG_ROW_ID_FIELD_ID),
        }
        columns = (Column("k", pa.int64(), field_id=1),)
        row_id_col = "_row_id"
    elif layout == "delta":  # found by the physical name the table configures
        cols = {"k": (key, None), "_row-id-col-x": (mat, None)}
        columns = (Column("k", pa.int64()),)
        row_id_col = "_row-id-col-x"
    else:  # no materialized column: every id is inherited
        cols = {"k": (key, None)}
        columns = (Column("k", pa.int64()),)
        row_id_col = "_row_id"
    entry = write(tmp / "f.parquet", cols, row_group_size)
    entry = FileEntry(entry.path, entry.size, num_records=n, first_row_id=first)
    source, snap = one_file_source(tmp, entry, columns, row_id_col)
    positions = data.draw(st.lists(st.integers(0, n - 1), max_size=2 * n))  # any order, duplicates
    got = row_ids(source, snap, entry, np.array(positions, dtype=np.int64))
    assert got.type == pa.int64()
    assert got.to_pylist() == expected_ids(values if layout != "absent" else None, first, positions)


def test_no_row_ids_in_the_snapshot_means_nulls(tmp_path: Path) -> None:
    entry = write(tmp_path / "f.parquet", {"k": (pa.array([1, 2, 3]), None)}, 10)
    entry = FileEntry(entry.path, entry.size, num_records=3, first_row_id=100)
    source, snap = one_file_source(tmp_path, entry, (Column("k", pa.int64()),), None)
    assert row_ids(source, snap, entry, [0, 2]).to_pylist() == [None, None]


def test_a_table_column_of_that_name_is_not_a_row_id_column(tmp_path: Path) -> None:
    """A logical column stored as ``_row_id`` holds user data, not row ids."""
    entry = write(tmp_path / "f.parquet", {"_row_id": (pa.array([7, 8, 9]), None)}, 10)
    entry = FileEntry(entry.path, entry.size, num_records=3, first_row_id=50)
    source, snap = one_file_source(tmp_path, entry, (Column("_row_id", pa.int64()),), "_row_id")
    assert row_id_column(snap, file_layout(source, entry)) is None
    assert row_ids(source, snap, entry, [0, 2]).to_pylist() == [50, 52]


def test_narrow_materialized_type_is_widened(tmp_path: Path) -> None:
    entry = write(
        tmp_path / "f.parquet",
        {"k": (pa.array([1, 2, 3]), None), "rid": (pa.array([5, None, 6], pa.int32()), None)},
        2,
    )
    entry = FileEntry(entry.path, entry.size, num_records=3, first_row_id=10)
    source, snap = one_file_source(tmp_path, entry, (Column("k", pa.int64()),), "rid")
    got = row_ids(source, snap, entry, [2, 1, 0])
    assert got.type == pa.int64() and got.to_pylist() == [6, 11, 5]


def test_all_null_row_groups_are_not_read(tmp_path: Path) -> None:
    """Row groups whose statistics say the materialized column is all null are answered from
    first_row_id alone: a corrupt page there is never decoded."""
    n = 6
    entry = write(
        tmp_path / "f.parquet",
        {
            "k": (pa.array(range(n)), None),
            "rid": (pa.array([None, None, None, 40, None, 42], pa.int64()), None),
        },
        3,
    )
    entry = FileEntry(entry.path, entry.size, num_records=n, first_row_id=100)
    source, snap = one_file_source(tmp_path, entry, (Column("k", pa.int64()),), "rid")
    md = pq.ParquetFile(tmp_path / "f.parquet").metadata
    assert md.row_group(0).column(1).statistics.null_count == 3
    # Overwrite the first row group's "rid" column chunk with garbage (same size: footer unchanged).
    chunk = md.row_group(0).column(1)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    raw = bytearray((tmp_path / "f.parquet").read_bytes())
    raw[start : start + chunk.total_compressed_size] = b"\xff" * chunk.total_compressed_size
    (tmp_path / "f.parquet").write_bytes(bytes(raw))
    clear_footer_cache()
    assert row_ids(source, snap, entry, [1, 4, 3, 0]).to_pylist() == [101, 104, 40, 100]


def test_positions_outside_the_file_and_non_integer_ids_fail(tmp_path: Path) -> None:
    entry = write(
        tmp_path / "f.parquet",
        {"k": (pa.array([1, 2]), None), "rid": (pa.array(["a", "b"]), None)},
        10,
    )
    entry = FileEntry(entry.path, entry.size, num_records=2, first_row_id=0)
    source, snap = one_file_source(tmp_path, entry, (Column("k", pa.int64()),), "rid")
    with pytest.raises(QueryError):
        row_ids(source, snap, entry, [2])
    with pytest.raises(TableFormatError):
        row_ids(source, snap, entry, [0])
    assert row_ids(source, snap, entry, []).to_pylist() == []
