"""Choosing the index snapshot that answers a query at a table version most cheaply.

A lookup through a named index (:func:`plan`) has as candidates every retained ACTIVE
snapshot (log entry) of that index, plus a plain scan of the version. A read with a
predicate (:func:`plan_read`) considers every index of the table, each as its kind says
the predicate can use it (``IndexKind.access``): the snapshots of an index whose key the
predicate pins to finitely many values (or whose columns hold the whole predicate), each
index that prunes files for it (cost: the bytes of the files it keeps plus its own), and
the plain scan; an index that cannot answer is listed with the reason ``WRONG_COLUMNS``.
The cost of answering version v from snapshot s, in bytes:

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

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from lakehouse_index.config import Config, PlannerConfig
from lakehouse_index.errors import VersionNotFoundError
from lakehouse_index.expressions import Predicate
from lakehouse_index.io import Storage
from lakehouse_index.kinds.base import Access, IndexKind, IndexLocation
from lakehouse_index.kinds.columns import changed_columns
from lakehouse_index.kinds.derived import on_index
from lakehouse_index.log.entry import LogEntry
from lakehouse_index.query import index_scan
from lakehouse_index.query import lookup as lk
from lakehouse_index.query.coverage import Coverage, coverage, covered_files
from lakehouse_index.source import FileEntry, Snapshot, TableSource


class Reason(str, Enum):
    """Why a candidate was chosen or not."""

    CHOSEN = "chosen"
    MORE_EXPENSIVE = "more expensive"
    OVER_THRESHOLD = "hybrid scan over threshold"
    TABLE_VERSION_GONE = "indexed table version no longer in the table's history"
    COLUMN_CHANGED = "an indexed column is another column at this version (renamed over, or re-added)"
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
    #: For a read: the live files the candidate has the read open: those a pruning index
    #: keeps, or those a lookup or a filter of the index's rows locates matches in.
    files: tuple[FileEntry, ...] | None = None
    #: Bytes of ``files``.
    fetch_bytes: int = 0
    #: Answers by reading the index rows its row-group bounds keep (``query.index_scan``).
    scans: bool = False
    #: For a scanning candidate: the row groups it reads (what its ``index_bytes`` counts).
    picked: index_scan.Picked | None = None

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
        lines.append(f"→ {self.summary}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    @property
    def summary(self) -> str:
        """One line: the chosen candidate and what it reads (files, or index answer vs hybrid scan)."""
        ch = self.chosen
        if ch.files is not None:
            return f"{ch.label}: {len(ch.files)} of {len(self.target.files)} files read"
        if ch.coverage is not None:
            cov = ch.coverage
            mode = "exact window (index only)" if cov.exact_window else "hybrid scan"
            return (
                f"{ch.label}: {mode}; {len(cov.answered)} files answered by the index, "
                f"{len(cov.scan)} scanned, {len(cov.filter_deletes)} filtered by deletes"
            )
        return ch.label

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data: the query, the table version, every candidate's costs (bytes)."""
        return {
            "query": self.query,
            "table_version": self.target.version,
            "table_files": len(self.target.files),
            "table_bytes": self.target.total_bytes,
            "keys": self.keys,
            "candidates": [
                {
                    "label": c.label,
                    "index": c.index,
                    "snapshot": None if c.entry is None else c.entry.id,
                    "cost": c.cost,
                    "scan_bytes": c.scan_bytes,
                    "index_bytes": c.index_bytes,
                    "repair_cost": c.repair_cost,
                    "fetch_bytes": c.fetch_bytes,
                    "decision": c.reason.value,
                }
                for c in self.candidates
            ],
            "chosen": self.chosen.label,
            "summary": self.summary,
            "notes": list(self.notes),
        }


def _snapshot_label(e: LogEntry) -> str:
    return f"snapshot {e.id} (table v{e.source.version})"


def _row_group_bytes(snapshots: Sequence[LogEntry], group_rows: int) -> int:
    """Average bytes of one index row group of ``group_rows`` rows, over every snapshot's files."""
    files = {f.path: f for e in snapshots for f in e.content.files}.values()
    rows = sum(f.rows for f in files)
    size = sum(f.size for f in files)
    return int(size * min(1.0, group_rows / rows)) // max(1, len(files)) if rows else 0


def _index_bytes(entry: LogEntry, keys: int, row_group_bytes: int) -> int:
    """Index bytes a lookup of ``keys`` keys reads: up to one row group per key and index file it
    may be in, at most the snapshot's size.

    A key may be in every unbucketed file (one per LSM level and key range) but only in the
    files of its own bucket. Charging a common row-group size makes snapshots differ by what
    really differs: how many files a key must be looked for in.
    """
    files = entry.content.files
    bucketed = [f for f in files if f.bucket is not None]
    buckets = len({f.bucket for f in bucketed}) or 1
    per_key = len(files) - len(bucketed) + len(bucketed) / buckets
    # Each file is read once for all the keys: never more than the whole snapshot.
    return min(int(per_key * row_group_bytes * max(1, keys)), entry.content.size)


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
    config: Config = Config(),
) -> Plan:
    """Cost every snapshot of ``index`` and the plain scan for a lookup of ``keys`` keys at ``target``."""
    cands = _snapshot_candidates(source, index, snapshots, target, keys, config)
    notes = () if snapshots else ("the index has no active snapshot",)
    return _choose(f"lookup via index {index!r}", target, keys, cands, config.planner, notes)


