"""The distributed append: a Spark DataFrame too large for this process, and its index entries.

For a Spark DataFrame of more rows than ``ExecutorConfig.local_max_rows`` (estimated
from Spark's plan statistics, no job run: :func:`~lakehouse_index.workflows.data.spark_rows_estimate`),
the frame's schema is checked against the table's, then one Spark job
(:class:`~lakehouse_index.workflows.append_task.AppendTask` in ``mapInArrow``) writes the
data files and every held index's entries for them; only per-file metadata comes back to
the driver. Holding the indexes, the commit and logging the entries are
:mod:`.direct_append`'s.
"""

from __future__ import annotations

import logging
from typing import Any

from lakehouse_index.context import IndexContext
from lakehouse_index.sink.contract import NotDistributable, Transaction
from lakehouse_index.workflows import data as inputs
from lakehouse_index.workflows.append_task import RESULT_DDL, AppendTask, IndexShare, TaskOutput, task_outputs
from lakehouse_index.workflows.direct_append import append_files
from lakehouse_index.workflows.reports import WriteResult

_log = logging.getLogger(__name__)


def append(ctx: IndexContext, tx: Transaction, frame: Any, start: float) -> WriteResult | None:
    """Append the Spark DataFrame ``frame`` through one Spark job committed by ``tx``; None when
    the table's layout is one the tasks do not write (the caller appends through this process)."""
    snap = tx.snapshot
    inputs.conform(inputs.spark_arrow_schema(frame).empty_table(), snap.schema, ctx.uri)
    try:
        files = tx.data_files()
    except NotDistributable as e:
        _log.warning("%s: the distributed append does not write it; collecting to this process", e)
        return None
    tasks = frame.rdd.getNumPartitions()

    def job(shares: tuple[IndexShare, ...]) -> list[TaskOutput]:
        task = AppendTask(snap.schema, ctx.uri, files, shares, tasks)
        return task_outputs(frame.mapInArrow(task, RESULT_DDL).collect())

    return append_files(ctx, tx, start, job)
