"""Purge of a Delta table's history: only the kept version stays readable, older traces go.

Steps, each safe to kill and to redo (the table stays readable at the kept version
throughout, because the checkpoint at that version is complete before anything is removed):

1. a classic-named checkpoint at the kept version (deltalake's ``create_checkpoint``; a V2
   checkpoint, with its ``checkpointMetadata`` action, for a table with the v2Checkpoint
   feature), unless one exists;
2. the checkpoint rewritten without ``remove`` tombstones: delta-rs keeps tombstones younger
   than ``delta.deletedFileRetentionDuration``, and their paths embed partition values (a
   subject's, for a table partitioned by it). The new file replaces the old by rename
   (atomic), and ``_last_checkpoint`` is rewritten to match;
3. every ``_delta_log`` file of an older version (commits, checkpoints, checksums,
   compactions), every other checkpoint of the kept version, and every sidecar file of V2
   checkpoints (the kept checkpoint has none);
4. the kept commit rewritten (by rename) without ``remove`` and ``cdc`` actions that name
   partition values or statistics (the erase's commit removes the subjects' files: in a table
   partitioned by a subject column, their paths hold the subject's value). Done once no older
   commit is left, so no reader can replay an older state onto the rewritten commit;
5. every file under the table that the kept version does not reference: removed data files,
   deletion-vector files, all ``_change_data/`` files. Top-level folders starting with ``_`` or
   ``.`` other than ``_change_data`` (``_lakehouse_index``, other tools' folders) are not touched,
   nor is the index root.

The kept version's commit JSON stays otherwise (its commit time is the version's timestamp).
"""

from __future__ import annotations

import json
import os
import re
from importlib.metadata import version
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.errors import UnsupportedFeatureError
from lakehouse_index.io import join_uri
from lakehouse_index.io.uri import local_path
from lakehouse_index.sink import purge_record
from lakehouse_index.sink.contract import TableWriter
from lakehouse_index.sink.history import (
    HistoryPurge,
    PurgedVersion,
    RemovedFiles,
    outside_purge,
    pause_point,
    remove_files,
)
from lakehouse_index.source import FileStatus
from lakehouse_index_delta.write.deltalake_ops import open_deltalake

LOG_DIR = "_delta_log"
#: The folder of V2 checkpoints' sidecar files, below ``_delta_log``.
SIDECARS = "_sidecars"
#: Table properties that ask for history to be kept: a purge overrides them only with ``force``.
RETENTION_SETTINGS = ("delta.logRetentionDuration", "delta.deletedFileRetentionDuration")
#: A ``_delta_log`` file name of one version (optionally a hidden Hadoop ``.crc`` companion).
_VERSIONED = re.compile(r"^\.?(\d{20})\.(.+)$")


def _deltalake(table: TableWriter, version: int | None = None) -> Any:
    return open_deltalake(table.uri, table.storage.options, version)


#: The deltalake release verified to write a classic-named V2 checkpoint (with its
#: ``checkpointMetadata`` action) for a table with the v2Checkpoint feature.
V2_CHECKPOINT_DELTALAKE = (1, 6, 6)


def check_supported(table: TableWriter) -> None:
    """UnsupportedFeatureError for a table whose history the purge cannot rewrite safely.

    A table with V2 checkpoints is purged when the installed deltalake writes V2 checkpoints
    (:data:`V2_CHECKPOINT_DELTALAKE` or later) and no classic-named checkpoint of the latest
    version keeps its file actions in sidecar files (their tombstones would survive).
    """
    dt = _deltalake(table)
    protocol = dt.protocol()
    features = set(protocol.reader_features or ()) | set(protocol.writer_features or ())
    config = dict(dt.metadata().configuration)
    if "v2Checkpoint" not in features and config.get("delta.checkpointPolicy", "classic") != "v2":
        return
    installed = version("deltalake")
    if _release(installed) < V2_CHECKPOINT_DELTALAKE:
        raise UnsupportedFeatureError(
            f"{table.uri}: the table uses the v2Checkpoint feature; deltalake {installed} may not write "
            f"its checkpoints (verified from {'.'.join(map(str, V2_CHECKPOINT_DELTALAKE))}), so its "
            "history cannot be purged safely here (nothing was changed)"
        )
    latest = dt.version()
    name = f"{latest:020d}.checkpoint.parquet"
    if table.storage.exists(_log_uri(table, name)):
        actions = pq.read_table(pa.BufferReader(table.storage.read_bytes(_log_uri(table, name))))
        if "sidecar" in actions.column_names and pc.any(actions.column("sidecar").is_valid()).as_py():
            raise UnsupportedFeatureError(
                f"{table.uri}: the checkpoint {name} keeps its file actions in sidecar files, whose "
                "removed-file tombstones a purge would have to rewrite; nothing was changed"
            )


