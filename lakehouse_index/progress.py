"""Progress of long Spark jobs, fed by Spark's status tracker.

Quiet by default in the API; the CLI turns it on. Example::

    with spark_progress(spark, "building by_email"):
        t.create_index(spec, spark=spark)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def spark_progress(spark: SparkSession, description: str, *, interval_s: float = 0.25) -> Iterator[None]:
    """Show a progress bar of the tasks of the Spark stages that run inside the block."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        transient=True,
    )
    task = progress.add_task(description, total=None)

    def poll() -> None:
        seen: dict[int, tuple[int, int]] = {}
        while not stop.wait(interval_s):
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    seen[stage_id] = (info.numCompletedTasks, info.numTasks)
            done = sum(d for d, _ in seen.values())
            total = sum(t for _, t in seen.values())
            progress.update(task, completed=done, total=total or None)

    thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
    with progress:
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
