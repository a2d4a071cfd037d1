"""Optimize (compact) an index: quick merges delta files, full writes a new base (OPTIMIZING → ACTIVE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakehouse_index.actions.modes import OptimizeMode, parse_mode
from lakehouse_index.context import IndexContext
from lakehouse_index.executors import build_context
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.log.entry import LogEntry, Operation
from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def optimize_index(
    ctx: IndexContext,
    name: str,
    mode: OptimizeMode | str = OptimizeMode.QUICK,
    *,
    spark: SparkSession | None = None,
    local_max_rows: int | None = None,
) -> LogEntry:
    """Compact index ``name``; the latest entry afterwards (nothing written when the kind
    says there is nothing to compact). Indexes of at most ``config.executor.local_max_entries``
    entries (``local_max_rows`` when given) are compacted in this process, larger ones on Spark."""
    how = parse_mode(OptimizeMode, mode, "optimize")
    log = ctx.log(name)

    def body(op: OpContext) -> OpResult:
        stable = op.stable
        assert stable is not None
        build = build_context(ctx, log.index_dir, op.data_uri, spark, local_max_rows)
        state, content = kind_of(stable.spec).optimize(build, stable, how.value)
        return OpResult(state, content, stable.pending)

    operation = Operation.OPTIMIZE_QUICK if how is OptimizeMode.QUICK else Operation.OPTIMIZE_FULL
    return run_operation(
        log, operation, body, precheck=lambda stable: kind_of(stable.spec).needs_optimize(stable, how.value)
    )
