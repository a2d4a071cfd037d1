"""A Delta table moved together with its side-car indexes keeps using them.

Delta logs name data files relative to the table root, so a table directory can be moved
or copied (``_lakehouse_index/`` included). The index log records the table URI and the
data files' full paths; read for the table at its new place, the entries are rebased, so
the index still covers every file, answers exactly, and refreshes incrementally. The
oracle is deltalake's own reader of the moved table.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.config import PlannerConfig
from lakehouse_index.query.planner import Reason
from tests.support.oracle import rows_multiset

KEYS = ["a", "b", "c", "d"]


def _batch(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "k": [KEYS[i % len(KEYS)] for i in ids]})


def _expected(path: Path, version: int, key: str) -> pa.Table:
    dt = DeltaTable(str(path), version=version)
    rows = dt.to_pyarrow_table()
    return rows.filter(pc.equal(rows["k"], key))


def test_moved_table_keeps_its_index(tmp_path: Path) -> None:
    before = tmp_path / "before"
    for i in range(3):
        write_deltalake(str(before), _batch(10 * i, 10), mode="append")
    t = li.open_table(str(before))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))

    after = tmp_path / "moved" / "table"
    after.parent.mkdir()
    shutil.move(str(before), str(after))
    moved = li.open_table(str(after))
    moved.planner_config = PlannerConfig(force_index=True)  # a tiny table: scanning would be cheaper

    plan = moved.explain("by_k", ["a"])
    assert plan.chosen.entry is not None and plan.chosen.reason is Reason.CHOSEN
    assert plan.chosen.scan_bytes == 0  # every file of the moved table is covered
    for key in KEYS:
        want = rows_multiset(_expected(after, 2, key), ["id", "k"])
        assert rows_multiset(moved.lookup("by_k", [key]), ["id", "k"]) == want
        located = moved.locate("by_k", [key])
        assert all(p.startswith(moved.uri) for p in located["_file"].to_pylist())

    write_deltalake(str(after), _batch(30, 10), mode="append")
    moved.refresh_index("by_k", mode="incremental")
    entry = moved.context.log("by_k").latest_stable()
    assert entry is not None and entry.source.table_uri == moved.uri
    assert all(f.path.startswith(moved.uri) for f in entry.source.files)
    for version in range(4):
        for key in KEYS:
            want = rows_multiset(_expected(after, version, key), ["id", "k"])
            got = moved.lookup("by_k", [key], version_as_of=version)
            assert rows_multiset(got, ["id", "k"]) == want