def _release(text: str) -> tuple[int, ...]:
    """The leading numbers of a version string (``1.6.6`` → (1, 6, 6); ``2.0.0rc1`` → (2, 0, 0))."""
    return tuple(int(re.sub(r"\D.*$", "", part) or 0) for part in text.split(".")[:3])


def blockers(table: TableWriter) -> list[str]:
    """Retention settings of the table that ask to keep the history a purge removes."""
    config = dict(_deltalake(table).metadata().configuration)
    return [
        f"the table property {key} is set to {config[key]!r}: it asks to keep older versions "
        "(or removed files) for that long, and a purge removes them now"
        for key in RETENTION_SETTINGS
        if key in config
    ]


def _log_uri(table: TableWriter, name: str = "") -> str:
    return join_uri(table.uri, LOG_DIR, name) if name else join_uri(table.uri, LOG_DIR)


def _kept_log_names(keep: int) -> set[str]:
    """The ``_delta_log`` files of the kept version that stay."""
    v = f"{keep:020d}"
    return {f"{v}.json", f".{v}.json.crc", f"{v}.crc", f".{v}.crc.crc", f"{v}.checkpoint.parquet"}


def _old_log_files(table: TableWriter, keep: int) -> list[FileStatus]:
    """``_delta_log`` files of versions before ``keep``, the kept version's other checkpoint
    files, and every sidecar file (V2 checkpoints of older versions hold their file actions
    there; the kept classic-named checkpoint has none, see :func:`check_supported`)."""
    kept = _kept_log_names(keep)
    sidecars = _log_uri(table, SIDECARS) + "/"
    out = []
    for status in table.storage.list_tree(_log_uri(table)):
        if status.path.startswith(sidecars):
            out.append(status)
            continue
        name = status.path.rsplit("/", 1)[-1]
        m = _VERSIONED.match(name)
        if m is None:
            continue
        version = int(m.group(1))
        if version < keep or (version == keep and name not in kept):
            out.append(status)
    return sorted(out, key=lambda s: s.path)


def _table_files(table: TableWriter, keep: int) -> list[tuple[str, FileStatus]]:
    """Files under the table the kept version does not reference, with their category."""
    snap = table.source.snapshot(keep)
    referenced = set(snap.files)
    for entry in snap.files.values():
        if entry.deletes is not None:
            referenced.update(entry.deletes.files())
    root = table.uri.rstrip("/") + "/"
    index_root = table.index_root.rstrip("/") + "/"
    out = []
    for status in table.storage.list_tree(table.uri):
        if status.path.startswith(index_root) or not status.path.startswith(root):
            continue
        rel = status.path[len(root) :]
        if outside_purge(rel):
            continue
        directory, _, name = status.path.rpartition("/")
        if status.path in referenced:
            continue
        if name.startswith(".") and name.endswith(".crc") and f"{directory}/{name[1:-4]}" in referenced:
            continue  # a Hadoop checksum of a kept file
        if rel.startswith("_change_data/"):
            category = "change_data"
        elif name.startswith("deletion_vector_") and name.endswith(".bin"):
            category = "deletes"
        else:
            category = "data"
        out.append((category, status))
    return sorted(out, key=lambda c: c[1].path)


def _purged_versions(table: TableWriter, keep: int) -> list[PurgedVersion]:
    return [PurgedVersion(v.version, v.timestamp_ms) for v in table.source.versions() if v.version < keep]


