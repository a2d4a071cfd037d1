"""Create an index: validate the spec against the latest table version, then build it (CREATING → ACTIVE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_index.context import IndexContext
from lakehouse_index.executors import build_context
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.derived import resolve_expressions
from lakehouse_index.log.entry import LogEntry, Operation, SourceState
from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation
from lakehouse_index.maintenance.build import full_build
from lakehouse_index.spec import IndexSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def create_index(
    ctx: IndexContext,
    spec: IndexSpec,
    *,
    spark: SparkSession | None = None,
    local_max_rows: int | None = None,
) -> LogEntry:
    """Create the index ``spec`` declares and build it from the table's latest version; its final entry.

    Work of at most ``local_max_rows`` rows (default ``config.executor.local_max_rows``,
    counted net of deleted rows) runs in this process, larger work on Spark (``spark``, or
    a local session). The spec is checked against the table schema before anything is written.
    """
    log = ctx.log(spec.name)
    snap = ctx.latest_snapshot()
    spec = resolve_expressions(spec, snap)  # keys naming no column are expressions
    kind_of(spec).validate(spec, snap)
    start = SourceState(ctx.format, ctx.uri, snap.version, snap.ordinal, snap.timestamp_ms)

    def body(op: OpContext) -> OpResult:
        build = build_context(ctx, log.index_dir, op.data_uri, spark, local_max_rows)
        state, content = full_build(build, spec, snap, None)
        return OpResult(state, content)

    return run_operation(log, Operation.CREATE, body, spec=spec, source=start)
