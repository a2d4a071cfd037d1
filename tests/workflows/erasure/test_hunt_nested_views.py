"""Erase of rows in a Delta file whose embedded Arrow schema has string views inside nested columns.

deltalake (1.x) writes the files of its DELETE / UPDATE / MERGE rewrites with ``string_view``
types, nested ones included (``struct<b: list<string_view>>``). The erase's rewrite cast
only top-level views to plain types and then failed in pyarrow's take (no kernel for views):
no subject of such a file could be erased.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li


def _rows(uri: str) -> list[dict]:
    return sorted(DeltaTable(uri).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])


def test_erase_rewrites_a_file_with_nested_string_views(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    ids = list(range(30))
    write_deltalake(
        uri,
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "email": [f"user{i % 6}@x" for i in ids],
                "nested": pa.array([{"b": [str(i), None], "c": f"c{i}"} if i % 4 else None for i in ids]),
                "tags": pa.array([[("k", f"v{i}")] for i in ids], pa.map_(pa.string(), pa.string())),
            }
        ),
    )
    DeltaTable(uri).delete("id = 0")
    (path,) = DeltaTable(uri).file_uris()
    assert "string_view" in str(pq.ParquetFile(path).schema_arrow.field("nested").type)
    before = _rows(uri)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))

    result = t.erase("by_email", ["user1@x", "user2@x"], purge=True)

    assert result.rows_erased == 10 and result.verification is not None and result.verification["ok"]
    assert _rows(uri) == [r for r in before if r["email"] not in ("user1@x", "user2@x")]
    assert t.locate("by_email", ["user3@x"]).num_rows == 5
