"""Incremental and quick refresh: maintain an index from the table's commits, never a rescan.

**Incremental** applies the commits after the indexed version one by one, each change
stamped with its own ordinal, so every version in between is answered exactly:

* added files → PUT entries for their live rows, computed by the index's kind on the
  executor the sizing policy picks (in this process when small, else one Spark job over
  those files only);
* removed files → a file-level tombstone: ``SourceFile.removed_ordinal`` in the log
  (lineage), no rewrite of index data;
* copy-on-write rewrites (a commit that removes files and adds files in the same
  partition: DELETE/UPDATE/MERGE, OPTIMIZE) → the lineage remap (``lineage``): rows that
  moved unchanged keep their index entries, read at the new address through
  ``SourceFile.moves``; only rows the commit changed or inserted get new entries;
* row-level delete changes (deletion vectors, position deletes) → DEL entries for
  exactly the newly deleted positions and PUT entries for positions that came back
  (RESTORE, rollback), reading only those rows' key columns (pyarrow, no JVM);
* equality deletes on record-key columns (Iceberg) → DEL entries for exactly the rows they
  match, found by reading the delete columns of the files they apply to; equality deletes
  on other columns are matched by value at read time (see ``query.coverage``);
  ``SourceFile.equality_applied`` says which is which;
* files a commit touched that were deleted from storage since (the table was vacuumed
  before the index caught up): a removed file that is gone is not remapped (the files
  its commit added are indexed the ordinary way); a file added and removed again within
  the replay, and gone, is left out of the map, so a query at a version it was live in
  fails clearly, as the table's own readers do;
* an indexed version that left the table's history (log cleanup, snapshot expiry) cannot
  be replayed from: the index is rebuilt from the target version instead (logged).

**Quick** records only metadata (``Pending``): which files were appended, removed or
had their deletes changed since the indexed version. Index data is unchanged, the
exact window is not extended, queries repair the difference by hybrid scan.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.errors import TableFormatError, VersionNotFoundError
from lakehouse_index.kinds.base import BuildContext, IndexJob, IndexKind, IndexWork, kind_of
from lakehouse_index.kinds.columns import changed_columns, column_identities
from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.kinds.entries import DEL, PUT
from lakehouse_index.log.entry import Content, IndexFile, Level, LogEntry, Pending, SourceFile, SourceState
from lakehouse_index.maintenance import lineage as lineage_remap
from lakehouse_index.maintenance.build import full_build, source_file
from lakehouse_index.read.datafiles import ROW_COLUMN, read_file
from lakehouse_index.read.deletes import equality_delete_mask
from lakehouse_index.sink.rewrite import WriteLineage
from lakehouse_index.source import Change, FileEntry, Snapshot, TableSource
from lakehouse_index.spec import IndexSpec

_log = logging.getLogger(__name__)


@dataclass
class _Replay:
    """Mutable state while replaying commits over the file-id map."""

    files: dict[int, SourceFile]
    live: dict[str, int]  # path → id of the live file
    next_id: int
    jobs: list[IndexJob]
    row_entries: list[pa.Table]


def replay(
    source: TableSource,
    target: Snapshot,
    kind: IndexKind,
    spec: IndexSpec,
    stable: LogEntry,
    changes: Sequence[Change],
    *,
    remap: bool = True,
    config: ExecutorConfig = ExecutorConfig(),
    written: Mapping[str, int] | None = None,
    lineage: WriteLineage | None = None,
) -> _Replay:
    """Apply ``changes`` to the stable entry's file map; collect index jobs and row-level entries.

    A kind without row-level entries (skipping indexes: per-file statistics stay valid,
    merely conservative, when rows are deleted) only gets the new deletes recorded in the map.
    ``remap`` aligns files a commit added with files it removed (``lineage``): rows that
    moved unchanged keep their entries; only the rest of such files is indexed.
    ``written`` maps paths of added files whose entries are already written (by the
    write that added them) to the file ids those entries carry: they get no job.
    ``lineage``: what the write of these commits knows of its rows (files it rewrote, rows it
    removed), used instead of reading them.
    """
    written = written or {}
    lineage = lineage or WriteLineage()
    state = _Replay(
        files={f.id: f for f in stable.source.files},
        live={f.path: f.id for f in stable.source.files if f.removed_ordinal is None},
        next_id=max(stable.source.next_file_id, max(written.values(), default=-1) + 1),
        jobs=[],
        row_entries=[],
    )
    gone = _Vanished(source, target)
    for change in changes:
        removed = [(state.live[fe.path], fe) for fe in change.removed if fe.path in state.live]
        for fe in change.removed:
            _remove(state, fe.path, change.ordinal)
        added = []
        for fe in change.added:
            if fe.path in state.live:  # the same path re-added: replaces the old file
                _remove(state, fe.path, change.ordinal)
            if gone(fe.path):
                # Added and removed again since the indexed version, and deleted from storage
                # since (the table was vacuumed): the versions it was live in cannot be read
                # any more. Left out of the map, a query at such a version scans it and fails
                # clearly ("data file ... is missing") instead of answering without its rows.
                continue
            fid = written.get(fe.path, state.next_id)
            state.next_id = max(state.next_id, fid + 1)
            state.files[fid] = source_file(fe, fid, change.ordinal)
            state.live[fe.path] = fid
            added.append((fid, fe))
        placed: frozenset[str] = frozenset()
        if remap and kind.row_level and removed and added:
            known = lineage_remap.known_remap(removed, added, lineage.rewritten)
            rest_removed = [(fid, fe) for fid, fe in removed if fid not in known.moves]
            rest_added = [
                (fid, fe) for fid, fe in added if fe.path not in known.placed and fe.path not in lineage.added
            ]
            try:
                rw = lineage_remap.remap_commit(
                    source, target, kind, spec, rest_removed, rest_added, change.ordinal, config
                )
            except TableFormatError:
                # A removed file (or its deletion vector) is gone: the table was vacuumed
                # after this commit. The added files are indexed the ordinary way instead.
                rw = lineage_remap.Remap()
            for fid, moves in {**known.moves, **rw.moves}.items():
                state.files[fid] = replace(state.files[fid], moves=moves)
            state.row_entries += rw.entries
            placed = known.placed | rw.placed
        state.jobs += [
            IndexJob(fe, fid, change.ordinal)
            for fid, fe in added
            if fe.path not in placed and fe.path not in written
        ]
        for dc in change.delete_changes:
            if gone(dc.after.path):  # vacuumed since: its entries stop answering from here on
                _remove(state, dc.after.path, change.ordinal)
                continue
            known_rows = lineage.removed.get(dc.after.path)
            _deletes_changed(
                state, source, target, kind, spec, dc.before, dc.after, change.ordinal, known_rows
            )
    return state


class _Vanished:
    """Whether a data file the replay meets was deleted from storage since (table vacuumed).

    Only files not live in the target can be gone; each is checked once.
    """

    def __init__(self, source: TableSource, target: Snapshot) -> None:
        self.source = source
        self.target = target
        self.seen: dict[str, bool] = {}

    def __call__(self, path: str) -> bool:
        if path in self.target.files:
            return False
        if path not in self.seen:
            self.seen[path] = not self.source.io.exists(path)
        return self.seen[path]


def _remove(state: _Replay, path: str, ordinal: int) -> None:
    fid = state.live.pop(path, None)
    if fid is not None:
        state.files[fid] = replace(state.files[fid], removed_ordinal=ordinal)


def _deletes_changed(
    state: _Replay,
    source: TableSource,
    target: Snapshot,
    kind: IndexKind,
    spec: IndexSpec,
    before: FileEntry,
    after: FileEntry,
    ordinal: int,
    known_rows: pa.Table | None = None,
) -> None:
    """Entries for the rows whose deletion changed in a covered file, and its new map record.

    The rows the index leaves out are those deleted by the file's deletion vector /
    position deletes and by its applied equality deletes (``SourceFile.equality_applied``).
    A new equality delete on record-key columns is applied (its rows get DEL entries);
    one on other columns is verified at read. Rows that come back (RESTORE, rollback)
    get PUT entries. ``known_rows``: rows of the file a write removed (columns and ``_row``),
    whose tombstones are taken from them when they hold every newly deleted position.
    """
    fid = state.live.get(after.path)
    if fid is None:
        return
    sf = state.files[fid]
    applied = _applied_equality_deletes(sf, after, spec)
    if kind.row_level:
        old = source.deleted_positions(before)
        new = source.deleted_positions(after)
        applied_before, applied_after = sf.equality_applied or (), applied or ()
        # Applied equality deletes count too when they changed, or when a row would come
        # back from the position deletes (it may still be equality-deleted).
        if applied_before != applied_after or (applied_after and old - new):
            old |= _equality_deleted(source, target, before, applied_before)
            new |= _equality_deleted(source, target, after, applied_after)
        for positions, op in ((new - old, DEL), (old - new, PUT)):
            if positions:
                rows = _known(known_rows, positions, spec, target) if op == DEL else None
                if rows is None:
                    state.row_entries.append(
                        _row_entries(source, target, kind, spec, after, positions, fid, ordinal, op)
                    )
                else:
                    state.row_entries.append(kind.row_entries(rows, spec, target, fid, ordinal, op))
    state.files[fid] = replace(
        sf,
        deletes_id=after.deletes.id if after.deletes else None,
        deleted_count=after.deleted_count,
        equality_applied=applied if kind.row_level else sf.equality_applied,
    )


def _applied_equality_deletes(sf: SourceFile, after: FileEntry, spec: IndexSpec) -> tuple[str, ...] | None:
    """The equality deletes of ``after`` whose rows the index will leave out.

    Those applied before that still apply, plus new ones on record-key columns. ``None``
    (unknown, a log older than format 3) stays unknown: queries verify every equality delete.
    """
    if sf.equality_applied is None:
        return None
    record_key = set(spec.record_key)
    kept = [e.path for e in after.equality_deletes if e.path in sf.equality_applied]
    new = [
        e.path
        for e in after.equality_deletes
        if e.path not in sf.equality_applied and record_key and set(e.columns) <= record_key
    ]
    return tuple(kept + new)


def _equality_deleted(
    source: TableSource, target: Snapshot, entry: FileEntry, paths: Sequence[str]
) -> BitMap64:
    """Positions of ``entry`` deleted by its equality-delete files named in ``paths``."""
    deletes = tuple(e for e in entry.equality_deletes if e.path in paths)
    if not deletes:
        return BitMap64()
    only = replace(entry, deletes=None, equality_deletes=deletes)
    columns = list(dict.fromkeys(c for e in deletes for c in e.columns))
    rows = read_file(source, target, only, columns=columns, with_positions=True, apply_deletes=False)
    mask = equality_delete_mask(source, target, only, rows)
    assert mask is not None
    return BitMap64(rows[ROW_COLUMN].to_numpy()[mask].tolist())


def _known(
    known_rows: pa.Table | None, positions: object, spec: IndexSpec, target: Snapshot
) -> pa.Table | None:
    """The rows at ``positions`` (with the spec's source columns and ``_row``) from a write's
    ``known_rows``; None when they do not hold them all."""
    if known_rows is None:
        return None
    sources = indexed_columns(spec, target).sources
    if not set(sources) <= set(known_rows.column_names):
        return None
    pos = np.fromiter(positions, dtype=np.int64)  # type: ignore[call-overload]
    at = known_rows[ROW_COLUMN].to_numpy()
    hit = np.isin(at, pos)
    if int(hit.sum()) != len(pos) or len(np.unique(at[hit])) != len(pos):
        return None
    rows = known_rows.filter(pa.array(hit)).select([*sources, ROW_COLUMN])
    return rows.take(pc.sort_indices(rows[ROW_COLUMN]))


def _row_entries(
    source: TableSource,
    target: Snapshot,
    kind: IndexKind,
    spec: IndexSpec,
    entry: FileEntry,
    positions: object,
    fid: int,
    ordinal: int,
    op: int,
) -> pa.Table:
    """Entries for individual rows: their key columns (an indexed expression's sources) are read
    at those positions only."""
    pos = np.fromiter(positions, dtype=np.int64)  # type: ignore[call-overload]
    rows = read_file(
        source,
        target,
        entry,
        columns=indexed_columns(spec, target).sources,
        positions=pos,
        with_positions=True,
        apply_deletes=False,
    )
    return kind.row_entries(rows, spec, target, fid, ordinal, op)


@dataclass(frozen=True)
class Written:
    """Index entries a write computed for the data files it added (``workflows.spark_append``).

    ``file_ids``: path of each such file (as the table's log names it) → the file id its
    entries carry; ``files``: the index files holding them (stamped with the commit's ordinal).
    """

    file_ids: Mapping[str, int]
    files: tuple[IndexFile, ...]


def incremental(
    ctx: BuildContext,
    stable: LogEntry,
    target: Snapshot,
    *,
    remap: bool = True,
    written: Written | None = None,
    lineage: WriteLineage | None = None,
) -> tuple[SourceState, Content]:
    """Apply every commit in (indexed version, target] to the index as new delta files.

    The index's kind computes the entries of added files on the executor the sizing policy
    picks (Spark only for large appends); row-level deletes and files placed by the lineage
    remap are applied with pyarrow, without a JVM.
    ``remap=False`` indexes every added file from its key columns (no lineage remap).
    ``written``: entries of added files already written by the write that added them;
    those files are recorded in the file-id map under the ids the entries carry and not
    read again. ``lineage``: what the write that made the commits knows of its rows
    (:class:`WriteLineage`: files it rewrote, placed without reading; rows it removed, whose
    tombstones need no read; see :func:`replay`).
    """
    spec = stable.spec
    kind = kind_of(spec)
    try:
        changes = list(ctx.source.changes(stable.source.version, target.version))
    except VersionNotFoundError as e:
        # The indexed version left the table's history (Delta log cleanup, Iceberg snapshot
        # expiry): its commits cannot be replayed. Rebuild from the target instead (file ids
        # of known paths kept); older index snapshots stay for time travel until vacuum.
        _log.warning("index %r: %s; rebuilding it from version %s", spec.name, e, target.version)
        return full_build(ctx, spec, target, stable.source)
    kind.validate(spec, target)
    changed = changed_columns(stable.source.columns, target) if kind.tracks_column_identity else []
    if changed:
        # Renamed over, or dropped and added again: the entries so far answer for other
        # columns. Rebuild from the target (older snapshots stay for time travel).
        _log.warning(
            "index %r: column(s) %s are other columns at version %s than it was built from; rebuilding it",
            spec.name,
            changed,
            target.version,
        )
        return full_build(ctx, spec, target, stable.source)
    state = replay(
        ctx.source,
        target,
        kind,
        spec,
        stable,
        changes,
        remap=remap,
        config=ctx.config,
        written=written.file_ids if written else None,
        lineage=lineage,
    )
    rows = pa.concat_tables(state.row_entries) if state.row_entries else None
    new_files = (
        kind.index_files(ctx, IndexWork(spec, target, state.jobs, Level.DELTA, rows))
        if state.jobs or rows is not None
        else ()
    )
    prewritten = written.files if written else ()
    return _source_state(stable, target, state), Content(
        stable.content.files + prewritten + new_files, stable.content.base_ordinal
    )


def _source_state(stable: LogEntry, target: Snapshot, state: _Replay) -> SourceState:
    """The file-id map after the replay, at the target version."""
    spec = stable.spec
    return SourceState(
        format=stable.source.format,
        table_uri=stable.source.table_uri,
        version=target.version,
        ordinal=target.ordinal,
        timestamp_ms=target.timestamp_ms,
        files=tuple(state.files[i] for i in sorted(state.files)),
        next_file_id=state.next_id,
        columns=column_identities(indexed_columns(spec, target).sources, target)
        if kind_of(spec).tracks_column_identity
        else (),
    )


def quick(source: TableSource, stable: LogEntry, target: Snapshot) -> Pending:
    """Metadata-only refresh: what differs between the indexed version and ``target``."""
    covered = {f.path: f for f in stable.source.files if f.removed_ordinal is None}
    appended = []
    changed = []
    for path, fe in target.files.items():
        sf = covered.get(path)
        if sf is None:
            appended.append(source_file(fe, -1, target.ordinal))
        elif sf.deletes_id != (fe.deletes.id if fe.deletes else None):
            changed.append(
                replace(sf, deletes_id=fe.deletes.id if fe.deletes else None, deleted_count=fe.deleted_count)
            )
    removed = tuple(sorted(f.id for p, f in covered.items() if p not in target.files))
    return Pending(target.version, target.ordinal, tuple(appended), removed, tuple(changed))
