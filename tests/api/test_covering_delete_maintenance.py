"""Covering index maintenance on deletes (issue 5: "removed files handled by lineage filters in
quick mode and by rewriting only the affected index files in incremental mode (Hyperspace
rewrote everything on any delete: do not)").

A Delta table of 6 files with a 4-bucket covering index built on Spark; a DELETE touching
one file. Quick refresh writes no index data (the removed file is excluded by lineage);
incremental refresh keeps every existing index file and adds at most the rows of the one
rewritten file (none with the lineage remap). Answers equal deltalake's read.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

pytestmark = pytest.mark.spark

FILES, ROWS = 6, 300
PROBE: list[Any] = [f"k{i}" for i in range(9)] + [None, "absent"]


def batch(f: int) -> pa.Table:
    ids = list(range(f * ROWS, (f + 1) * ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 17 == 3 else f"k{i % 9}" for i in ids], pa.string()),
            "amount": pa.array([i * 10 for i in ids], pa.int64()),
        }
    )


def check(path: str, t: li.Table) -> None:
    full = DeltaTable(path).to_pyarrow_table()
    want = Counter((r["k"], r["id"], r["amount"]) for r in full.to_pylist() if r["k"] in set(PROBE))
    got = t.lookup("cov", PROBE, columns=["k", "id", "amount"])  # index-only
    assert (
        Counter(zip(got["k"].to_pylist(), got["id"].to_pylist(), got["amount"].to_pylist(), strict=True))
        == want
    )


def entry(t: li.Table) -> Any:
    e = t.context.log("cov").latest_stable()
    assert e is not None
    return e


@pytest.mark.parametrize("mode", ["quick", "incremental", "incremental-no-remap"])
def test_a_delete_rewrites_no_existing_covering_index_file(tmp_path: Path, spark: Any, mode: str) -> None:
    path = str(tmp_path / "t")
    for f in range(FILES):
        write_deltalake(path, batch(f), mode="append")
    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=True)
    t.create_index(
        li.CoveringIndex("cov", indexed="k", included=["id", "amount"], num_buckets=4),
        spark=spark,
        local_max_rows=0,
    )
    before = entry(t)
    assert len({f.bucket for f in before.content.files}) == 4
    DeltaTable(path).delete(f"id >= {2 * ROWS} AND id < {2 * ROWS + 40}")  # rows of one data file
    touched = {p for p in (f.path for f in before.source.files)} - {
        "file://" + u.removeprefix("file://") for u in DeltaTable(path).file_uris()
    }
    assert len(touched) == 1

    refresh_mode = mode.split("-")[0]
    t.refresh_index("cov", refresh_mode, spark=spark, remap=mode != "incremental-no-remap")
    after = entry(t)
    old_files = set(before.content.files)
    assert old_files <= set(after.content.files)  # nothing existing rewritten
    new_rows = sum(f.rows for f in after.content.files if f not in old_files)
    if refresh_mode == "quick":
        assert after.content == before.content
        assert after.pending is not None and len(after.pending.removed) == 1
    elif mode == "incremental":
        assert new_rows == 0  # the rewritten file's rows moved: lineage remap, no index data
    else:
        assert new_rows == ROWS - 40  # only the rewritten file's rows are indexed again
    removed = [f for f in after.source.files if f.removed_ordinal is not None]
    assert refresh_mode == "quick" or [f.path for f in removed] == sorted(touched)
    check(path, t)
