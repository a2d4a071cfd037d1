"""Progress displays of long operations: Spark jobs (fed by Spark's status tracker) and in-process work.

Quiet by default in the API; the CLI turns them on, on standard error (``--quiet`` passes a
quiet console). They draw only on a terminal: redirected output gets nothing. Example::

    with spark_progress(spark, "building by_email", console=Console(stderr=True)):
        t.create_index(spec, spark=spark)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def activity(console: Console, description: str) -> Iterator[None]:
    """Show a spinner with the elapsed time while the block runs (work that reports no steps)."""
    if not console.is_terminal:
        yield
        return
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    progress.add_task(description, total=None)
    with progress:
        yield


@contextmanager
def spark_progress(
    spark: SparkSession, description: str, *, console: Console | None = None, interval_s: float = 0.25
) -> Iterator[None]:
    """Show a progress bar of the tasks of the Spark stages that run inside the block."""
    console = console or Console()
    if not console.is_terminal:
        yield
        return
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("tasks"),
        TimeElapsedColumn(),
        console=console,
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
