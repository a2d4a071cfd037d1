"""A separate ``index_root`` (issue 5: "or a separate ``index_root`` for read-only tables").

Index operations through ``open_table(..., index_root=elsewhere)`` never write under the
table (its tree is hashed before and after every index operation), the indexes live under
``<index_root>/<name>/``, answer like the format's own reader, and are found again by a
fresh ``open_table`` with the same ``index_root`` (and not without it). Delta and Iceberg.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

pytestmark = pytest.mark.spark

KEYS: list[Any] = ["k1", "k4", None, "absent"]


def batch(b: int) -> pa.Table:
    ids = list(range(b * 100, b * 100 + 60))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 13 == 4 else f"k{i % 6}" for i in ids], pa.string()),
            "g": pa.array([i % 4 for i in ids], pa.int32()),
        }
    )


def tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_indexes_under_a_separate_root_never_touch_the_table(tmp_path: Path, spark: Any, kind: str) -> None:
    index_root = tmp_path / "indexes" / "customers"
    opener: Callable[..., li.Table]
    if kind == "iceberg":
        from pyiceberg.catalog.sql import SqlCatalog

        (tmp_path / "wh").mkdir()
        catalog = SqlCatalog("ro", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
        catalog.create_namespace("db")
        ice = catalog.create_table("db.t", batch(0).schema, properties={"format-version": "2"})
        table_dir = Path(ice.location().removeprefix("file://"))

        def write(b: int) -> None:
            catalog.load_table("db.t").append(batch(b))

        def rows() -> pa.Table:
            return catalog.load_table("db.t").scan().to_arrow()

        def opener(**kw: Any) -> li.Table:
            return li.open_table("db.t", catalog=catalog, **kw)
    else:
        table_dir = tmp_path / "t"

        def write(b: int) -> None:
            write_deltalake(str(table_dir), batch(b), mode="append")

        def rows() -> pa.Table:
            return DeltaTable(str(table_dir)).to_pyarrow_table()

        def opener(**kw: Any) -> li.Table:
            return li.open_table(str(table_dir), **kw)

    for b in range(3):
        write(b)

    def check(t: li.Table) -> None:
        full = rows()
        want = Counter((r["k"], r["id"]) for r in full.to_pylist() if r["k"] in set(KEYS))
        for name in ("by_k", "cov"):
            got = t.lookup(name, KEYS, columns=["k", "id"])
            assert Counter(zip(got["k"].to_pylist(), got["id"].to_pylist(), strict=True)) == want, name
        scanned = t.scan(where="g = 2", columns=["id"])
        assert sorted(scanned["id"].to_pylist()) == sorted(r["id"] for r in full.to_pylist() if r["g"] == 2)

    t = opener(index_root=str(index_root))
    t.planner_config = li.PlannerConfig(force_index=True)
    table_before = tree(table_dir)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id"], num_buckets=2), spark=spark)
    t.create_index(li.SkippingIndex("skip", columns=["g"]))
    assert tree(table_dir) == table_before
    check(t)

    write(3)
    table_before = tree(table_dir)
    for name in ("by_k", "cov", "skip"):
        t.refresh_index(name, "incremental", spark=spark)
    t.optimize_index("by_k", "full", spark=spark)
    t.vacuum_index("by_k", retention_hours=0)
    t.delete_index("cov")
    t.restore_index("cov")
    assert tree(table_dir) == table_before
    assert not (table_dir / "_lakehouse_index").exists()
    assert {p.name for p in index_root.iterdir()} == {"by_k", "cov", "skip"}
    assert all((index_root / n / "_log").is_dir() for n in ("by_k", "cov", "skip"))
    check(t)

    again = opener(index_root=str(index_root))
    again.planner_config = li.PlannerConfig(force_index=True)
    assert sorted(i.name for i in again.indexes()) == ["by_k", "cov", "skip"]
    check(again)
    default = opener()
    assert default.indexes() == []
    with pytest.raises(li.IndexNotFoundError):
        default.lookup("by_k", KEYS)
