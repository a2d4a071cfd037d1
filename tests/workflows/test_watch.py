"""The watcher: resumes from the index logs, treats lost races as someone else's work,
stops cleanly on SIGTERM, watches Iceberg tables through their catalog pointer."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.errors import ConcurrentIndexUpdate
from lakehouse_index.workflows import sync as sync_workflow
from lakehouse_index.workflows.watch import StopFlag, WatchEvent, watch
from tests.support.paths import code_env
from tests.workflows.helpers import create_indexes, rows

ROOT = Path(__file__).resolve().parents[2]
FIRST = [(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")]


def _table(tmp_path: Path) -> tuple[str, li.Table]:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    return path, t


def test_a_lost_race_is_rechecked_on_the_next_poll(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path, t = _table(tmp_path)
    write_deltalake(path, rows([(3, "c", 2, 3, "x")]), mode="append")
    real = sync_workflow.refresh_index  # the action the sync runs
    calls = {"n": 0}

    def racing(ctx, name, mode="incremental", **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] == 1:  # another watcher won the log slot
            raise ConcurrentIndexUpdate("log slot taken")
        return real(ctx, name, mode, **kw)

    monkeypatch.setattr(sync_workflow, "refresh_index", racing)
    events: list[WatchEvent] = []
    stop = StopFlag()

    def on_event(e: WatchEvent) -> None:
        events.append(e)
        if e.report is not None and e.report.name == "by_k" and e.report.action.value == "incremental":
            stop.set()

    watch([t.context], interval=0.01, on_event=on_event, stop=stop, handle_signals=False)
    by_k = [e.report.action.value for e in events if e.report is not None and e.report.name == "by_k"]
    assert by_k[:2] == ["raced", "incremental"]
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == 1


def test_idle_polls_do_nothing(tmp_path: Path) -> None:
    _, t = _table(tmp_path)
    first = watch([t.context], once=True, handle_signals=False)
    assert {e.report.action.value for e in first if e.report} <= {"nothing", "reported"}
    logs = {i.name: i.log_entry for i in t.indexes()}
    watch([t.context], once=True, handle_signals=False)
    assert {i.name: i.log_entry for i in t.indexes()} == logs


def test_sigterm_stops_the_watcher_cleanly(tmp_path: Path) -> None:
    path, t = _table(tmp_path)
    env = code_env()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--interval", "0.2", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(ROOT),
    )
    try:
        time.sleep(0.5)
        write_deltalake(path, rows([(3, "c", 2, 3, "x")]), mode="append")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if {i.name: i.indexed_version for i in t.indexes()}["by_k"] == 1:
                break
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines() if x.strip()]
    assert any(x["index"] == "by_k" and x["action"] == "incremental" and x["version"] == 1 for x in lines)


def test_watch_iceberg_through_its_catalog(tmp_path: Path) -> None:
    from tests.workflows.test_writes_iceberg_oracle import iceberg_table

    catalog, tbl = iceberg_table(str(tmp_path), FIRST)
    t = li.open_table("db.t", catalog=catalog)
    create_indexes(t)
    tbl.append(rows([(3, "c", 2, 3, "x")]))
    events = watch([t.context], once=True, handle_signals=False)
    head = catalog.load_table("db.t").current_snapshot().snapshot_id
    by_name = {e.report.name: e.report for e in events if e.report}
    assert by_name["by_k"].indexed_version == head and by_name["by_kk"].seen_version == head
    assert t.lookup("by_k", ["c"])["id"].to_pylist() == [3]


def test_a_sync_reads_the_latest_version_once_plus_once_per_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.workflows.test_writes_iceberg_oracle import iceberg_table

    catalog, tbl = iceberg_table(str(tmp_path), FIRST)
    t = li.open_table("db.t", catalog=catalog)
    create_indexes(t)  # incremental, quick and off
    tbl.append(rows([(3, "c", 2, 3, "x")]))
    reads = {"n": 0}
    real = type(t.source).latest_version

    def counted(self):  # type: ignore[no-untyped-def]
        reads["n"] += 1  # on Iceberg each read is a catalog load and a metadata parse
        return real(self)

    monkeypatch.setattr(type(t.source), "latest_version", counted)
    result = t.sync_indexes()
    head = catalog.load_table("db.t").current_snapshot().snapshot_id
    assert [(r.name, r.action.value, r.table_version) for r in result.indexes] == [
        ("by_k", "incremental", head),
        ("by_kk", "quick", head),
        ("cov", "reported", head),
    ]
    assert reads["n"] == 3  # the sync's own read, and each refresh's
