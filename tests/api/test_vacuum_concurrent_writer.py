"""Vacuum removes only data older than its own transient entry: a directory an operation writes
after the vacuum started (possible only when the vacuum was cancelled while it still ran, then
another operation began) is left for a later vacuum (found by the race harness)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.log.garbage import orphans
from lakehouse_index.log.store import IndexCatalog
from lakehouse_index.maintenance.vacuum import vacuum_active, vacuum_deleted
from tests.workflows.helpers import rows


def _index(tmp_path: Path) -> tuple[li.Table, Path]:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(1, "a", 0, 1, "x")]))
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    return t, Path(path) / "_lakehouse_index" / "by_k" / "data"


def _orphan(data: Path, name: str) -> Path:
    f = data / name / "part-0.parquet"
    f.parent.mkdir(parents=True)
    f.write_bytes(b"not named by any entry")
    return f


def test_vacuum_of_an_active_index_keeps_data_newer_than_its_start(tmp_path: Path) -> None:
    t, data = _index(tmp_path)
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    old = _orphan(data, "old")
    started_ms = int(time.time() * 1000) + 1  # the vacuum "starts" now
    time.sleep(0.05)
    young = _orphan(data, "young")  # written after the vacuum started
    vacuum_active(log, 0, started_ms)
    assert not old.exists() and young.exists()
    assert [o.path.rsplit("/", 3)[-2] for o in orphans(log)] == ["young"]
    t.vacuum_index("by_k", retention_hours=0)  # a later vacuum removes it
    assert orphans(log) == [] and not young.exists()


def test_vacuum_of_a_deleted_index_keeps_data_newer_than_its_start(tmp_path: Path) -> None:
    t, data = _index(tmp_path)
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    t.delete_index("by_k")
    named = [p for p in data.rglob("*.parquet")]
    assert named
    started_ms = int(time.time() * 1000) + 1
    time.sleep(0.05)
    young = _orphan(data, "young")
    vacuum_deleted(log, started_ms)
    assert [p for p in data.rglob("*") if p.is_file()] == [young]


def test_vacuum_of_a_deleted_index_cancelled_while_it_runs_keeps_the_restored_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process cancels the vacuum of a deleted index right after its transient entry and
    restores the index; the vacuum goes on, loses its final slot, and must have deleted nothing:
    the restored index names that data (found by the race harness on S3)."""
    from lakehouse_index.log import lifecycle

    t, data = _index(tmp_path)
    t.delete_index("by_k")
    other = li.open_table(str(tmp_path / "t"))  # the other process
    real = lifecycle.crash_point

    def cancel_and_restore(name: str) -> None:
        real(name)
        if name == "vacuum.after_transient":
            other.cancel_index("by_k")
            other.restore_index("by_k")

    monkeypatch.setattr(lifecycle, "crash_point", cancel_and_restore)
    with pytest.raises(li.ConcurrentIndexUpdate):
        t.vacuum_index("by_k", retention_hours=0)
    monkeypatch.undo()

    assert [i.state for i in other.indexes()] == [li.IndexState.ACTIVE]
    assert other.lookup("by_k", ["a"])["id"].to_pylist() == [1]
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    assert all(t.storage.exists(log.uri(f.path)) for e in log.entries() for f in e.content.files)
    assert list(data.rglob("*.parquet"))
