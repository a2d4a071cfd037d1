"""Named crash points: where the crash harness kills a process, chosen through the environment.

Every mutating operation calls :func:`crash_point` at its real steps (after its transient
log entry, after writing index data, after the table commit, ...). Normally this is one
dictionary lookup of an unset variable. When ``LAKEHOUSE_INDEX_CRASH_AT`` names the point,
the process sends itself SIGKILL there, with no chance to clean up, exactly as a machine
that loses power or an OOM kill would::

    LAKEHOUSE_INDEX_CRASH_AT=refresh-incremental.after_data lakehouse-index refresh ...
    LAKEHOUSE_INDEX_CRASH_AT=index_data.file_written:3 ...     # at the third hit

``name:N`` kills at the N-th time the point is reached (default the first). The points are
listed in :data:`CRASH_POINTS` and documented in ``docs/RELIABILITY.md``; ``{op}`` stands for
an index operation's name (``create``, ``refresh-full``, ``refresh-incremental``,
``refresh-quick``, ``optimize-quick``, ``optimize-full``, ``delete``, ``restore``,
``vacuum``, ``cancel``; cancel writes no data, so it has no ``after_data``).
"""

from __future__ import annotations

import os
import signal
from collections import Counter

#: The environment variable naming the point to die at (``name`` or ``name:N``).
CRASH_ENV = "LAKEHOUSE_INDEX_CRASH_AT"

#: Every crash point, with what has happened when a process dies there.
CRASH_POINTS: dict[str, str] = {
    "{op}.after_transient": "the operation's transient log entry is written, nothing else",
    "{op}.after_data": "the operation's index data is written, its final log entry is not",
    "{op}.after_final": "the final log entry is written (the operation is done; the caller never hears)",
    "index_data.file_written": "one index data file is written (more may follow)",
    "vacuum.after_expire": "vacuum expired old log entries, deleted no data yet",
    "vacuum.data_deleted": "vacuum deleted one unreferenced data directory or file (more may follow)",
    "write.before_commit": "a write (append/overwrite/delete/update/upsert) is checked, nothing committed",
    "write.after_commit": "the write's table commit is done; no index is maintained yet",
    "sync.after_index": "sync_indexes (writes, watcher) maintained one index (more may follow)",
    "watch.after_poll": "the watcher finished one poll of one table",
    "erase.after_locate": "erase located the subjects' rows; nothing rewritten",
    "erase.after_delete": "erase's table commit (the rewritten files) is done; indexes not refreshed",
    "erase.after_refresh": "erase refreshed every index; no purge yet",
    "erase.after_purge": "erase purged table history and index data; not verified",
    "purge.{step}": "a purge step of erase is done (the steps of ``sink.history.STEPS``)",
    "erase.after_verify": "erase verified the purge; the audit record is not written",
}

_hits: Counter[str] = Counter()


def crash_point(name: str) -> None:
    """SIGKILL this process if ``LAKEHOUSE_INDEX_CRASH_AT`` names ``name`` (at its N-th hit)."""
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    _hits[name] += 1
    if _hits[name] >= (int(nth) if nth else 1):
        os.kill(os.getpid(), signal.SIGKILL)
