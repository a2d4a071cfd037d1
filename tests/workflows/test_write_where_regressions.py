"""Regressions: writes through deltalake and pyiceberg remove / rewrite exactly ``scan(where)``'s rows."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.errors import DuplicateKeyError, WriteRefusedError
from tests.api.iceberg_index_support import sql_catalog
from tests.workflows.write_oracle import deltalake_would_overwrite_nans


def _open(tmp_path: Path, fmt: str, files: list[pa.Table]) -> tuple[li.Table, Any]:
    if fmt == "delta":
        path = str(tmp_path / "t")
        for b in files:
            write_deltalake(path, b, mode="append")
        return li.open_table(path), lambda: DeltaTable(path).to_pyarrow_table()
    catalog = sql_catalog(str(tmp_path))
    tbl = catalog.create_table("db.t", schema=files[0].schema)
    for b in files:
        tbl.append(b)
    return li.open_table("db.t", catalog=catalog), lambda: catalog.load_table("db.t").scan().to_arrow()


def _rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(repr(v) if isinstance(v, float) else v for v in r.values()) for r in t.to_pylist())


F = pa.schema([("id", pa.int64()), ("s", pa.string()), ("f", pa.float64())])


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize(
    ("files", "where"),
    [
        ([[(1, "o", 0.0), (2, "o", 0.0)], [(3, "o", 7.5), (4, "o", 1.0)]], "f IN (0.0, 7.5)"),
        ([[(1, "o", 0.0), (2, "o", -0.0)]], "f IN (0.0, 7.5)"),
        ([[(1, "o", 0.0), (3, "o", 1.5)], [(2, "o", -0.0)]], "f IN (-0.0, 7.5)"),
        ([[(1, "x", math.nan), (2, "y", 1.0)]], "s = 'x' OR f = 5.0"),
        ([[(1, "a", 1.0), (2, "b", math.nan)]], "f <= 1e300"),
        ([[(1, "a", 1.0), (2, "b", math.nan), (3, "c", 3.0)]], "f >= 3.0"),
        ([[(1, "a", 1.0), (2, "b", math.nan), (3, "c", 3.0)]], "NOT (f < 3.0)"),
        ([[(1, "a", 1.0), (2, "b", math.nan), (3, "c", 3.0)]], "f != 1.0"),
        ([[(1, "a", 1.0), (2, "b", math.nan), (3, "c", 3.0)]], "f NOT BETWEEN 0.0 AND 2.0"),
        # NaN beside one infinite value: deltalake writes null statistics (no constant), so the
        # write is not refused and the NaN survives the rewrite (the oracle once refused it).
        ([[(1, "a", 0.0), (2, "a", 1.5)], [(4, "b", math.nan), (5, "c", math.inf)]], "f = 0.0"),
        ([[(1, "a", 0.0), (2, "a", 1.5)], [(4, "b", math.nan), (5, "c", -math.inf)]], "f != 0.0"),
    ],
)
def test_update_then_delete_float_where(tmp_path: Path, fmt: str, files: list[Any], where: str) -> None:
    batches = [pa.Table.from_pylist([dict(zip(F.names, r, strict=True)) for r in b], schema=F) for b in files]
    t, read_back = _open(tmp_path, fmt, batches)
    before = pa.concat_tables(batches)
    if fmt == "delta" and deltalake_would_overwrite_nans(batches, ["f"]):
        for write in (lambda: t.update(where, set={"s": "U"}), lambda: t.delete(where)):
            with pytest.raises(WriteRefusedError, match="deltalake"):
                write()
            assert _rows(read_back()) == _rows(before)  # nothing written
        return
    ids = set(t.scan(where=where, use_indexes=False)["id"].to_pylist())
    expected = [(r["id"], "U" if r["id"] in ids else r["s"], r["f"]) for r in before.to_pylist()]
    t.update(where, set={"s": "U"})
    assert _rows(read_back()) == _rows(
        pa.Table.from_pylist([dict(zip(F.names, r, strict=True)) for r in expected])
    )
    ids = set(t.scan(where=where, use_indexes=False)["id"].to_pylist())  # the update may change them
    t.delete(where)
    kept = [r for r in expected if r[0] not in ids]
    assert _rows(read_back()) == _rows(
        pa.Table.from_pylist([dict(zip(F.names, r, strict=True)) for r in kept], schema=F)
    )


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize(
    ("schema", "values", "where", "deleted"),
    [
        (pa.float32(), [0.1, 1.5], "f = 0.1", []),
        (pa.float32(), [0.1, 1.5], "f <= 0.1", []),
        (pa.float32(), [0.1, 1.5], "f IN (0.1, 1.5)", [2]),
        (pa.float32(), [0.1, 1.5], "f BETWEEN 0.1 AND 1.0", [1]),
        (pa.int32(), [2147483647, -5, 3], "f IN (2147483648, -5)", [2]),
        (pa.int32(), [2147483647, -5, 3], "f NOT IN (2147483648, -5)", [1, 3]),
        (pa.int32(), [2147483647, -5, 3], "f IN (2147483648)", []),
    ],
)
def test_delete_literals_the_column_cannot_hold(
    tmp_path: Path, fmt: str, schema: pa.DataType, values: list[Any], where: str, deleted: list[int]
) -> None:
    s = pa.schema([("id", pa.int64()), ("f", schema)])
    data = pa.table({"id": list(range(1, len(values) + 1)), "f": pa.array(values, schema)}, schema=s)
    t, read_back = _open(tmp_path, fmt, [data])
    assert sorted(t.scan(where=where, use_indexes=False)["id"].to_pylist()) == deleted
    t.delete(where)
    assert sorted(read_back()["id"].to_pylist()) == [i for i in data["id"].to_pylist() if i not in deleted]


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_update_and_delete_a_dotted_column(tmp_path: Path, fmt: str) -> None:
    s = pa.schema([("id", pa.int64()), ("x.y", pa.string())])
    t, read_back = _open(tmp_path, fmt, [pa.table({"id": [1, 2], "x.y": ["a", "b"]}, schema=s)])
    t.update("`x.y` = 'a'", set={"x.y": "Z"})
    assert sorted((r["id"], r["x.y"]) for r in read_back().to_pylist()) == [(1, "Z"), (2, "b")]
    t.delete("`x.y` = 'Z'")
    assert sorted((r["id"], r["x.y"]) for r in read_back().to_pylist()) == [(2, "b")]


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_upsert_float_keys_match_as_lookups_do(tmp_path: Path, fmt: str) -> None:
    """``upsert`` matches keys as ``lookup`` does: NaN matches NaN, -0.0 matches 0.0 (on Iceberg,
    NaN keys were never matched and their rows inserted a second time)."""
    s = pa.schema([("k", pa.float64()), ("v", pa.string())])
    before = pa.table({"k": [math.nan, 0.0, 1.0], "v": ["a", "b", "c"]}, schema=s)
    t, read_back = _open(tmp_path, fmt, [before])
    result = t.upsert(pa.table({"k": [math.nan, -0.0, 2.0], "v": ["A", "B", "D"]}, schema=s), on=["k"])
    assert (result.rows_updated, result.rows_written) == (2, 1)
    want = [(repr(-0.0), "B"), (repr(1.0), "c"), (repr(2.0), "D"), (repr(math.nan), "A")]
    assert _rows(read_back()) == want


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
@pytest.mark.parametrize("keys", [[0.0, -0.0], [math.nan, -math.nan]], ids=["signed-zeros", "nans"])
def test_upsert_refuses_keys_equal_as_lookups_see_them(tmp_path: Path, fmt: str, keys: list[float]) -> None:
    """Two data rows whose keys a lookup cannot tell apart would both match one row: refused."""
    s = pa.schema([("k", pa.float64()), ("v", pa.string())])
    before = pa.table({"k": [0.0, math.nan], "v": ["a", "b"]}, schema=s)
    t, read_back = _open(tmp_path, fmt, [before])
    with pytest.raises(DuplicateKeyError, match="not unique"):
        t.upsert(pa.table({"k": keys, "v": ["X", "Y"]}, schema=s), on=["k"])
    assert _rows(read_back()) == _rows(before)
