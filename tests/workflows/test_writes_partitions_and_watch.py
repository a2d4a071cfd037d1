"""Whole-partition overwrite and delete with indexes present; ``watch --once`` through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows import sync as sync_workflow
from tests.support.paths import code_env
from tests.workflows.helpers import check_all, create_indexes, rows

ROOT = Path(__file__).resolve().parents[2]
FIRST = [(i, "abc"[i % 3], i % 3, i, "xy"[i % 2]) for i in range(12)]


def _read(path: str):  # type: ignore[no-untyped-def]
    return lambda v: DeltaTable(path, version=v).to_pyarrow_table()


def _watch_once(path: str) -> subprocess.CompletedProcess[str]:
    """``lakehouse-index watch PATH --once --json``, run as a user runs it."""
    cmd = [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--once", "--json"]
    return subprocess.run(
        cmd, capture_output=True, text=True, env=code_env(), cwd=str(ROOT), timeout=300, check=True
    )


def test_overwrite_and_delete_whole_partitions(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST[:6]), partition_by=["p"])
    write_deltalake(path, rows(FIRST[6:]), mode="append")
    t = li.open_table(path)
    create_indexes(t)
    replaced = t.overwrite(rows([(100, "a", 1, 7, "x"), (101, "z", 2, 8, "x")]), where="p = 'x'")
    assert replaced.ok and replaced.rows_deleted == 6 and replaced.rows_written == 2
    by_k = {r.name: r for r in replaced.indexes}["by_k"]
    assert by_k.files_tombstoned == 2 and by_k.indexed_version == replaced.table_version
    gone = t.delete("p = 'y'")
    assert gone.ok and gone.rows_deleted == 6
    assert t.scan().num_rows == 2
    assert t.lookup("by_k", ["b", "c"]).num_rows == 0
    assert sorted(t.lookup("by_k", ["a", "z"])["id"].to_pylist()) == [100, 101]
    everything = t.overwrite(rows([(200, "b", 0, 1, "y")]))
    assert everything.ok
    assert t.lookup("by_k", ["b"])["id"].to_pylist() == [200]
    check_all(t, list(range(t.latest_version() + 1)), _read(path))


def test_index_failure_keeps_the_commit_and_says_how_to_recover(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    real = sync_workflow.refresh_index  # the action the sync runs

    def failing(ctx, name, mode="incremental", **kw):  # type: ignore[no-untyped-def]
        if name == "by_k":
            raise OSError("disk full")
        return real(ctx, name, mode, **kw)

    monkeypatch.setattr(sync_workflow, "refresh_index", failing)
    try:
        t.append(rows([(50, "c", 0, 5, "x")]))
        raise AssertionError("expected IndexMaintenanceError")
    except li.errors.IndexMaintenanceError as e:
        message = str(e)
        result = e.result
    assert "by_k" in message and "disk full" in message and "refresh_index('by_k'" in message
    assert result.table_version == 1 == t.latest_version()  # the commit stands
    failed = {r.name: r for r in result.indexes}
    assert not failed["by_k"].ok and failed["by_kk"].ok
    assert failed["by_k"].indexed_version == 0
    monkeypatch.setattr(sync_workflow, "refresh_index", real)
    # the failed index still answers correctly (hybrid scan), and the hint recovers it
    check_all(t, [0, 1], _read(path))
    t.refresh_index("by_k", "incremental")
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == 1


def test_watch_once_cli_after_a_native_commit(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    write_deltalake(path, rows([(60, "a", 1, 6, "y")]), mode="append")
    DeltaTable(path).delete("k = 'b'")
    out = _watch_once(path)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.strip()]
    by_name = {x["index"]: x for x in lines}
    assert set(by_name) == {"by_k", "by_kk", "cov"}
    for x in lines:
        assert x["table"] == t.uri and x["version"] == 2
        assert {"indexed_version", "lag", "seconds", "lag_seconds"} <= set(x)
    assert by_name["by_k"]["action"] == "incremental" and by_name["by_k"]["indexed_version"] == 2
    assert by_name["by_k"]["lag"] == 0
    assert by_name["by_kk"]["action"] == "quick" and by_name["by_kk"]["seen_version"] == 2
    assert by_name["cov"]["action"] == "reported" and by_name["cov"]["lag"] == 2
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == 2
    # a second pass (a restarted or second watcher) finds nothing to do
    again = _watch_once(path)
    actions = {
        json.loads(x)["index"]: json.loads(x)["action"] for x in again.stdout.splitlines() if x.strip()
    }
    assert actions == {"by_k": "nothing", "by_kk": "nothing", "cov": "reported"}
    rows_b = t.lookup("by_k", ["b"])
    assert (
        rows_b.num_rows == 0
        and t.scan(where="k = 'a'").filter(pc.equal(t.scan(where="k = 'a'")["id"], 60)).num_rows == 1
    )
