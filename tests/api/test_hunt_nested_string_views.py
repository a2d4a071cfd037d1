"""Lookups and scans of Delta files whose embedded Arrow schema has string views *inside* nested columns.

deltalake (1.x) writes the files of its DELETE / UPDATE / MERGE rewrites with an Arrow
schema of ``string_view`` columns, nested ones included (``struct<b: list<string_view>>``).
pyarrow has no take kernel for views; only top-level view columns were cast to plain types,
so every lookup or scan touching such a file failed with TableFormatError.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li


def _table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    ids = list(range(20))
    write_deltalake(
        uri,
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "k": [f"k{i % 5}" for i in ids],
                "nested": pa.array([{"b": [str(i), None], "c": f"c{i}"} for i in ids]),
            }
        ),
    )
    DeltaTable(uri).delete("id = 0")  # deltalake rewrites the file with a view-typed Arrow schema
    return uri


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.select(["id", "k", "nested"]).to_pylist(), key=lambda r: r["id"])


def test_lookup_and_scan_of_a_file_with_nested_string_views(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    (path,) = DeltaTable(uri).file_uris()
    assert "string_view" in str(pq.ParquetFile(path).schema_arrow.field("nested").type)
    reader = DeltaTable(uri).to_pyarrow_table()
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_k", key="k"))

    expected = [r for r in _sorted(reader) if r["k"] == "k1"]
    assert _sorted(t.lookup("by_k", ["k1"])) == expected
    assert _sorted(t.scan(where="k = 'k1'")) == expected
    assert _sorted(t.scan()) == _sorted(reader)
