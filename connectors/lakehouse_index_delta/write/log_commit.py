"""The project's own Delta commits: exactly the rows a write found, removed from exactly their files.

deltalake's DELETE and MERGE scan every file a predicate may match and record the
predicate, with its values, in ``commitInfo``; its write transaction cannot remove a file
that carries a deletion vector. The erase and the index-accelerated writes know their rows
already (an index located them), so they write their own commit, following the protocol:

* one ``remove`` per rewritten file, repeating the live ``add``'s path, partition
  values, size and deletion vector (the logical file is (path, DV));
* one ``add`` per rewrite that keeps rows, with statistics of the new file (for the erase:
  it holds no subject, so no statistic can be a subject's value);
* merge-on-read (:mod:`.marks`): per marked file, a ``remove`` of (path, old DV) and, unless
  every row of it is then marked, an ``add`` of the same path with its new DV, same size, ``baseRowId`` and
  ``defaultRowCommitVersion``, statistics from the file's Parquet footer with
  ``tightBounds: false``; the new DVs in one
  ``deletion_vector_<uuid>.bin`` file;
* one ``add`` per new data file of the write's added rows (Hive-style partition folders,
  statistics; fresh ``baseRowId``s under row tracking);
* ``cdc`` files of the removed rows when the change data feed is on (a ``purge`` removes
  them with the rest of the history);
* ``commitInfo`` that names the operation and counts, never a key or a predicate; first,
  with an ``inCommitTimestamp``, when in-commit timestamps are on.

The commit file is created with put-if-absent: if another writer committed that version
first, :class:`~lakehouse_index.errors.WriteConflictError` is raised after the new files
are deleted, and the caller decides (the erase locates again on the newer version).
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.errors import WriteConflictError
from lakehouse_index.io import Storage
from lakehouse_index.io.base import ObjectExistsError
from lakehouse_index.io.parallel import each_file
from lakehouse_index.io.uri import join_uri
from lakehouse_index.read.row_ids import row_ids
from lakehouse_index.sink.contract import Commit
from lakehouse_index.sink.partitions import split
from lakehouse_index.sink.rewrite import FileRewrite, delete_quietly, sibling_uri, write_parquet
from lakehouse_index.source import Snapshot, TableSource, relative_log_path
from lakehouse_index_delta.deletion_vectors import DeletionVectorDescriptor, descriptor_json
from lakehouse_index_delta.write.marks import FileMark, write_deletion_vectors
from lakehouse_index_delta.write.new_files import DeltaFiles
from lakehouse_index_delta.write.stats import file_stats

CHANGE_TYPE = "_change_type"
#: Fields of a live ``add`` that its ``remove`` repeats (the logical file is path + DV).
REMOVE_FIELDS = ("path", "partitionValues", "size", "deletionVector", "baseRowId", "defaultRowCommitVersion")
ROW_TRACKING_DOMAIN = "delta.rowTracking"


def _engine() -> str:
    """This project as the commit's ``engineInfo``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"lakehouse-index/{version('lakehouse-index')}"
    except PackageNotFoundError:
        return "lakehouse-index"


def is_true(config: Mapping[str, str], key: str) -> bool:
    """Whether the table property ``key`` is set to true."""
    return str(config.get(key, "false")).lower() == "true"


