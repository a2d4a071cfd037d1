"""Warm lookups reuse what they planned, and never serve a stale answer.

One ``Table`` object lives through a history of commits, index refreshes (incremental, quick),
optimizes and lookups at the latest and at older versions. Every lookup and ``locate`` is
compared with the table's own reader (deltalake, pyiceberg) at that version, so a coverage,
snapshot or catalog location kept from before a commit or a refresh would show up as a wrong
answer. The planning caches are also checked directly: the same (log entry, table version)
gives back the same coverage object, a new commit or a new log entry another one, and a warm
Iceberg lookup parses no metadata file until the table changes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.api.iceberg_index_support import sql_catalog
from tests.support.oracle import rows_multiset

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("v", pa.int64())])
INDEX = "by_k"
#: The tables are tiny: without it the planner would answer by a plain scan.
CONFIG = li.Config(planner=li.PlannerConfig(force_index=True))


def batch(first: int, n: int) -> pa.Table:
    """Rows ``first .. first+n-1``; key ``k`` repeats every 7 ids, so keys span commits."""
    ids = list(range(first, first + n))
    return pa.table({"id": ids, "k": [f"k{i % 7}" for i in ids], "v": [i * 10 for i in ids]}, schema=SCHEMA)


PROBES = [["k0"], ["k3", "k5"], ["nope"], ["k6", "k6", "k1"]]


def check(t: li.Table, oracle: pa.Table, version: int | None) -> None:
    """lookup and locate of every probe at ``version`` against the oracle's rows at that version."""
    assert t.plan(INDEX, ["k0"], version_as_of=version).chosen.entry is not None  # through the index
    for keys in PROBES:
        want = oracle.filter(pc.is_in(oracle["k"], pa.array(keys)))
        got = t.lookup(INDEX, keys, version_as_of=version)
        assert rows_multiset(got, ["id", "k", "v"]) == rows_multiset(want, ["id", "k", "v"]), (keys, version)
        where = t.locate(INDEX, keys, version_as_of=version)
        assert rows_multiset(where, ["k", "id"]) == rows_multiset(want, ["k", "id"]), (keys, version)


def run_history(
    t: li.Table,
    append: Callable[[pa.Table], None],
    delete: Callable[[str], None],
    oracle_at: Callable[[int], pa.Table],
) -> None:
    """Commits, refreshes and lookups interleaved on one Table, each answer checked."""
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))
    seen: list[int] = []

    def check_all() -> None:
        latest = t.latest_version()
        if latest not in seen:
            seen.append(latest)
        check(t, oracle_at(latest), None)
        for v in seen[-3:]:
            check(t, oracle_at(v), v)

    check_all()
    steps: list[Callable[[], Any]] = [
        lambda: append(batch(100, 20)),  # a commit the index has not seen: hybrid scan
        lambda: t.refresh_index(INDEX, "incremental"),
        lambda: delete("id < 10"),
        lambda: t.refresh_index(INDEX, "quick"),  # a new log entry, same index data
        lambda: append(batch(200, 15)),
        lambda: delete("k = 'k3' AND id > 100"),
        lambda: t.refresh_index(INDEX, "incremental"),
        lambda: t.optimize_index(INDEX, "full"),
        lambda: append(batch(300, 5)),
    ]
    for step in steps:
        step()
        check_all()


def test_delta_history_on_one_table(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    for first in (0, 30):
        write_deltalake(path, batch(first, 30), mode="append")
    t = li.open_table(path, config=CONFIG)

    def oracle_at(version: int) -> pa.Table:
        return DeltaTable(path, version=version).to_pyarrow_table()

    run_history(
        t,
        lambda rows: write_deltalake(path, rows, mode="append"),
        lambda where: DeltaTable(path).delete(where),
        oracle_at,
    )


def test_iceberg_history_on_one_table(tmp_path: Path) -> None:
    catalog = sql_catalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append(batch(0, 30))
    table.append(batch(30, 30))
    t = li.open_table("db.t", catalog=catalog, config=CONFIG)

    def oracle_at(version: int) -> pa.Table:
        return catalog.load_table("db.t").scan(snapshot_id=version).to_arrow()

    run_history(
        t,
        lambda rows: catalog.load_table("db.t").append(rows),
        lambda where: catalog.load_table("db.t").delete(where),
        oracle_at,
    )


def test_coverage_reused_until_a_commit_or_a_log_entry(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, batch(0, 30), mode="append")
    t = li.open_table(path, config=CONFIG)
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))

    def chosen() -> Any:
        return t.plan(INDEX, ["k1"]).chosen

    first = chosen()
    assert chosen().coverage is first.coverage  # warm: the same object, nothing recomputed
    write_deltalake(path, batch(30, 10), mode="append")
    after_commit = chosen()
    assert after_commit.coverage is not first.coverage
    assert [fe.path for fe in after_commit.coverage.scan] == [
        p for p in t.snapshot().files if p not in t.snapshot(0).files
    ]
    t.refresh_index(INDEX, "incremental")
    newest = t.plan(INDEX, ["k1"]).candidates[-2]  # the plain scan comes last
    assert newest.entry is not None and newest.entry.id > after_commit.entry.id
    assert newest.coverage is not None and newest.coverage.exact_window and not newest.coverage.scan


def test_warm_iceberg_lookup_parses_no_metadata(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyiceberg.table.metadata import TableMetadataUtil

    parses = []
    parse_raw = TableMetadataUtil.parse_raw

    def counting(data: str | bytes) -> Any:  # every metadata JSON parse, ours or pyiceberg's
        parses.append(1)
        return parse_raw(data)

    monkeypatch.setattr(TableMetadataUtil, "parse_raw", staticmethod(counting))
    catalog = sql_catalog(str(tmp_path))
    table = catalog.create_table("db.t", schema=SCHEMA)
    table.append(batch(0, 30))
    t = li.open_table("db.t", catalog=catalog, config=CONFIG)
    t.create_index(li.SecondaryIndex(INDEX, key="k", record_key="id"))
    t.lookup(INDEX, ["k1"])
    parsed = t.source.reads["metadata"]
    snap = t.snapshot()
    parses.clear()
    for _ in range(5):
        t.lookup(INDEX, ["k1"])
    assert not parses  # the catalog's row names the metadata file; it did not change
    assert t.source.reads["metadata"] == parsed
    assert t.snapshot() is snap  # one Snapshot object per version: the planning caches stay warm
    catalog.load_table("db.t").append(batch(30, 7))
    got = t.lookup(INDEX, ["k2"])
    assert t.source.reads["metadata"] == parsed + 1  # the new metadata file, once
    want = catalog.load_table("db.t").scan().to_arrow()
    want = want.filter(pc.equal(want["k"], "k2"))
    assert rows_multiset(got, ["id", "k", "v"]) == rows_multiset(want, ["id", "k", "v"])
