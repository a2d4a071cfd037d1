"""Bad input gets a clear lakehouse_index error and leaves nothing under the side-car folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

import lakehouse_index as li


def sidecar(path: Path) -> list[Path]:
    """Everything written under the table's side-car folder."""
    root = path / "_lakehouse_index"
    return sorted(root.rglob("*")) if root.exists() else []


@pytest.fixture
def table_path(tmp_path: Path) -> Path:
    path = tmp_path / "t"
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "email": ["a@x", "b@x"],
            "attrs": pa.array([[("k", "v")], []], pa.map_(pa.string(), pa.string())),
            "addr": pa.array([{"city": "A"}, {"city": "B"}], pa.struct([("city", pa.string())])),
        }
    )
    write_deltalake(str(path), data)
    return path


def test_opening_a_folder_that_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "junk.txt").write_text("hello")
    with pytest.raises(li.NotATableError, match="not a table"):
        li.open_table(str(tmp_path))
    with pytest.raises(li.NotATableError):
        li.open_table(str(tmp_path / "does-not-exist"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (lambda: li.SecondaryIndex("i", key="nope", record_key="id"), "no column 'nope'"),
        (lambda: li.SecondaryIndex("i", key="email", record_key="missing"), "no column 'missing'"),
        (lambda: li.SecondaryIndex("i", key="attrs"), "cannot be an index key"),
        (lambda: li.SecondaryIndex("i", key="addr"), "cannot be an index key"),
    ],
)
def test_bad_index_specs_write_nothing(table_path: Path, spec: Any, message: str) -> None:
    t = li.open_table(str(table_path))
    with pytest.raises(li.InvalidIndexSpecError, match=message):
        t.create_index(spec())
    assert sidecar(table_path) == []
    assert t.indexes() == []


@pytest.mark.parametrize("name", ["a/b", "../x", "", ".", "x" * 200, "white space"])
def test_bad_index_names(name: str) -> None:
    with pytest.raises(li.InvalidIndexSpecError, match="invalid index name"):
        li.SecondaryIndex(name, key="email")


def test_key_and_record_key_must_differ() -> None:
    with pytest.raises(li.InvalidIndexSpecError):
        li.SecondaryIndex("i", key="email", record_key="email")


def test_querying_an_index_that_does_not_exist(table_path: Path) -> None:
    t = li.open_table(str(table_path))
    with pytest.raises(li.IndexNotFoundError):
        t.lookup("nope", ["a@x"])
    assert sidecar(table_path) == []


@pytest.mark.spark
def test_lookup_with_wrongly_shaped_keys(table_path: Path, spark: Any) -> None:
    t = li.open_table(str(table_path))
    t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"), spark=spark)
    with pytest.raises(li.QueryError, match="has 2 values"):
        t.lookup("by_email", [("a@x", 1)])
    with pytest.raises(li.QueryError, match="list of key values"):
        t.lookup("by_email", "a@x")
    with pytest.raises(li.QueryError, match="does not fit"):
        t.lookup("by_email", [12.5])
    with pytest.raises(li.QueryError, match="unknown columns"):
        t.lookup("by_email", ["a@x"], columns=["nope"])
