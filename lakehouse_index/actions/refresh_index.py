"""Refresh an index to the latest table version: full, incremental or quick (REFRESHING → ACTIVE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_index.actions.modes import RefreshMode, parse_mode
from lakehouse_index.context import IndexContext
from lakehouse_index.executors import build_context
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.columns import require_same_columns
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation
from lakehouse_index.maintenance import refresh
from lakehouse_index.maintenance.build import full_build
from lakehouse_index.sink.rewrite import WriteLineage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_OPERATIONS = {
    RefreshMode.FULL: Operation.REFRESH_FULL,
    RefreshMode.INCREMENTAL: Operation.REFRESH_INCREMENTAL,
    RefreshMode.QUICK: Operation.REFRESH_QUICK,
}


def refresh_index(
    ctx: IndexContext,
    name: str,
    mode: RefreshMode | str = RefreshMode.INCREMENTAL,
    *,
    spark: SparkSession | None = None,
    remap: bool = True,
    local_max_rows: int | None = None,
    lineage: WriteLineage | None = None,
) -> LogEntry:
    """Bring index ``name`` up to the table's latest version; the latest entry afterwards.

    See :meth:`lakehouse_index.Table.refresh_index` for the modes and ``remap``;
    ``lineage``: what the write that made the commit knows of its rows (:class:`WriteLineage`).
    A refresh with nothing to do (another writer got there first) writes nothing; a spec the
    table no longer fits is refused before anything is written.
    """
    how = parse_mode(RefreshMode, mode, "refresh")
    log = ctx.log(name)
    target = ctx.latest_snapshot()

    def precheck(stable: LogEntry) -> bool:
        kind = kind_of(stable.spec)
        kind.validate(stable.spec, target)
        if how is RefreshMode.QUICK and kind.tracks_column_identity:
            # An indexed column renamed over or added again: only a full refresh follows it.
            require_same_columns(stable.spec.name, stable.source.columns, target)
        pending = stable.pending if how is RefreshMode.QUICK else None
        indexed = pending.ordinal if pending else stable.source.ordinal
        return target.ordinal > indexed or (how is not RefreshMode.QUICK and stable.pending is not None)

    def body(op: OpContext) -> OpResult:
        stable = op.stable
        assert stable is not None
        if how is RefreshMode.QUICK:
            return OpResult(stable.source, stable.content, refresh.quick(ctx.source, stable, target))
        build = build_context(ctx, log.index_dir, op.data_uri, spark, local_max_rows)
        if how is RefreshMode.INCREMENTAL:
            state, content = refresh.incremental(build, stable, target, remap=remap, lineage=lineage)
        else:
            state, content = full_build(build, stable.spec, target, stable.source)
        return OpResult(state, content)

    return run_operation(log, _OPERATIONS[how], body, precheck=precheck)
