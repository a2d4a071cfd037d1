"""Choosing the index snapshot that answers a query at a table version most cheaply.

A lookup through a named index (:func:`plan`) has as candidates every retained ACTIVE
snapshot (log entry) of that index, plus a plain scan of the version. A read with a
predicate (:func:`plan_read`) considers every index of the table: the snapshots of each
secondary or covering index whose key the predicate pins to finitely many values, each
skipping index that prunes files for it (cost: the bytes of the files it keeps plus its
own), and the plain scan; an index that cannot answer is listed with the reason
``WRONG_COLUMNS``. The cost of answering version v from snapshot s, in bytes:

* data files live in v that s does not cover (the hybrid scan reads them),
* index data read (per key, up to one row group of each index file, charged at the
  index's average row-group size),
* a small charge per file s covers that is not live in v (lineage filter) and per row
  deleted since indexing (delete filter).

A snapshot whose exact window holds v scans nothing. A plain scan costs the bytes of v.
Ties go to the newer snapshot. A snapshot whose hybrid scan would read more than
``max_scan_share`` of the version's bytes is rejected (the plain scan is then cheaper
in practice, because the index part costs extra round trips). Every rejected candidate
carries a typed reason, which ``explain`` prints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

from lakehouse_index.config import PlannerConfig
from lakehouse_index.errors import VersionNotFoundError
from lakehouse_index.log.entry import LogEntry
from lakehouse_index.maintenance.writer import ROW_GROUP_ROWS
from lakehouse_index.query.coverage import Coverage, coverage
from lakehouse_index.source import Snapshot, TableSource
from lakehouse_index.spec import IndexKind


class Reason(str, Enum):
    """Why a candidate was chosen or not."""

    CHOSEN = "chosen"
    MORE_EXPENSIVE = "more expensive"
    OVER_THRESHOLD = "hybrid scan over threshold"
    TABLE_VERSION_GONE = "indexed table version no longer in the table's history"
    WRONG_COLUMNS = "index does not cover the query's columns"


@dataclass(frozen=True)
class Candidate:
    """One way to answer the query, with its cost broken down."""

    label: str
    entry: LogEntry | None
    coverage: Coverage | None
    scan_bytes: int
    index_bytes: int
    repair_cost: int
    reason: Reason = Reason.MORE_EXPENSIVE
    #: The index the candidate reads (None: the plain scan).
    index: str | None = None
    #: For a read: the live files (paths) the candidate has the read open: those a skipping
    #: index keeps, or those a secondary or covering index locates the keys in.
    files: frozenset[str] | None = None
    #: Bytes of ``files``.
    fetch_bytes: int = 0

    @property
    def cost(self) -> int:
        """Total estimated bytes."""
        return self.scan_bytes + self.index_bytes + self.repair_cost + self.fetch_bytes

    @property
    def usable(self) -> bool:
        """Whether the candidate competes on cost (not rejected for a hard reason)."""
        return self.reason in (Reason.CHOSEN, Reason.MORE_EXPENSIVE)


@dataclass(frozen=True)
class Plan:
    """The planner's decision for one query; ``str(plan)`` is the explain output."""

    #: What is planned, e.g. "lookup via index 'by_email'" (the explain header).
    query: str
    target: Snapshot
    keys: int
    candidates: tuple[Candidate, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def chosen(self) -> Candidate:
        """The candidate that answers."""
        return next(c for c in self.candidates if c.reason is Reason.CHOSEN)

    def __str__(self) -> str:
        lines = [
            f"{self.query} at table version {self.target.version} "
            f"({len(self.target.files)} files, {self.target.total_bytes:,} bytes), {self.keys} key(s)",
            f"{'candidate':<44} {'cost (bytes)':>14} {'scan':>12} {'index':>10} {'repair':>8} "
            f"{'fetch':>12}  decision",
        ]
        for c in self.candidates:
            lines.append(
                f"{c.label:<44} {c.cost:>14,} {c.scan_bytes:>12,} {c.index_bytes:>10,} {c.repair_cost:>8,} "
                f"{c.fetch_bytes:>12,}  {c.reason.value}"
            )
        ch = self.chosen
        if ch.files is not None:
            lines.append(f"→ {ch.label}: {len(ch.files)} of {len(self.target.files)} files read")
        elif ch.coverage is not None:
            cov = ch.coverage
            mode = "exact window (index only)" if cov.exact_window else "hybrid scan"
            lines.append(
                f"→ {ch.label}: {mode}; {len(cov.answered)} files answered by the index, "
                f"{len(cov.scan)} scanned, {len(cov.filter_deletes)} filtered by deletes"
            )
        else:
            lines.append(f"→ {ch.label}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _snapshot_label(e: LogEntry) -> str:
    return f"snapshot {e.id} (table v{e.source.version})"


def _row_group_bytes(snapshots: Sequence[LogEntry]) -> int:
    """Average bytes of one index row group, over every snapshot's files (one figure for all)."""
    files = {f.path: f for e in snapshots for f in e.content.files}.values()
    rows = sum(f.rows for f in files)
    size = sum(f.size for f in files)
    return int(size * min(1.0, ROW_GROUP_ROWS / rows)) // max(1, len(files)) if rows else 0


def _index_bytes(entry: LogEntry, keys: int, row_group_bytes: int) -> int:
    """Index bytes a lookup of ``keys`` keys reads: up to one row group per index file and key.

    Charging a common row-group size makes snapshots differ by what really differs: how
    many files (LSM levels) a key must be looked for in.
    """
    return len(entry.content.files) * row_group_bytes * max(1, keys)


def _in_history(source: TableSource, version: int) -> bool:
    try:
        source.version_info(version)
    except VersionNotFoundError:
        return False
    return True


def _distinct(snapshots: Sequence[LogEntry]) -> list[LogEntry]:
    """Snapshots minus older copies of the same state (cancel and restore re-write an entry)."""
    seen = set()
    out = []
    for e in sorted(snapshots, key=lambda e: -e.id):
        # Data paths are unique per operation (fresh directories): they identify the content.
        key = (e.source.version, e.source.ordinal, tuple(f.path for f in e.content.files))
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out[::-1]


def plan(
    source: TableSource,
    index: str,
    snapshots: Sequence[LogEntry],
    target: Snapshot,
    keys: int,
    config: PlannerConfig = PlannerConfig(),
) -> Plan:
    """Cost every snapshot of ``index`` and the plain scan for a lookup of ``keys`` keys at ``target``."""
    cands = _snapshot_candidates(source, index, snapshots, target, keys, config)
    notes = () if snapshots else ("the index has no active snapshot",)
    return _choose(f"lookup via index {index!r}", target, keys, cands, config, notes)


@dataclass(frozen=True)
class IndexOption:
    """One index of the table, as a read with a predicate could use it."""

    name: str
    #: Its retained ACTIVE snapshots (the newest last).
    snapshots: tuple[LogEntry, ...]
    #: Secondary / covering: the key tuples the predicate pins the key to (None: it does not).
    keys: Sequence[tuple[object, ...]] | None = None
    #: Secondary / covering: the predicate uses only the index's columns (a range on the key,
    #: a condition on included columns), so filtering the index rows finds the files.
    covers: bool = False
    #: Skipping: the live files it keeps for the predicate (None: it prunes nothing for it).
    kept: frozenset[str] | None = None


def plan_read(
    source: TableSource,
    query: str,
    options: Sequence[IndexOption],
    target: Snapshot,
    locate: Callable[[IndexOption, LogEntry, Coverage, bool], frozenset[str]],
    config: PlannerConfig = PlannerConfig(),
) -> Plan:
    """Cost every way to read the rows of ``target`` matching a predicate: each index, or a plain scan.

    A skipping index costs its own bytes plus the files it keeps. A secondary or covering
    index costs what a lookup of the pinned keys through each snapshot costs (or, for a
    predicate over its columns only, reading the whole snapshot) plus the files that hold
    matching rows, which ``locate(option, snapshot, coverage, by_keys)`` finds through the cheapest
    snapshot (it is called only for indexes that can compete). An index whose key the
    predicate pins and whose columns cover it competes both ways.
    """
    cands: list[Candidate] = []
    keys = 0
    for opt in options:
        latest = opt.snapshots[-1] if opt.snapshots else None
        if latest is not None and latest.spec.kind is IndexKind.SKIPPING:
            if opt.kept is None:
                cands.append(_unusable(opt.name))
                continue
            label = f"{opt.name}: skipping, {len(opt.kept)} files kept"
            fetch = _bytes_of(target, opt.kept)
            cands.append(
                Candidate(
                    label,
                    latest,
                    None,
                    0,
                    latest.content.size,
                    0,
                    index=opt.name,
                    files=opt.kept,
                    fetch_bytes=fetch,
                )
            )
        elif latest is None or (opt.keys is None and not opt.covers):
            cands.append(_unusable(opt.name))
        else:
            if opt.keys is not None:
                keys = max(keys, len(opt.keys))
                cands += _read_candidates(source, opt, target, config, locate, by_keys=True)
            if opt.covers:
                cands += _read_candidates(source, opt, target, config, locate, by_keys=False)
    return _choose(query, target, keys, cands, config, ())


def _read_candidates(
    source: TableSource,
    opt: IndexOption,
    target: Snapshot,
    config: PlannerConfig,
    locate: Callable[[IndexOption, LogEntry, Coverage, bool], frozenset[str]],
    *,
    by_keys: bool,
) -> list[Candidate]:
    """The snapshots of a secondary or covering index as ways to read: by the pinned keys, or by
    filtering every index row with the predicate; each with the files that hold matching rows."""
    n = len(opt.keys) if by_keys and opt.keys is not None else 1
    prefix = f"{opt.name}: " if by_keys else f"{opt.name} (filter): "
    snaps = _snapshot_candidates(source, opt.name, opt.snapshots, target, n, config, prefix=prefix)
    if not by_keys:  # the filter reads every index row of the snapshot
        snaps = [replace(c, index_bytes=c.entry.content.size) if c.entry else c for c in snaps]
    usable = [c for c in snaps if c.usable]
    if not usable:
        return snaps
    best = min(usable, key=_preference)
    assert best.entry is not None and best.coverage is not None
    found = locate(opt, best.entry, best.coverage, by_keys)
    fetch = _bytes_of(target, found)
    return [replace(c, files=found, fetch_bytes=fetch) if c.usable else c for c in snaps]


def _preference(c: Candidate) -> tuple[int, int]:
    """Cheapest first; ties to the newer snapshot (higher entry id), then to any index over the plain scan."""
    return (c.cost, -(c.entry.id if c.entry else -1))


def _bytes_of(target: Snapshot, paths: frozenset[str]) -> int:
    return sum(f.size for p, f in target.files.items() if p in paths)


def _unusable(name: str) -> Candidate:
    return Candidate(name, None, None, 0, 0, 0, Reason.WRONG_COLUMNS, index=name)


def _snapshot_candidates(
    source: TableSource,
    index: str,
    snapshots: Sequence[LogEntry],
    target: Snapshot,
    keys: int,
    config: PlannerConfig,
    *,
    prefix: str = "",
) -> list[Candidate]:
    """A candidate per distinct snapshot of one secondary or covering index (labels after ``prefix``)."""
    total = target.total_bytes
    rg_bytes = _row_group_bytes(snapshots)
    cands: list[Candidate] = []
    for e in _distinct(snapshots):
        if not _in_history(source, e.source.version):
            cands.append(
                Candidate(
                    prefix + _snapshot_label(e), e, None, 0, 0, 0, Reason.TABLE_VERSION_GONE, index=index
                )
            )
            continue
        cov = coverage(source, e, target)
        live = set(target.files)
        excluded = sum(1 for f in e.source.files if f.removed_ordinal is None and f.path not in live)
        deleted = sum(fe.deleted_count for fid, fe in cov.answered.items() if fid in cov.filter_deletes)
        repair = excluded * config.excluded_file_cost + deleted * config.deleted_row_cost
        reason = Reason.MORE_EXPENSIVE
        if total and cov.scan_bytes > config.max_scan_share * total and not config.force_index:
            reason = Reason.OVER_THRESHOLD
        index_bytes = _index_bytes(e, keys, rg_bytes)
        cands.append(
            Candidate(
                prefix + _snapshot_label(e), e, cov, cov.scan_bytes, index_bytes, repair, reason, index=index
            )
        )
    return cands


def _choose(
    query: str,
    target: Snapshot,
    keys: int,
    cands: list[Candidate],
    config: PlannerConfig,
    notes: tuple[str, ...],
) -> Plan:
    """The plan choosing the cheapest usable candidate (the plain scan is added last)."""
    cands = [*cands, Candidate("plain scan", None, None, target.total_bytes, 0, 0)]
    usable = [c for c in cands if c.usable]
    if config.force_index and any(c.entry is not None for c in usable):
        usable = [c for c in usable if c.entry is not None]
    best = min(usable, key=_preference)
    final = tuple(replace(c, reason=Reason.CHOSEN) if c is best else c for c in cands)
    return Plan(query, target, keys, final, notes)
