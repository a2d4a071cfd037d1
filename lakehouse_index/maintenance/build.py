"""Full build of an index from one table snapshot, by the index's kind on the executor it sizes.

Every live file of the snapshot gets a file id (ids of paths the previous state knew are
kept: stable lineage) and is indexed at the snapshot's ordinal; the result answers
exactly from that ordinal on. Which executor computes the entries (in process with
pyarrow, or Spark) is the sizing policy's choice (``lakehouse_index.executors``).
"""

from __future__ import annotations

from collections.abc import Mapping

from lakehouse_index.kinds.base import BuildContext, IndexJob, IndexWork, kind_of
from lakehouse_index.kinds.columns import column_identities
from lakehouse_index.kinds.derived import indexed_columns
from lakehouse_index.log.entry import Content, Level, SourceFile, SourceState
from lakehouse_index.source import FileEntry, Snapshot
from lakehouse_index.spec import IndexSpec


def assign_file_ids(
    files: Mapping[str, FileEntry], previous: SourceState | None, ordinal: int
) -> tuple[tuple[SourceFile, ...], int]:
    """File-id map for ``files``: ids of paths the previous state knew are kept (stable lineage)."""
    known = previous.by_path() if previous else {}
    next_id = previous.next_file_id if previous else 0
    out = []
    for path in sorted(files):
        entry = files[path]
        old = known.get(path)
        if old is not None and old.removed_ordinal is None:
            fid, added = old.id, old.added_ordinal
        else:
            fid, added, next_id = next_id, ordinal, next_id + 1
        out.append(source_file(entry, fid, added))
    return tuple(out), next_id


def source_file(entry: FileEntry, file_id: int, added_ordinal: int) -> SourceFile:
    """The log's record of one covered data file."""
    return SourceFile(
        id=file_id,
        path=entry.path,
        size=entry.size,
        mtime_ms=entry.mtime_ms,
        num_records=entry.num_records,
        deletes_id=entry.deletes.id if entry.deletes else None,
        deleted_count=entry.deleted_count,
        added_ordinal=added_ordinal,
        # Entries are read with every delete of ``entry`` applied, equality deletes included.
        equality_applied=tuple(e.path for e in entry.equality_deletes),
    )


def full_build(
    ctx: BuildContext, spec: IndexSpec, snapshot: Snapshot, previous: SourceState | None
) -> tuple[SourceState, Content]:
    """Index every live row of ``snapshot``; the result answers exactly from its ordinal on."""
    kind = kind_of(spec)
    kind.validate(spec, snapshot)
    files, next_id = assign_file_ids(snapshot.files, previous, snapshot.ordinal)
    jobs = [IndexJob(snapshot.files[f.path], f.id, snapshot.ordinal) for f in files]
    content_files = kind.index_files(ctx, IndexWork(spec, snapshot, jobs, Level.BASE)) if jobs else ()
    state = SourceState(
        format=ctx.source.format_name,
        table_uri=ctx.source.uri,
        version=snapshot.version,
        ordinal=snapshot.ordinal,
        timestamp_ms=snapshot.timestamp_ms,
        files=files,
        next_file_id=next_id,
        columns=column_identities(indexed_columns(spec, snapshot).sources, snapshot)
        if kind.tracks_column_identity
        else (),
    )
    return state, Content(files=content_files, base_ordinal=snapshot.ordinal)