def _replace(table: TableWriter, name: str, data: bytes) -> None:
    """Write ``_delta_log/<name>`` by renaming a complete temporary file over it (atomic)."""
    tmp = _log_uri(table, f".{name}.purge-tmp")
    table.storage.write_bytes(tmp, data)
    fs, tmp_path = table.storage.arrow(tmp)
    fs.move(tmp_path, table.storage.arrow(_log_uri(table, name))[1])
    table.storage.delete(_log_uri(table, f".{name}.crc"))  # a Hadoop checksum of the old content


def _checkpoint(table: TableWriter, keep: int) -> None:
    """Steps 1 and 2: a checkpoint at ``keep`` without tombstones, and ``_last_checkpoint`` naming it."""
    name = f"{keep:020d}.checkpoint.parquet"
    if not table.storage.exists(_log_uri(table, name)):
        _deltalake(table, keep).create_checkpoint()
    pause_point("checkpointed")
    actions = pq.read_table(pa.BufferReader(table.storage.read_bytes(_log_uri(table, name))))
    tombstones = actions.column("remove").is_valid()
    if pc.any(tombstones).as_py():
        actions = actions.filter(pc.invert(tombstones))
        sink = pa.BufferOutputStream()
        pq.write_table(actions, sink)
        data = sink.getvalue().to_pybytes()
        _replace(table, name, data)
    size = table.storage.stat(_log_uri(table, name)).size
    hint = {
        "version": keep,
        "size": actions.num_rows,
        "sizeInBytes": size,
        "numOfAddFiles": int(pc.sum(actions.column("add").is_valid()).as_py() or 0),
    }
    _replace(table, "_last_checkpoint", json.dumps(hint, separators=(",", ":")).encode())
    pause_point("tombstones-dropped")


def _traces(line: str) -> bool:
    """Whether a commit line is a ``remove`` or ``cdc`` action naming values: partition values
    (also embedded in its path) or statistics."""
    action = json.loads(line) if line.strip() else {}
    for kind in ("remove", "cdc"):
        body = action.get(kind)
        if body is not None and (body.get("partitionValues") or body.get("stats")):
            return True
    return False


def _scrub_kept_commit(table: TableWriter, keep: int) -> None:
    """Step 4: the kept commit without ``remove``/``cdc`` actions naming values.

    The erase's commit removes the subjects' files: for a table partitioned by a subject
    column their paths and partition values are the subject's. The checkpoint at ``keep``
    already holds the version's state, so no reader needs those actions (their files are
    gone; the change data of this version goes with them). Rewritten by rename; a local
    file keeps its modification time (the version's timestamp without in-commit timestamps).
    """
    name = f"{keep:020d}.json"
    uri = _log_uri(table, name)
    lines = table.storage.read_bytes(uri).decode().splitlines()
    kept = [line for line in lines if not _traces(line)]
    if len(kept) == len(lines):
        return
    mtime_ns = os.stat(local_path(uri)).st_mtime_ns if uri.startswith("file:") else None
    _replace(table, name, ("\n".join(kept) + "\n").encode())
    if mtime_ns is not None:
        os.utime(local_path(uri), ns=(mtime_ns, mtime_ns))


def purge(table: TableWriter, keep: int, dry_run: bool) -> HistoryPurge:
    """Make ``keep`` (the latest version) the only readable version; remove every older trace."""
    check_supported(table)
    old_log = _old_log_files(table, keep)
    files = _table_files(table, keep)
    removed = RemovedFiles.of([("log", s) for s in old_log] + files)
    purged = _purged_versions(table, keep)
    if dry_run:
        return HistoryPurge("delta", keep, keep, tuple(purged), (), removed, True)
    record, path = purge_record.write_record(
        table.storage, table.index_root, purge_record.new_record("delta", table.uri, keep, keep, purged)
    )
    pause_point("recorded")
    _checkpoint(table, keep)
    old_log = _old_log_files(table, keep)  # again: with any temporary a killed rewrite left
    for i, status in enumerate(old_log):
        table.storage.delete(status.path)
        if i == len(old_log) // 2:
            pause_point("log-half-removed")
    pause_point("log-removed")
    # After the older commits: no reader can replay onto the kept commit any more.
    _scrub_kept_commit(table, keep)
    pause_point("commit-scrubbed")
    remove_files(table.storage, table.uri, table.index_root, [status.path for _, status in files])
    return HistoryPurge("delta", keep, keep, record.purged, (), removed, False, path)
