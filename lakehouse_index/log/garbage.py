"""Garbage: index data files that no retained log entry names.

Operations write data under a fresh ``<index_dir>/data/<uuid>/`` before the entry that
names it, so a failed, cancelled or killed operation leaves files nothing refers to.
Vacuum deletes them (and, after log entries are expired, the data only those entries
named). Nothing here deletes anything: vacuum decides, inside its VACUUMING operation,
when no other operation can be writing fresh data.

Example::

    from lakehouse_index.log.garbage import orphans
    for f in orphans(log, young_after_ms=now_ms - 3_600_000):
        log.storage.delete(f.path)
"""

from __future__ import annotations

from collections.abc import Set

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


def orphans(
    log: IndexLog, *, young_after_ms: int | None = None, known: Set[str] = frozenset()
) -> list[FileStatus]:
    """Files under ``<index_dir>/data/`` that no retained entry names, sorted by path.

    With ``young_after_ms``, a file modified at or after that epoch-ms time is left out unless
    it is in ``known`` (relative paths named by entries read before the caller started): a
    young file nothing named may belong to an operation still running (one that began after
    the caller was cancelled).
    """
    referenced = referenced_paths(log)
    prefix = log.index_dir + "/"
    out = []
    for status in log.storage.list_tree(log.uri(DATA_DIR)):
        rel = status.path[len(prefix) :] if status.path.startswith(prefix) else status.path
        if rel in referenced or is_young(status, rel, young_after_ms, known):
            continue
        out.append(status)
    return sorted(out, key=lambda s: s.path)


def orphan_dirs(
    log: IndexLog, *, young_after_ms: int | None = None, known: Set[str] = frozenset()
) -> list[str]:
    """Data directories (full URIs) of which no file is named by a retained entry and, with
    ``young_after_ms``, no file is young and unknown (as in :func:`orphans`): safe to delete whole."""
    referenced_dirs = {p.split("/")[1] for p in referenced_paths(log)}
    data_root = log.uri(DATA_DIR)
    prefix = log.index_dir + "/"
    young: set[str] = set()
    seen: set[str] = set()
    for status in log.storage.list_tree(data_root):
        d = status.path[len(data_root) + 1 :].split("/")[0]
        seen.add(d)
        if is_young(status, status.path[len(prefix) :], young_after_ms, known):
            young.add(d)
    return sorted(log.uri(f"{DATA_DIR}/{d}") for d in seen - referenced_dirs - young)


def is_young(status: FileStatus, rel: str, young_after_ms: int | None, known: Set[str]) -> bool:
    """Whether ``status`` (``rel``: its path relative to the index directory) was modified at or
    after ``young_after_ms`` and is named in no entry of ``known``."""
    return young_after_ms is not None and status.mtime_ms >= young_after_ms and rel not in known
