"""Erase data subjects: locate through the index, targeted delete, refresh, purge, verify, audit.

Every check runs before anything is written, so bad input changes nothing. Each step
can be rerun after a crash: the targeted delete is one atomic table commit (a rerun
locates again and finds what is left, nothing when it committed), refresh and purge
resume from the logs, and verification and the audit record come last.
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.actions.cancel_index import cancel_index
from lakehouse_index.actions.refresh_index import refresh_index
from lakehouse_index.context import IndexContext
from lakehouse_index.errors import (
    EraseRefusedError,
    ErasureVerificationError,
    IndexBusyError,
    IndexNotFoundError,
    WriteConflictError,
)
from lakehouse_index.faults import crash_point
from lakehouse_index.io.parallel import each_file
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.log.entry import IndexState
from lakehouse_index.log.lifecycle import writer_is_dead
from lakehouse_index.query import index_queries
from lakehouse_index.sink.conflicts import RETRIES, Isolation, find_conflict
from lakehouse_index.sink.contract import Commit, Transaction, WriteOperation
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.sink.rewrite import FileRewrite, Rewritten, WriteLineage, plan_rewrite
from lakehouse_index.source import Snapshot
from lakehouse_index.workflows.erasure import audit
from lakehouse_index.workflows.erasure.subjects import key_values, physical_matches, subject_rows
from lakehouse_index.workflows.erasure.verification import verify
from lakehouse_index.workflows.writes import begin

FILE_COLUMN = "_file"
ROW_COLUMN = "_row"


@dataclass(frozen=True)
class FileFinding:
    """One live data file holding subjects: its rows before, the rows erased, what replaced it."""

    path: str
    rows_before: int
    rows_erased: int
    size: int
    replaced_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As JSON."""
        return {
            "path": self.path,
            "rowsBefore": self.rows_before,
            "rowsErased": self.rows_erased,
            "size": self.size,
            "replacedBy": self.replaced_by,
        }


@dataclass(frozen=True)
class EraseResult:
    """What an erase found and did (``dry_run``: what it would do; nothing changed).

    ``files``: every live file that held subjects, found through the index (and the
    hybrid scan of files it has not indexed yet). ``version``: the table version that
    no longer holds the subjects (None when nothing was found or on a dry run).
    ``purge`` and ``verification`` are the purge step's and the residue scan's reports
    as JSON (None when not run). ``audit_uri``: where the audit record was written.
    """

    table_uri: str
    index: str
    subjects: int
    dry_run: bool
    purge: bool
    version_before: int
    version: int | None
    files: tuple[FileFinding, ...]
    rows_erased: int
    bytes_rewritten: int
    index_reports: Mapping[str, Any]
    purge_report: Mapping[str, Any] | None
    verification: Mapping[str, Any] | None
    audit_uri: str | None
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def files_rewritten(self) -> int:
        """Files replaced by a rewrite (the others held only subjects and were removed)."""
        return sum(1 for f in self.files if f.replaced_by)

    def to_json(self) -> dict[str, Any]:
        """As JSON (no key appears in it)."""
        return {
            "table": self.table_uri,
            "index": self.index,
            "subjects": self.subjects,
            "dryRun": self.dry_run,
            "purge": self.purge,
            "versionBefore": self.version_before,
            "version": self.version,
            "files": [f.to_json() for f in self.files],
            "rowsErased": self.rows_erased,
            "bytesRewritten": self.bytes_rewritten,
            "indexes": dict(self.index_reports),
            "purgeReport": self.purge_report,
            "verification": self.verification,
            "audit": self.audit_uri,
            "timings": dict(self.timings),
        }


def _check_index(ctx: IndexContext, index: str, column: str | None) -> Any:
    names = [i.name for i in ctx.indexes()]
    if index not in names:
        raise IndexNotFoundError(f"no index {index!r} on {ctx.uri} (indexes: {names})")
    entry = ctx.log(index).latest_stable()
    if entry is None:
        raise EraseRefusedError(f"index {index!r} has no usable snapshot; refresh or recreate it first")
    spec = entry.spec
    if not kind_of(spec).answers_lookups:
        raise EraseRefusedError(
            f"index {index!r} is a {spec.kind} index and cannot locate rows by key; erase needs a "
            "secondary or covering index keyed on the subject column"
        )
    if column is not None and tuple(spec.key) != (column,):
        raise EraseRefusedError(
            f"index {index!r} is keyed on {list(spec.key)}, not on the subject column {column!r}; "
            "choose an index whose key is the subject column"
        )
    return spec


