"""Iceberg commits through pyiceberg, loaded through the table's catalog.

pyiceberg commits each transaction atomically through the catalog (the commit asserts
that the branch head did not move); a lost race raises ``CommitFailedException`` (or,
after pyiceberg's own retries, ``ValidationException``), and the conflict rules of
:mod:`lakehouse_index.sink.conflicts` decide whether the operation runs again on the
reloaded table. Every operation here is a function of the table state it runs on, so
running it again is rebasing it. ``update`` (pyiceberg has none) reads the matching rows,
sets the columns and commits delete + append in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_index.errors import ReadOnlyTableError, WriteConflictError, WriteRefusedError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.matching import match_keys
from lakehouse_index.io import Storage
from lakehouse_index.io.parallel import each_file
from lakehouse_index.io.uri import canonical_uri
from lakehouse_index.read.datafiles import ROW_COLUMN
from lakehouse_index.read.scan import scan_files
from lakehouse_index.sink.conflicts import Isolation, commit_rebasing
from lakehouse_index.sink.contract import Commit, RowChangeCommit, RowChanges, WriteMode
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.sink.rewrite import FileRewrite, Rewritten, delete_quietly, plan_rewrite, write_parquet
from lakehouse_index.source import Snapshot, TableSource
from lakehouse_index_iceberg.write.erase_commit import data_file
from lakehouse_index_iceberg.write.position_deletes import commit_position_deletes

#: The lineage column ``scan_files(with_lineage=True)`` adds: the row's FileEntry path.
FILE_PATH_COLUMN = "_file_path"


def open_for_write(source: Any, uri: str) -> Any:
    """The pyiceberg Table to commit to; ReadOnlyTableError for a table opened by path."""
    load = getattr(source, "catalog_table", None)
    tbl = load() if load is not None else None
    if tbl is None:
        raise ReadOnlyTableError(
            f"{uri}: an Iceberg table opened by path has no atomic commit; open it through its "
            "catalog (open_table(identifier, catalog=...)) to write"
        )
    return tbl


def _live_total(snapshot: Any) -> int | None:
    """Live rows of a snapshot from its summary (None when row-level deletes make it unknown)."""
    if snapshot is None:
        return 0
    summary = snapshot.summary
    if summary is None:
        return None
    props = summary.additional_properties if hasattr(summary, "additional_properties") else dict(summary)
    if int(props.get("total-position-deletes", 0)) or int(props.get("total-equality-deletes", 0)):
        return None
    total = props.get("total-records")
    return None if total is None else int(total)


def _in_table_schema(tbl: Any, data: pa.Table) -> pa.Table:
    target = tbl.schema().as_arrow()
    return data.select(target.names).cast(target)


#: Iceberg's isolation properties (values ``serializable``, the default, and ``snapshot``),
#: by the operation they govern, as Iceberg's Spark writes read them; an overwrite deletes
#: rows by a filter, so it follows the delete's.
ISOLATION_PROPERTIES = {
    "overwrite": "write.delete.isolation-level",
    "delete": "write.delete.isolation-level",
    "update": "write.update.isolation-level",
    "upsert": "write.merge.isolation-level",
}
ISOLATION_LEVELS = {"serializable": Isolation.SERIALIZABLE, "snapshot": Isolation.SNAPSHOT}


def isolation(tbl: Any, operation: str, uri: str) -> Isolation:
    """The isolation level the table's properties set for ``operation`` (serializable when unset;
    appends and erases read no such property); WriteRefusedError for a value Iceberg does not define."""
    prop = ISOLATION_PROPERTIES.get(operation)
    raw = None if prop is None else tbl.properties.get(prop)
    if raw is None:
        return Isolation.SERIALIZABLE
    level = ISOLATION_LEVELS.get(str(raw).lower())
    if level is None:
        raise WriteRefusedError(
            f"{uri}: {prop}={raw!r} is not one of serializable, snapshot; nothing was written"
        )
    return level


def lost_race() -> tuple[type[Exception], ...]:
    """pyiceberg's errors of a commit that lost the race and did not land: the catalog's refusal,
    and its own validation of a retried commit (which refuses any concurrently added file)."""
    from pyiceberg.exceptions import CommitFailedException, ValidationException

    return CommitFailedException, ValidationException


def with_retries(
    tbl: Any,
    source: TableSource,
    reads: ReadSet,
    isolation: Isolation,
    what: str,
    op: Callable[[Any], Commit],
) -> Commit:
    """``op(tbl)``; after a lost commit race the conflict rules decide, and without a conflict
    ``op`` runs again on the table reloaded from the catalog
    (:func:`~lakehouse_index.sink.conflicts.commit_rebasing`). ``op`` builds on the head of
    the table it is given, whose version the rules take as the write's base."""
    current = [tbl]

    def run(_: Snapshot | None) -> Commit:
        try:
            return op(current[0])
        except lost_race() as e:
            raise WriteConflictError(f"the Iceberg commit lost to a concurrent writer: {e}") from e

    def catch_up() -> int | None:
        current[0] = tbl.catalog.load_table(tbl.name())
        now = head(current[0])
        return None if now is None else int(now.snapshot_id)

    start = head(tbl)
    base = None if start is None else source.snapshot(int(start.snapshot_id))
    return commit_rebasing(source, base, reads, isolation, what, run, catch_up)


