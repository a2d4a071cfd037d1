"""Executors: where index entries are computed and written (in process with pyarrow, or Spark).

One sizing policy (:func:`executor_for`, with ``ExecutorConfig.estimate_rows`` and
:mod:`.sizing`) picks the executor for every build, refresh and optimize: work whose rows,
counted net of deleted rows, fit in this process's memory runs here (no JVM: a Spark job's
fixed cost would dominate, and it needs no Hadoop object-store jars); larger work, or work
above the cluster bounds when a cluster is configured, runs on Spark. Explicit bounds
(``local_max_rows``, ``local_max_entries`` for an optimize, which only merges entries) override
it. Both write one layout (:class:`~lakehouse_index.kinds.base.Layout`), so readers cannot tell
which ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.context import IndexContext
from lakehouse_index.executors.local import LocalExecutor
from lakehouse_index.executors.sizing import cluster_configured, entry_bytes, runs_locally
from lakehouse_index.executors.spark import SparkExecutor
from lakehouse_index.kinds.base import BuildContext, Executor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalExecutor", "SparkExecutor", "build_context", "executor_for"]


def executor_for(
    rows: int,
    schema: pa.Schema,
    config: ExecutorConfig,
    spark_factory: Callable[[], SparkSession],
    *,
    cluster: bool,
    compaction: bool = False,
) -> Executor:
    """The executor for work of ``rows`` rows of index entries of ``schema`` (for a
    ``compaction``, ``rows`` entries): in process when the sizing policy says so
    (:func:`.sizing.runs_locally`), else Spark."""
    if runs_locally(config, rows, row_bytes=entry_bytes(schema), cluster=cluster, compaction=compaction):
        return LocalExecutor(config)
    return SparkExecutor(spark_factory(), config)


def build_context(
    ctx: IndexContext,
    index_dir: str,
    data_dir: str,
    spark: SparkSession | None = None,
    local_max_rows: int | None = None,
) -> BuildContext:
    """What a kind needs to write index data for one operation under ``data_dir``: the
    executors sized by ``ctx.config`` (``local_max_rows``, when given, bounds every part of
    the operation), Spark started only when the work needs it (``spark`` or a local session)."""
    from lakehouse_index.spark import get_spark

    cfg = ctx.config.executor
    if local_max_rows is not None:
        cfg = replace(cfg, local_max_rows=local_max_rows, local_max_entries=local_max_rows)
    cluster = cluster_configured(spark)

    def session() -> SparkSession:
        return get_spark(spark)

    return BuildContext(
        ctx.source,
        ctx.storage,
        index_dir,
        data_dir,
        cfg,
        executor_for=lambda rows, schema: executor_for(rows, schema, cfg, session, cluster=cluster),
        compactor_for=lambda rows, schema: executor_for(
            rows, schema, cfg, session, cluster=cluster, compaction=True
        ),
        local=LocalExecutor(cfg),
    )