def _is_nan(value: Any) -> bool:
    """Whether ``value`` is a float or Decimal NaN (numpy floats included)."""
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    return isinstance(value, (float, np.floating)) and bool(np.isnan(value))


def _composite(keys: list[Any], width: int) -> list[Any]:
    """Composite keys as tuples (a list such as ``["de", 4]`` is one key, as the CLI's JSON gives).

    Every later step (residue scan, audit hashes) takes a composite key as a tuple: a key of
    another shape is refused here, before anything changes.
    """
    out = []
    for i, k in enumerate(keys):
        if not isinstance(k, (tuple, list)) or len(k) != width:
            raise EraseRefusedError(
                f"key #{i} is not a composite key of {width} values (a tuple, one value per key column)"
            )
        if any(v is None for v in k):
            raise EraseRefusedError("a subject key cannot be null (nor any value of a composite key)")
        out.append(tuple(k))
    return out


def _check_keys(keys: Sequence[Any], key_columns: Sequence[str], snapshot: Snapshot) -> list[Any]:
    keys = list(keys)
    if not keys:
        raise EraseRefusedError("erase needs at least one key (the key list is empty)")
    if any(k is None for k in keys):
        raise EraseRefusedError("a subject key cannot be null")
    if len(key_columns) > 1:
        keys = _composite(keys, len(key_columns))
    if any(_is_nan(v) for v in key_values(keys)):
        # NaN equals nothing: the residue scan and the audit could not name it (and it is no
        # person's key); refused before the commit, not after.
        raise EraseRefusedError("a subject key cannot be NaN")
    from lakehouse_index.workflows.erasure.verify.needles import Needles

    try:  # the verification and the audit record look for these values: refused now, not after the commit
        Needles(key_values(keys))
    except (TypeError, ValueError) as e:
        raise EraseRefusedError(f"the keys cannot be erased: {e}") from e
    for name in key_columns:
        t = snapshot.schema.field(name).type
        values = [k[key_columns.index(name)] if len(key_columns) > 1 else k for k in keys]
        for v in values:
            if isinstance(v, bool) and not pa.types.is_boolean(t):
                raise EraseRefusedError(f"key {type(v).__name__} does not fit column {name!r} ({t})")
            try:
                arr = pa.array([v])
                if arr.type != t and not pa.types.is_null(arr.type):
                    arr = arr.cast(t, safe=True)
            except (
                pa.ArrowInvalid,
                pa.ArrowTypeError,
                pa.ArrowNotImplementedError,
                TypeError,
                OverflowError,
            ) as e:
                raise EraseRefusedError(
                    f"a key of type {type(v).__name__} does not fit column {name!r} ({t}): {e}"
                ) from e
            if pa.types.is_string(t) != isinstance(v, str):
                raise EraseRefusedError(
                    f"a key of type {type(v).__name__} does not fit column {name!r} ({t})"
                )
    return keys


def _locate(
    ctx: IndexContext, index: str, key_columns: Sequence[str], keys: Sequence[Any], snap: Snapshot
) -> dict[str, np.ndarray]:
    """The live rows holding subjects, by file (through the index), and the files whose rows
    removed by row-level deletes hold one (no live row to erase: the rewrite leaves out the
    deleted rows, so the subject leaves the file's bytes too)."""
    located = index_queries.locate(ctx, index, keys, lambda: snap)
    out: dict[str, np.ndarray] = {}
    files = located[FILE_COLUMN]
    rows = located[ROW_COLUMN].to_numpy()
    for path in pc.unique(files).to_pylist():
        mask = pc.equal(files, path).to_numpy(zero_copy_only=False)
        out[path] = np.unique(rows[mask])
    subjects = subject_rows(key_columns, keys, snap)
    with_deletes = [e for e in snap.files.values() if e.path not in out and (e.deletes or e.equality_deletes)]
    held = each_file(lambda e: physical_matches(ctx.source, snap, e, subjects).num_rows > 0, with_deletes)
    out.update((e.path, np.empty(0, np.int64)) for e, hides in zip(with_deletes, held, strict=True) if hides)
    return out