def head(tbl: Any) -> Any:
    """The current snapshot of ``tbl`` (None for a table without snapshots)."""
    return tbl.current_snapshot()


def version_after(tbl: Any, before: Any) -> int:
    """The table version after a commit of ``tbl`` (``before``: its head before it)."""
    current = head(tbl)
    if current is None:
        assert before is not None
        return int(before.snapshot_id)
    return int(current.snapshot_id)


def append(tbl: Any, data: pa.Table, source: TableSource) -> Commit:
    """Append ``data``."""

    def op(t: Any) -> Commit:
        before = head(t)
        t.append(_in_table_schema(t, data))
        return Commit(version_after(t, before), rows_written=data.num_rows)

    return with_retries(tbl, source, ReadSet.nothing(), Isolation.SERIALIZABLE, "append", op)


def _positions(hits: pa.Table) -> dict[str, np.ndarray]:
    """Row positions by file path, from rows read with lineage (``_file_path``, ``_row``)."""
    if hits.num_rows == 0:
        return {}
    paths = hits[FILE_PATH_COLUMN].to_numpy(zero_copy_only=False)
    rows = hits[ROW_COLUMN].to_numpy()
    return {str(p): np.unique(rows[paths == p]) for p in np.unique(paths)}


def _matching(source: TableSource, snap: Snapshot, predicate: Predicate | None, columns: Any) -> pa.Table:
    """The live rows of ``snap`` where ``predicate`` is TRUE (every row for None), read and
    filtered exactly as ``Table.scan(where=...)`` does, with ``_file_path`` and ``_row``."""
    return scan_files(source, snap, snap.files.values(), columns, predicate, with_lineage=True)


def _copy_on_write(
    t: Any,
    source: TableSource,
    storage: Storage,
    snap: Snapshot,
    positions: Mapping[str, np.ndarray],
    added: pa.Table | None,
) -> tuple[dict[str, Rewritten], tuple[str, ...]]:
    """One commit on top of ``snap`` (the head of ``t``): every file of ``positions`` is
    replaced by a rewrite without the live rows at those positions, and ``added`` (rows in
    the table schema) is written to new files. Returns where each rewrite's rows came from
    (by the rewrite's URI) and the URIs of the files holding ``added``.

    The rows removed are exactly the ones named, found by this library's reader and
    evaluator: pyiceberg's predicate evaluation (its metrics pruning and its row filter
    disagree on -0.0, NaN and out-of-range literals) plays no part. The rewrites are the
    erase's (:func:`lakehouse_index.sink.rewrite.plan_rewrite`): the old file's physical schema, its
    row-level deletes applied, so they need none.
    """
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    new_rows = added is not None and added.num_rows > 0
    added_uris: list[str] = []
    if not positions:
        if new_rows:
            with t.transaction() as tx, tx.update_snapshot().fast_append() as fa:
                for df in _dataframe_to_data_files(
                    table_metadata=tx.table_metadata, df=added, io=t.io, write_uuid=fa.commit_uuid
                ):
                    added_uris.append(canonical_uri(df.file_path, decoded=True))
                    fa.append_data_file(df)
        return {}, tuple(added_uris)
    originals = _originals(t, snap, positions)
    rewrites = each_file(
        lambda item: plan_rewrite(source, snap, snap.files[item[0]], item[1]), sorted(positions.items())
    )
    written: list[str] = []  # deleted when the commit fails
    lineage: dict[str, Rewritten] = {}

    def rewritten(r: FileRewrite) -> Any:
        old = originals[r.entry.path]
        raw = f"{old.file_path.rsplit('/', 1)[0]}/{uuid.uuid4()}-rewritten.parquet"
        uri = canonical_uri(raw, decoded=True)
        written.append(uri)
        lineage[uri] = Rewritten(r.entry.path, r.kept_positions)
        size = write_parquet(source, uri, r.kept, r.compression)
        return data_file(t, old, raw, size, source, uri)

    try:
        kept_files = each_file(rewritten, [r for r in rewrites if r.kept.num_rows])
        with t.transaction() as tx, tx.update_snapshot().overwrite() as ow:
            for r in rewrites:
                ow.delete_data_file(originals[r.entry.path])
            for df in kept_files:
                ow.append_data_file(df)
            if new_rows:
                for df in _dataframe_to_data_files(
                    table_metadata=tx.table_metadata, df=added, io=t.io, write_uuid=ow.commit_uuid
                ):
                    added_uris.append(canonical_uri(df.file_path, decoded=True))
                    ow.append_data_file(df)
    except BaseException:
        delete_quietly(storage, written)
        raise
    return lineage, tuple(added_uris)


