"""Many processes running real index operations on ONE index while the table changes.

Eight OS processes (spawn) race refreshes of every mode, optimizes of both modes and
delete + restore on one secondary index; only two of them run Spark (local[1] each, the
machine has two cores), the others do metadata-only operations. Meanwhile the parent
appends files to the Delta table and deletes whole files. Losers get
``ConcurrentIndexUpdate`` (``IndexBusyError`` is one) and succeed on retry. Afterwards the
log read as plain JSON shows one writer per slot and well-formed operations, and lookups
and ``locate`` equal deltalake's read of the latest version.

A deterministic interleaving test pins one race the random schedule rarely hits: the
table and the index move on between a refresh choosing its target version and writing
its transient entry.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from enginetest_helpers import INDEX, STABLE, check_answers, check_race_log, log_entries, make_table
from enginetest_workers import attempt, collect_outcomes, start_racers

import lakehouse_index as li

pytestmark = pytest.mark.spark


def _stable_versions(path: Path) -> list[int]:
    """The table version each ACTIVE entry answers up to (quick refreshes: their pending version)."""
    entries = [e for _, e in sorted(log_entries(path).items()) if e["state"] == "ACTIVE"]
    return [(e["pending"] or e["source"])["version"] for e in entries]


@pytest.mark.parametrize(
    "mode",
    [
        "incremental",
        "quick",
        "full",
    ],
)
def test_refresh_whose_target_went_stale_never_moves_the_index_back(
    indexed_table: tuple[Path, li.Table], spark: Any, mode: str
) -> None:
    path, t = indexed_table
    make_table(path, [10])
    other = li.open_table(str(path))
    real_snapshot = t.source.snapshot
    calls = 0

    def snapshot_then_interleave(version: int | None) -> Any:
        # After ``t`` picked its target: the table moves on and another writer refreshes the
        # index past that target, before ``t`` reads the log.
        nonlocal calls
        snap = real_snapshot(version)
        calls += 1
        if calls == 1:
            DeltaTable(str(path)).delete("batch = 1")
            other.refresh_index(INDEX, "incremental", spark=spark)
        return snap

    t.source.snapshot = snapshot_then_interleave  # type: ignore[method-assign,assignment]
    # Losing the race cleanly is fine; going backwards or failing otherwise is not.
    with contextlib.suppress(li.ConcurrentIndexUpdate):
        t.refresh_index(INDEX, mode, spark=spark)
    assert calls >= 1
    check_answers(other, path)
    versions = _stable_versions(path)
    assert versions == sorted(versions), f"indexed version went backwards: {versions}"
    assert other.indexes()[0].indexed_version == DeltaTable(str(path)).version()


#: The eight racing processes: two on Spark, six metadata-only.
RACERS = ("spark-refresh", "spark-optimize", "quick", "quick", "quick", "delete", "delete", "incremental")


def _answers_while_racing(t: li.Table, path: Path, tally: Counter[str]) -> None:
    """Lookups by the parent while operations run: correct, or refused because the index is
    deleted for a moment (a clear state error, never wrong rows)."""
    try:
        check_answers(t, path)
        tally["checked"] += 1
    except li.IllegalIndexStateError as e:
        assert "DELETED" in str(e), e
        tally["deleted"] += 1


def test_eight_processes_race_on_one_index_while_the_table_changes(
    indexed_table: tuple[Path, li.Table], spark: Any
) -> None:
    path, t = indexed_table
    procs, barrier, go_incremental, stop, results = start_racers(str(path), RACERS)
    parent_tally: Counter[str] = Counter({"busy": 0, "lost": 0, "deleted": 0})
    barrier.wait(timeout=600)

    # Phase 1: appends (files to index), lookups in between.
    for b in (10, 11, 12):
        make_table(path, [b])
        _answers_while_racing(t, path, parent_tally)
        time.sleep(1.0)
    # The parent is a racer too: it indexes its appends (incremental, on its own Spark).
    attempt(lambda: t.refresh_index(INDEX, "incremental", spark=spark), parent_tally, time.monotonic() + 600)
    go_incremental.set()
    # Phase 2: whole-file deletes only (remove actions, nothing to index).
    for b in (0, 2, 10):
        DeltaTable(str(path)).delete(f"batch = {b}")
        _answers_while_racing(t, path, parent_tally)
        time.sleep(1.0)
    stop.set()

    outcomes, retries = collect_outcomes(procs, results)
    written = Counter(e["operation"] for e in log_entries(path).values() if e["state"] in STABLE)
    # Shown with -s (and on failure): how much racing happened.
    print(f"retries {dict(retries)}, parent {dict(parent_tally)}, operations written {dict(written)}")
    for role, pid, _, done, _ in outcomes:
        print(role, pid, dict(Counter(op for op, _ in done)))
    assert retries["busy"] + retries["lost"] > 0, f"no process ever lost a race: {retries}"
    assert parent_tally["checked"] > 0

    check_race_log(log_entries(path), {pid: done for _, pid, _, done, _ in outcomes})

    # The final index answers like deltalake; after a last refresh, too.
    [info] = t.indexes()
    assert info.state is li.IndexState.ACTIVE
    check_answers(t, path)
    t.refresh_index(INDEX, "incremental", spark=spark)
    check_answers(t, path)
    assert t.indexes()[0].indexed_version == DeltaTable(str(path)).version()
