"""Child processes of the race harness (``spawn``): index racers, an API table writer, watchers.

Every process opens the table itself (``storage_options`` for object stores), waits at the
barrier, then loops until the parent's ``stop`` event: index racers run their operation,
retrying lost races; the writer appends and deletes through the API (which maintains the
indexes); watchers run :func:`lakehouse_index.watch`. Each reports
``(role, pid, "ok" | "error", done | traceback, tally)`` on the results queue, where ``done``
lists ``(operation, entry id)`` of every operation that returned.
"""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import lakehouse_index as li
from lakehouse_index.errors import (
    IllegalIndexStateError,
    IndexBusyError,
    IndexMaintenanceError,
    IndexNotFoundError,
    WriteConflictError,
)
from lakehouse_index.workflows.watch import StopFlag
from tests.workflows.helpers import rows

#: The index every racer works on.
INDEX = "by_k"
#: What the refusal of an operation on a soft-deleted index says (retried: the delete-restore
#: racer restores it).
DELETED_INDEX = " of a DELETED index "


def _cancel(t: li.Table) -> li.IndexInfo | None:
    """Cancel whatever operation holds the index (live or dead); ``None`` when none does."""
    info = next((i for i in t.indexes() if i.name == INDEX), None)
    if info is None or info.state.is_stable:  # (None: vacuumed while deleted)
        return None
    try:
        return t.cancel_index(INDEX)
    except IllegalIndexStateError:  # it finished before our cancel looked
        return None


def _restore(t: li.Table) -> li.IndexInfo:
    """Restore the index; create it again when the vacuum racer removed it while deleted."""
    try:
        return t.restore_index(INDEX)
    except IndexNotFoundError:
        return t.create_index(li.SecondaryIndex(INDEX, key="k"))


#: Index racers: role → the operations it loops over, in order.
ROLES: dict[str, tuple[tuple[str, Callable[[li.Table], li.IndexInfo | None]], ...]] = {
    "refresh-incremental": (("refresh-incremental", lambda t: t.refresh_index(INDEX, "incremental")),),
    "refresh-full": (("refresh-full", lambda t: t.refresh_index(INDEX, "full")),),
    "refresh-quick": (("refresh-quick", lambda t: t.refresh_index(INDEX, "quick")),),
    "optimize-quick": (("optimize-quick", lambda t: t.optimize_index(INDEX, "quick")),),
    "optimize-full": (("optimize-full", lambda t: t.optimize_index(INDEX, "full")),),
    "delete-restore": (
        ("delete", lambda t: t.delete_index(INDEX)),
        ("restore", _restore),
    ),
    "vacuum": (("vacuum", lambda t: t.vacuum_index(INDEX, retention_hours=0)),),
    "cancel": (("cancel", _cancel),),
}


def attempt(fn: Callable[[], Any], tally: dict[str, int], deadline: float) -> Any:
    """Run ``fn`` until it succeeds; retried: lost races (``ConcurrentIndexUpdate``, busy) and the
    index being deleted for a moment by the delete-restore racer. Anything else propagates."""
    delay = 0.01
    while True:
        try:
            return fn()
        except IndexBusyError:
            tally["busy"] += 1
        except li.ConcurrentIndexUpdate:
            tally["lost"] += 1
        except IndexNotFoundError:  # vacuumed while deleted: the delete-restore racer creates it again
            tally["gone"] += 1
        except IllegalIndexStateError as e:
            if DELETED_INDEX not in str(e):  # e.g. a restore of an ACTIVE index: a defect
                raise
            tally["deleted"] += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"no success before the deadline: {tally}")
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.5, 0.3)


