"""The commit watcher: poll tables, sync their indexes when a table moved.

No state file: on each poll the watcher compares the table's latest version with
what it saw last (in memory only) and, when it moved or on the first poll, runs
``sync_indexes``, which starts from each index's own log. A restarted watcher or a
second one is therefore harmless: the index log's put-if-absent lets one refresh win,
the loser reports ``raced`` and re-checks on its next poll.

Per poll and table it reads: Delta — one existence probe of the next commit file
(``_delta_log`` is re-listed at most every 10 s), then only the new commit files;
Iceberg — the current metadata pointer (catalog or ``metadata/`` folder), then the new
snapshots' manifest lists and their new manifests. Each index log is read from its
newest entry.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from lakehouse_index.context import IndexContext
from lakehouse_index.faults import crash_point
from lakehouse_index.workflows.reports import Action, IndexReport
from lakehouse_index.workflows.sync import sync_indexes


@dataclass(frozen=True)
class WatchEvent:
    """One watcher action: a table and the report of one of its indexes (or an error)."""

    table: str
    version: int | None
    report: IndexReport | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """A JSON object: table, index, version, indexed version, lag, seconds and more."""
        out: dict[str, Any] = {"table": self.table, "version": self.version}
        if self.report is not None:
            out.update(self.report.to_json())
        if self.error is not None:
            out["error"] = self.error
        return out


class StopFlag:
    """Set by SIGINT/SIGTERM (or by the caller); the watcher stops between actions."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        """Ask the watcher to stop after its current action."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether a stop was asked for."""
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True as soon as a stop is asked for."""
        return self._event.wait(seconds)


@contextmanager
def stop_on_signals(stop: StopFlag) -> Iterator[None]:
    """Route SIGINT and SIGTERM to ``stop`` while inside (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: Any) -> None:
        stop.set()

    for s in previous:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def watch(
    tables: Iterable[IndexContext],
    *,
    interval: float = 5.0,
    once: bool = False,
    on_event: Callable[[WatchEvent], None] | None = None,
    stop: StopFlag | None = None,
    handle_signals: bool = True,
) -> list[WatchEvent]:
    """Keep the indexes of ``tables`` in step with their commits, whoever makes them.

    ``tables``: the tables to keep in step (``lakehouse_index.watch`` also takes URIs). Every
    ``interval`` seconds each table's latest version is polled; when it moved (and on the
    first poll) every index's policy is applied (:func:`sync_indexes`). ``on_event`` gets
    one :class:`WatchEvent` per index action; with ``once`` a single pass is made and
    its events are returned (otherwise the events are only passed to ``on_event``).
    SIGINT/SIGTERM (or ``stop.set()``) end the loop between actions.
    """
    opened = list(tables)
    stop = stop or StopFlag()
    seen: dict[str, int] = {}
    events: list[WatchEvent] = []

    def emit(event: WatchEvent) -> None:
        if once:
            events.append(event)
        if on_event is not None:
            on_event(event)

    def poll(ctx: IndexContext) -> None:
        try:
            latest = ctx.source.latest_version()
        except Exception as e:  # a table briefly unreadable must not stop the others
            emit(WatchEvent(ctx.uri, None, error=f"{type(e).__name__}: {e}"))
            return
        if seen.get(ctx.uri) == latest:
            return
        result = sync_indexes(ctx, raise_on_error=False, wait_for_busy=False, should_stop=stop.is_set)
        for report in result.indexes:
            emit(WatchEvent(ctx.uri, report.table_version, report))
        crash_point("watch.after_poll")
        if not stop.is_set() and all(r.ok and r.action is not Action.RACED for r in result.indexes):
            seen[ctx.uri] = latest  # a raced, failed or skipped index: re-checked next poll
        else:
            seen.pop(ctx.uri, None)

    context = stop_on_signals(stop) if handle_signals else _nothing()
    with context:
        while not stop.is_set():
            for table in opened:
                if stop.is_set():
                    break
                poll(table)
            if once or stop.wait(interval):
                break
    return events


@contextmanager
def _nothing() -> Iterator[None]:
    yield
