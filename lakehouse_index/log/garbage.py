"""Garbage: index data files that no retained log entry names.

Operations write data under a fresh ``<index_dir>/data/<uuid>/`` before the entry that
names it, so a failed, cancelled or killed operation leaves files nothing refers to.
Vacuum deletes them (and, after log entries are expired, the data only those entries
named). Nothing here deletes anything: vacuum decides, inside its VACUUMING operation,
when no other operation can be writing fresh data.

Example::

    from lakehouse_index.log.garbage import orphans
    for f in orphans(log, older_than_ms=now_ms - 3_600_000):
        log.storage.delete(f.path)
"""

from __future__ import annotations

from lakehouse_index.log.entry import DATA_DIR, LogEntry
from lakehouse_index.log.store import IndexLog
from lakehouse_index.source import FileStatus


def entry_paths(entry: LogEntry) -> set[str]:
    """Index data files named by one entry, relative to the index directory (under
    ``data/``: :func:`lakehouse_index.log.entry.data_file_path` checks every entry read)."""
    return {f.path for f in entry.content.files}


def referenced_paths(log: IndexLog) -> set[str]:
    """Every index data file named by any retained entry (transient ones included),
    relative to the index directory (``data/<uuid>/...``)."""
    out: set[str] = set()
    for entry in log.entries():
        out |= entry_paths(entry)
    return out


def orphans(log: IndexLog, *, older_than_ms: int | None = None) -> list[FileStatus]:
    """Files under ``<index_dir>/data/`` that no retained entry names, sorted by path.

    ``older_than_ms`` keeps files modified at or after that epoch-ms time out of the
    answer (a safety margin for writers of a cancelled-but-still-running operation).
    """
    referenced = referenced_paths(log)
    data_root = log.uri(DATA_DIR)
    prefix = log.index_dir + "/"
    out = []
    for status in log.storage.list_tree(data_root):
        rel = status.path[len(prefix) :] if status.path.startswith(prefix) else status.path
        if rel in referenced:
            continue
        if older_than_ms is not None and status.mtime_ms >= older_than_ms:
            continue
        out.append(status)
    return sorted(out, key=lambda s: s.path)


def orphan_dirs(log: IndexLog, *, older_than_ms: int | None = None) -> list[str]:
    """Data directories (full URIs) of which no file is named by a retained entry and,
    with ``older_than_ms``, every file is older than that: safe to delete whole."""
    referenced_dirs = {p.split("/")[1] for p in referenced_paths(log)}
    data_root = log.uri(DATA_DIR)
    young: set[str] = set()
    seen: set[str] = set()
    for status in log.storage.list_tree(data_root):
        d = status.path[len(data_root) + 1 :].split("/")[0]
        seen.add(d)
        if older_than_ms is not None and status.mtime_ms >= older_than_ms:
            young.add(d)
    return sorted(log.uri(f"{DATA_DIR}/{d}") for d in seen - referenced_dirs - young)
