"""Vacuum an index (VACUUMING): remove data physically.

A deleted index loses all its data and its file map, and ceases to exist
(DOES_NOT_EXIST); an active index drops snapshots older than the retention and every
data file no retained snapshot names, leftovers of crashed operations included.
"""

from __future__ import annotations

from dataclasses import replace

from lakehouse_index.context import IndexContext
from lakehouse_index.log.entry import Content, IndexState, LogEntry, Operation
from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation
from lakehouse_index.maintenance import vacuum


def vacuum_index(ctx: IndexContext, name: str, *, retention_hours: float | None = None) -> LogEntry:
    """Vacuum index ``name`` (``retention_hours`` default ``config.log.vacuum_retention_hours``;
    the latest snapshot is always kept); its final entry."""
    log = ctx.log(name)
    hours = ctx.config.log.vacuum_retention_hours if retention_hours is None else retention_hours
    deleted_since: list[int] = []  # a deleted index: when its vacuum started

    def body(op: OpContext) -> OpResult | None:
        if op.stable is not None and op.stable.state is IndexState.DELETED:
            deleted_since.append(op.transient.timestamp_ms)
            # No file map either: its paths (partition values) are table data the index no longer needs.
            return OpResult(replace(op.stable.source, files=()), Content(), None)
        vacuum.vacuum_active(log, hours, op.transient.timestamp_ms)
        return None

    final = run_operation(log, Operation.VACUUM, body)
    if deleted_since:
        # Only once the final entry stands: a vacuum cancelled while it ran must not delete
        # the data of an index restored meanwhile (found by the race harness on S3).
        vacuum.vacuum_deleted(log, deleted_since[0])
    return final
