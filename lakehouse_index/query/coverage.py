"""Coverage: how one index snapshot relates to the table version a query asks for.

For a target version v and an index snapshot s (a stable log entry):

* **Exact window** — v is s itself or an ancestor of s no older than the index's base
  ordinal: the LSM entries capped at v are exactly the live rows of v for the files
  covered at v (``added_ordinal <= v < removed_ordinal``). Nothing is scanned.
* **Hybrid** — any other v (newer than s, older than the base, or on another branch):
  entries are taken as of s and repaired against v's snapshot:
  files live in v and not covered by s are scanned; entries of covered files not live in
  v are dropped; a covered file whose row-level deletes differ is filtered by v's deletes
  when it had none when indexed, else scanned (rows deleted then may be live in v); the
  same for a covered file with an applied equality delete that does not apply in v.

In both, rows of files with equality deletes the index has not applied (``SourceFile.
equality_applied``: those of a full build, and later ones on the record key, which refresh
writes as DEL entries) are re-read and filtered by value, and entries of files rewritten by
copy-on-write commits up to the cap are read at their new address (``moves``, the lineage
remap).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from lakehouse_index.config import SizedCache
from lakehouse_index.errors import VersionNotFoundError
from lakehouse_index.kinds.moves import MoveMap, moves_of
from lakehouse_index.log.entry import LogEntry, SourceFile
from lakehouse_index.source import FileEntry, Snapshot, TableSource


@dataclass(frozen=True)
class Coverage:
    """What a query at one version reads from the index and what it scans."""

    #: LSM entries with ``_version`` above this ordinal are ignored.
    cap: int
    #: Covered file id → the target's live entry: index rows of these files are answers.
    answered: dict[int, FileEntry]
    #: File ids (subset of ``answered``) whose rows must be filtered by the target's deletes.
    filter_deletes: frozenset[int]
    #: Target files the index cannot answer for: read and filtered directly.
    scan: tuple[FileEntry, ...]
    exact_window: bool
    #: Where rows of files rewritten up to ``cap`` moved (applied to entries before the merge).
    moves: MoveMap
    #: Files the snapshot counts as live that the target does not hold (their entries are dropped).
    excluded: int = 0

    @cached_property
    def scan_bytes(self) -> int:
        """Bytes of data files the hybrid scan must read."""
        return sum(f.size for f in self.scan)

    @cached_property
    def answered_ids(self) -> pa.Array:
        """The ids of :attr:`answered`, ascending (int64): the filter of the index entries."""
        return pa.array(sorted(self.answered), pa.int64())

    @cached_property
    def deleted_rows(self) -> int:
        """Rows deleted in the target from the files filtered by its deletes (the delete filter's work)."""
        return sum(self.answered[fid].deleted_count for fid in self.filter_deletes)


def is_ancestor(source: TableSource, older: int, newer: int, min_ordinal: int) -> bool:
    """Whether version ``older`` is ``newer`` or one of its ancestors (not below ``min_ordinal``)."""
    v: int | None = newer
    while v is not None:
        if v == older:
            return True
        try:
            info = source.version_info(v)
        except VersionNotFoundError:  # history cleaned up: ancestry unknown, so not exact
            return False
        if info.ordinal < min_ordinal:
            return False
        v = info.parent
    return False


#: (id of a log entry, id of a target snapshot) → (that entry, that snapshot, its coverage).
#: Both are immutable and a connector hands out one Snapshot object per version while it is
#: cached, so a warm lookup computes coverage once per (table version, index log entry): a new
#: table version or a new log entry is another object, hence a miss. Holding both objects keeps
#: their ids from being reused while cached. Size: ``CacheConfig.coverage_entries``.
_CACHE: SizedCache[tuple[int, int], tuple[LogEntry, Snapshot, Coverage]] = SizedCache("coverage_entries")


def coverage(source: TableSource, entry: LogEntry, target: Snapshot) -> Coverage:
    """Plan the repair of ``entry``'s index data for the table state ``target`` (cached per pair)."""
    key = (id(entry), id(target))
    hit = _CACHE.get(key)
    if hit is not None and hit[0] is entry and hit[1] is target:
        return hit[2]
    found = _coverage(source, entry, target)
    _CACHE[key] = (entry, target, found)
    return found


def _coverage(source: TableSource, entry: LogEntry, target: Snapshot) -> Coverage:
    base = entry.content.base_ordinal if entry.content.base_ordinal is not None else entry.source.ordinal
    window = base <= target.ordinal <= entry.source.ordinal and is_ancestor(
        source, target.version, entry.source.version, base
    )
    if window:
        return _window(entry, target)
    return _hybrid(entry, target, _legacy_equality_applied(source, entry))


def _legacy_equality_applied(source: TableSource, entry: LogEntry) -> dict[str, frozenset[str]] | None:
    """For file-map records older than format 3: the equality deletes their entries leave out.

    Those are at least the ones that applied at the indexed version when the file was
    indexed by a full build (which reads rows with every delete applied); taking every
    equality delete of the indexed version is the conservative reading. ``{}`` when every
    record says it itself, or for formats without equality deletes; ``None`` when the
    indexed version is gone (unknown: scan every such file).
    """
    if type(source).equality_delete_rows is TableSource.equality_delete_rows or all(
        f.equality_applied is not None for f in entry.source.files
    ):
        return {}
    try:
        indexed = source.snapshot(entry.source.version)
    except VersionNotFoundError:
        return None
    return {
        path: frozenset(e.path for e in fe.equality_deletes)
        for path, fe in indexed.files.items()
        if fe.equality_deletes
    }


def _left_out(sf: SourceFile, legacy: dict[str, frozenset[str]] | None) -> frozenset[str] | None:
    """Equality-delete files whose rows ``sf``'s entries leave out (None: unknown)."""
    if sf.equality_applied is not None:
        return frozenset(sf.equality_applied)
    return None if legacy is None else legacy.get(sf.path, frozenset())


def _verify(sf: SourceFile, target: FileEntry) -> bool:
    """Whether equality deletes of ``target`` may delete rows the entries of ``sf`` still hold."""
    applies = {e.path for e in target.equality_deletes}
    return not applies <= set(sf.equality_applied) if sf.equality_applied is not None else bool(applies)


def _covered_at(f: SourceFile, ordinal: int) -> bool:
    return f.added_ordinal <= ordinal and (f.removed_ordinal is None or f.removed_ordinal > ordinal)


def _window(entry: LogEntry, target: Snapshot) -> Coverage:
    v = target.ordinal
    covered = {f.path: f for f in entry.source.files if _covered_at(f, v)}
    answered: dict[int, FileEntry] = {}
    filtered = set()
    scan = []
    for path, fe in target.files.items():
        sf = covered.get(path)
        if sf is None:
            scan.append(fe)
            continue
        answered[sf.id] = fe
        if _verify(sf, fe):
            filtered.add(sf.id)
    moves = moves_of(entry.source, v)
    return Coverage(v, answered, frozenset(filtered), tuple(scan), True, moves, _excluded(entry, target))


def _hybrid(entry: LogEntry, target: Snapshot, legacy: dict[str, frozenset[str]] | None) -> Coverage:
    covered = {f.path: f for f in entry.source.files if f.removed_ordinal is None}
    answered: dict[int, FileEntry] = {}
    filtered = set()
    scan = []
    for path, fe in target.files.items():
        sf = covered.get(path)
        target_deletes = fe.deletes.id if fe.deletes else None
        left_out = None if sf is None else _left_out(sf, legacy)
        if sf is None or left_out is None:
            scan.append(fe)
        elif not left_out <= {e.path for e in fe.equality_deletes}:
            scan.append(fe)  # rows an equality delete removed from the index may be live here
        elif sf.deletes_id == target_deletes:
            answered[sf.id] = fe
            if _verify(sf, fe):
                filtered.add(sf.id)
        elif sf.deleted_count == 0:
            answered[sf.id] = fe
            filtered.add(sf.id)
        else:
            scan.append(fe)
    cap = entry.source.ordinal
    return Coverage(
        cap,
        answered,
        frozenset(filtered),
        tuple(scan),
        False,
        moves_of(entry.source, cap),
        _excluded(entry, target),
    )


def _excluded(entry: LogEntry, target: Snapshot) -> int:
    """Files ``entry`` counts as live (not removed) that ``target`` does not hold."""
    return sum(1 for f in entry.source.files if f.removed_ordinal is None and f.path not in target.files)


def covered_files(entry: LogEntry, target: Snapshot) -> tuple[dict[int, FileEntry], tuple[FileEntry, ...]]:
    """Files of ``target`` whose data ``entry`` covers (id → the target's entry), and the others.

    File-level only (for indexes whose answer about a file does not depend on its row-level
    deletes, such as per-file statistics): a covered file is one the snapshot indexed
    and still counts as live.
    """
    ids = {f.path: f.id for f in entry.source.files if f.removed_ordinal is None}
    covered = {ids[p]: fe for p, fe in target.files.items() if p in ids}
    return covered, tuple(fe for p, fe in target.files.items() if p not in ids)


def plain_scan(target: Snapshot) -> Coverage:
    """The coverage of "no index": every live file is scanned."""
    return Coverage(target.ordinal, {}, frozenset(), tuple(target.files.values()), False, MoveMap({}))
