"""Soft-delete an index (DELETING → DELETED): queries stop using it; its data stays until vacuum."""

from __future__ import annotations

from lakehouse_index.context import IndexContext
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import run_operation


def delete_index(ctx: IndexContext, name: str) -> LogEntry:
    """Soft-delete index ``name``; its final entry. ``restore_index`` brings it back."""
    return run_operation(ctx.log(name), Operation.DELETE)