@dataclass(frozen=True)
class RowTracking:
    """What an erase commit must do for Delta row tracking.

    ``high_water``: the row-id high-water mark of the read version (-1 when none was
    assigned). With ``materialize`` (row tracking enabled: ids are stable), each kept row
    keeps its row id and row commit version in the materialized columns ``id_column`` and
    ``version_column`` of its new file.
    """

    high_water: int
    materialize: bool
    id_column: str | None
    version_column: str | None

    @classmethod
    def of(cls, source: TableSource, version: int, config: Mapping[str, str]) -> RowTracking:
        """The row-tracking state of ``version``."""
        raw = source.domain_metadata(version, ROW_TRACKING_DOMAIN)
        high = int(json.loads(raw)["rowIdHighWaterMark"]) if raw else -1
        id_col = config.get("delta.rowTracking.materializedRowIdColumnName")
        version_col = config.get("delta.rowTracking.materializedRowCommitVersionColumnName")
        enabled = is_true(config, "delta.enableRowTracking") and bool(id_col) and bool(version_col)
        return cls(high, enabled, id_col, version_col)

    def kept_rows(
        self, source: TableSource, snapshot: Snapshot, r: FileRewrite, record: Mapping[str, Any]
    ) -> pa.Table:
        """``r.kept`` with the kept rows' row ids and commit versions materialized."""
        if not self.materialize:
            return r.kept
        assert self.id_column is not None and self.version_column is not None
        ids = row_ids(source, snapshot, r.entry, r.kept_positions)
        default = record.get("defaultRowCommitVersion")
        fill = pa.scalar(default, pa.int64()) if default is not None else pa.scalar(None, pa.int64())
        if self.version_column in r.kept.column_names:
            versions = pc.coalesce(r.kept.column(self.version_column).cast(pa.int64()), fill)
        else:
            versions = pa.array([default] * r.kept.num_rows, pa.int64())
        out = r.kept
        for name, values in ((self.id_column, ids), (self.version_column, versions)):
            if name in out.column_names:
                out = out.set_column(out.column_names.index(name), pa.field(name, pa.int64()), values)
            else:
                out = out.append_column(pa.field(name, pa.int64()), values)
        return out


def _previous_ict(storage: Storage, log_dir: str, version: int) -> int | None:
    try:
        first = storage.read_bytes(join_uri(log_dir, f"{version:020d}.json")).split(b"\n", 1)[0]
    except FileNotFoundError:
        return None
    info = json.loads(first).get("commitInfo") or {}
    ict = info.get("inCommitTimestamp")
    return int(ict) if ict is not None else None


def _new_file(
    source: TableSource,
    old: str,
    rows: pa.Table,
    compression: str,
    prefix: str,
    folder: str | None = None,
    *,
    int96: bool = False,
) -> tuple[str, int]:
    ext = {"snappy": ".snappy.parquet", "zstd": ".zstd.parquet", "gzip": ".gz.parquet"}.get(
        compression, ".parquet"
    )
    base = old if folder is None else folder + "/x"
    uri = sibling_uri(base, prefix, "-c000" + ext)
    return uri, write_parquet(source, uri, rows, compression, int96=int96)


def _dv_id(record: Mapping[str, Any], root: str) -> str | None:
    """The unique id of a live ``add``'s deletion vector (None: it has none)."""
    dv = record.get("deletionVector")
    return None if dv is None else DeletionVectorDescriptor.from_json(dv, root).id


def _cdc_rows(erased: pa.Table) -> pa.Table:
    # Spark's data files of a CDF table may carry a (null) _change_type column already.
    rows = erased.drop_columns([c for c in erased.column_names if c == CHANGE_TYPE])
    return rows.append_column(CHANGE_TYPE, pa.array(["delete"] * rows.num_rows, pa.string()))


@dataclass(frozen=True)
class LogCommit:
    """What :func:`commit_changes` commits, besides the rewrites: the operation as ``commitInfo``
    names it (``DELETE``, ``UPDATE``, ``MERGE``, ``WRITE``) and its parameters (no key, no
    predicate), the rows added (in the table schema, ``None``: none)."""

    operation: str
    parameters: Mapping[str, str]
    added: pa.Table | None = None


