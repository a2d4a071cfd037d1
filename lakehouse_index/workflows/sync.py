"""Apply each index's ``auto_refresh`` policy to the table commits it has not seen.

``incremental`` runs the action ``refresh_index(name, "incremental")`` and ``quick``
``refresh_index(name, "quick")`` (:mod:`lakehouse_index.actions`); both go to the table's
latest version, so commits by other engines that landed in between are included. ``off``
only reports the lag. The index log's put-if-absent decides races: a refresh that loses to
another writer (a watcher, a second API writer) changes nothing and is re-checked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse_index.actions.cancel_index import cancel_index
from lakehouse_index.actions.refresh_index import refresh_index
from lakehouse_index.context import IndexContext
from lakehouse_index.errors import ConcurrentIndexUpdate, IndexBusyError, IndexMaintenanceError
from lakehouse_index.faults import crash_point
from lakehouse_index.log.entry import IndexState, LogEntry
from lakehouse_index.log.store import IndexLog
from lakehouse_index.sink.rewrite import WriteLineage
from lakehouse_index.spec import AutoRefresh
from lakehouse_index.workflows.reports import Action, IndexReport, SyncResult, failure_message

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


_log = logging.getLogger(__name__)

#: How long a write waits for another process's operation on an index before reporting it.
BUSY_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class _Latest:
    version: int
    ordinal: int
    timestamp_ms: int


def _latest(ctx: IndexContext) -> _Latest:
    version = ctx.source.latest_version()
    info = ctx.source.version_info(version)
    return _Latest(version, info.ordinal, info.timestamp_ms)


def _newer(ctx: IndexContext, latest: _Latest, entry: LogEntry) -> _Latest:
    """``latest``, or the newest commit ``entry`` knows of (indexed or pending) when that one is newer.

    A refresh goes to the table's latest version, read when it started; reporting from it
    saves reading the table's metadata again (an Iceberg catalog load per index).
    """
    version, ordinal = _seen(entry)
    if ordinal <= latest.ordinal:
        return latest
    if entry.pending is None:
        return _Latest(version, ordinal, entry.source.timestamp_ms)
    return _Latest(version, ordinal, ctx.source.version_info(version).timestamp_ms)


def _seen(entry: LogEntry) -> tuple[int, int]:
    """(version, ordinal) of the newest table commit the index log knows of."""
    if entry.pending is not None:
        return entry.pending.version, entry.pending.ordinal
    return entry.source.version, entry.source.ordinal


def _lag(ctx: IndexContext, entry: LogEntry, latest: _Latest) -> tuple[int, float]:
    version, ordinal = _seen(entry)
    lag = max(0, latest.ordinal - ordinal)
    if lag == 0:
        return 0, 0.0
    seen_ms = entry.source.timestamp_ms
    if entry.pending is not None:
        seen_ms = ctx.source.version_info(version).timestamp_ms
    return lag, max(0.0, (latest.timestamp_ms - seen_ms) / 1000)


def dead_local_writer(entry: LogEntry) -> bool:
    """Whether a transient entry was written by a process of this host that no longer exists.

    Writers are recorded as ``host:pid``. Only a local, provably dead writer counts (a
    process killed with SIGKILL mid-operation); a writer on another host, or a pid that
    is alive (possibly reused), is left alone.
    """
    host, _, pid_text = entry.writer.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def cancel_if_dead(ctx: IndexContext, log: IndexLog, name: str) -> bool:
    """Cancel the operation in progress on ``name`` if its writer died here; True if cancelled."""
    latest = log.latest()
    if latest is None or latest.state.is_stable or not dead_local_writer(latest):
        return False
    _log.warning(
        "index %r: %s operation by %s (entry %d) died; cancelling it",
        name,
        latest.operation.value,
        latest.writer,
        latest.id,
    )
    with contextlib.suppress(ConcurrentIndexUpdate):  # another watcher cancelled it first
        cancel_index(ctx, name)
    return True


def _recovery(name: str, mode: str, stuck: bool) -> str:
    refresh = f"t.refresh_index({name!r}, {mode!r}) (CLI: lakehouse-index refresh TABLE {name} --mode {mode})"
    if stuck:
        return (
            f"the index is left in a transient state: t.cancel_index({name!r}) "
            f"(CLI: lakehouse-index cancel TABLE {name}), then {refresh}"
        )
    return f"the index still answers correctly by hybrid scan; catch up with {refresh}"


def _delta(before: LogEntry, after: LogEntry) -> tuple[int, int]:
    """Index rows written and data files newly tombstoned between two stable entries."""
    old_files = {f.path for f in before.content.files}
    written = sum(f.rows for f in after.content.files if f.path not in old_files)
    was_removed = {f.id for f in before.source.files if f.removed_ordinal is not None}
    tombstoned = sum(
        1 for f in after.source.files if f.removed_ordinal is not None and f.id not in was_removed
    )
    return written, tombstoned


def maintain_index(
    ctx: IndexContext,
    name: str,
    *,
    wait_for_busy: bool = True,
    spark: SparkSession | None = None,
    latest: _Latest | None = None,
    lineage: WriteLineage | None = None,
) -> IndexReport:
    """Apply index ``name``'s policy to the commits it has not seen; never raises for a failed refresh.

    ``wait_for_busy``: when another process holds the index (its transient entry is the
    latest), wait up to :data:`BUSY_TIMEOUT_S` and retry (writes); otherwise report
    ``RACED`` at once (the watcher re-checks on its next poll). ``latest``: the table's
    latest version as the caller just read it (read here when not given). ``lineage``: what a
    write of this package knows of the rows it changed (an incremental refresh places its
    rewritten files without reading them, and takes tombstones from its removed rows).
    """
    start = time.perf_counter()
    log = ctx.log(name)
    before = log.latest_stable()
    if before is None:  # a first create still running elsewhere
        raise IndexBusyError(f"index {name!r} is being created; nothing to maintain yet")
    policy = before.spec.auto_refresh
    mode = policy.value
    version_before = before.source.version

    def report(action: Action, entry: LogEntry, latest: _Latest, **extra: object) -> IndexReport:
        lag, lag_s = _lag(ctx, entry, latest)
        return IndexReport(
            name=name,
            policy=policy,
            action=action,
            table_version=latest.version,
            version_before=version_before,
            indexed_version=entry.source.version,
            seen_version=_seen(entry)[0],
            lag=lag,
            lag_seconds=lag_s,
            seconds=time.perf_counter() - start,
            **extra,  # type: ignore[arg-type]
        )

    def failed(e: Exception, entry: LogEntry, latest: _Latest, *, stuck: bool) -> IndexReport:
        error = f"{type(e).__name__}: {e}"
        return report(Action.FAILED, entry, latest, error=error, recovery=_recovery(name, mode, stuck))

    if latest is None:
        latest = _latest(ctx)
    if policy is AutoRefresh.OFF:
        return report(Action.REPORTED, before, latest)
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        current = log.latest_stable()
        assert current is not None
        if current.state is not IndexState.ACTIVE:
            return report(Action.NOTHING, current, latest)
        up_to_date = _seen(current)[1] >= latest.ordinal and (mode == "quick" or current.pending is None)
        if up_to_date:  # (even while another operation, e.g. an optimize, holds the index)
            action = Action.NOTHING if current.id == before.id else Action.RACED
            return report(action, current, latest)
        try:
            refresh_index(ctx, name, mode, spark=spark, lineage=lineage if mode == "incremental" else None)
        except ConcurrentIndexUpdate as e:
            if (
                isinstance(e, IndexBusyError)
                and time.monotonic() < deadline
                and cancel_if_dead(ctx, log, name)
            ):
                continue
            if not wait_for_busy:
                return report(Action.RACED, current, latest)
            if time.monotonic() > deadline:
                return failed(e, current, latest, stuck=isinstance(e, IndexBusyError))
            time.sleep(0.05)
            latest = _latest(ctx)
            continue
        except Exception as e:  # the table commit stands; report and let the caller decide
            newest = log.latest()
            stuck = newest is not None and not newest.state.is_stable
            return failed(e, log.latest_stable() or current, latest, stuck=stuck)
        after = log.latest_stable()
        assert after is not None
        written, tombstoned = _delta(before, after)
        action = Action.INCREMENTAL if mode == "incremental" else Action.QUICK
        return report(
            action, after, _newer(ctx, latest, after), entries_written=written, files_tombstoned=tombstoned
        )


def sync_indexes(
    ctx: IndexContext,
    names: Sequence[str] | None = None,
    *,
    raise_on_error: bool = True,
    wait_for_busy: bool = True,
    spark: SparkSession | None = None,
    should_stop: Callable[[], bool] | None = None,
    lineage: WriteLineage | None = None,
) -> SyncResult:
    """Apply every (or the named) existing index's policy; one report per index.

    Deleted indexes are skipped. With ``raise_on_error``, a failed index raises
    :class:`IndexMaintenanceError` (carrying the result) after every index was tried.
    ``should_stop`` is asked before each index (the watcher stops between actions);
    ``lineage`` as for :func:`maintain_index`.
    """
    start = time.perf_counter()
    wanted = None if names is None else set(names)
    reports: list[IndexReport] = []
    latest: _Latest | None = None  # read once, when the first index needs it
    for info in ctx.indexes():
        if wanted is not None and info.name not in wanted:
            continue
        if info.state in (IndexState.DELETED, IndexState.DOES_NOT_EXIST) or info.indexed_version is None:
            continue
        if should_stop is not None and should_stop():
            break
        if latest is None:
            latest = _latest(ctx)
        report = maintain_index(
            ctx, info.name, wait_for_busy=wait_for_busy, spark=spark, latest=latest, lineage=lineage
        )
        reports.append(report)
        crash_point("sync.after_index")
        if report.table_version != latest.version:  # a refresh found a newer commit: the next index sees it
            latest = _latest(ctx)
    result = SyncResult(
        table_uri=ctx.uri,
        table_version=reports[-1].table_version if reports else ctx.source.latest_version(),
        indexes=tuple(reports),
        seconds=time.perf_counter() - start,
    )
    if raise_on_error and not result.ok:
        raise IndexMaintenanceError(failure_message(f"sync of {ctx.uri}", result.failed), result)
    return result