def erase(
    ctx: IndexContext,
    index: str,
    keys: Sequence[Any],
    *,
    purge: bool = False,
    dry_run: bool = False,
    retain_audit: bool = True,
    force: bool = False,
    column: str | None = None,
    progress: Callable[[str], None] | None = None,
    deep_verify: bool = False,
) -> EraseResult:
    """Erase every row whose ``index`` key is one of ``keys``; see :meth:`lakehouse_index.Table.erase`.

    Phases: check (nothing written when it fails), targeted delete (locate and one commit,
    committed again on a newer version after a lost race, located again there when the
    winning commits touched the subjects' rows), refresh of every index, purge, verify,
    audit record.
    """
    say = progress or (lambda _msg: None)
    clock = _Clock()
    tx = begin(ctx, WriteOperation.ERASE)
    spec = _check_index(ctx, index, column)
    keys = _check_keys(keys, list(spec.key), tx.snapshot)
    if purge:
        from lakehouse_index.workflows.erasure.purge import purge_blockers

        blockers = purge_blockers(ctx)
        if blockers and not force:
            raise EraseRefusedError(
                "purge refused by the table's retention settings (pass force=True to purge anyway): "
                + "; ".join(blockers)
            )
    version_before = tx.snapshot.version
    clock.lap("check")
    deleted = _targeted_delete(ctx, tx, index, spec.key, keys, dry_run, say, clock)

    index_reports: dict[str, Any] = {}
    purge_report: dict[str, Any] | None = None
    verification: dict[str, Any] | None = None
    if not dry_run:
        say("refreshing every index of the table")
        index_reports = _refresh_all(ctx, say, deleted.rewritten)
        clock.lap("refresh")
        crash_point("erase.after_refresh")
        leftover = index_queries.locate(ctx, index, keys, ctx.latest_snapshot)
        if leftover.num_rows:
            raise ErasureVerificationError(
                f"after the erase the index still locates {leftover.num_rows} subject row(s) in "
                f"{ctx.uri}; nothing was purged. Rerun the erase"
            )
        if purge:
            purge_report = _purge(ctx, say, force, _paths_spell_no_subject(deleted, keys))
            clock.lap("purge")
            crash_point("erase.after_purge")
            touched = [f.replaced_by for f in deleted.findings if f.replaced_by]
            verification = verify(ctx, spec.key, keys, touched, say, deep=deep_verify)
            clock.lap("verify")
            crash_point("erase.after_verify")
    elif purge:
        from lakehouse_index.workflows.erasure.purge import purge_history

        purge_report = _as_json(
            purge_history(ctx, keep_version=ctx.source.latest_version(), dry_run=True, force=force)
        )

    clock.timings["total"] = round(time.perf_counter() - clock.start, 6)
    result = EraseResult(
        table_uri=ctx.uri,
        index=index,
        subjects=len(keys),
        dry_run=dry_run,
        purge=purge,
        version_before=version_before,
        version=deleted.commit.version if deleted.commit else None,
        files=tuple(deleted.findings),
        rows_erased=deleted.rows_erased,
        bytes_rewritten=deleted.bytes_rewritten,
        index_reports=index_reports,
        purge_report=purge_report,
        verification=verification,
        audit_uri=None,
        timings=clock.timings,
    )
    if retain_audit and not dry_run:
        uri = _write_audit(ctx, result, keys, deleted.ordinal)
        result = EraseResult(**{**result.__dict__, "audit_uri": uri})
    if verification is not None and not verification["ok"]:
        hits = verification["hits"]
        raise ErasureVerificationError(
            f"{ctx.uri}: {len(hits)} trace(s) of the subjects remain after the purge (audit record: "
            f"{result.audit_uri}): "
            + "; ".join(f"{h['path']} ({h['decoder']} {h['location']})" for h in hits[:5]),
            verification,
        )
    return result