@dataclass(frozen=True)
class IndexHandle:
    """One index of the table, as a read with a predicate may use it."""

    name: str
    kind: IndexKind
    #: Where its log and data live.
    index_dir: str
    #: Its retained ACTIVE snapshots (the newest last).
    snapshots: tuple[LogEntry, ...]


def plan_read(
    source: TableSource,
    storage: Storage,
    query: str,
    indexes: Sequence[IndexHandle],
    target: Snapshot,
    predicate: Predicate,
    config: Config = Config(),
) -> Plan:
    """Cost every way to read the rows of ``target`` matching ``predicate``: each index, or a plain scan.

    Each index's kind says how the predicate can use it (:meth:`IndexKind.access`). An
    index that prunes files costs its own bytes plus the files it keeps. One whose key the
    predicate pins costs what a lookup of those keys through each snapshot costs; one whose
    columns hold the whole predicate, reading the whole snapshot; either plus the files that
    hold matching rows, located through the cheapest snapshot (only for indexes that can
    compete). An index may compete in several ways; one that cannot answer is listed with
    ``WRONG_COLUMNS``.
    """
    groups: list[list[Candidate]] = []
    keys = 0
    filters: list[tuple[int, IndexHandle, Predicate]] = []
    for index in indexes:
        latest = index.snapshots[-1] if index.snapshots else None
        # As the index's columns read it: conditions on an indexed expression on its column.
        on = on_index(predicate, latest.spec) if latest is not None else predicate
        access = index.kind.access(latest.spec, on) if latest is not None else Access()
        if latest is None or not access.usable:
            groups.append(
                [Candidate(index.name, None, None, 0, 0, 0, Reason.WRONG_COLUMNS, index=index.name)]
            )
            continue
        if access.prunes:
            groups.append([_pruning_candidate(storage, index, latest, target, on)])
        if access.keys is not None:
            keys = max(keys, len(access.keys))
            groups.append(_read_candidates(source, storage, index, target, on, access.keys, config))
        if access.covers:
            filters.append((len(groups), index, on))
            groups.append([])
        if access.scans:
            groups.append(_scan_candidates(source, storage, index, target, on, None, config))
    # Filtering reads a whole index snapshot: locate its files only when it can still win.
    for at, index, on in filters:
        beat = _cost_to_beat([c for g in groups for c in g], target, config.planner)
        groups[at] = _read_candidates(source, storage, index, target, on, None, config, beat=beat)
    return _choose(query, target, keys, [c for g in groups for c in g], config.planner, ())


def _cost_to_beat(cands: Sequence[Candidate], target: Snapshot, config: PlannerConfig) -> int | None:
    """The cost of the cheapest candidate so far that would win against a costlier one (None: none)."""
    costs = [c.cost for c in cands if c.usable and (c.files is not None or c.entry is None)]
    if not config.force_index:
        costs.append(target.total_bytes)  # the plain scan
    return min(costs, default=None)


def _pruning_candidate(
    storage: Storage, index: IndexHandle, entry: LogEntry, target: Snapshot, predicate: Predicate
) -> Candidate:
    """A file-pruning index (its newest snapshot): the files it keeps, plus every file it does not cover."""
    covered, uncovered = covered_files(entry, target)
    keep = index.kind.prune(IndexLocation(storage, index.index_dir, target), entry, predicate, covered)
    files = tuple(fe for fid, fe in covered.items() if fid in keep) + uncovered
    label = f"{index.name}: {index.kind.name}, {len(files)} files kept"
    return Candidate(
        label,
        entry,
        None,
        0,
        entry.content.size,
        0,
        index=index.name,
        files=files,
        fetch_bytes=sum(f.size for f in files),
    )


