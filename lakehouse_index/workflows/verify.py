"""A differential self-check users run on their own data: index answers against a plain scan.

Peers have shipped silent index data loss (an index dropping entries for some keys, a
stale index making updates report zero rows). :func:`verify_index` samples keys from the
table itself (present at some checked version, so absent at others) and asks **every**
retained snapshot of the index (not only the one the planner would pick) at each checked
version, comparing with a plain scan of that version:

* indexes with lookups: ``lookup`` (full rows) and ``locate`` (row addresses) through the
  snapshot, with its repair by hybrid scan, against the scan's rows and addresses, as
  multisets per key;
* pruning indexes: the files the snapshot keeps for ``key IN (...)`` must include every
  file holding a matching row.

A snapshot whose table version left the table's history is skipped (queries never use it).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.context import IndexContext
from lakehouse_index.errors import IndexNotFoundError, VersionNotFoundError
from lakehouse_index.expressions import And, Col, Compare, IsNull, Lit, Node, Predicate
from lakehouse_index.kinds.base import IndexKind, IndexLocation, kind_of
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.log.entry import LogEntry
from lakehouse_index.query import lookup as lk
from lakehouse_index.query.coverage import covered_files
from lakehouse_index.read.scan import scan_files
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import IndexSpec
from lakehouse_index.workflows import versions as table_versions

#: The checks: full rows, row addresses, files kept by a pruning index.
LOOKUP, LOCATE, PRUNE = "lookup", "locate", "prune"

Key = tuple[Any, ...]


@dataclass(frozen=True)
class Mismatch:
    """One key whose answer through one index snapshot differs from the plain scan at one version."""

    version: int
    #: The index snapshot (log entry id) that answered.
    snapshot: int
    check: str
    key: Key
    #: Rows, row addresses or files holding matches that the plain scan found for the key.
    expected: int
    #: What the index answered with (for ``prune``: those of the expected files it kept).
    got: int


@dataclass(frozen=True)
class VerifyReport:
    """What :func:`verify_index` checked and every mismatch it found."""

    index: str
    versions: tuple[int, ...]
    snapshots: tuple[int, ...]
    keys: int
    checks: int
    mismatches: tuple[Mismatch, ...]

    @property
    def ok(self) -> bool:
        """True when every index answer equalled the plain scan."""
        return not self.mismatches

    def __str__(self) -> str:
        verdict = "OK" if self.ok else f"{len(self.mismatches)} MISMATCHES"
        head = (
            f"index {self.index!r}: {self.checks} checks of {self.keys} keys through snapshots "
            f"{list(self.snapshots)} at versions {list(self.versions)}: {verdict}"
        )
        lines = [
            f"  v{m.version} snapshot {m.snapshot} {m.check} {m.key!r}: plain scan {m.expected}, "
            f"index {m.got}"
            for m in self.mismatches
        ]
        return "\n".join([head, *lines])

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (``lakehouse-index verify --json``); keys as arrays."""
        return {
            "index": self.index,
            "ok": self.ok,
            "versions": list(self.versions),
            "snapshots": list(self.snapshots),
            "keys": self.keys,
            "checks": self.checks,
            "mismatches": [asdict(m) for m in self.mismatches],
        }


def verify_index(
    ctx: IndexContext,
    name: str,
    *,
    sample: int = 100,
    versions: Sequence[int | str] | None = None,
    seed: int | None = None,
) -> VerifyReport:
    """Compare ``sample`` keys' answers through every snapshot of index ``name`` with a plain scan.

    ``versions`` default to the index's indexed version and the table's latest version.
    Keys are drawn (``seed`` for a repeatable draw) from the rows of those versions.
    """
    log = ctx.log(name)
    snapshots = log.active_snapshots()
    if not snapshots:
        raise IndexNotFoundError(f"index {name!r} on {ctx.uri} has no active snapshot to verify")
    spec = snapshots[-1].spec
    kind = kind_of(spec)
    wanted = versions if versions is not None else [snapshots[-1].source.version, ctx.source.latest_version()]
    targets = {s.version: s for s in (table_versions.snapshot(ctx, v) for v in wanted)}
    scans = {v: _with_expressions(_plain_scan(ctx, s), spec, s) for v, s in targets.items()}
    keys = _sample_keys(list(scans.values()), spec.key, sample, random.Random(seed))
    usable = [e for e in snapshots if _in_history(ctx, e.source.version)]
    mismatches: list[Mismatch] = []
    checks = 0
    for v, target in targets.items():
        expected = _by_key(scans[v], spec.key)
        for entry in usable:
            answers = (
                _lookups(ctx, log.index_dir, entry, target, keys)
                if kind.answers_lookups
                else _pruned(ctx, kind, log.index_dir, entry, target, spec, keys)
            )
            for check, got in answers.items():
                for key in keys:
                    checks += 1
                    want, have = _expected(check, expected.get(key, [])), got.get(key, Counter())
                    if _differs(check, want, have):
                        mismatches.append(
                            Mismatch(v, entry.id, check, key, sum(want.values()), _count(check, want, have))
                        )
    return VerifyReport(
        name, tuple(targets), tuple(e.id for e in usable), len(keys), checks, tuple(mismatches)
    )


