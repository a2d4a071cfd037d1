"""Optimize (compact) an index: quick merges delta files, full writes a new base; the purge of an
erase rewrites the files holding entries of rows no longer live (OPTIMIZING → ACTIVE)."""

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


def purge_index(ctx: IndexContext, name: str) -> LogEntry:
    """Rewrite index ``name`` without any entry of a row that is no longer live, touching only
    the index files that hold one where the kind can tell them (``IndexKind.purge``; otherwise
    this is an ``optimize full``): the purge of an erase, once the erase has removed every file
    physically holding a subject. The latest entry afterwards."""
    log = ctx.log(name)

    def body(op: OpContext) -> OpResult:
        stable = op.stable
        assert stable is not None
        build = build_context(ctx, log.index_dir, op.data_uri)
        kind = kind_of(stable.spec)
        done = kind.purge(build, stable)
        state, content = done if done is not None else kind.optimize(build, stable, OptimizeMode.FULL.value)
        return OpResult(state, content, stable.pending)

    return run_operation(log, Operation.OPTIMIZE_PURGE, body)
