"""A watcher killed with SIGKILL (inside a refresh, or at random moments) and restarted recovers."""

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

import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.log.entry import Content, IndexState, Operation
from lakehouse_index.log.store import IndexCatalog
from tests.support.paths import code_env
from tests.workflows.helpers import check_all, check_version, create_indexes, rows
from tests.workflows.watched import Watcher, exactly_once, index_log, pid_alive, watched_table, watcher_script

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


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_watcher_killed_inside_a_refresh_and_restarted(tmp_path: Path, fmt: str) -> None:
    w = watched_table(tmp_path, fmt, [(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")])
    w.native_append(rows([(3, "c", 2, 3, "x")]))
    w.native_delete("id = 1")
    marker = tmp_path / "inside-refresh"
    # deterministic: the watcher's first incremental refresh blocks inside its body, after
    # its transient log entry (the CLI watcher with refresh.incremental replaced)
    blocked = Watcher(w, 0.05, python=watcher_script(str(marker)))
    deadline = time.monotonic() + 120
    while not marker.exists() and blocked.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), blocked.stop(signal.SIGKILL)
    pid = int(marker.read_text())
    transient = index_log(w.t, "by_k")[-1]
    assert transient.state is IndexState.REFRESHING and transient.operation is Operation.REFRESH_INCREMENTAL
    assert transient.writer == f"{socket.gethostname()}:{pid}"
    code, _ = blocked.stop(signal.SIGKILL)
    assert code == -signal.SIGKILL and not pid_alive(pid)
    # what the kill left: the transient entry is still the newest; readers use the last stable
    # entry and repair the rest by hybrid scan
    assert index_log(w.t, "by_k")[-1] == transient
    latest = w.versions()[-1]
    check_version(w.t, latest, w.read(latest))
    w.native_append(rows([(4, "a", 0, 4, "y")]))  # a commit while no watcher runs
    restarted = Watcher(w, 0.05)
    latest = w.versions()[-1]
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            info = {i.name: i for i in w.t.indexes()}["by_k"]
            if info.indexed_version == latest and info.state is IndexState.ACTIVE:
                break
            time.sleep(0.05)
    finally:
        code, err = restarted.stop(signal.SIGTERM)
    assert code == 0, err
    assert "died; cancelling it" in err  # the restarted watcher says what it did
    after = index_log(w.t, "by_k")[transient.id + 1 :]
    assert [(e.operation, e.state.is_stable) for e in after] == [
        (Operation.CANCEL, False),
        (Operation.CANCEL, True),
        (Operation.REFRESH_INCREMENTAL, False),
        (Operation.REFRESH_INCREMENTAL, True),
    ]
    assert after[-1].source.version == latest
    assert [line for line in restarted.lines if line.get("error")] == []
    exactly_once(w, "by_k")
    check_all(w.t, w.versions(), w.read)