class _Clock:
    """The erase's timings: seconds of each phase since the previous one."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.timings: dict[str, float] = {}

    def lap(self, step: str) -> None:
        now = time.perf_counter()
        self.timings[step] = round(now - self.last, 6)
        self.last = now


@dataclass(frozen=True)
class _Deleted:
    """What the targeted delete did."""

    commit: Commit | None
    #: The commit's ordinal, read before a purge expires it.
    ordinal: int | None
    findings: list[FileFinding]
    #: The commit's new files: where their rows came from.
    rewritten: dict[str, Rewritten]
    rows_erased: int
    bytes_rewritten: int


def _subjects(key_columns: Sequence[str], keys: Sequence[Any], snap: Snapshot) -> ReadSet:
    """The rows the erase reads: those holding a subject's key (as the index matches keys)."""
    return ReadSet.matching(subject_rows(key_columns, keys, snap), tuple(key_columns))


def _targeted_delete(
    ctx: IndexContext,
    tx: Transaction,
    index: str,
    key_columns: Sequence[str],
    keys: Sequence[Any],
    dry_run: bool,
    say: Callable[[str], None],
    clock: _Clock,
) -> _Deleted:
    """Locate the subjects' rows at ``tx``'s version and commit the rewrites of their files
    (a dry run only reports them).

    After a lost race the conflict rules decide (:func:`~lakehouse_index.sink.conflicts.find_conflict`,
    Serializable whatever the table's isolation setting: every row of a subject must go,
    including rows appended meanwhile): when no winning commit added a file holding a
    subject's row, or removed or changed a file holding one, the rewrites still hold and are
    committed again on the newer version; otherwise the subjects are located there again.
    Bounded attempts with jittered backoff (:data:`~lakehouse_index.sink.conflicts.RETRIES`).
    """
    reads = _subjects(key_columns, keys, tx.snapshot)
    rewrites: list[FileRewrite] | None = None
    for attempt in range(RETRIES.attempts):
        snap = tx.snapshot
        if rewrites is None:
            say(f"locating {len(keys)} subject(s) through index {index!r} at version {snap.version}")
            where = _locate(ctx, index, key_columns, keys, snap)
            rewrites = each_file(
                lambda item, snap=snap: plan_rewrite(ctx.source, snap, snap.files[item[0]], item[1]),  # type: ignore[misc]
                sorted(where.items()),
            )
            clock.lap("locate")
            crash_point("erase.after_locate")
            if dry_run or not rewrites:
                findings = [
                    FileFinding(r.entry.path, r.live_rows, r.erased.num_rows, r.entry.size) for r in rewrites
                ]
                return _Deleted(None, None, findings, {}, sum(f.rows_erased for f in findings), 0)
            say(
                f"rewriting {len(rewrites)} file(s) without {sum(r.erased.num_rows for r in rewrites)} row(s)"
            )
        try:
            commit, replaced = tx.commit_erase(rewrites, len(keys))
            ordinal = ctx.source.version_info(commit.version).ordinal
        except WriteConflictError:
            if attempt == RETRIES.attempts - 1:
                raise
            tx = begin(ctx, WriteOperation.ERASE)
            if find_conflict(ctx.source, snap, tx.snapshot, reads, Isolation.SERIALIZABLE) is not None:
                rewrites = None  # the winners touched the subjects' rows: locate again
            RETRIES.wait(attempt)
            continue
        clock.lap("delete")
        crash_point("erase.after_delete")
        return _Deleted(
            commit,
            ordinal,
            [
                FileFinding(
                    r.entry.path, r.live_rows, r.erased.num_rows, r.entry.size, replaced.get(r.entry.path)
                )
                for r in rewrites
            ],
            {
                replaced[r.entry.path]: Rewritten(r.entry.path, r.kept_positions)
                for r in rewrites
                if r.entry.path in replaced
            },
            commit.rows_deleted or 0,
            sum(r.entry.size for r in rewrites),
        )
    raise AssertionError("unreachable")


