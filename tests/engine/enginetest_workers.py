"""Child-process bodies of the engine race and crash tests (imported after a ``spawn``)."""

from __future__ import annotations

import functools
import os
import random
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lakehouse_index as li
from lakehouse_index.config import ExecutorConfig
from lakehouse_index.errors import IndexBusyError
from lakehouse_index.spark import MASTER_ENV

#: Where a crash child is killed.
KILL_POINTS = ("after-transient", "before-data", "after-data")


def _note_jvm(pid_file: Path) -> None:
    """Record the pid of this process's Spark JVM (if any) so the parent can make sure it ends."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is not None:
        pid_file.write_text(str(proc.pid))


def _die(pid_file: Path) -> None:
    _note_jvm(pid_file)
    os.kill(os.getpid(), signal.SIGKILL)


#: The default in-process limit (the racing roles that must not start a JVM stay under it).
LOCAL_MAX_ROWS = ExecutorConfig().local_max_rows


def refresh_and_die(path: str, mode: str, point: str, pid_file: str) -> None:
    """Run ``refresh_index(mode)`` and SIGKILL this process at ``point``.

    The hooks wrap the real functions (the operation itself runs unchanged up to the kill):
    ``IndexLog.write`` for the transient entry, the executors' ``write`` for before/after the
    data write: ``SparkExecutor.write`` and ``LocalExecutor.write`` (in process). The ``full``
    refresh is forced onto Spark and the ``incremental`` one runs in process (small appends),
    so a kill inside either writer is covered.
    """
    os.environ[MASTER_ENV] = "local[1]"
    from lakehouse_index.executors import LocalExecutor, SparkExecutor
    from lakehouse_index.log import store

    marker = Path(pid_file)
    if point == "after-transient":
        real_write = store.IndexLog.write

        def write(self: store.IndexLog, entry: Any) -> None:
            real_write(self, entry)
            _die(marker)

        store.IndexLog.write = write  # type: ignore[method-assign]
    else:

        def killing(real: Callable[..., Any]) -> Callable[..., Any]:
            def write(*args: Any, **kwargs: Any) -> Any:
                if point == "before-data":
                    _die(marker)
                out = real(*args, **kwargs)
                _die(marker)
                return out

            return write

        SparkExecutor.write = killing(SparkExecutor.write)  # type: ignore[method-assign]
        LocalExecutor.write = killing(LocalExecutor.write)  # type: ignore[method-assign]
    local = 0 if mode == "full" else LOCAL_MAX_ROWS
    li.open_table(path).refresh_index("by_k", mode, local_max_rows=local)
    raise AssertionError("the refresh finished: the kill hook never ran")


# --------------------------------------------------------------------------- races


def attempt(fn: Callable[[], Any], tally: dict[str, int], deadline: float) -> Any:
    """Run ``fn`` until it succeeds. Retried: ``ConcurrentIndexUpdate`` (incl. ``IndexBusyError``)
    and ``IllegalIndexStateError`` of an index another process deleted for a moment (its
    deleter restores it). Anything else propagates."""
    delay = 0.02
    while True:
        try:
            return fn()
        except IndexBusyError:
            tally["busy"] += 1
        except li.ConcurrentIndexUpdate:
            tally["lost"] += 1
        except li.IllegalIndexStateError as e:
            if "DELETED index" not in str(e):
                raise
            tally["deleted"] += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"no success before the deadline: {tally}")
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 1.5, 0.5)


def _refresh(mode: str, *, on_spark: bool = False) -> Callable[[li.Table], Any]:
    # Small tables are indexed in process unless the refresh is forced onto Spark.
    local = 0 if on_spark else LOCAL_MAX_ROWS
    return lambda t: t.refresh_index("by_k", mode, local_max_rows=local)


def _optimize(mode: str) -> Callable[[li.Table], Any]:
    return lambda t: t.optimize_index("by_k", mode)


#: What each kind of racing process does, in a loop: (operation, call, pause after it in s).
#: Only the ``spark-*`` roles start a JVM. Quick refreshes, delete and restore are metadata
#: only; ``incremental`` starts once the parent has indexed its appends and from then on
#: only deletes whole files, so its refreshes have no file to index (no JVM either);
#: ``local-refresh`` indexes in process (small appends, full rebuilds of a small table).
ROLES: dict[str, list[tuple[str, Callable[[li.Table], Any], float]]] = {
    "spark-refresh": [
        ("refresh-incremental", _refresh("incremental", on_spark=True), 0.2),
        ("optimize-quick", _optimize("quick"), 0.2),
        ("refresh-full", _refresh("full", on_spark=True), 0.2),
    ],
    "spark-optimize": [
        ("optimize-full", _optimize("full"), 0.2),
        ("refresh-incremental", _refresh("incremental", on_spark=True), 0.2),
    ],
    "local-refresh": [
        ("refresh-incremental", _refresh("incremental"), 0.2),
        ("refresh-full", _refresh("full"), 0.2),
    ],
    "quick": [("refresh-quick", _refresh("quick"), 0.3)],
    "incremental": [("refresh-incremental", _refresh("incremental"), 0.3)],
    "delete": [
        ("delete", lambda t: t.delete_index("by_k"), 0.0),
        ("restore", lambda t: t.restore_index("by_k"), 0.8),
    ],
}


def race_worker(
    path: str,
    role: str,
    min_rounds: int,
    barrier: Any,
    go_incremental: Any,
    stop: Any,
    results: Any,
    storage_options: dict[str, str] | None = None,
) -> None:
    """One racing process: run its role's operations in a loop, at least ``min_rounds`` times
    and until the parent's table changes are done, each retried until it succeeds.

    Reports the id of the entry each operation returned (its final entry, or the stable
    entry for a no-op) and the retry tally.
    """
    os.environ[MASTER_ENV] = "local[1]"
    tally = {"busy": 0, "lost": 0, "deleted": 0}
    done: list[tuple[str, int]] = []
    try:
        t = li.open_table(path, storage_options=storage_options)
        barrier.wait(timeout=600)
        if role == "incremental":
            go_incremental.wait(timeout=600)
        deadline = time.monotonic() + 600
        ops = ROLES[role]
        rounds = 0
        # Whole rounds only: a deleter always restores what it deleted.
        while rounds < min_rounds or not stop.is_set():
            for name, call, pause in ops:
                info = attempt(functools.partial(call, t), tally, deadline)
                done.append((name, info.log_entry))
                time.sleep(pause)
            rounds += 1
        results.put((role, os.getpid(), "ok", done, tally))
    except BaseException:
        results.put((role, os.getpid(), "error", traceback.format_exc(), tally))
    finally:
        if "pyspark" in sys.modules:
            from pyspark.sql import SparkSession

            active = SparkSession.getActiveSession()
            if active is not None:
                active.stop()


def collect_outcomes(procs: list[Any], results: Any) -> tuple[list[Any], Counter[str]]:
    """Wait for every racer's report; fail with the tracebacks of those that failed.

    Returns the reports ``(role, pid, "ok", done, tally)`` and the summed retry tally.
    """
    outcomes = [results.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=120)
    errors = [o for o in outcomes if o[2] != "ok"]
    assert not errors, "\n".join(f"{role} (pid {pid}):\n{tb}" for role, pid, _, tb, _ in errors)
    retries: Counter[str] = Counter()
    for _, _, _, _, tally in outcomes:
        retries.update(tally)
    return outcomes, retries


def start_racers(
    path: str, roles: tuple[str, ...], storage_options: dict[str, str] | None = None
) -> tuple[list[Any], Any, Any, Any, Any]:
    """Spawn one :func:`race_worker` per role on the table at ``path``.

    Returns (processes, barrier the parent must also wait on, go-incremental event, stop
    event, results queue).
    """
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(roles) + 1)
    go_incremental, stop = ctx.Event(), ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=race_worker,
            args=(path, role, 2, barrier, go_incremental, stop, results, storage_options),
            daemon=True,
        )
        for role in roles
    ]
    for p in procs:
        p.start()
    return procs, barrier, go_incremental, stop, results