def _run(role: str, uri: str, options: dict[str, str] | None, barrier: Any, stop: Any, results: Any) -> None:
    tally: Counter[str] = Counter()
    done: list[tuple[str, int]] = []
    try:
        t = li.open_table(uri, storage_options=options)
        barrier.wait(timeout=600)
        deadline = time.monotonic() + 600
        if role == "writer":
            _write(t, stop, done, tally, deadline)
        elif role == "watcher":
            _watch(t, stop, done)
        else:
            # Whole rounds: a delete is always followed by its restore.
            while not stop.is_set():
                for name, call in ROLES[role]:
                    info = attempt(lambda call=call: call(t), tally, deadline)  # type: ignore[misc]
                    if info is not None:
                        done.append((name, info.log_entry))
                time.sleep(0.02)
        results.put((role, os.getpid(), "ok", done, tally))
    except BaseException:
        results.put((role, os.getpid(), "error", traceback.format_exc(), tally))


def race_worker(
    role: str, uri: str, options: dict[str, str] | None, barrier: Any, stop: Any, results: Any
) -> None:
    """One racing process (the ``spawn`` target)."""
    _run(role, uri, options, barrier, stop, results)


def tolerated(error: str) -> bool:
    """Whether an index report's error is a race outcome, not a defect: the index was held by
    another operation (busy, lost race) or soft-deleted for a moment."""
    kind = error.split(":", 1)[0]
    return kind in ("IndexBusyError", "ConcurrentIndexUpdate", "IndexNotFoundError") or (
        kind == "IllegalIndexStateError" and DELETED_INDEX in error
    )


def _commit(call: Callable[[], Any], tally: dict[str, int], deadline: float) -> int:
    """Run one API write until its table commit succeeds (a commit conflict with the other table
    writer changes nothing and is retried); its version. Index maintenance that lost a race is
    counted: the commit stands and a later sync catches up."""
    while True:
        try:
            return int(call().table_version)
        except WriteConflictError:
            tally["conflict"] += 1
        except IndexMaintenanceError as e:
            reports = e.result.indexes  # type: ignore[attr-defined]
            bad = [r.error for r in reports if not r.ok and not tolerated(r.error or "")]
            if bad:
                raise
            tally["maintenance-raced"] += 1
            return int(e.result.table_version)  # type: ignore[attr-defined]
        if time.monotonic() > deadline:
            raise TimeoutError(f"no commit before the deadline: {tally}")
        time.sleep(0.02 * random.random())


def _write(
    t: li.Table, stop: Any, done: list[tuple[str, int]], tally: dict[str, int], deadline: float
) -> None:
    """API writes (each maintains the indexes): appends, and a delete after every third one."""
    i = 0
    while not stop.is_set():
        ident = 100_000 + i
        batch = rows([(ident, "abc"[i % 3], i % 3, i, "x")])
        done.append(("append", _commit(lambda batch=batch: t.append(batch), tally, deadline)))  # type: ignore[misc]
        if i % 3 == 2:
            where = f"id = {ident - 1}"
            done.append(("delete-rows", _commit(lambda where=where: t.delete(where), tally, deadline)))  # type: ignore[misc]
        i += 1
        time.sleep(0.05)


def _watch(t: li.Table, stop: Any, done: list[tuple[str, int]]) -> None:
    """A watcher polling every 50 ms until ``stop``; its failed reports are failures."""
    flag = StopFlag()

    def relay() -> None:
        # Polled, never stop.wait(): a process that exits while it waits on the Event leaves a
        # sleeper behind, and the parent's stop.set() then blocks forever.
        while not stop.is_set():
            time.sleep(0.05)
        flag.set()

    threading.Thread(target=relay, daemon=True).start()
    errors: list[str] = []

    def on_event(event: Any) -> None:
        report = event.report
        if event.error is not None:
            errors.append(event.error)
        elif report is not None:
            if not report.ok and not tolerated(report.error or ""):
                errors.append(f"{report.name}: {report.error}")
            done.append((report.action.value, report.indexed_version or -1))

    li.watch([t], interval=0.05, on_event=on_event, stop=flag, handle_signals=False)
    if errors:
        raise AssertionError(f"watcher reported failures: {errors[:5]}")
