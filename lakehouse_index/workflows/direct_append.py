"""Appends whose data files this project writes itself, with the index entries computed from
the rows on the way (never by rereading the written files).

Two callers run it: :mod:`.spark_append` (a Spark DataFrame too large for this process:
one Spark job) and :func:`append_rows` (a pyarrow table in this process: the same task
code, on threads). Either way:

1. each index that can take entries computed by the write (its kind offers
   :meth:`~lakehouse_index.kinds.base.IndexKind.write_time_entries`; policy
   ``incremental``; caught up with the table first if it lagged) is *held*: the
   transient entry of an incremental refresh is written, so no other writer assigns
   file ids in it until this append logs its refresh;
2. the job (:class:`~lakehouse_index.workflows.append_task.AppendTask`) writes the data
   files into the table location and every held index's entries for them;
3. the commit adds those files through the format library's transaction API
   (deltalake add actions with statistics; a pyiceberg fast append of data files);
4. each held index logs the incremental refresh of exactly that commit, naming the
   entries the job wrote (``maintenance.refresh.Written``) — when the commit got the
   ordinal the entries were stamped with and holds exactly the job's files; otherwise
   (a concurrent commit moved it) the operation is abandoned and the index follows by
   its ordinary refresh, as do indexes that were not held; their reports say why
   (``IndexReport.note``);
5. every index's policy is then applied as after any write (commits that landed
   after this one included).

The index commit always follows the table commit. A process that dies between them
leaves the held operation's transient entry, which the next writer or watcher on this
host cancels (its writer is provably dead), or ``cancel_index`` resolves; the commit is
then indexed by an ordinary incremental refresh.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import pyarrow as pa

from lakehouse_index.context import IndexContext
from lakehouse_index.errors import ConcurrentIndexUpdate, IndexMaintenanceError
from lakehouse_index.executors import build_context
from lakehouse_index.executors.writer import read_root_index
from lakehouse_index.io.parallel import CORES
from lakehouse_index.kinds.base import BuildContext, kind_of
from lakehouse_index.log.entry import IndexState, Level, LogEntry, Operation
from lakehouse_index.log.lifecycle import OpResult, Started, start_operation
from lakehouse_index.maintenance import refresh
from lakehouse_index.sink.contract import NotDistributable, Transaction, WrittenFile
from lakehouse_index.source import Change, Snapshot
from lakehouse_index.spec import AutoRefresh
from lakehouse_index.workflows.append_task import AppendTask, IndexShare, TaskOutput
from lakehouse_index.workflows.reports import Action, IndexReport, WriteResult, failure_message
from lakehouse_index.workflows.sync import maintain_index, sync_indexes

_log = logging.getLogger(__name__)

#: Why an index was not given entries by the write's job (``IndexReport.note``).
NOT_WRITE_TIME = "its kind takes no entries computed by the write"
NOT_INCREMENTAL = "its auto_refresh policy is not incremental"
BUSY = "another operation held the index when the job started"
MOVED = "a concurrent commit changed the version the job's entries were stamped for"

#: Runs the job for the held indexes' shares; the outputs of all its tasks.
Job = Callable[[tuple[IndexShare, ...]], list[TaskOutput]]


@dataclass(frozen=True)
class _Held:
    """An index whose incremental refresh this append holds open while its job runs."""

    name: str
    started: Started
    build: BuildContext
    share: IndexShare

    @property
    def stable(self) -> LogEntry:
        assert self.started.ctx.stable is not None
        return self.started.ctx.stable


def _caught_up(entry: LogEntry, snap: Snapshot) -> bool:
    return entry.pending is None and entry.source.ordinal >= snap.ordinal


def _hold(ctx: IndexContext, snap: Snapshot, notes: dict[str, str], held: list[_Held]) -> None:
    """Start the incremental refresh of every index that can take the job's entries (into ``held``)."""
    for info in ctx.indexes():
        if info.state is not IndexState.ACTIVE:
            continue
        log = ctx.log(info.name)
        stable = log.latest_stable()
        if stable is None or stable.state is not IndexState.ACTIVE:
            continue
        kind = kind_of(stable.spec)
        entries = kind.write_time_entries(stable.spec, snap)
        if stable.spec.auto_refresh is not AutoRefresh.INCREMENTAL:
            notes[info.name] = NOT_INCREMENTAL
            continue
        if entries is None:
            notes[info.name] = NOT_WRITE_TIME
            continue
        kind.validate(stable.spec, snap)
        if not _caught_up(stable, snap):
            maintain_index(ctx, info.name)  # commits it had not seen, the ordinary way
        try:
            started = start_operation(
                log,
                Operation.REFRESH_INCREMENTAL,
                precheck=lambda s: s.state is IndexState.ACTIVE and _caught_up(s, snap),
            )
        except ConcurrentIndexUpdate:
            notes[info.name] = BUSY
            continue
        if isinstance(started, LogEntry):  # could not be caught up (another writer holds it)
            notes[info.name] = BUSY
            continue
        build = build_context(ctx, log.index_dir, started.ctx.data_uri)
        held_from = started.ctx.stable  # after the catch-up above: its file ids are taken
        assert held_from is not None
        share = IndexShare(
            name=info.name,
            entries=entries,
            target=build.target(entries.layout, entries.schema, Level.DELTA, "files"),
            config=build.config,
            first_id=held_from.source.next_file_id,
            ordinal=snap.ordinal + 1,
        )
        held.append(_Held(info.name, started, build, share))


