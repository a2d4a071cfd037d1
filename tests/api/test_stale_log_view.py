"""Processes whose cached view of an index log ends below slots another process expired (a
zero-retention vacuum or an erase purge cut the log): readers must not fail on the deleted
index data, writers must not write into the hole (found by the crash harness)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.log.entry import Operation
from lakehouse_index.log.lifecycle import Started, start_operation
from lakehouse_index.log.store import IndexCatalog, IndexLog
from tests.workflows.helpers import SCHEMA, multiset, rows


def _expire_behind(path: str) -> li.Table:
    """A reader that saw only the create, then another process's refreshes, optimize and
    zero-retention vacuum expire every entry up to the newest ones."""
    write_deltalake(path, rows([(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")]))
    writer = li.open_table(path)
    writer.create_index(li.SecondaryIndex("by_k", key="k"))
    stale = li.open_table(path)
    stale.planner_config = li.PlannerConfig(force_index=True)  # the tiny table would be scanned
    stale.indexes()  # its view of the log: entries 0 and 1 (no index data read, none cached)
    for i in (3, 4):
        write_deltalake(path, rows([(i, "a", 1, i, "x")]), mode="append")
        writer.refresh_index("by_k", "incremental")
    DeltaTable(path).delete("id = 1")
    writer.refresh_index("by_k", "incremental")
    writer.optimize_index("by_k", "full")
    writer.vacuum_index("by_k", retention_hours=0)
    return stale


def _one_row_index(tmp_path: Path) -> tuple[str, li.Table, IndexLog]:
    """A one-row Delta table with a secondary index on ``k``: its path, table and index log."""
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(1, "a", 0, 1, "x")]))
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    return path, t, IndexCatalog(t.storage, t.index_root).log("by_k")


def _slots(path: str) -> list[int]:
    return sorted(
        int(p.name[:20]) for p in (Path(path) / "_lakehouse_index" / "by_k" / "_log").glob("*.json")
    )


def test_reader_behind_an_expiry_answers_correctly(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    reader = _expire_behind(path)
    assert _slots(path)[0] > 2  # the slots after the reader's view are gone
    for v in range(DeltaTable(path).version() + 1):
        oracle = DeltaTable(path, version=v).to_pyarrow_table()
        want = oracle.filter(pc.equal(oracle["k"], "a"))
        got = reader.lookup("by_k", ["a"], version_as_of=v)
        assert multiset(got, SCHEMA.names) == multiset(want, SCHEMA.names), v
        assert reader.locate("by_k", ["a"], version_as_of=v).num_rows == want.num_rows, v
        scanned = reader.scan(version_as_of=v, where="k = 'a'")
        assert multiset(scanned, SCHEMA.names) == multiset(want, SCHEMA.names), v


def test_writer_behind_an_expiry_does_not_write_into_the_hole(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    writer = _expire_behind(path)
    newest = _slots(path)[-1]
    write_deltalake(path, rows([(9, "c", 2, 9, "x")]), mode="append")
    info = writer.refresh_index("by_k", "incremental")
    assert info.log_entry == newest + 2 and _slots(path)[-2:] == [newest + 1, newest + 2]
    transient = json.loads(
        (Path(path) / "_lakehouse_index" / "by_k" / "_log" / f"{newest + 1:020d}.json").read_text()
    )
    assert transient["baseId"] == newest
    assert li.open_table(path).indexes()[0].indexed_version == DeltaTable(path).version()


def test_log_view_whose_entries_were_expired_finds_the_newer_ones(tmp_path: Path) -> None:
    """The view ends at a transient entry; another process finishes it, operates again and
    expires everything below its newest stable entry: the view's ids are gone and a hole
    separates them from the newer slots (found by the race harness: a watcher failed with
    "has no log entry")."""
    path, t, log = _one_row_index(tmp_path)
    started = start_operation(log, Operation.REFRESH_QUICK)
    assert isinstance(started, Started)
    view = IndexCatalog(t.storage, t.index_root).log("by_k")
    assert view.list_ids() == [0, 1, 2]  # listed, no entry read yet
    started.finish(None)
    write_deltalake(path, rows([(2, "b", 1, 2, "y")]), mode="append")
    t.refresh_index("by_k", "incremental")
    assert log.expire(range(5), min_retention_s=0) == [0, 1, 2, 3, 4]
    latest = view.latest()
    stable = view.latest_stable()
    assert latest is not None and stable is not None
    assert latest.id == stable.id == 5 and stable.source.version == 1


def test_cancelled_operation_finishing_after_its_slot_expired_writes_nothing_readers_use(
    tmp_path: Path,
) -> None:
    """A refresh is cancelled while it runs; other operations and a zero-retention vacuum then
    expire the slot after its transient entry; the refresh finally writes its final entry there
    (put-if-absent succeeds in an expired slot). It must fail like a lost race, leave no entry
    behind, and readers must keep the newer state (found by the race harness on S3: a late
    entry below the newest ones left a hole in the log)."""
    path, t, log = _one_row_index(tmp_path)
    late = start_operation(log, Operation.REFRESH_INCREMENTAL)
    assert isinstance(late, Started)
    t.cancel_index("by_k")
    write_deltalake(path, rows([(3, "c", 0, 3, "x")]), mode="append")
    t.refresh_index("by_k", "incremental")
    t.vacuum_index("by_k", retention_hours=0)
    slot = late.ctx.transient.id + 1
    assert slot < _slots(path)[0]  # expired

    with pytest.raises(li.ConcurrentIndexUpdate, match="expired"):
        late.finish(None)

    assert slot not in _slots(path)
    fresh = li.open_table(path)
    assert [e.id for e in IndexCatalog(fresh.storage, fresh.index_root).log("by_k").entries()] == _slots(path)
    assert fresh.indexes()[0].indexed_version == DeltaTable(path).version()
    assert sorted(fresh.lookup("by_k", ["a", "c"])["id"].to_pylist()) == [1, 3]
    # The vacuum's expiry mark is what readers go by: a late entry below it is never listed.
    late_entry = Path(path) / "_lakehouse_index" / "by_k" / "_log" / f"{slot:020d}.json"
    late_entry.write_text(
        (Path(path) / "_lakehouse_index" / "by_k" / "_log" / f"{_slots(path)[0]:020d}.json").read_text()
    )
    assert slot not in IndexCatalog(fresh.storage, fresh.index_root).log("by_k").list_ids()


def test_log_view_whose_listed_entries_all_expired_reads_the_newer_ones(tmp_path: Path) -> None:
    """A reader listed the log but had read none of its entries when another process's
    zero-retention vacuum expired every listed one: its next read of the entries must list
    again, not answer with the (empty) rest (found by the engine race: a lookup was refused with
    "index 'by_k' is ACTIVE; restore it to query it")."""
    path, writer, _ = _one_row_index(tmp_path)
    reader = IndexCatalog(writer.storage, writer.index_root).log("by_k")  # another process's view
    listed = reader.list_ids()  # ids only: no entry read yet
    write_deltalake(path, rows([(2, "a", 0, 2, "x")]), mode="append")
    writer.refresh_index("by_k", "incremental")
    writer.vacuum_index("by_k", retention_hours=0)
    assert not set(listed) & set(_slots(path))  # every listed entry is gone

    assert [e.id for e in reader.entries()] == _slots(path)
    assert reader.active_snapshots()[-1].id == _slots(path)[-1]
