"""A watcher killed with SIGKILL (mid-refresh or not) and restarted: the index recovers."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.log.entry import Content, IndexState, Operation
from lakehouse_index.log.store import IndexCatalog
from tests.support.paths import code_env
from tests.workflows.helpers import check_all, create_indexes, rows

ROOT = Path(__file__).resolve().parents[2]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_operation_left_by_a_killed_local_process_is_cancelled(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(1, "a", 0, 1, "x")]), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    log = IndexCatalog(t.storage, t.index_root).log("by_k")
    stable = log.latest_stable()
    assert stable is not None
    # what a process killed mid-refresh leaves: a transient entry and no final one
    log.write(
        stable.next(
            state=IndexState.REFRESHING,
            operation=Operation.REFRESH_INCREMENTAL,
            source=replace(stable.source, files=()),
            content=Content(),
            pending=None,
            writer=f"{socket.gethostname()}:{_dead_pid()}",
            base_id=stable.id,
        )
    )
    write_deltalake(path, rows([(2, "b", 1, 2, "y")]), mode="append")
    events = li.watch([t], once=True, handle_signals=False)
    by_k = next(e.report for e in events if e.report and e.report.name == "by_k")
    assert by_k.action.value == "incremental" and by_k.indexed_version == 1
    assert [e.operation for e in log.entries()[-4:]] == [
        Operation.CANCEL,
        Operation.CANCEL,
        Operation.REFRESH_INCREMENTAL,
        Operation.REFRESH_INCREMENTAL,
    ]


def test_a_live_or_remote_writer_is_not_cancelled(tmp_path: Path) -> None:
    from lakehouse_index.workflows.sync import dead_local_writer

    path = str(tmp_path / "t")
    write_deltalake(path, rows([(1, "a", 0, 1, "x")]))
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    entry = IndexCatalog(t.storage, t.index_root).log("by_k").latest()
    assert entry is not None
    assert not dead_local_writer(replace(entry, writer=f"{socket.gethostname()}:{os.getpid()}"))
    assert not dead_local_writer(replace(entry, writer=f"elsewhere:{_dead_pid()}"))
    assert dead_local_writer(replace(entry, writer=f"{socket.gethostname()}:{_dead_pid()}"))


def test_watcher_killed_at_random_moments_and_restarted(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(0, "a", 0, 0, "x")]), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    env = code_env()
    args = [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--interval", "0.05", "--json"]
    rng = random.Random(13)
    for round_ in range(3):
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert proc.stdout is not None
            proc.stdout.readline()  # its first poll is done
            for i in range(4):
                write_deltalake(
                    path, rows([(round_ * 10 + i, "abc"[i % 3], i % 3, i, "xy"[i % 2])]), mode="append"
                )
                if i == 1:
                    DeltaTable(path).delete(f"id = {round_ * 10}")
                time.sleep(rng.uniform(0.0, 0.08))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    # a restarted watcher (here: one pass) brings every index up, whatever the kills left
    events = li.watch([t], once=True, handle_signals=False)
    latest = t.latest_version()
    assert all(e.report is not None and e.report.ok for e in events)
    info = {i.name: i for i in t.indexes()}
    assert info["by_k"].indexed_version == latest and info["by_k"].state is IndexState.ACTIVE
    check_all(t, list(range(latest + 1)), lambda v: DeltaTable(path, version=v).to_pyarrow_table())
