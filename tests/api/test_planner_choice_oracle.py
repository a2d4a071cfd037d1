"""Snapshot choice (issue 6), checked independently and on both formats.

The Hyperspace-talk scenario — index snapshots at v1, v3 and v5, appends and a delete in
between, queries at every version — on Delta and on Iceberg:

* every candidate's scan bytes equal the bytes of the files live in the queried version
  that the snapshot does not cover, computed from the table's own metadata (deltalake's
  add actions / pyiceberg's planned files) and the index log read as plain JSON;
* the chosen snapshot is the one a reasoning about the history predicts, its cost is the
  minimum of the listed candidates, and ``str(plan)`` lists every candidate with a reason;
* the answers equal the format's own reader.

Plus: an index snapshot whose table version left the table's history (Iceberg snapshot
expiry; the Delta log-cleanup case is in ``test_planner.py``) is listed as
``TABLE_VERSION_GONE`` and never used, and lookups stay right.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from iceberg_index_support import main_lineage, sql_catalog

import lakehouse_index as li
from lakehouse_index.query.planner import Reason

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string())])


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "k": [f"k{i % 7}" for i in ids]}, schema=SCHEMA)


@dataclass
class Scenario:
    """v0 big · v1 (S1) · v2 small · v3 delete rewriting the v1 file (S3) · v4 big · v5 tiny (S5)."""

    table: li.Table
    versions: list[int]  # table versions v0..v5
    live_files: Callable[[int], dict[str, int]]  # version → {path: size}, from the format's metadata
    rows: Callable[[int], pa.Table]
    index_dir: Path


def _canonical(path: str) -> str:
    return "file://" + path.removeprefix("file://")


def delta_scenario(root: Path, spark: Any) -> Scenario:
    path = str(root / "delta")
    write_deltalake(path, batch(0, 20000))
    write_deltalake(path, batch(20000, 5000), mode="append")
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    write_deltalake(path, batch(25000, 10), mode="append")
    DeltaTable(path).delete("id >= 20000 AND id < 20100")
    t.refresh_index("by_k", mode="full", spark=spark)
    write_deltalake(path, batch(25010, 10000), mode="append")
    write_deltalake(path, batch(35010, 5), mode="append")
    t.refresh_index("by_k", mode="full", spark=spark)

    def live(v: int) -> dict[str, int]:
        actions = pa.table(DeltaTable(path, version=v).get_add_actions(flatten=True)).to_pydict()
        return {
            _canonical(os.path.join(path, p)): s
            for p, s in zip(actions["path"], actions["size_bytes"], strict=True)
        }

    return Scenario(
        t, list(range(6)), live, lambda v: DeltaTable(path, version=v).to_pyarrow_table(), root / "delta"
    )


def iceberg_scenario(root: Path, spark: Any) -> Scenario:
    from pyiceberg import expressions as X

    catalog = sql_catalog(str(root))
    ice = catalog.create_table("db.p", SCHEMA, properties={"format-version": "2"})
    ice.append(batch(0, 20000))
    ice.append(batch(20000, 5000))
    t = li.open_table("db.p", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    ice.append(batch(25000, 10))
    ice.delete(X.And(X.GreaterThanOrEqual("id", 20000), X.LessThan("id", 20100)))
    t.refresh_index("by_k", mode="full", spark=spark)
    ice.append(batch(25010, 10000))
    ice.append(batch(35010, 5))
    t.refresh_index("by_k", mode="full", spark=spark)
    ice = catalog.load_table("db.p")
    versions = main_lineage(ice)

    def live(sid: int) -> dict[str, int]:
        return {
            _canonical(task.file.file_path): task.file.file_size_in_bytes
            for task in ice.scan(snapshot_id=sid).plan_files()
        }

    location = ice.location().removeprefix("file://")
    return Scenario(t, versions, live, lambda sid: ice.scan(snapshot_id=sid).to_arrow(), Path(location))


@pytest.fixture(scope="module", params=["delta", "iceberg"])
def scenario(
    request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Scenario:
    root = tmp_path_factory.mktemp(f"choice-{request.param}")
    return (delta_scenario if request.param == "delta" else iceberg_scenario)(root, spark)


def log_snapshots(index_dir: Path) -> dict[int, dict[str, Any]]:
    """ACTIVE log entries of ``by_k``, read as plain JSON, by entry id."""
    out = {}
    for f in sorted((index_dir / "_lakehouse_index" / "by_k" / "_log").glob("*.json")):
        e = json.loads(f.read_text())
        if e["state"] == "ACTIVE":
            out[e["id"]] = e
    return out


#: Position in the history (v0..v5) → position of the snapshot the planner must pick (None: any
#: snapshot that scans nothing). v2: S1 scans the 10-row v2 file, S3/S5 the 5,000-row v1 file they
#: no longer cover; v4: S5 covers the big v4 file and excludes only the tiny v5 file; S3 scans v4.
EXPECTED = {0: None, 1: 1, 2: 1, 3: 3, 4: 5, 5: 5}


@pytest.mark.parametrize("position", range(6))
def test_explain_picks_the_cheapest_snapshot_and_costs_agree_with_the_metadata(
    scenario: Scenario, position: int
) -> None:
    s = scenario
    t = s.table
    version = s.versions[position]
    plan = t.explain("by_k", ["k3"], version_as_of=version)
    entries = log_snapshots(s.index_dir)
    indexed_at = {s.versions.index(e["source"]["version"]) for e in entries.values()}
    assert indexed_at == {1, 3, 5}, str(plan)

    # Scan bytes of every snapshot candidate, from the table's metadata and the log as plain JSON.
    live = s.live_files(version)
    for c in plan.candidates:
        if c.entry is None:
            assert c.label == "plain scan" and c.scan_bytes == sum(live.values()), str(plan)
            continue
        covered = {f["path"] for f in entries[c.entry.id]["source"]["files"] if f["removedOrdinal"] is None}
        expected_scan = sum(size for p, size in live.items() if p not in covered)
        assert c.scan_bytes == expected_scan, (c.label, str(plan))

    chosen = plan.chosen
    assert chosen.entry is not None, str(plan)
    assert chosen.cost == min(c.cost for c in plan.candidates if c.usable), str(plan)
    want = EXPECTED[position]
    if want is None:
        assert chosen.scan_bytes == 0, str(plan)
    else:
        assert s.versions.index(chosen.entry.source.version) == want, str(plan)
    text = str(plan)
    for c in plan.candidates:
        assert c.label in text and c.reason.value in text
    assert sum(c.reason is Reason.CHOSEN for c in plan.candidates) == 1

    full = s.rows(version)
    got = t.lookup("by_k", ["k3", "k5"], version_as_of=version)
    want_rows = full.filter(pa.compute.is_in(full["k"], pa.array(["k3", "k5"])))
    assert Counter(zip(got["id"].to_pylist(), got["k"].to_pylist(), strict=True)) == Counter(
        zip(want_rows["id"].to_pylist(), want_rows["k"].to_pylist(), strict=True)
    )


def test_a_snapshot_of_an_expired_iceberg_snapshot_is_not_used(tmp_path: Path, spark: Any) -> None:
    catalog = sql_catalog(str(tmp_path))
    ice = catalog.create_table("db.x", SCHEMA, properties={"format-version": "2"})
    ice.append(batch(0, 500))
    t = li.open_table("db.x", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)  # S0
    first = ice.current_snapshot().snapshot_id
    for i in range(1, 4):
        ice.append(batch(500 * i, 500))
    t.refresh_index("by_k", mode="full", spark=spark)  # S3
    ice = catalog.load_table("db.x")
    ice.maintenance.expire_snapshots().by_id(first).commit()
    ice = catalog.load_table("db.x")
    assert first not in {s.snapshot_id for s in ice.snapshots()}

    t = li.open_table("db.x", catalog=catalog)
    t.planner_config = li.PlannerConfig(force_index=True)  # even forced, a gone version is not used
    for sid in main_lineage(ice):
        plan = t.explain("by_k", ["k1"], version_as_of=sid)
        reasons = {c.entry.source.version: c.reason for c in plan.candidates if c.entry is not None}
        assert reasons[first] is Reason.TABLE_VERSION_GONE, str(plan)
        assert plan.chosen.entry is not None and plan.chosen.entry.source.version != first, str(plan)
        full = ice.scan(snapshot_id=sid).to_arrow()
        got = t.lookup("by_k", ["k1"], version_as_of=sid)
        want = full.filter(pa.compute.equal(full["k"], "k1"))
        assert sorted(got["id"].to_pylist()) == sorted(want["id"].to_pylist())


def test_ties_go_to_the_newer_snapshot(tmp_path: Path, spark: Any) -> None:
    """Two snapshots with the same files (a commit that changed no data in between) cost the same
    at the latest version: the newer one is chosen, and the answer is right."""
    path = str(tmp_path / "t")
    write_deltalake(path, batch(0, 3000))
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    DeltaTable(path).alter.set_table_properties({"delta.checkpointInterval": "50"})  # no data change
    assert DeltaTable(path).version() > 0
    t.refresh_index("by_k", mode="incremental", spark=spark)
    plan = t.explain("by_k", ["k2"])
    snaps = [c for c in plan.candidates if c.entry is not None]
    assert len(snaps) == 2 and snaps[0].cost == snaps[1].cost, str(plan)
    newest = max(snaps, key=lambda c: c.entry.id if c.entry else -1)
    assert plan.chosen is newest, str(plan)
    got = t.lookup("by_k", ["k2"])
    full = DeltaTable(path).to_pyarrow_table()
    assert sorted(got["id"].to_pylist()) == sorted(r["id"] for r in full.to_pylist() if r["k"] == "k2")
