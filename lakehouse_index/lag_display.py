"""The watcher's live lag table (``lakehouse-index watch`` in a terminal, without ``--json``).

The display is a pure function of a :class:`LagState` and the clock: :func:`record` folds
one :class:`~lakehouse_index.workflows.watch.WatchEvent` into a new state, :func:`render`
draws the state as a rich table (one row per table and index: table version, indexed
version, lag in versions and seconds, last action and how long ago, last error). The CLI
keeps the state and lets ``rich.live.Live`` redraw it a few times a second, so the "ago"
column ages between the watcher's actions.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.table import Table as RichTable
from rich.text import Text

from lakehouse_index.workflows.watch import WatchEvent

#: The table's columns, left to right.
COLUMNS = (
    "table",
    "index",
    "policy",
    "table version",
    "indexed version",
    "lag (versions)",
    "lag (s)",
    "last action",
    "when",
    "last error",
)
_LEFT = frozenset({"table", "index", "policy", "last action", "last error"})

#: Placeholder index name of a row that reports a table-level error (the table was unreadable).
TABLE_ROW = "—"


@dataclass(frozen=True)
class LagRow:
    """The latest known lag of one index (or the table row of a table-level error)."""

    table: str
    index: str
    policy: str | None = None
    table_version: int | None = None
    indexed_version: int | None = None
    seen_version: int | None = None
    lag: int | None = None
    lag_seconds: float | None = None
    action: str | None = None
    action_seconds: float | None = None
    at: float | None = None  # clock reading of the last event (time.time())
    error: str | None = None  # the most recent error, kept after later successes
    error_at: float | None = None


@dataclass(frozen=True)
class LagState:
    """Every row seen so far, in the order first seen."""

    rows: tuple[LagRow, ...] = ()

    def row(self, table: str, index: str) -> LagRow | None:
        """The row of ``table`` / ``index``, if any event named it."""
        return next((r for r in self.rows if r.table == table and r.index == index), None)


def record(state: LagState, event: WatchEvent, now: float) -> LagState:
    """``state`` with ``event`` (seen at clock reading ``now``) applied to its row."""
    report = event.report
    index = report.name if report is not None else TABLE_ROW
    old = state.row(event.table, index) or LagRow(event.table, index)
    if report is None:
        new = replace(old, action="error", at=now, error=event.error, error_at=now)
    else:
        new = replace(
            old,
            policy=report.policy.value,
            table_version=report.table_version,
            indexed_version=report.indexed_version,
            seen_version=report.seen_version,
            lag=report.lag,
            lag_seconds=report.lag_seconds,
            action=report.action.value,
            action_seconds=report.seconds,
            at=now,
        )
        if report.error is not None:
            new = replace(new, error=report.error, error_at=now)
    if state.row(event.table, index) is None:
        return LagState((*state.rows, new))
    return LagState(tuple(new if (r.table, r.index) == (event.table, index) else r for r in state.rows))


def _text(value: object) -> str:
    return "—" if value is None else str(value)


def _ago(at: float | None, now: float) -> str:
    return "—" if at is None else f"{max(0.0, now - at):.0f} s ago"


def _indexed(row: LagRow) -> str:
    """The indexed version; a quick refresh's newer seen version (recorded, repaired at query time) too."""
    if row.seen_version is None or row.seen_version == row.indexed_version:
        return _text(row.indexed_version)
    return f"{_text(row.indexed_version)} (seen {row.seen_version})"


def _lag_style(row: LagRow) -> str:
    if row.action in ("failed", "error"):
        return "red"
    return "green" if row.lag == 0 else "yellow"


def render(state: LagState, now: float, *, title: str | None = None) -> RichTable:
    """The lag table of ``state`` at clock reading ``now`` (a pure function of both)."""
    out = RichTable(title=title, expand=False)
    for name in COLUMNS:
        out.add_column(name, justify="left" if name in _LEFT else "right")
    for r in state.rows:
        style = _lag_style(r)
        action = _text(r.action)
        if r.action_seconds is not None:
            action += f" ({r.action_seconds:.2f} s)"
        error = Text("")
        if r.error is not None:
            error = Text(f"{r.error} ({_ago(r.error_at, now)})", style="red")
        out.add_row(
            r.table,
            r.index,
            _text(r.policy),
            _text(r.table_version),
            _indexed(r),
            Text(_text(r.lag), style=style),
            Text("—" if r.lag_seconds is None else f"{r.lag_seconds:.1f}", style=style),
            Text(action, style="red" if r.action in ("failed", "error") else ""),
            _ago(r.at, now),
            error,
        )
    return out
