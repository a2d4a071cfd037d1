"""The contract's view of Delta live files: file entries, snapshot files, a commit's changes, diffs.

A :class:`FileEntry` is made from an ``add`` with the partition values typed by the
version's :class:`TableSchema`; the entries of a snapshot are made only when read
(:class:`SnapshotFiles`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.source import Change, DeleteChange, Diff, FileEntry, TableFormatError
from lakehouse_index_delta.actions import Actions, AddFile, Metadata
from lakehouse_index_delta.live_files import LiveFiles, PartitionRaw, SnapshotFiles
from lakehouse_index_delta.schema import TableSchema

#: Name under which row ids are exposed when row tracking is on but no materialized
#: column is configured (see :attr:`Snapshot.row_id_column` and DeltaSource docs).
DEFAULT_ROW_ID_COLUMN = "_row_id"


def file_entry(
    a: AddFile, schema: TableSchema, typed: dict[PartitionRaw, tuple[tuple[str, Any], ...]] | None = None
) -> FileEntry:
    """The contract's entry for an add; ``typed`` caches typed partition values by raw ones."""
    pv: tuple[tuple[str, Any], ...] = ()
    if schema.partition_fields:
        known = typed.get(a.partition_values) if typed is not None else None
        pv = known if known is not None else schema.partition_values(a.partition_values, a.path)
        if typed is not None:
            typed[a.partition_values] = pv
    return FileEntry(
        a.path, a.size, a.modification_time, a.num_records, pv, a.deletion_vector, (), a.base_row_id
    )


def snapshot_files(files: LiveFiles, schema: TableSchema, where: str) -> SnapshotFiles:
    """``Snapshot.files`` of the live ``files``; TableFormatError (naming ``where``) when a path
    is live twice or a partition value does not parse."""
    typed: dict[PartitionRaw, tuple[tuple[str, Any], ...]] = {}
    out = SnapshotFiles(files, partial(file_entry, schema=schema, typed=typed))
    dup = out.duplicate_path()
    if dup is not None:
        raise TableFormatError(f"{where}: two live entries for {dup}")
    if schema.partition_fields:
        # Typed eagerly (a bad value fails here, not on first access); distinct values are few.
        for raw, path in files.distinct_partitions().items():
            typed[raw] = schema.partition_values(raw, path)
    return out


def row_id_column(metadata: Metadata) -> str | None:
    """The column through which row ids are exposed, None without row tracking."""
    config = metadata.config
    if config.get("delta.enableRowTracking", "false").lower() != "true":
        return None
    return config.get("delta.rowTracking.materializedRowIdColumnName") or DEFAULT_ROW_ID_COLUMN


def commit_change(
    version: int,
    actions: Actions,
    removed: list[AddFile],
    added: list[AddFile],
    before_schema: TableSchema,
    after_schema: TableSchema,
    timestamp_ms: int,
) -> Change:
    """What commit ``version`` changed, from the files it made stop being live and its adds of
    keys that were not live (:meth:`LiveFiles.apply` with ``report``)."""
    removed_by_path = {gone.path: gone for gone in removed}
    delete_changes: list[DeleteChange] = []
    plain_added: list[FileEntry] = []
    for a in added:
        old = removed_by_path.pop(a.path, None)
        if old is None:
            plain_added.append(file_entry(a, after_schema))
        else:
            # Same data file, new deletion vector: a row-level change, not add + remove.
            delete_changes.append(DeleteChange(file_entry(old, before_schema), file_entry(a, after_schema)))
    file_actions = list(actions.adds) + list(actions.removes)
    return Change(
        version=version,
        ordinal=version,
        timestamp_ms=timestamp_ms,
        added=tuple(plain_added),
        removed=tuple(file_entry(gone, before_schema) for gone in removed_by_path.values()),
        delete_changes=tuple(delete_changes),
        data_change=any(f.data_change for f in file_actions) if file_actions else True,
        operation=actions.operation,
        blind_append=actions.blind_append,
    )


def diff_files(
    a: int, b: int, files_a: LiveFiles, files_b: LiveFiles, schema_a: TableSchema, schema_b: TableSchema
) -> Diff:
    """The difference from the live files of version ``a`` to those of ``b`` (either direction).

    Compares their logical file keys as Arrow columns and builds entries only for the files
    that differ.
    """
    keys_a, rows_a = files_a.key_strings()
    keys_b, rows_b = files_b.key_strings()
    only_b = files_b.files_at(_positions_not_in(keys_b, keys_a), rows_b)
    only_a = files_a.files_at(_positions_not_in(keys_a, keys_b), rows_a)
    a_by_path = {f.path: f for f in only_a}
    added, changed = [], []
    for f in only_b:
        before = a_by_path.pop(f.path, None)
        if before is None:
            added.append(file_entry(f, schema_b))
        else:
            changed.append(DeleteChange(file_entry(before, schema_a), file_entry(f, schema_b)))
    removed = tuple(file_entry(f, schema_a) for f in a_by_path.values())
    return Diff(a, b, tuple(added), removed, tuple(changed))


def _positions_not_in(keys: pa.Array, others: pa.Array) -> list[int]:
    """Positions of ``keys`` whose value is not among ``others``."""
    return list(pc.indices_nonzero(pc.invert(pc.is_in(keys, value_set=others))).to_pylist())