def _our_change(ctx: IndexContext, after: int, written: list[WrittenFile]) -> tuple[Change, int]:
    """The commit after version ``after`` that added the job's files, and how many commits
    landed after ``after`` up to it (1: none by another writer)."""
    names = {w.name for w in written}
    for n, change in enumerate(ctx.source.changes(after, ctx.source.latest_version()), start=1):
        if any(f.path.rsplit("/", 1)[-1] in names for f in change.added):
            return change, n
    raise AssertionError(f"no commit after version {after} of {ctx.uri} added the appended files")


def _finish(
    ctx: IndexContext, h: _Held, change: Change, commits: int, outputs: list[TaskOutput]
) -> int | None:
    """Log ``h``'s refresh of ``change`` naming the job's entries (the number of entries);
    None (abandoned) when the commit is not the one the entries were computed for."""
    by_name = {f.path.rsplit("/", 1)[-1]: f.path for f in change.added}
    ids = {}
    for out in outputs:
        for w in out.files:
            ids[by_name[w.name]] = dict(w.file_ids)[h.name]
    if change.ordinal != h.share.ordinal or commits != 1 or change.removed or len(change.added) != len(ids):
        h.started.abandon()
        return None
    paths = [p for out in outputs for name, ps in out.index_files if name == h.name for p in ps]
    written = refresh.Written(ids, read_root_index(h.share.target, paths))
    target = ctx.source.snapshot(change.version)
    state, content = refresh.incremental(h.build, h.stable, target, remap=False, written=written)
    h.started.finish(OpResult(state, content))
    return sum(f.rows for f in written.files)


def append_files(
    ctx: IndexContext,
    tx: Transaction,
    start: float,
    job: Job,
    *,
    require_index: bool = False,
) -> WriteResult | None:
    """Hold the indexes, run ``job`` (it writes the data files), commit through ``tx``, log the
    held refreshes, sync.

    ``require_index``: return None (nothing written, nothing held) when no index can take
    the job's entries, so the caller writes through the format library instead.
    """
    snap = tx.snapshot
    notes: dict[str, str] = {}
    held: list[_Held] = []
    closed: set[str] = set()  # held indexes whose operation ended (finished or abandoned)
    done: dict[str, int] = {}  # index → entries the job wrote for it
    try:
        _hold(ctx, snap, notes, held)
        if require_index and not held:
            return None
        outputs = job(tuple(h.share for h in held))
        written = [w for out in outputs for w in out.files]
        rows = sum(w.rows for w in written)
        version, retries = snap.version, 0
        if written:
            retries = tx.commit_files(written).retries
            change, commits = _our_change(ctx, snap.version, written)
            version = change.version
            for h in held:
                try:
                    entries = _finish(ctx, h, change, commits, outputs)
                except Exception as e:  # the commit stands: the index follows by refresh below
                    _log.exception("index %r: logging the append's entries failed", h.name)
                    h.started.abandon()
                    notes[h.name] = f"logging the job's entries failed ({type(e).__name__}: {e})"
                else:
                    if entries is None:
                        notes[h.name] = MOVED
                    else:
                        done[h.name] = entries
                closed.add(h.name)
    finally:
        for h in held:
            if h.name not in closed:
                h.started.abandon()
    sync = sync_indexes(ctx, raise_on_error=False)
    reports = tuple(_report(r, snap.version, done, notes) for r in sync.indexes)
    result = WriteResult(
        operation="append",
        table_uri=ctx.uri,
        table_version=version,
        previous_version=snap.version,
        rows_written=rows,
        rows_deleted=None,
        rows_updated=None,
        indexes=reports,
        seconds=time.perf_counter() - start,
        retries=retries,
    )
    if not result.ok:
        raise IndexMaintenanceError(
            failure_message(f"append committed version {version} of {ctx.uri}", result.failed), result
        )
    return result


def append_rows(ctx: IndexContext, tx: Transaction, rows: pa.Table, start: float) -> WriteResult | None:
    """Append ``rows`` (already in the table schema) by writing the data files and the index
    entries in this process, on threads; None when no index takes write-time entries or the
    table's layout is one the task does not write (the caller appends through the format
    library and refreshes)."""
    try:
        files = tx.data_files()
    except NotDistributable:
        return None

    def job(shares: tuple[IndexShare, ...]) -> list[TaskOutput]:
        task = AppendTask(tx.snapshot.schema, ctx.uri, files, shares, tasks=1, threads=CORES)
        return [task.write(0, [rows])]

    return append_files(ctx, tx, start, job, require_index=True)


def _report(r: IndexReport, before: int, done: dict[str, int], notes: dict[str, str]) -> IndexReport:
    """The sync's report of one index, saying how the append's entries got there."""
    if r.name in done:
        if r.action is not Action.NOTHING:  # later commits were applied too: report that action
            return r
        return replace(r, action=Action.WRITE_JOB, version_before=before, entries_written=done[r.name])
    if r.name in notes:
        return replace(r, note=f"indexed by refresh after the commit: {notes[r.name]}")
    return r