def _read_candidates(
    source: TableSource,
    storage: Storage,
    index: IndexHandle,
    target: Snapshot,
    predicate: Predicate,
    keys: Sequence[tuple[object, ...]] | None,
    config: Config,
    *,
    beat: int | None = None,
) -> list[Candidate]:
    """The snapshots of an index as ways to read: by the pinned ``keys``, or (``None``) by filtering
    every index row with the predicate; each with the files that hold matching rows.

    When even the cheapest usable snapshot costs more than ``beat`` before its files are counted,
    it cannot be chosen: its files are not located (``files`` stays None)."""
    n = len(keys) if keys is not None else 1
    prefix = f"{index.name}: " if keys is not None else f"{index.name} (filter): "
    snaps = _snapshot_candidates(source, index.name, index.snapshots, target, n, config, prefix=prefix)
    if keys is None:  # the filter reads every index row of the snapshot
        snaps = [replace(c, index_bytes=c.entry.content.size) if c.entry else c for c in snaps]
    usable = [c for c in snaps if c.usable]
    if not usable:
        return snaps
    best = min(usable, key=_preference)
    assert best.entry is not None and best.coverage is not None
    if beat is not None and best.cost > beat:
        return snaps
    if keys is not None:
        plan = lk.plan_lookup(source, best.entry, target, list(keys), best.coverage, config.read)
        found = lk.locate(source, storage, index.index_dir, plan, with_row_ids=False)
        paths = frozenset(found[lk.FILE].to_pylist())
    else:
        paths = lk.files_matching(
            source, storage, index.index_dir, best.entry, target, predicate.to_pyarrow(), best.coverage
        )
    files = tuple(fe for p, fe in target.files.items() if p in paths)
    fetch = sum(f.size for f in files)
    return [replace(c, files=files, fetch_bytes=fetch) if c.usable else c for c in snaps]


def _scan_candidates(
    source: TableSource,
    storage: Storage,
    index: IndexHandle,
    target: Snapshot,
    predicate: Predicate | None,
    fraction: float | None,
    config: Config,
) -> list[Candidate]:
    """The snapshots of an index that scans its own row groups: each costs the bytes of the row
    groups its statistics keep for ``predicate`` (and the sample ``fraction``), plus its repair."""
    label = f"{index.name} ({'sample' if fraction is not None else 'index scan'}): "
    out = []
    for c in _snapshot_candidates(source, index.name, index.snapshots, target, 1, config, prefix=label):
        if c.entry is None or c.coverage is None:
            out.append(c)
            continue
        picked = index_scan.pick_groups(
            storage, index.index_dir, c.entry, predicate, fraction, c.coverage.cap
        )
        groups = f", {picked.read} of {picked.total} row groups"
        out.append(replace(c, label=c.label + groups, index_bytes=picked.bytes, scans=True, picked=picked))
    return out


def plan_sample(
    source: TableSource,
    storage: Storage,
    indexes: Sequence[IndexHandle],
    target: Snapshot,
    predicate: Predicate | None,
    fraction: float,
    config: Config = Config(),
) -> Plan:
    """Cost every index that keeps sampling weights (``IndexKind.samples``) whose columns hold
    ``predicate``, against the plain scan computing the weights."""
    cands: list[Candidate] = []
    for index in indexes:
        latest = index.snapshots[-1] if index.snapshots else None
        if (
            latest is None
            or not index.kind.samples
            or (predicate is not None and not predicate.columns <= set(latest.spec.columns))
        ):
            cands.append(Candidate(index.name, None, None, 0, 0, 0, Reason.WRONG_COLUMNS, index=index.name))
            continue
        cands += _scan_candidates(source, storage, index, target, predicate, fraction, config)
    notes = (
        ()
        if any(c.scans for c in cands)
        else ("no index keeps sampling weights for this query: the plain scan computes each row's weight",)
    )
    text = f"sample {fraction}" + (f" where {predicate}" if predicate is not None else "")
    return _choose(text, target, 0, cands, config.planner, notes)


def _preference(c: Candidate) -> tuple[int, int]:
    """Cheapest first; ties to the newer snapshot (higher entry id), then to any index over the plain scan."""
    return (c.cost, -(c.entry.id if c.entry else -1))


def _snapshot_candidates(
    source: TableSource,
    index: str,
    snapshots: Sequence[LogEntry],
    target: Snapshot,
    keys: int,
    config: Config,
    *,
    prefix: str = "",
) -> list[Candidate]:
    """A candidate per distinct snapshot of one secondary or covering index (labels after ``prefix``)."""
    total = target.total_bytes
    rg_bytes = _row_group_bytes(snapshots, config.executor.index_row_group_rows)
    cands: list[Candidate] = []
    for e in _distinct(snapshots):
        unusable = (
            Reason.TABLE_VERSION_GONE
            if not _in_history(source, e.source.version)
            else Reason.COLUMN_CHANGED
            if changed_columns(e.source.columns, target)
            else None
        )
        if unusable is not None:
            cands.append(Candidate(prefix + _snapshot_label(e), e, None, 0, 0, 0, unusable, index=index))
            continue
        cov = coverage(source, e, target)
        repair = (
            cov.excluded * config.planner.excluded_file_cost
            + cov.deleted_rows * config.planner.deleted_row_cost
        )
        reason = Reason.MORE_EXPENSIVE
        if (
            total
            and cov.scan_bytes > config.planner.max_scan_share * total
            and not config.planner.force_index
        ):
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