def commit_changes(
    source: TableSource,
    storage: Storage,
    *,
    snapshot: Snapshot,
    rewrites: Sequence[FileRewrite],
    what: LogCommit,
    config: Mapping[str, str],
    row_tracking: bool,
    marks: Sequence[FileMark] = (),
) -> tuple[Commit, dict[str, str], tuple[str, ...]]:
    """Commit version ``version + 1``: the removes and rewrites of ``rewrites``, the new deletion
    vectors of ``marks`` and the added rows.

    Returns the commit, per rewritten file (path) the URI of the file replacing it, and the
    URIs of the files holding the added rows. The removes repeat the live adds
    (:meth:`~lakehouse_index.source.TableSource.file_records`). On a lost race the new files
    are deleted and WriteConflictError is raised. With ``row_tracking`` (the table supports the
    feature) new files get fresh ``baseRowId``s above the high-water mark, which the commit
    advances, and kept rows keep their row ids and commit versions when tracking is enabled.
    """
    root = source.uri
    version = snapshot.version
    paths = [r.entry.path for r in rewrites] + [m.entry.path for m in marks]
    records = source.file_records(version, paths)
    missing = [p for p in paths if p not in records]
    moved = [
        m.entry.path
        for m in marks
        if m.entry.path in records and _dv_id(records[m.entry.path], root) != m.replaces
    ]
    if missing or moved:
        files = [*missing, *moved][:3]
        raise WriteConflictError(f"{root}: files {files} are no longer live as planned at version {version}")
    now = int(time.time() * 1000)
    cdf = is_true(config, "delta.enableChangeDataFeed")
    written: list[str] = []  # data and change-data files, deleted when the commit fails
    replaced: dict[str, str] = {}
    tracking = RowTracking.of(source, version, config) if row_tracking else None
    bases: dict[str, int] = {}
    high = tracking.high_water if tracking else -1
    for r in rewrites:
        if r.kept.num_rows:
            bases[r.entry.path] = high + 1
            high += r.kept.num_rows

    def remove(path: str) -> dict[str, Any]:
        rec = records[path]
        out: dict[str, Any] = {k: rec[k] for k in REMOVE_FIELDS if k in rec}
        out.update({"deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True})
        return {"remove": out}

    def cdc(path: str, erased: pa.Table, compression: str, int96: bool) -> dict[str, Any]:
        folder = relative_log_path(root, path).rsplit("/", 1)
        cdc_dir = join_uri(root, "_change_data", *folder[:-1])
        uri, size = _new_file(source, path, _cdc_rows(erased), compression, "cdc-00000", cdc_dir, int96=int96)
        written.append(uri)
        out = {
            "path": relative_log_path(root, uri),
            "partitionValues": records[path]["partitionValues"],
            "size": size,
            "dataChange": False,
        }
        return {"cdc": out}

    def file_actions(r: FileRewrite) -> list[dict[str, Any]]:
        rec = records[r.entry.path]
        out: list[dict[str, Any]] = [remove(r.entry.path)]
        if r.kept.num_rows:
            kept = tracking.kept_rows(source, snapshot, r, rec) if tracking else r.kept
            uri, size = _new_file(source, r.entry.path, kept, r.compression, "part-00000", int96=r.int96)
            written.append(uri)
            replaced[r.entry.path] = uri
            add: dict[str, Any] = {
                "path": relative_log_path(root, uri),
                "partitionValues": rec["partitionValues"],
                "size": size,
                "modificationTime": now,
                "dataChange": True,
                "stats": file_stats(r.kept, config),
            }
            if tracking:
                add.update({"baseRowId": bases[r.entry.path], "defaultRowCommitVersion": version + 1})
            out.append({"add": add})
        if cdf and r.erased.num_rows:
            out.append(cdc(r.entry.path, r.erased, r.compression, r.int96))
        return out

    def mark_actions() -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        kept = [m for m in marks if not m.removes_file]
        descriptors: list[DeletionVectorDescriptor] = []
        if kept:
            uri, descriptors = write_deletion_vectors(storage, root, kept)
            written.append(uri)
        for m in marks:
            if m.removes_file:
                out.append(remove(m.entry.path))
        for m, dv in zip(kept, descriptors, strict=True):
            rec = records[m.entry.path]
            add: dict[str, Any] = {
                k: rec[k]
                for k in ("path", "partitionValues", "size", "baseRowId", "defaultRowCommitVersion")
                if k in rec
            }
            add.update({"modificationTime": now, "dataChange": True, "deletionVector": descriptor_json(dv)})
            add["stats"] = m.stats
            out += [remove(m.entry.path), {"add": add}]
        for m in marks:
            if cdf and m.erased is not None and m.erased.num_rows:
                out.append(cdc(m.entry.path, m.erased, m.compression, m.int96))
        return out

    new_files: DeltaFiles | None = None
    added: list[tuple[tuple[tuple[str, Any], ...], pa.Table]] = []
    if what.added is not None and what.added.num_rows:
        new_files = DeltaFiles(storage, root, what.added.schema, snapshot.partition_columns)
        added = list(split(what.added, new_files.partition_columns))
    added_uris = [""] * len(added)
    added_counts = [0] * len(added)

    def added_file(i: int) -> list[dict[str, Any]]:
        assert new_files is not None
        opened = new_files.open(added[i][0])
        written.append(opened.uri)
        opened.write(added[i][1])
        done = opened.close()
        added_uris[i], added_counts[i] = opened.uri, done.rows
        add: dict[str, Any] = {
            "path": relative_log_path(root, opened.uri),
            "partitionValues": dict(done.partition_values),
            "size": done.size,
            "modificationTime": now,
            "dataChange": True,
            "stats": done.commit_info.decode(),
        }
        return [{"add": add}]

    removed_rows = sum(r.erased.num_rows for r in rewrites) + sum(m.removed for m in marks)
    kept_rows = sum(r.kept.num_rows for r in rewrites)
    added_rows = 0 if what.added is None else what.added.num_rows
    try:
        # Every file is written side by side: the rewrites, the deletion vectors, the added rows.
        jobs: list[Callable[[], list[dict[str, Any]]]] = [
            *(functools.partial(file_actions, r) for r in rewrites),
            mark_actions,
            *(functools.partial(added_file, i) for i in range(len(added))),
        ]
        done_jobs = each_file(lambda job: job(), jobs)
        actions = [a for per_job in done_jobs[: len(rewrites) + 1] for a in per_job]
        new = [a for per_job in done_jobs[len(rewrites) + 1 :] for a in per_job]
        if tracking:  # fresh row ids, in the order of the added files
            for a, count in zip(new, added_counts, strict=True):
                a["add"].update({"baseRowId": high + 1, "defaultRowCommitVersion": version + 1})
                high += count
        actions += new
        if tracking and high != tracking.high_water:
            domain = {
                "domain": ROW_TRACKING_DOMAIN,
                "configuration": json.dumps({"rowIdHighWaterMark": high}),
            }
            actions.append({"domainMetadata": {**domain, "removed": False}})
        info: dict[str, Any] = {
            "timestamp": now,
            "operation": what.operation,
            "operationParameters": dict(what.parameters),
            "operationMetrics": {
                "numRemovedFiles": str(len(rewrites) + sum(1 for m in marks if m.removes_file)),
                "numDeletionVectorsAdded": str(
                    sum(1 for m in marks if m.replaces is None and not m.removes_file)
                ),
                "numDeletionVectorsUpdated": str(
                    sum(1 for m in marks if m.replaces is not None and not m.removes_file)
                ),
                "numAddedFiles": str(sum(1 for r in rewrites if r.kept.num_rows) + len(new)),
                "numDeletedRows": str(removed_rows),
                "numCopiedRows": str(kept_rows),
                "numOutputRows": str(kept_rows + added_rows),
            },
            "readVersion": version,
            "isolationLevel": "Serializable",
            "isBlindAppend": False,
            "engineInfo": _engine(),
            "txnId": str(uuid.uuid4()),
        }
        log_dir = join_uri(root, "_delta_log")
        if is_true(config, "delta.enableInCommitTimestamps"):
            previous = _previous_ict(storage, log_dir, version)
            info = {"inCommitTimestamp": max(now, (previous or 0) + 1), **info}
        body = (
            "\n".join(json.dumps(a, separators=(",", ":")) for a in [{"commitInfo": info}, *actions]) + "\n"
        )
        storage.put_if_absent(join_uri(log_dir, f"{version + 1:020d}.json"), body.encode())
    except ObjectExistsError as e:
        delete_quietly(storage, written)
        raise WriteConflictError(f"{root}: another writer committed version {version + 1} first") from e
    except BaseException:
        delete_quietly(storage, written)
        raise
    done = Commit(version + 1, rows_written=added_rows, rows_deleted=removed_rows)
    return done, replaced, tuple(added_uris)
