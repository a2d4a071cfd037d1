"""Vacuum: physically remove index data.

* A DELETED index loses everything under its ``data/`` directory and ends in
  DOES_NOT_EXIST (its name can be created again).
* An ACTIVE index expires log entries older than the retention (never the latest
  stable one) and removes the data files no retained entry names: data of expired
  snapshots and orphans of crashed or failed operations. The lifecycle holds the
  index in VACUUMING meanwhile, so no other operation is writing data.
"""

from __future__ import annotations

import time

from lakehouse_index.config import LogConfig
from lakehouse_index.io import join_uri
from lakehouse_index.log.garbage import orphan_dirs, orphans
from lakehouse_index.log.store import DATA_DIR, IndexLog

#: ``vacuum_index``'s default retention: ``LogConfig().vacuum_retention_hours``.
DEFAULT_RETENTION_HOURS = LogConfig().vacuum_retention_hours


def vacuum_deleted(log: IndexLog) -> None:
    """Remove all index data of a deleted index."""
    log.storage.delete_tree(join_uri(log.index_dir, DATA_DIR))


def vacuum_active(log: IndexLog, retention_hours: float) -> list[str]:
    """Expire snapshots older than ``retention_hours``, delete unreferenced data; returns removed files."""
    stable = log.latest_stable()
    cutoff_ms = time.time() * 1000 - retention_hours * 3600 * 1000
    old = [
        e.id for e in log.entries() if stable is not None and e.id < stable.id and e.timestamp_ms < cutoff_ms
    ]
    retention_s = retention_hours * 3600
    log.expire(old, min_retention_s=retention_s if retention_s > log.relist_after_s else 0)
    removed = [status.path for status in orphans(log)]
    # Directories no retained entry names go whole (with empty subdirectories and markers);
    # then single orphan files inside directories that are still referenced.
    for directory in orphan_dirs(log):
        log.storage.delete_tree(directory)
    for path in removed:
        log.storage.delete(path)
    return removed
