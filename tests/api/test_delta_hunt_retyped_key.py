"""An indexed column retyped by an overwrite that replaces the schema (string -> long).

deltalake's ``write_deltalake(..., mode="overwrite", schema_mode="overwrite")`` gives the
key column another type; the index's entries so far hold values of the old column. Every
answer at either version must equal deltalake's read of that version, before and after
the index is refreshed and optimized; none may fail on comparing a string with a number.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

OLD = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "k": ["a", "b", "a"]})
NEW = pa.table({"id": pa.array([4, 5, 6], pa.int64()), "k": pa.array([1, 2, 2], pa.int64())})


def _retyped(tmp_path: Path, kind: str) -> tuple[str, li.Table]:
    path = str(tmp_path / "t")
    write_deltalake(path, OLD)  # version 0: k is a string
    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=True)
    if kind == "secondary":
        t.create_index(li.SecondaryIndex("ix", key="k", record_key="id", auto_refresh="off"))
    else:
        t.create_index(
            li.CoveringIndex("ix", indexed="k", included=["id"], num_buckets=2, auto_refresh="off")
        )
    write_deltalake(path, NEW, mode="overwrite", schema_mode="overwrite")  # version 1: k is a long
    return path, t


def _ids(path: str, version: int, keep: object) -> list[int]:
    rows = DeltaTable(path, version=version).to_pyarrow_table().to_pylist()
    return sorted(r["id"] for r in rows if keep(r))  # type: ignore[operator]


@pytest.mark.parametrize("kind", ["secondary", "covering"])
@pytest.mark.parametrize("refreshed", [False, True], ids=["stale", "refreshed"])
def test_lookup_after_key_column_retyped(tmp_path: Path, kind: str, refreshed: bool) -> None:
    path, t = _retyped(tmp_path, kind)
    if refreshed:
        t.refresh_index("ix", mode="incremental")
    assert sorted(t.lookup("ix", [2])["id"].to_pylist()) == _ids(path, 1, lambda r: r["k"] == 2)
    assert t.locate("ix", [1, 2]).num_rows == len(_ids(path, 1, lambda r: r["k"] in (1, 2)))
    old = t.lookup("ix", ["a"], version_as_of=0)
    assert sorted(old["id"].to_pylist()) == _ids(path, 0, lambda r: r["k"] == "a")


@pytest.mark.parametrize("kind", ["secondary", "covering"])
def test_scan_where_after_key_column_retyped(tmp_path: Path, kind: str) -> None:
    """``query/index_reader.RowFilter.select`` filtered the old (string) index entries with a
    predicate bound to the new type (``greater(string, int8)``): the recorded column identity
    now holds the kind of values, so the old snapshot is not used."""
    path, t = _retyped(tmp_path, kind)
    got = t.scan(where="k > 1")
    assert sorted(got["id"].to_pylist()) == _ids(path, 1, lambda r: r["k"] > 1)


@pytest.mark.parametrize("kind", ["secondary", "covering"])
def test_optimize_after_key_column_retyped(tmp_path: Path, kind: str) -> None:
    """The refresh did not rebuild (the recorded column identity had no type), so the index
    held string and long entry files, which a full optimize could not concatenate."""
    path, t = _retyped(tmp_path, kind)
    t.refresh_index("ix", mode="incremental")
    t.optimize_index("ix", mode="full")
    assert sorted(t.lookup("ix", [2])["id"].to_pylist()) == _ids(path, 1, lambda r: r["k"] == 2)


def test_skipping_index_after_key_column_retyped(tmp_path: Path) -> None:
    """The skipping files of the removed (string) files no longer meet the new (long) ones:
    a full optimize raised "do not share a schema"."""
    path = str(tmp_path / "t")
    write_deltalake(path, OLD)
    t = li.open_table(path)
    t.create_index(li.SkippingIndex("sk", columns=["k"], auto_refresh="off"))
    write_deltalake(path, NEW, mode="overwrite", schema_mode="overwrite")
    t.refresh_index("sk", mode="incremental")
    t.optimize_index("sk", mode="full")
    assert sorted(t.scan(where="k > 1")["id"].to_pylist()) == _ids(path, 1, lambda r: r["k"] > 1)
    old = t.scan(where="k = 'a'", version_as_of=0)
    assert sorted(old["id"].to_pylist()) == _ids(path, 0, lambda r: r["k"] == "a")
