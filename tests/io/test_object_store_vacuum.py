"""Vacuum on an object store leaves data written after it started, although the store lists
modification times in whole seconds (found by the race harness on S3: a vacuum cancelled while it
still ran deleted the fresh data of the operation that started after the cancel, because its
files were listed as modified before the vacuum's start)."""

from __future__ import annotations

import time
import uuid

from deltalake import write_deltalake

import lakehouse_index as li
from lakehouse_index.log.garbage import orphans
from lakehouse_index.log.store import IndexCatalog
from lakehouse_index.maintenance.vacuum import vacuum_active, vacuum_deleted
from tests.support.stores import StoreUnderTest
from tests.workflows.helpers import rows


def _write_listed_before_start(table: li.Table, data_dir: str) -> tuple[int, str]:
    """Write a young data file just after taking a start time, so that the store lists it as
    modified before that start (its whole seconds). The write is retried, on a fresh path, until
    it lands in the start's own second: on a loaded machine a write can cross into the next one."""
    for _ in range(20):
        while not 0.2 < time.time() % 1 < 0.5:
            time.sleep(0.02)
        started_ms = int(time.time() * 1000)
        young = f"{data_dir}/{uuid.uuid4().hex}/rows/part-0.parquet"
        table.storage.write_bytes(young, b"data of an operation that began after the vacuum")
        if table.storage.stat(young).mtime_ms < started_ms:
            return started_ms, young
        table.storage.delete(young)
    raise AssertionError("no write landed in the second it started in")


def test_vacuum_keeps_data_written_after_it_started(store: StoreUnderTest) -> None:
    uri = f"{store.root}/vacuum-{uuid.uuid4().hex}"
    write_deltalake(uri, rows([(1, "a", 0, 1, "x")]), storage_options=store.delta_options)
    t = li.open_table(uri, storage_options=store.storage_options)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    write_deltalake(uri, rows([(2, "b", 0, 2, "x")]), mode="append", storage_options=store.delta_options)
    t.refresh_index("by_k", "full")  # the create's data is now named by an old entry only
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    named_before = {f.path for e in log.entries() for f in e.content.files}
    started_ms, young = _write_listed_before_start(t, f"{t.index_root}/by_k/data")

    vacuum_active(log, 0, started_ms)
    assert t.storage.exists(young)
    # The expired entry's data went, at any age; what the latest entry names stayed.
    [latest] = [e for e in log.entries() if e.state.is_stable]
    kept = {f.path for f in latest.content.files}
    assert kept and named_before > kept
    left = {
        s.path[len(t.index_root) + len("/by_k/") :] for s in t.storage.list_tree(f"{t.index_root}/by_k/data")
    }
    assert left == kept | {young[len(t.index_root) + len("/by_k/") :]}
    assert sorted(t.lookup("by_k", ["a", "b"])["id"].to_pylist()) == [1, 2]

    t.delete_index("by_k")
    vacuum_deleted(log, started_ms)
    assert [s.path for s in t.storage.list_tree(f"{t.index_root}/by_k/data")] == [young]
    assert [s.path for s in orphans(log)] == [young]