def _in_history(ctx: IndexContext, version: int) -> bool:
    try:
        table_versions.snapshot(ctx, version)
    except VersionNotFoundError:
        return False
    return True


def _plain_scan(ctx: IndexContext, snap: Snapshot) -> pa.Table:
    """Every live row of ``snap`` with its file (``_file``) and position (``_row``)."""
    rows = scan_files(ctx.source, snap, snap.files.values(), with_lineage=True)
    return rows.rename_columns([c if c != "_file_path" else "_file" for c in rows.column_names])


def _with_expressions(rows: pa.Table, spec: IndexSpec, snap: Snapshot) -> pa.Table:
    """``rows`` with the values of the index's expressions (an expression index's keys) added."""
    stored = indexed_columns(spec, snap)
    extra = [n for n, _ in stored.expressions if n not in rows.column_names]
    return stored.derive(rows, [*rows.column_names, *extra]) if extra else rows


def _sample_keys(scans: Sequence[pa.Table], key: Sequence[str], n: int, rnd: random.Random) -> list[Key]:
    found = {tuple(r[c] for c in key) for t in scans for r in t.select(list(key)).to_pylist()}
    return rnd.sample(sorted(found, key=repr), min(n, len(found)))


def _by_key(rows: pa.Table, key: Sequence[str]) -> dict[Key, list[dict[str, Any]]]:
    out: dict[Key, list[dict[str, Any]]] = {}
    for r in rows.to_pylist():
        out.setdefault(tuple(r[c] for c in key), []).append(r)
    return out


def _lookups(
    ctx: IndexContext, index_dir: str, entry: LogEntry, target: Snapshot, keys: list[Key]
) -> dict[str, dict[Key, Counter[str]]]:
    """Full rows (without ``_file``/``_row``) and row addresses per key, through one snapshot."""
    probe: list[Any] = [k if len(k) > 1 else k[0] for k in keys]
    key = entry.spec.key
    plan = lk.plan_lookup(ctx.source, entry, target, probe)
    rows = _with_expressions(lk.lookup(ctx.source, ctx.storage, index_dir, plan, None), entry.spec, target)
    where = lk.locate(ctx.source, ctx.storage, index_dir, plan, with_row_ids=False)
    return {
        LOOKUP: _counted(rows, key, rows.column_names),
        LOCATE: _counted(where, key, [lk.FILE, "_row"]),
    }


def _pruned(
    ctx: IndexContext,
    kind: IndexKind,
    index_dir: str,
    entry: LogEntry,
    target: Snapshot,
    spec: IndexSpec,
    keys: list[Key],
) -> dict[str, dict[Key, Counter[str]]]:
    """The files one snapshot keeps for each key (plus every file it does not cover)."""
    covered, uncovered = covered_files(entry, target)
    kept: dict[Key, Counter[str]] = {}
    for key in keys:
        predicate = _equals(indexed_columns(spec, target), target, spec.key, key)
        ids = kind.prune(IndexLocation(ctx.storage, index_dir, target), entry, predicate, covered)
        files = [covered[i].path for i in ids] + [f.path for f in uncovered]
        kept[key] = Counter(files)
    return {PRUNE: kept}


def _equals(stored: IndexedColumns, target: Snapshot, columns: Sequence[str], key: Key) -> Predicate:
    """The bound predicate ``columns = key`` (``IS NULL`` for null components) over the index's
    columns (an indexed expression's by the name of the column holding its values)."""
    atoms: list[Node] = [
        IsNull(Col(c)) if v is None else Compare("=", Col(c), Lit(v, stored.schema.field(c).type))
        for c, v in zip(columns, key, strict=True)
    ]
    extra = [stored.schema.field(n) for n, _ in stored.expressions]
    schema = pa.schema([*target.schema, *extra])
    return Predicate(atoms[0] if len(atoms) == 1 else And(tuple(atoms)), schema)


def _counted(rows: pa.Table, key: Sequence[str], columns: Sequence[str]) -> dict[Key, Counter[str]]:
    out: dict[Key, Counter[str]] = {}
    for r in rows.to_pylist():
        out.setdefault(tuple(r[c] for c in key), Counter())[_canon(r, columns)] += 1
    return out


def _canon(row: dict[str, Any], columns: Sequence[str]) -> str:
    return repr(sorted((c, row[c]) for c in columns))


def _expected(check: str, rows: list[dict[str, Any]]) -> Counter[str]:
    if check == LOCATE:
        return Counter(_canon({lk.FILE: r["_file"], "_row": r["_row"]}, [lk.FILE, "_row"]) for r in rows)
    if check == PRUNE:
        return Counter(r["_file"] for r in rows)
    return Counter(_canon(r, [c for c in r if c not in ("_file", "_row")]) for r in rows)


def _differs(check: str, want: Counter[str], have: Counter[str]) -> bool:
    if check == PRUNE:  # a pruning index may keep more files, never fewer
        return not set(want) <= set(have)
    return want != have


def _count(check: str, want: Counter[str], have: Counter[str]) -> int:
    if check == PRUNE:
        return sum(n for f, n in want.items() if f in have)
    return sum(have.values())
