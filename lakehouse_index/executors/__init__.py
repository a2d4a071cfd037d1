"""Executors: where index entries are computed and written (in process with pyarrow, or Spark).

One sizing policy (:func:`executor_for`, with ``ExecutorConfig.estimate_rows`` and
``runs_locally``) picks the executor for every build, refresh and optimize: work of at
most ``ExecutorConfig.local_max_rows`` rows, counted net of deleted rows, runs in this
process (no JVM: a Spark job's fixed cost would dominate, and it needs no Hadoop
object-store jars); larger work runs on Spark. An optimize only merges index entries
(no data file is decoded), so its bound is ``ExecutorConfig.local_max_entries`` entries. Both write one layout
(:class:`~lakehouse_index.kinds.base.Layout`), so readers cannot tell which ran.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.context import IndexContext
from lakehouse_index.executors.local import LocalExecutor
from lakehouse_index.executors.spark import SparkExecutor
from lakehouse_index.kinds.base import BuildContext, Executor

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalExecutor", "SparkExecutor", "build_context", "executor_for"]


def executor_for(
    rows: int, config: ExecutorConfig, spark_factory: Callable[[], SparkSession], *, compaction: bool = False
) -> Executor:
    """The executor for work of ``rows`` rows: in process up to ``config.local_max_rows`` (for a
    ``compaction`` of index entries, ``config.local_max_entries``), else Spark."""
    if config.runs_locally(rows, compaction=compaction):
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
    return BuildContext(
        ctx.source,
        ctx.storage,
        index_dir,
        data_dir,
        cfg,
        executor_for=lambda rows: executor_for(rows, cfg, lambda: get_spark(spark)),
        compactor_for=lambda rows: executor_for(rows, cfg, lambda: get_spark(spark), compaction=True),
        local=LocalExecutor(cfg),
    )
