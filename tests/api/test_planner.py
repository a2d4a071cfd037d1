"""Snapshot choice for time travel (the Hyperspace talk's scenario) and explain's why-not."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.query.planner import Reason

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string())])


def batch(start: int, n: int) -> pa.Table:
    return pa.table(
        {"id": list(range(start, start + n)), "k": [f"k{i % 7}" for i in range(start, start + n)]},
        schema=SCHEMA,
    )


def rows(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(zip(table["id"].to_pylist(), table["k"].to_pylist(), strict=True))


@pytest.fixture(scope="module")
def history(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """v0 big append · v1 append (index S1) · v2 small append · v3 delete (index S3) · v4 big append ·
    v5 tiny append (index S5)."""
    path = str(tmp_path_factory.mktemp("planner") / "t")
    write_deltalake(path, batch(0, 20000))  # v0: a big file
    write_deltalake(path, batch(20000, 5000), mode="append")  # v1
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)  # S1 @ v1
    write_deltalake(path, batch(25000, 10), mode="append")  # v2: small
    DeltaTable(path).delete("id >= 20000 AND id < 20100")  # v3: rewrites the v1 file
    t.refresh_index("by_k", mode="full", spark=spark)  # S3 @ v3
    write_deltalake(path, batch(25010, 10000), mode="append")  # v4: big
    write_deltalake(path, batch(35010, 5), mode="append")  # v5: tiny
    t.refresh_index("by_k", mode="full", spark=spark)  # S5 @ v5
    return {"path": path, "table": t}


@pytest.mark.parametrize(
    ("version", "expected_snapshot_version"),
    [(0, None), (1, 1), (2, 1), (3, 3), (4, 5), (5, 5)],
)
def test_time_travel_picks_the_cheapest_snapshot(
    history: dict[str, Any], version: int, expected_snapshot_version: int | None
) -> None:
    t: li.Table = history["table"]
    plan = t.explain("by_k", ["k3"], version_as_of=version)
    snapshots = [c for c in plan.candidates if c.entry is not None]
    assert sorted({c.entry.source.version for c in snapshots}) == [1, 3, 5]
    chosen = plan.chosen
    assert chosen.entry is not None, str(plan)
    if expected_snapshot_version is None:  # v0: every snapshot covers the v0 file; only repair costs differ
        assert chosen.scan_bytes == 0, str(plan)
    else:
        assert chosen.entry.source.version == expected_snapshot_version, str(plan)
    assert chosen.cost == min(c.cost for c in plan.candidates if c.usable)
    if version in (1, 3, 5):
        assert chosen.scan_bytes == 0 and chosen.coverage is not None and chosen.coverage.exact_window
    for c in plan.candidates:
        if c is not chosen:
            assert c.reason is not Reason.CHOSEN
    text = str(plan)
    assert "chosen" in text and "more expensive" in text and "plain scan" in text

    got = t.lookup("by_k", ["k3", "k5"], version_as_of=version)
    full = DeltaTable(history["path"], version=version).to_pyarrow_table()
    want = full.filter(pa.compute.is_in(full["k"], pa.array(["k3", "k5"])))
    assert rows(got) == rows(want)


def test_hybrid_scan_over_threshold_falls_back_to_a_plain_scan(history: dict[str, Any]) -> None:
    t: li.Table = history["table"]
    t.planner_config = li.api.planner.PlannerConfig(max_scan_share=0.0)
    try:
        plan = t.explain("by_k", ["k1"], version_as_of=2)
        reasons = {c.label: c.reason for c in plan.candidates}
        # At v2 every snapshot must scan something (S1: the v2 file; S3, S5: the file v3 rewrote).
        assert plan.chosen.label == "plain scan", str(plan)
        assert Reason.OVER_THRESHOLD in reasons.values()
        got = t.lookup("by_k", ["k1"], version_as_of=2)
        full = DeltaTable(history["path"], version=2).to_pyarrow_table()
        assert rows(got) == rows(full.filter(pa.compute.equal(full["k"], "k1")))
    finally:
        t.planner_config = li.api.planner.PlannerConfig()


def test_stale_index_answers_through_hybrid_scan(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for i in range(5):
        write_deltalake(path, batch(2000 * i, 2000), mode="append")
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    write_deltalake(path, batch(300, 50), mode="append")
    DeltaTable(path).delete("id < 20")
    t.refresh_index("by_k", mode="quick")
    info = t.indexes()[0]
    assert info.indexed_version == 4  # quick refresh does not extend the index
    plan = t.explain("by_k", ["k2"])
    assert plan.chosen.entry is not None and not plan.chosen.coverage.exact_window  # type: ignore[union-attr]
    got = t.lookup("by_k", ["k2", "k4"])
    full = DeltaTable(path).to_pyarrow_table()
    assert rows(got) == rows(full.filter(pa.compute.is_in(full["k"], pa.array(["k2", "k4"]))))


def test_snapshot_of_a_cleaned_up_table_version_is_not_used(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, batch(0, 500), configuration={"delta.logRetentionDuration": "interval 0 days"})
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)  # snapshot at v0
    for i in range(1, 4):
        write_deltalake(path, batch(500 * i, 500), mode="append")
    t.refresh_index("by_k", mode="full", spark=spark)  # snapshot at v3
    dt = DeltaTable(path)
    dt.create_checkpoint()
    dt.cleanup_metadata()
    assert not (Path(path) / "_delta_log" / f"{0:020d}.json").exists()

    t = li.open_table(path)
    plan = t.explain("by_k", ["k1"])
    reasons = {c.entry.source.version: c.reason for c in plan.candidates if c.entry is not None}
    assert reasons[0] is Reason.TABLE_VERSION_GONE, str(plan)
    assert plan.chosen.entry is not None and plan.chosen.entry.source.version == 3
    got = t.lookup("by_k", ["k1"])
    full = DeltaTable(path).to_pyarrow_table()
    assert rows(got) == rows(full.filter(pa.compute.equal(full["k"], "k1")))