def _originals(t: Any, snap: Snapshot, paths: Collection[str]) -> dict[str, Any]:
    """pyiceberg's ``DataFile`` of each of ``paths`` (live in ``snap``), by path."""
    originals: dict[str, Any] = {}
    for task in t.scan(snapshot_id=snap.version).plan_files():
        key = canonical_uri(task.file.file_path, decoded=True)
        if key in paths:
            originals[key] = task.file
    missing = set(paths) - set(originals)
    if missing:
        raise WriteConflictError(f"data files {sorted(missing)[:3]} are not live in snapshot {snap.version}")
    return originals


def _head_snapshot(t: Any, source: TableSource) -> tuple[Any, Snapshot | None]:
    """The head of ``t`` and this library's view of it (None for a table without snapshots)."""
    before = head(t)
    return before, (None if before is None else source.snapshot(int(before.snapshot_id)))


def overwrite(
    tbl: Any, data: pa.Table, predicate: Predicate | None, source: TableSource, storage: Storage, uri: str
) -> Commit:
    """Replace every row (``predicate`` None) or the rows where it is TRUE with ``data``, in one commit."""
    from pyiceberg.expressions import AlwaysTrue

    def op(t: Any) -> Commit:
        incoming = _in_table_schema(t, data)
        if predicate is None:
            before = head(t)
            total_before = _live_total(before)
            t.overwrite(incoming, overwrite_filter=AlwaysTrue())
            total_after = _live_total(head(t))
            deleted = None
            if total_before is not None and total_after is not None:
                deleted = total_before - (total_after - data.num_rows)
            return Commit(version_after(t, before), rows_written=data.num_rows, rows_deleted=deleted)
        before, snap = _head_snapshot(t, source)
        if snap is None:
            t.append(incoming)
            return Commit(version_after(t, before), rows_written=data.num_rows, rows_deleted=0)
        hits = _matching(source, snap, predicate, [snap.schema.names[0]])
        _copy_on_write(t, source, storage, snap, _positions(hits), incoming)
        return Commit(version_after(t, before), rows_written=data.num_rows, rows_deleted=hits.num_rows)

    level = isolation(tbl, "overwrite", uri)
    return with_retries(tbl, source, ReadSet.where(predicate), level, "overwrite", op)


def delete(tbl: Any, predicate: Predicate, source: TableSource, storage: Storage, uri: str) -> Commit:
    """Delete the rows where ``predicate`` is TRUE: exactly the rows ``scan(where)`` returns."""

    def op(t: Any) -> Commit:
        before, snap = _head_snapshot(t, source)
        if snap is None:
            return Commit(0, rows_deleted=0)
        hits = _matching(source, snap, predicate, [snap.schema.names[0]])
        _copy_on_write(t, source, storage, snap, _positions(hits), None)
        return Commit(version_after(t, before), rows_deleted=hits.num_rows)

    level = isolation(tbl, "delete", uri)
    return with_retries(tbl, source, ReadSet.where(predicate), level, "delete", op)


def update(
    tbl: Any,
    predicate: Predicate | None,
    values: Mapping[str, Any],
    source: TableSource,
    storage: Storage,
    uri: str,
) -> Commit:
    """Set ``values`` (Python literals) on the rows where ``predicate`` is TRUE (every row for None).

    The rows are read and matched as ``scan(where)`` does; their files are rewritten
    without them and the updated rows written anew, in one commit, so the rows removed
    are exactly the rows rewritten.
    """

    def op(t: Any) -> Commit:
        before, snap = _head_snapshot(t, source)
        if snap is None:
            return Commit(0, rows_updated=0)
        hits = _matching(source, snap, predicate, None)
        if hits.num_rows == 0:
            return Commit(int(snap.version), rows_updated=0)
        rows = hits.drop_columns([FILE_PATH_COLUMN, ROW_COLUMN])
        schema = t.schema().as_arrow()
        for name, value in values.items():
            field = schema.field(name)
            rows = rows.set_column(
                rows.schema.get_field_index(name), field, pa.array([value] * rows.num_rows, field.type)
            )
        _copy_on_write(t, source, storage, snap, _positions(hits), _in_table_schema(t, rows))
        return Commit(version_after(t, before), rows_updated=rows.num_rows)

    level = isolation(tbl, "update", uri)
    return with_retries(tbl, source, ReadSet.where(predicate), level, "update", op)


