"""kill -9 of a real refresh (Spark build, incremental refresh) at each step, through the API.

A child process runs ``refresh_index`` and SIGKILLs itself from a hook wrapped around the
real code: right after the transient entry is written, before the Spark write of index
data, after it. The parent then proves: lookups keep answering (equal to deltalake) from
the last stable entry; every other operation gets ``IndexBusyError``; ``cancel_index``
returns the index to that entry; ``vacuum_index(retention_hours=0)`` removes the dead
operation's data and keeps all data retained entries name; a new refresh works.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from enginetest_helpers import (
    INDEX,
    SNAPSHOT_FIELDS,
    check_answers,
    data_dirs,
    index_dir,
    latest_stable,
    log_entries,
    make_table,
    sidecar_tree,
)
from enginetest_workers import KILL_POINTS, refresh_and_die

import lakehouse_index as li
from lakehouse_index.errors import IndexBusyError

pytestmark = pytest.mark.spark


def _reap_jvm(pid_file: Path) -> None:
    """The dead child's JVM exits when its parent's pipe closes; make sure (by its own pid)."""
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("mode", ["incremental", "full"])
@pytest.mark.parametrize(
    "point",
    KILL_POINTS,
)
def test_refresh_killed_at_each_step(
    indexed_table: tuple[Path, li.Table], spark: Any, tmp_path: Path, mode: str, point: str
) -> None:
    path, t = indexed_table
    # Work for the refresh: two appended files and one removed file.
    make_table(path, [10, 11])
    DeltaTable(str(path)).delete("batch = 2")
    stable_before = latest_stable(path)
    slots_before = set(log_entries(path))
    dirs_before = data_dirs(path)

    pid_file = tmp_path / "jvm.pid"
    child = mp.get_context("spawn").Process(
        target=refresh_and_die, args=(str(path), mode, point, str(pid_file))
    )
    child.start()
    child.join(timeout=600)
    _reap_jvm(pid_file)
    assert child.exitcode == -signal.SIGKILL, f"child ended with {child.exitcode}, not killed"

    # The dead operation left its transient entry (written by the child) and maybe data.
    entries = log_entries(path)
    [new_slot] = set(entries) - slots_before
    transient = entries[new_slot]
    assert transient["state"] == "REFRESHING"
    assert transient["baseId"] == stable_before["id"]
    assert transient["writer"].endswith(f":{child.pid}")
    dead_dirs = data_dirs(path) - dirs_before
    if point == "after-data":
        assert dead_dirs, "the child should have written index data before dying"
        assert any(any((index_dir(path) / "data" / d).rglob("*.parquet")) for d in dead_dirs)
    else:
        assert not any(any((index_dir(path) / "data" / d).rglob("*.parquet")) for d in dead_dirs)

    # Readers keep using the last stable entry and answer like deltalake (hybrid scan of the
    # appended file, lineage filter of the removed one).
    check_answers(t, path)
    [info] = t.indexes()
    assert info.state is li.IndexState.REFRESHING
    assert info.indexed_version == stable_before["source"]["version"]

    # Everything but cancel is refused while the dead operation's entry is the latest.
    tree = sidecar_tree(path)
    for op in (
        lambda: t.refresh_index(INDEX, "quick"),
        lambda: t.refresh_index(INDEX, mode, spark=spark),
        lambda: t.optimize_index(INDEX, "full", spark=spark),
        lambda: t.delete_index(INDEX),
        lambda: t.vacuum_index(INDEX, retention_hours=0),
    ):
        with pytest.raises(IndexBusyError, match=rf"refresh-{mode} is in progress.*:{child.pid}.*cancel"):
            op()
    assert sidecar_tree(path) == tree

    # Cancel returns the index to exactly the entry the dead refresh started from.
    info = t.cancel_index(INDEX)
    assert info.state is li.IndexState.ACTIVE
    restored = latest_stable(path)
    assert restored["id"] == new_slot + 2
    assert {k: restored[k] for k in SNAPSHOT_FIELDS} == {k: stable_before[k] for k in SNAPSHOT_FIELDS}
    check_answers(t, path)

    # Vacuum removes the orphan data; every file a retained entry names is still there.
    t.vacuum_index(INDEX, retention_hours=0)
    for d in dead_dirs:
        left = [p for p in (index_dir(path) / "data" / d).rglob("*") if p.is_file()]
        assert left == [], f"vacuum left the dead refresh's files: {left}"
    for e in log_entries(path).values():
        for f in e["content"]["files"]:
            assert (index_dir(path) / f["path"]).is_file(), f["path"]
    check_answers(t, path)
    vacuumed = sidecar_tree(path)

    # A refresh now works and catches up with the table.
    info = t.refresh_index(INDEX, mode, spark=spark)
    assert info.state is li.IndexState.ACTIVE
    assert info.indexed_version == DeltaTable(str(path)).version()
    check_answers(t, path)

    # Last (it is the only known failure): vacuum also removed the dead data directories.
    assert [d for d in dead_dirs if f"{INDEX}/data/{d}" in vacuumed] == []
