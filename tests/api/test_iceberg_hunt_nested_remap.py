"""An incremental refresh over a copy-on-write rewrite of files holding nested indexed columns.

The lineage remap (``maintenance/lineage.py``) fingerprints the index's columns of the
removed and added files to align their rows. A covering index may include a struct, list
or map column; a pyiceberg ``delete`` rewrites the files (copy-on-write), and the refresh
must follow (remapped or re-indexed), not fail.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import lakehouse_index as li
from tests.api.iceberg_index_support import sql_catalog

pytest.importorskip("pyiceberg")


ARROW = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.large_string()),
        ("st", pa.struct([("a", pa.int32())])),
        ("tags", pa.large_list(pa.large_string())),
    ]
)


@pytest.mark.parametrize("nested", ["st", "tags"])
def test_refresh_after_cow_delete_with_nested_included_column(tmp_path: Path, nested: str) -> None:
    from pyiceberg.expressions import EqualTo
    from pyiceberg.schema import Schema
    from pyiceberg.types import IntegerType, ListType, LongType, NestedField, StringType, StructType

    cat = sql_catalog(str(tmp_path))
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "k", StringType(), required=False),
        NestedField(3, "st", StructType(NestedField(4, "a", IntegerType(), required=False)), required=False),
        NestedField(5, "tags", ListType(6, StringType(), element_required=False), required=False),
    )
    pt = cat.create_table("db.t", schema, properties={"format-version": "2"})
    pt.append(
        pa.table(
            {
                "id": [1, 2, 3],
                "k": ["x", "y", "x"],
                "st": [{"a": 1}, None, {"a": 3}],
                "tags": [["p"], [], None],
            },
            schema=ARROW,
        )
    )
    t = li.open_table("db.t", catalog=cat)
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id", nested]))
    cat.load_table("db.t").delete(EqualTo("id", 2))  # copy-on-write: the file is rewritten
    t.refresh_index("cov", mode="incremental")
    want = cat.load_table("db.t").scan().to_arrow()
    got = t.scan(where="k = 'x'")
    assert sorted(got["id"].to_pylist()) == [1, 3]
    assert sorted(map(str, got[nested].to_pylist())) == sorted(
        map(str, want.filter(pa.compute.equal(want["k"], "x"))[nested].to_pylist())
    )
    assert t.index_status()[0].lag == 0
