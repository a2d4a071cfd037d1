"""Cancel the operation a crashed process left in progress (CANCELLING → the stable state it started from)."""

from __future__ import annotations

from lakehouse_index.context import IndexContext
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import run_operation


def cancel_index(ctx: IndexContext, name: str) -> LogEntry:
    """Return index ``name`` from a transient state to its last stable state; the final entry."""
    return run_operation(ctx.log(name), Operation.CANCEL)
