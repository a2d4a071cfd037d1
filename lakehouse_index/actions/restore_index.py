"""Restore a soft-deleted index (RESTORING → ACTIVE)."""

from __future__ import annotations

from lakehouse_index.context import IndexContext
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import run_operation


def restore_index(ctx: IndexContext, name: str) -> LogEntry:
    """Undo the soft delete of index ``name``; its final entry."""
    return run_operation(ctx.log(name), Operation.RESTORE)
