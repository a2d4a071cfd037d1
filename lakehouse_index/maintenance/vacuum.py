"""Vacuum: physically remove index data.

* A DELETED index ends in DOES_NOT_EXIST (its name can be created again), then loses
  everything under its ``data/`` directory.
* An ACTIVE index expires log entries older than the retention (never the latest
  stable one) and removes the data files no retained entry names: data of expired
  snapshots and orphans of crashed or failed operations. The lifecycle holds the
  index in VACUUMING meanwhile, so no other operation is writing data.
"""

from __future__ import annotations

import logging
import time

from lakehouse_index.config import LogConfig
from lakehouse_index.faults import crash_point
from lakehouse_index.log.garbage import find_garbage, referenced_paths
from lakehouse_index.log.store import IndexLog

_log = logging.getLogger(__name__)

#: ``vacuum_index``'s default retention: ``LogConfig().vacuum_retention_hours``.
DEFAULT_RETENTION_HOURS = LogConfig().vacuum_retention_hours


def young_after_ms(log: IndexLog, started_ms: int) -> int:
    """The time from which listed data of unknown origin counts as written after a vacuum that
    started at ``started_ms``: earlier by the store's listing resolution and clock skew."""
    return started_ms - log.storage.mtime_slack_ms


def vacuum_deleted(log: IndexLog, started_ms: int) -> None:
    """Remove the index data of a deleted index: every data directory of which each file is
    named by a log entry or predates ``started_ms`` (the vacuum's transient entry).

    Called after the vacuum's final entry (``DOES_NOT_EXIST``) is written: no entry that can
    be restored names the data any more. A process killed before it finishes leaves orphans,
    which the vacuum of the index's next incarnation removes.

    A directory written since (by an operation that was cancelled while it still ran, then
    vacuum started) is left for a later vacuum, as is one such an operation still writes
    into while it is being deleted.
    """
    found = find_garbage(
        log,
        young_after_ms=young_after_ms(log, started_ms),
        known=referenced_paths(log),
        referenced=frozenset(),
    )
    for directory in found.dirs:
        try:
            log.storage.delete_tree(directory)
        except OSError as e:  # a live writer added a file meanwhile: the next vacuum removes it
            _log.warning("index %r: vacuum left %s: %s", log.name, directory, e)
        crash_point("vacuum.data_deleted")


def vacuum_active(log: IndexLog, retention_hours: float, started_ms: int) -> list[str]:
    """Expire snapshots older than ``retention_hours``, delete unreferenced data; returns removed files.

    Data named by an entry read here (expired ones included) goes at any age; other data only
    when it predates ``started_ms`` (the vacuum's transient entry; :func:`young_after_ms`):
    such files belong to an operation that started after this vacuum was cancelled.
    """
    known = referenced_paths(log)
    stable = log.latest_stable()
    cutoff_ms = time.time() * 1000 - retention_hours * 3600 * 1000
    old = [
        e.id for e in log.entries() if stable is not None and e.id < stable.id and e.timestamp_ms < cutoff_ms
    ]
    retention_s = retention_hours * 3600
    log.expire(old, min_retention_s=retention_s if retention_s > log.relist_after_s else 0)
    crash_point("vacuum.after_expire")
    found = find_garbage(log, young_after_ms=young_after_ms(log, started_ms), known=known)
    # Directories no retained entry names go whole (with empty subdirectories and markers);
    # then single orphan files inside directories that are still referenced.
    for directory in found.dirs:
        log.storage.delete_tree(directory)
        crash_point("vacuum.data_deleted")
    for status in found.loose_files:
        log.storage.delete(status.path)
        crash_point("vacuum.data_deleted")
    return [status.path for status in found.files]