def _refresh_all(
    ctx: IndexContext, say: Callable[[str], None], rewritten: Mapping[str, Rewritten]
) -> dict[str, Any]:
    """Refresh every active index to the latest version, placing the erase's rewrites by ``rewritten``.

    An operation left in progress by a process of this host that died (an earlier erase
    killed mid-refresh) is cancelled first; one of a live or remote writer raises
    IndexBusyError (retry when it ends, or ``cancel_index`` it if its writer is gone).
    """
    out: dict[str, Any] = {}
    for info in ctx.indexes():
        state = info.state
        if not state.is_stable:
            latest = ctx.log(info.name).latest()
            if latest is None or not writer_is_dead(latest.writer):
                raise IndexBusyError(
                    f"index {info.name!r} is busy ({state.value}, by {latest.writer if latest else '?'}); "
                    "the table commit of the erase stands. Rerun the erase when the operation ends, or "
                    f"cancel_index({info.name!r}) if its writer is gone"
                )
            say(f"index {info.name!r}: cancelling the operation left by dead process {latest.writer}")
            state = cancel_index(ctx, info.name).state
        if state is not IndexState.ACTIVE:
            continue
        refreshed = ctx.info(
            refresh_index(ctx, info.name, "incremental", lineage=WriteLineage(rewritten=rewritten))
        )
        out[info.name] = {"indexedVersion": refreshed.indexed_version}
    return out


def _as_json(report: Any) -> dict[str, Any]:
    to_json = getattr(report, "to_json", None)
    return dict(to_json()) if to_json is not None else dict(report.__dict__)


def _paths_spell_no_subject(deleted: _Deleted, keys: Sequence[Any]) -> bool:
    """Whether no file the erase removed has a path that spells a subject (a table partitioned
    by the subject column): the index's file map keeps the paths of removed files until a full
    optimize drops them."""
    from lakehouse_index.workflows.erasure.verify.needles import Needles

    needles = Needles(key_values(keys))
    return all(needles.redact(f.path) == f.path for f in deleted.findings)


def _purge(ctx: IndexContext, say: Callable[[str], None], force: bool, targeted: bool) -> dict[str, Any]:
    from lakehouse_index.workflows.erasure.purge import purge_history, purge_indexes

    say("purging older table versions and index data")
    history = purge_history(ctx, keep_version=ctx.source.latest_version(), force=force)
    indexes = purge_indexes(ctx, targeted=targeted)
    return {"history": _as_json(history), "indexes": _as_json(indexes)}


def _write_audit(ctx: IndexContext, result: EraseResult, keys: Sequence[Any], ordinal: int | None) -> str:
    from lakehouse_index.workflows.erasure.verify.needles import Needles

    salt = audit.table_salt(ctx.storage, ctx.index_root)
    # Paths can spell a subject (a partition value): the record names it by number instead.
    needles = Needles(key_values(keys))

    def redact(path: str | None) -> str | None:
        return None if path is None else needles.redact(path)

    removed = tuple(needles.redact(f.path) for f in result.files)

    # A purge may add a version of its own (Iceberg: the replace snapshot it keeps).
    kept = ((result.purge_report or {}).get("history") or {}).get("keptVersion")
    kept = None if kept == result.version else kept
    record = audit.AuditRecord(
        id=uuid.uuid4().hex,
        table_uri=ctx.uri,
        table_format=ctx.format,
        index=result.index,
        subjects=tuple(audit.subject_hash(salt, k) for k in keys),
        purge=result.purge,
        version_before=result.version_before,
        versions_created=tuple(v for v in (result.version, kept) if v is not None),
        ordinal_created=ordinal,
        files_rewritten=tuple(
            {**f.to_json(), "path": redact(f.path), "replacedBy": redact(f.replaced_by)} for f in result.files
        ),
        files_removed=removed,
        rows_erased=result.rows_erased,
        bytes_rewritten=result.bytes_rewritten,
        index_files_rewritten=tuple(
            (result.purge_report or {}).get("indexes", {}).get("filesWritten", ())
            if result.purge_report
            else ()
        ),
        purge_report=result.purge_report,
        verification=result.verification,
        timings=result.timings,
        who=audit.who(),
        when=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
    )
    return audit.write_record(ctx.storage, ctx.index_root, record)
