"""Child-process bodies of the engine race and crash tests (imported after a ``spawn``)."""

from __future__ import annotations

import os
import signal
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lakehouse_index as li
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


def refresh_and_die(path: str, mode: str, point: str, pid_file: str) -> None:
    """Run ``refresh_index(mode)`` and SIGKILL this process at ``point``.

    The hooks wrap the real functions (the operation itself runs unchanged up to the kill):
    ``IndexLog.write`` for the transient entry, ``write_sorted`` (the Spark write of index
    data) for before/after the data write.
    """
    os.environ[MASTER_ENV] = "local[1]"
    from lakehouse_index.log import store
    from lakehouse_index.maintenance import build, refresh

    marker = Path(pid_file)
    if point == "after-transient":
        real_write = store.IndexLog.write

        def write(self: store.IndexLog, entry: Any) -> None:
            real_write(self, entry)
            _die(marker)

        store.IndexLog.write = write  # type: ignore[method-assign]
    else:
        real_sorted = build.write_sorted

        def write_sorted(*args: Any, **kwargs: Any) -> Any:
            if point == "before-data":
                _die(marker)
            out = real_sorted(*args, **kwargs)
            _die(marker)
            return out

        build.write_sorted = write_sorted  # type: ignore[assignment]
        refresh.write_sorted = write_sorted  # type: ignore[assignment]
    li.open_table(path).refresh_index("by_k", mode)
    raise AssertionError("the refresh finished: the kill hook never ran")


# --------------------------------------------------------------------------- races


def _attempt(fn: Callable[[], Any], tally: dict[str, int], deadline: float) -> Any:
    """Run ``fn`` until it succeeds: retry on ConcurrentIndexUpdate (incl. IndexBusyError) and on
    IllegalIndexStateError caused by a concurrent delete (the index is DELETED for a moment)."""
    delay = 0.02
    while True:
        try:
            return fn()
        except IndexBusyError:
            tally["busy"] += 1
        except li.ConcurrentIndexUpdate:
            tally["lost"] += 1
        except li.IllegalIndexStateError as e:
            if "DELETED" not in str(e) and "ACTIVE" not in str(e):
                raise
            tally["state"] += 1
        if time.monotonic() > deadline:
            raise TimeoutError(f"no success before the deadline: {tally}")
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def race_worker(path: str, role: str, rounds: int, barrier: Any, stop: Any, results: Any) -> None:
    """One racing process: repeat its operations ``rounds`` times (and until the parent's table
    changes are done), each retried until it succeeds; report the log slots it wrote."""
    os.environ[MASTER_ENV] = "local[1]"
    tally = {"busy": 0, "lost": 0, "state": 0}
    wrote: list[tuple[str, int]] = []  # (operation, id of the entry readers use afterwards)
    try:
        t = li.open_table(path)
        barrier.wait(timeout=300)
        deadline = time.monotonic() + 240
        ops = ROLES[role]
        i = 0
        while i < rounds or not stop.is_set():
            name, call = ops[i % len(ops)]
            if name == "delete":
                # Deleting needs ACTIVE: a concurrent delete leaves it DELETED; restore it back.
                info = _attempt(lambda: call(t), tally, deadline)
                wrote.append((name, info.log_entry))
                info = _attempt(lambda: t.restore_index("by_k"), tally, deadline)
                wrote.append(("restore", info.log_entry))
            else:
                info = _attempt(lambda call=call: call(t), tally, deadline)  # type: ignore[misc]
                wrote.append((name, info.log_entry))
            i += 1
        results.put((role, os.getpid(), "ok", wrote, tally))
    except BaseException:
        results.put((role, os.getpid(), "error", traceback.format_exc(), tally))


def _refresh(mode: str) -> Callable[[li.Table], Any]:
    return lambda t: t.refresh_index("by_k", mode)


def _optimize(mode: str) -> Callable[[li.Table], Any]:
    return lambda t: t.optimize_index("by_k", mode)


#: What each kind of racing process does, in a loop. Only ``spark-*`` roles start a JVM:
#: quick refreshes, delete and restore are metadata only, and the parent's table changes
#: during ``meta-incremental``'s phase are whole-file deletes (no file to index).
ROLES: dict[str, list[tuple[str, Callable[[li.Table], Any]]]] = {
    "spark-refresh": [
        ("refresh-incremental", _refresh("incremental")),
        ("optimize-quick", _optimize("quick")),
        ("refresh-full", _refresh("full")),
    ],
    "spark-optimize": [
        ("optimize-full", _optimize("full")),
        ("refresh-incremental", _refresh("incremental")),
    ],
    "quick": [("refresh-quick", _refresh("quick"))],
    "delete": [("delete", lambda t: t.delete_index("by_k"))],
}
