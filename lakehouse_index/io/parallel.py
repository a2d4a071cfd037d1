"""Per-file work on a few threads: reading and writing Parquet release the GIL while they wait
on storage and decode, so files are handled side by side even on two cores."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["CORES", "DECODE_THREADS", "each_file", "shared_pool"]

T = TypeVar("T")
R = TypeVar("R")

#: Most threads one call uses.
MAX_THREADS = 8
#: Cores of this machine (read once: ``os.cpu_count`` costs tens of microseconds a call).
CORES = os.cpu_count() or 1
#: Threads decoding Parquet at once: one per core, at least two (reads wait on storage too, and
#: Arrow decodes without the GIL), at most :data:`MAX_THREADS` (more only add memory).
DECODE_THREADS = max(2, min(MAX_THREADS, CORES))

_POOLS: dict[tuple[str, int, int], ThreadPoolExecutor] = {}


def each_file(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``fn`` of every item, in order, up to two per core at a time (at most :data:`MAX_THREADS`).

    Every call finishes before an error of one is raised, so callers can clean up all that
    was written. (Reading the key column of 100 files of 5,000 rows on 2 cores: 69 ms one
    after the other, 40 ms on 4 threads.)
    """
    workers = max(1, min(len(items), 2 * CORES, MAX_THREADS))
    if workers == 1:
        return [fn(i) for i in items]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="each-file") as pool:
        futures = [pool.submit(fn, i) for i in items]
    return [f.result() for f in futures]


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The long-lived pool of ``workers`` threads named ``name`` of this process.

    Keyed by process id: a forked child (a Spark Python worker) gets pools of its own,
    since the parent's threads do not exist there.
    """
    key = (name, workers, os.getpid())
    pool = _POOLS.get(key)
    if pool is None:
        pool = _POOLS.setdefault(key, ThreadPoolExecutor(workers, thread_name_prefix=name))
    return pool