def upsert(
    tbl: Any, data: pa.Table, on: Sequence[str], source: TableSource, storage: Storage, uri: str
) -> Commit:
    """Rows matching a data row on ``on`` become that data row, other data rows are inserted.

    One commit: the key columns of every live row are read (as ``scan`` reads them); the
    files holding a target row whose key is a data row's are rewritten without those
    rows, and the data rows (replacements and inserts) are written anew. Like a SQL MERGE
    (and deltalake), every matching target row is updated, duplicates included; pyiceberg
    0.12's own ``upsert`` refuses a target with duplicate keys, so it is not used. Keys are
    unique and not null in ``data``, and matched as lookups match them (``data.match_keys``).
    """

    def op(t: Any) -> Commit:
        incoming = _in_table_schema(t, data)
        before, snap = _head_snapshot(t, source)
        if snap is None:
            t.append(incoming)
            return Commit(version_after(t, before), rows_written=incoming.num_rows, rows_updated=0)
        current = _matching(source, snap, None, list(on))
        position = {key: i for i, key in enumerate(match_keys(incoming, on))}
        current_keys = match_keys(current, on)
        matched_from: list[int] = []  # data row replacing each matched target row
        hit: list[bool] = []
        for key in current_keys:
            i = position.get(key)
            hit.append(i is not None)
            if i is not None:
                matched_from.append(i)
        used = set(matched_from)
        inserted = [i for i in range(incoming.num_rows) if i not in used]
        hits = current.filter(pa.array(hit, pa.bool_())) if current.num_rows else current
        added = pa.concat_tables(
            [incoming.take(pa.array(matched_from, pa.int64())), incoming.take(pa.array(inserted, pa.int64()))]
        )
        _copy_on_write(t, source, storage, snap, _positions(hits), added)
        return Commit(version_after(t, before), rows_written=len(inserted), rows_updated=len(matched_from))

    reads = ReadSet.matching(data, tuple(on))
    return with_retries(tbl, source, reads, isolation(tbl, "upsert", uri), "upsert", op)


#: The table properties choosing each operation's write mode (``copy-on-write``, the default,
#: or ``merge-on-read``), as Iceberg's Spark writes read them; an overwrite deletes rows by a
#: filter, so it follows the delete's.
MODE_PROPERTIES = {
    "overwrite": "write.delete.mode",
    "delete": "write.delete.mode",
    "update": "write.update.mode",
    "upsert": "write.merge.mode",
}


def write_mode(tbl: Any, operation: str, uri: str) -> WriteMode:
    """The write mode the table's properties set for ``operation`` (copy-on-write when unset);
    WriteRefusedError for a value Iceberg does not define."""
    prop = MODE_PROPERTIES.get(operation)
    raw = None if prop is None else tbl.properties.get(prop)
    if raw is None:
        return WriteMode.COPY_ON_WRITE
    try:
        return WriteMode(str(raw).lower())
    except ValueError:
        raise WriteRefusedError(
            f"{uri}: {prop}={raw!r} is not one of copy-on-write, merge-on-read; nothing was written"
        ) from None


def row_changes(
    tbl: Any, changes: RowChanges, source: TableSource, storage: Storage, uri: str
) -> RowChangeCommit:
    """Commit ``changes`` (rows found by the caller) in one snapshot: copy-on-write, the files
    holding removed rows rewritten without them (an overwrite); merge-on-read, a position-delete
    file per such file (:mod:`.position_deletes`); the added rows appended. After a lost race,
    again on the reloaded table when the conflict rules let the same changes through."""
    out: list[tuple[dict[str, Rewritten], tuple[str, ...], tuple[str, ...]]] = []
    removed = sum(len(p) for p in changes.removed.values())
    mor = changes.mode is WriteMode.MERGE_ON_READ

    def op(t: Any) -> Commit:
        before, snap = _head_snapshot(t, source)
        if snap is None:
            raise WriteConflictError(f"{uri} has no snapshot: the rows to change are gone")
        added = None if changes.added is None else _in_table_schema(t, changes.added)
        written = 0 if added is None else added.num_rows
        if mor:
            originals = _originals(t, snap, changes.removed)
            version, files = commit_position_deletes(t, source, storage, originals, changes.removed, added)
            out.append(({}, tuple(sorted(changes.removed)), files))
            return Commit(version, rows_written=written, rows_deleted=removed)
        lineage, files = _copy_on_write(t, source, storage, snap, changes.removed, added)
        out.append((lineage, (), files))
        return Commit(version_after(t, before), rows_written=written, rows_deleted=removed)

    name = changes.operation.value
    done = with_retries(tbl, source, changes.reads, isolation(tbl, name, uri), name, op)
    lineage, marked, added_files = out[-1]
    return RowChangeCommit(done, lineage, marked, added_files)
