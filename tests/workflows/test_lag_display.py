"""The watcher's live lag table: a pure function of the state (render), folded from events (record);
the CLI shows it in a terminal and plain lines otherwise."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from deltalake import write_deltalake
from rich.console import Console

import lakehouse_index as li
from lakehouse_index.lag_display import COLUMNS, TABLE_ROW, LagState, record, render
from lakehouse_index.spec import AutoRefresh
from lakehouse_index.workflows.reports import Action, IndexReport
from lakehouse_index.workflows.watch import WatchEvent
from tests.support.paths import REPO_ROOT, code_env
from tests.workflows.helpers import create_indexes, rows

T = "file:///data/orders"


def _report(
    name: str,
    action: Action,
    version: int,
    indexed: int,
    *,
    policy: AutoRefresh = AutoRefresh.INCREMENTAL,
    lag_seconds: float = 0.0,
    seconds: float = 0.0,
    error: str | None = None,
) -> IndexReport:
    return IndexReport(
        name=name,
        policy=policy,
        action=action,
        table_version=version,
        version_before=indexed,
        indexed_version=indexed,
        seen_version=indexed,
        lag=version - indexed,
        lag_seconds=lag_seconds,
        seconds=seconds,
        error=error,
        recovery=None if error is None else "t.refresh_index(...)",
    )


def _text(state: LagState, now: float) -> list[str]:
    console = Console(record=True, width=250, color_system=None)
    console.print(render(state, now, title="watch"))
    return console.export_text().replace("┃", "│").splitlines()  # header cells use the heavy bar


def _cells(lines: list[str], index: str) -> list[str]:
    """The cells of the row of ``index`` (rich separates cells with │)."""
    (line,) = [x for x in lines if f"│ {index} " in x]
    return [c.strip() for c in line.strip()[1:-1].split("│")]


def test_rows_show_versions_lag_action_age_and_errors() -> None:
    state = LagState()
    state = record(
        state, WatchEvent(T, 7, _report("by_k", Action.INCREMENTAL, 7, 7, seconds=0.25)), now=100.0
    )
    off = _report("cov", Action.REPORTED, 7, 4, policy=AutoRefresh.OFF, lag_seconds=12.5)
    state = record(state, WatchEvent(T, 7, off), now=100.5)
    failed = _report("by_kk", Action.FAILED, 7, 5, lag_seconds=3.0, error="OSError: disk full")
    state = record(state, WatchEvent(T, 7, failed), now=101.0)
    quick = replace(_report("by_q", Action.QUICK, 7, 2, policy=AutoRefresh.QUICK), seen_version=7, lag=0)
    state = record(state, WatchEvent(T, 7, quick), now=101.0)
    lines = _text(state, now=110.0)
    header = [c.strip() for c in next(x for x in lines if "│ index" in x).strip()[1:-1].split("│")]
    assert header == list(COLUMNS)
    assert _cells(lines, "by_k") == [
        T,
        "by_k",
        "incremental",
        "7",
        "7",
        "0",
        "0.0",
        "incremental (0.25 s)",
        "10 s ago",
        "",
    ]
    assert _cells(lines, "cov") == [
        T,
        "cov",
        "off",
        "7",
        "4",
        "3",
        "12.5",
        "reported (0.00 s)",
        "10 s ago",
        "",
    ]
    assert _cells(lines, "by_kk")[5:] == [
        "2",
        "3.0",
        "failed (0.00 s)",
        "9 s ago",
        "OSError: disk full (9 s ago)",
    ]
    # rows keep the order they were first seen in
    # a quick refresh recorded version 7 without indexing it: lag 0, data at version 2
    assert _cells(lines, "by_q")[3:7] == ["7", "2 (seen 7)", "0", "0.0"]
    assert [x.split("│")[2].strip() for x in lines if x.startswith(f"│ {T}")] == [
        "by_k",
        "cov",
        "by_kk",
        "by_q",
    ]


def test_a_later_success_updates_the_row_and_keeps_the_last_error() -> None:
    failed = _report("by_k", Action.FAILED, 5, 3, error="ValueError: boom")
    first = record(LagState(), WatchEvent(T, 5, failed), now=10.0)
    second = record(first, WatchEvent(T, 6, _report("by_k", Action.INCREMENTAL, 6, 6, seconds=1.5)), now=20.0)
    assert len(second.rows) == 1
    assert _cells(_text(second, now=25.0), "by_k")[3:] == [
        "6",
        "6",
        "0",
        "0.0",
        "incremental (1.50 s)",
        "5 s ago",
        "ValueError: boom (15 s ago)",
    ]
    # record is pure: the earlier state still renders the failure
    assert _cells(_text(first, now=25.0), "by_k")[7] == "failed (0.00 s)"


def test_a_table_error_gets_its_own_row() -> None:
    event = WatchEvent(T, None, error="TableFormatError: _delta_log is gone")
    state = record(LagState(), event, now=1.0)
    cells = _cells(_text(state, now=3.0), TABLE_ROW)
    assert cells[0] == T and cells[3:8] == ["—", "—", "—", "—", "error"]
    assert cells[9] == "TableFormatError: _delta_log is gone (2 s ago)"


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    write_deltalake(path, rows([(1, "a", 0, 1, "x")]), partition_by=["p"])
    create_indexes(li.open_table(path))
    write_deltalake(path, rows([(2, "b", 1, 2, "y")]), mode="append")
    return path


def test_watch_prints_plain_lines_when_not_a_terminal(tmp_path: Path) -> None:
    path = _table(tmp_path)
    out = subprocess.run(
        [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--once"],
        capture_output=True,
        text=True,
        env=code_env(COLUMNS="400"),
        cwd=str(REPO_ROOT),
        check=True,
    ).stdout
    lines = out.splitlines()
    assert any("by_k incremental: version 1, indexed 1, lag 0" in x for x in lines), out
    assert "│" not in out and "lag (versions)" not in out


def test_watch_in_a_terminal_shows_the_live_table(tmp_path: Path) -> None:
    path = _table(tmp_path)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lakehouse_index.cli", "watch", path, "--interval", "0.2"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=code_env(COLUMNS="400", TERM="xterm"),
        cwd=str(REPO_ROOT),
    )
    os.close(follower)
    seen = b""
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and b"incremental (" not in seen:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                seen += os.read(leader, 65536)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = seen.decode(errors="replace")
    assert "lag (versions)" in text and "indexed version" in text, text
    assert "by_k" in text and "incremental (" in text, text
