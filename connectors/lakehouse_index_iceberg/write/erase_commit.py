"""The Iceberg commit of an erase: an ``overwrite`` snapshot that removes exactly the files holding subjects.

pyiceberg's delete by predicate plans over every manifest entry the predicate may
match and rewrites whole files by filter. The erase already knows its files: it deletes
their ``DataFile`` entries and appends the rewrites in one overwrite snapshot, through
pyiceberg's transaction (the catalog commit asserts the branch head did not move). The
snapshot summary holds counts only, never the keys. Delete files that pointed at a
removed data file stay valid (they no longer match any live file) and the rewrites
carry no deleted rows, so they need none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lakehouse_index.errors import WriteConflictError
from lakehouse_index.io import Storage
from lakehouse_index.io.parallel import each_file
from lakehouse_index.sink.contract import Commit
from lakehouse_index.sink.rewrite import FileRewrite, delete_quietly, write_parquet
from lakehouse_index.source import TableSource, canonical_uri

#: Snapshot summary properties naming the operation (counts only).
SUMMARY_OPERATION = "lakehouse-index.operation"
SUMMARY_SUBJECTS = "lakehouse-index.subjects"


def _field_ids(schema: Any) -> dict[str, int]:
    """Parquet column path → field id, from the file's own Arrow schema (``PARQUET:field_id``)."""
    import pyarrow as pa

    out: dict[str, int] = {}

    def walk(f: pa.Field, prefix: str) -> None:
        path = f"{prefix}{f.name}"
        t = f.type
        if pa.types.is_struct(t):
            for child in t:
                walk(child, path + ".")
            return
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            walk(t.value_field, path + ".list.")
            return
        if pa.types.is_map(t):
            walk(t.key_field, path + ".key_value.")
            walk(t.item_field, path + ".key_value.")
            return
        fid = (f.metadata or {}).get(b"PARQUET:field_id")
        if fid is not None:
            out[path] = int(fid)

    for f in schema:
        walk(f, "")
    return out


def data_file(tbl: Any, old: Any, path: str, size: int, source: TableSource, uri: str) -> Any:
    import pyarrow.parquet as pq
    from pyiceberg.io.pyarrow import compute_statistics_plan, data_file_statistics_from_parquet_metadata
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat

    fs, p = source.io.arrow(uri)
    with fs.open_input_file(p) as f:
        meta = pq.read_metadata(f)
    schema = tbl.schema()
    plan = compute_statistics_plan(schema, tbl.properties)
    ids = {k: v for k, v in _field_ids(meta.schema.to_arrow_schema()).items() if v in plan}
    stats = data_file_statistics_from_parquet_metadata(meta, {i: plan[i] for i in ids.values()}, ids)
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=old.partition,
        file_size_in_bytes=size,
        sort_order_id=old.sort_order_id,
        spec_id=old.spec_id,
        equality_ids=None,
        key_metadata=None,
        **stats.to_serialized_dict(),
    )


def commit_erase(
    tbl: Any,
    source: TableSource,
    storage: Storage,
    *,
    version: int,
    rewrites: Sequence[FileRewrite],
    subjects: int,
) -> tuple[Commit, dict[str, str]]:
    """Commit one overwrite snapshot on top of snapshot ``version``; the commit and the files written."""
    import uuid

    from pyiceberg.exceptions import CommitFailedException, ValidationException

    head = tbl.current_snapshot()
    if head is None or int(head.snapshot_id) != version:
        raise WriteConflictError(f"{source.uri}: the table moved past snapshot {version}")
    wanted = {r.entry.path for r in rewrites}
    originals = {}
    for task in tbl.scan(snapshot_id=version).plan_files():
        key = canonical_uri(task.file.file_path, decoded=True)
        if key in wanted:
            originals[key] = task.file
    missing = wanted - set(originals)
    if missing:
        raise WriteConflictError(f"{source.uri}: files {sorted(missing)[:3]} are no longer live")
    written: list[str] = []  # deleted when the commit fails
    replaced: dict[str, str] = {}
    erased = sum(r.erased.num_rows for r in rewrites)

    def rewritten(r: FileRewrite) -> Any:
        old = originals[r.entry.path]
        raw = f"{old.file_path.rsplit('/', 1)[0]}/{uuid.uuid4()}-erased.parquet"
        uri = canonical_uri(raw, decoded=True)
        written.append(uri)
        replaced[r.entry.path] = uri
        size = write_parquet(source, uri, r.kept, r.compression, int96=r.int96)
        return data_file(tbl, old, raw, size, source, uri)

    try:
        new_files = each_file(rewritten, [r for r in rewrites if r.kept.num_rows])
        props = {SUMMARY_OPERATION: "erase", SUMMARY_SUBJECTS: str(subjects)}
        with tbl.transaction() as tx, tx.update_snapshot(snapshot_properties=props).overwrite() as ow:
            for r in rewrites:
                ow.delete_data_file(originals[r.entry.path])
            for df in new_files:
                ow.append_data_file(df)
    except (CommitFailedException, ValidationException) as e:
        delete_quietly(storage, written)
        raise WriteConflictError(f"{source.uri}: another writer committed first: {e}") from e
    except BaseException:
        delete_quietly(storage, written)
        raise
    now = tbl.current_snapshot()
    return Commit(int(now.snapshot_id), rows_deleted=erased), replaced
