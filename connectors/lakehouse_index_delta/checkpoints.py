"""Reading Delta checkpoints: classic, multi-part and V2 (JSON or Parquet, with sidecars).

A checkpoint holds the reconciled state of its version: every live ``add``, the
``protocol`` and ``metaData``; ``remove`` tombstones are for VACUUM and are not read.
A V2 checkpoint may keep its file actions in sidecar Parquet files named by ``sidecar``
actions (paths relative to ``_delta_log/_sidecars/``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.source import FileIO, TableFormatError
from lakehouse_index_delta.actions import (
    Actions,
    AddFile,
    Metadata,
    Protocol,
    parse_action_objects,
    parse_json_lines,
    parse_metadata,
    parse_protocol,
)
from lakehouse_index_delta.live_files import AddColumns, LiveFiles, add_columns
from lakehouse_index_delta.log_files import Checkpoint
from lakehouse_index_delta.paths import resolve_path

#: The fields of ``add`` that are read (not ``tags``, ``clusteringProvider``, ...).
_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "stats_parsed.numRecords",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)


#: Rows decoded at a time.
_BATCH_ROWS = 8192

#: The actions read besides ``add`` (a handful of non-null rows among the adds' rows).
_OTHER_ACTIONS = ("metaData", "protocol", "sidecar", "checkpointMetadata")


def _has_field(t: pa.DataType, dotted: str) -> bool:
    """Whether struct type ``t`` has the (nested) field ``a.b.c``."""
    for name in dotted.split("."):
        if not pa.types.is_struct(t) or t.get_field_index(name) < 0:
            return False
        t = t.field(name).type
    return True


def _read_parquet(
    io: FileIO, uri: str, table_root: str, adds: list[AddColumns], *, adds_only: bool = False
) -> dict[str, list[dict[str, Any]]]:
    """The non-null rows of the other actions (dicts by action); the ``add`` rows go to ``adds``.

    The file is read a batch of rows at a time, selecting only the fields of ``add`` that
    are used (its stats and tags are most of the file); each batch is reduced before the
    next is read: the adds to their compact columns, the other actions (null in almost
    every row) to their few rows, and the pages it freed are returned to the OS when the
    file has more than one batch. One thread: decoding in the pool's threads kept more
    resident and was not faster.

    (A small checkpoint returns nothing: returning the pool's free pages to the OS makes the
    process's next reads fault fresh pages in, which slowed a cold lookup's first read of a
    data file after opening the table by some milliseconds.)
    """
    fs, path = io.arrow(uri)
    pool = pa.default_memory_pool()
    large = False
    try:
        with pq.ParquetFile(path, filesystem=fs) as pf:
            large = pf.metadata.num_rows > _BATCH_ROWS
            names = pf.schema_arrow.names
            other = [] if adds_only else [c for c in _OTHER_ACTIONS if c in names]
            columns = list(other)
            if "add" in names:
                add_type = pf.schema_arrow.field("add").type
                columns += [f"add.{f}" for f in _ADD_FIELDS if _has_field(add_type, f)] or ["add"]
            rows: dict[str, list[dict[str, Any]]] = {c: [] for c in other}
            for batch in pf.iter_batches(_BATCH_ROWS, columns=columns, use_threads=False) if columns else ():
                for c in other:
                    rows[c] += _non_null_rows(batch.column(c))
                if "add" in names:
                    adds.append(add_columns(batch.column("add"), table_root, uri))
                del batch
                if large:
                    pool.release_unused()
    except FileNotFoundError as e:
        raise TableFormatError(f"checkpoint file {uri} is missing") from e
    except (OSError, pa.ArrowInvalid) as e:
        raise TableFormatError(f"checkpoint file {uri} is not readable Parquet: {e}") from e
    if large:
        pool.release_unused()  # the reader's buffers of the whole file
    return rows


def _non_null_rows(arr: pa.StructArray) -> list[dict[str, Any]]:
    """The non-null rows of a struct column as dicts."""
    if arr.null_count == len(arr):
        return []
    arr = arr.filter(arr.is_valid())
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    # Column-wise conversion is several times faster than StructArray.to_pylist().
    values = {n: arr.field(n).to_pylist() for n in names}
    return [{n: values[n][i] for n in names} for i in range(len(arr))]


def _parquet_actions(io: FileIO, uri: str, table_root: str, adds: list[AddColumns]) -> Actions:
    rows = _read_parquet(io, uri, table_root, adds)
    meta, proto = rows.get("metaData"), rows.get("protocol")
    extra = parse_action_objects([{"sidecar": s} for s in rows.get("sidecar", ())], table_root, uri)
    return Actions(
        metadata=parse_metadata(meta[-1], uri) if meta else None,
        protocol=parse_protocol(proto[-1], uri) if proto else None,
        sidecars=extra.sidecars,
        has_checkpoint_metadata=bool(rows.get("checkpointMetadata")),
    )


def _sidecar_uri(log_uri: str, table_root: str, path: str) -> str:
    if "/" in path or ":" in path:
        try:
            return resolve_path(table_root, path)
        except ValueError as e:
            raise TableFormatError(f"checkpoint sidecar reference: {e}") from e
    return f"{log_uri}/_sidecars/{path}"


def read_checkpoint(
    io: FileIO, cp: Checkpoint, log_uri: str, table_root: str
) -> tuple[Protocol, Metadata, LiveFiles]:
    """Protocol, metadata and every live file of a complete checkpoint.

    Parquet ``add`` rows stay Arrow columns; those of JSON parts (V2 checkpoints) are objects.
    """
    columns: list[AddColumns] = []
    json_adds: list[AddFile] = []
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    for st in cp.files:
        if st.path.endswith(".json"):
            try:
                data = io.read_bytes(st.path)
            except FileNotFoundError as e:
                raise TableFormatError(f"checkpoint file {st.path} is missing") from e
            part = parse_json_lines(data, table_root, st.path)
            json_adds.extend(part.adds)
        else:
            part = _parquet_actions(io, st.path, table_root, columns)
        protocol = part.protocol or protocol
        metadata = part.metadata or metadata
        for sc in part.sidecars:
            _read_parquet(io, _sidecar_uri(log_uri, table_root, sc.path), table_root, columns, adds_only=True)
    names = ", ".join(s.path for s in cp.files)
    if protocol is None or metadata is None:
        raise TableFormatError(f"checkpoint {names} has no protocol or metaData action")
    live = LiveFiles(AddColumns.concat(columns) if columns else None)
    live.apply([Actions(adds=tuple(json_adds))], report=False)
    return protocol, metadata, live
