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
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Garbage:
    """Index data no retained entry names, from one listing of ``<index_dir>/data/``."""

    #: Data directories (full URIs) none of whose files is named or young: safe to delete whole.
    dirs: tuple[str, ...]
    #: Every unnamed file that is not young (those inside ``dirs`` included), sorted by path.
    files: tuple[FileStatus, ...]

    @property
    def loose_files(self) -> tuple[FileStatus, ...]:
        """The files of :attr:`files` outside :attr:`dirs` (the others go with their directory)."""
        inside = tuple(d + "/" for d in self.dirs)
        return tuple(f for f in self.files if not f.path.startswith(inside))


def find_garbage(
    log: IndexLog,
    *,
    young_after_ms: int | None = None,
    known: Set[str] = frozenset(),
    referenced: Set[str] | None = None,
) -> Garbage:
    """The index data that ``referenced`` (default: :func:`referenced_paths`) does not name.

    With ``young_after_ms``, a file modified at or after that epoch-ms time is left out (and
    keeps its directory) unless it is in ``known`` (relative paths named by entries read before
    the caller started): a young file nothing named may belong to an operation still running
    (one that began after the caller was cancelled). ``referenced=frozenset()`` takes every
    file (a deleted index's data).
    """
    named = referenced_paths(log) if referenced is None else referenced
    named_dirs = {p.split("/")[1] for p in named}
    data_root = log.uri(DATA_DIR)
    prefix = log.index_dir + "/"
    files: list[FileStatus] = []
    seen: set[str] = set()
    young: set[str] = set()
    for status in log.storage.list_tree(data_root):
        rel = status.path[len(prefix) :] if status.path.startswith(prefix) else status.path
        directory = status.path[len(data_root) + 1 :].split("/")[0]
        seen.add(directory)
        if young_after_ms is not None and status.mtime_ms >= young_after_ms and rel not in known:
            young.add(directory)
        elif rel not in named:
            files.append(status)
    dirs = sorted(log.uri(f"{DATA_DIR}/{d}") for d in seen - named_dirs - young)
    return Garbage(tuple(dirs), tuple(sorted(files, key=lambda s: s.path)))


def orphans(
    log: IndexLog, *, young_after_ms: int | None = None, known: Set[str] = frozenset()
) -> list[FileStatus]:
    """Files under ``<index_dir>/data/`` that no retained entry names, sorted by path
    (``young_after_ms`` and ``known`` as in :func:`find_garbage`)."""
    return list(find_garbage(log, young_after_ms=young_after_ms, known=known).files)


def orphan_dirs(
    log: IndexLog, *, young_after_ms: int | None = None, known: Set[str] = frozenset()
) -> list[str]:
    """Data directories (full URIs) of which no file is named by a retained entry (nor young
    and unknown, as in :func:`find_garbage`): safe to delete whole."""
    return list(find_garbage(log, young_after_ms=young_after_ms, known=known).dirs)
