"""The commands that keep indexes in step with their tables' commits: sync (once), watch (on
every new commit)."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Annotated

import typer

import lakehouse_index as li
from lakehouse_index.cli.options import QuietOpt, TableArg, TableOptions
from lakehouse_index.cli.output import console, echo_json, progress
from lakehouse_index.progress import activity

#: The ``--json`` help of the commands: what each prints.
_SYNC_JSON = (
    "one JSON object {table_uri, table_version, seconds, indexes: [{name, policy, action, "
    "table_version, indexed_version, seen_version, lag, lag_seconds, ..., error, recovery}]}"
)
_WATCH_JSON = (
    "one JSON object per action and line {table, version, index, policy, action, "
    "indexed_version, seen_version, lag, lag_seconds, entries_written, files_tombstoned, seconds, "
    "error, recovery}"
)


def sync(
    table: TableArg,
    as_json: Annotated[bool, typer.Option("--json", help=_SYNC_JSON)] = False,
    quiet: QuietOpt = False,
    *,
    table_options: TableOptions,
) -> None:
    """Apply every index's auto-refresh policy to the commits it has not seen (exit 1 if one failed).

    Example: lakehouse-index sync /data/customers --json
    """
    t = table_options.open(table)
    with activity(progress(quiet), "syncing indexes"):
        result = t.sync_indexes(raise_on_error=False)
    if as_json:
        echo_json(dataclasses.asdict(result))
    else:
        for r in result.indexes:
            console.print(
                f"{r.name} ({r.policy.value}): {r.action.value}, indexed {r.indexed_version}, lag {r.lag}"
                + (f"\n  {r.error}\n  {r.recovery}" if r.error else ""),
                markup=False,
            )
    if not result.ok:
        raise typer.Exit(1)


def watch(
    tables: Annotated[list[str], typer.Argument(help="table paths/URIs (or identifiers with --catalog)")],
    interval: Annotated[float, typer.Option(help="seconds between polls")] = 5.0,
    once: Annotated[bool, typer.Option(help="one pass, then exit")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=_WATCH_JSON)] = False,
    *,
    table_options: TableOptions,
) -> None:
    """Sync indexes whenever a table gets new commits (by any engine); Ctrl-C stops cleanly.

    In a terminal a live table shows each index's lag (versions and seconds), last action
    and last error; otherwise one line per action (one JSON object per line with --json).

    Example: lakehouse-index watch /data/customers /data/orders --interval 10
    """
    from lakehouse_index.workflows.watch import WatchEvent

    opened = [table_options.open(t) for t in tables]
    if not as_json and not once and console.is_terminal:
        _watch_live(opened, interval)
        return

    def show(event: WatchEvent) -> None:
        if as_json:
            typer.echo(json.dumps(event.to_json(), sort_keys=True))
            return
        r = event.report
        if r is None:
            console.print(f"[red]{event.table}[/]: {event.error}")
            return
        colour = "red" if not r.ok else "green" if r.lag == 0 else "yellow"
        console.print(
            f"{event.table} [bold]{r.name}[/] {r.action.value}: version {r.table_version}, indexed "
            f"{r.indexed_version}, [{colour}]lag {r.lag} ({r.lag_seconds:.1f} s)[/] in {r.seconds:.2f} s"
            + (f"\n  [red]{r.error}[/]\n  {r.recovery}" if r.error else "")
        )

    li.watch(opened, interval=interval, once=once, on_event=show)


def _watch_live(opened: list[li.Table], interval: float) -> None:
    """The watcher with the live lag table (:mod:`lakehouse_index.lag_display`) redrawn in place."""
    from rich.live import Live

    from lakehouse_index.lag_display import LagState, record, render
    from lakehouse_index.workflows.watch import WatchEvent

    state = LagState()
    title = f"lakehouse-index watch: {len(opened)} table(s), polled every {interval:g} s (Ctrl-C stops)"

    def on_event(event: WatchEvent) -> None:
        nonlocal state
        state = record(state, event, time.time())

    with Live(
        console=console, refresh_per_second=2, get_renderable=lambda: render(state, time.time(), title=title)
    ):
        li.watch(opened, interval=interval, on_event=on_event)
