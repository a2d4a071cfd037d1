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

from connectors.delta.actions import (
    Actions,
    AddFile,
    Metadata,
    Protocol,
    parse_action_objects,
    parse_add,
    parse_json_lines,
    parse_metadata,
    parse_protocol,
)
from connectors.delta.log_files import Checkpoint
from connectors.delta.paths import resolve_path
from lakehouse_index.source import FileIO, TableFormatError

_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
)


def _read_parquet(io: FileIO, uri: str, wanted: tuple[str, ...]) -> pa.Table:
    fs, path = io.arrow(uri)
    try:
        pf = pq.ParquetFile(path, filesystem=fs)
        present = [c for c in wanted if c in pf.schema_arrow.names]
        return pf.read(columns=present)
    except FileNotFoundError as e:
        raise TableFormatError(f"checkpoint file {uri} is missing") from e
    except (OSError, pa.ArrowInvalid) as e:
        raise TableFormatError(f"checkpoint file {uri} is not readable Parquet: {e}") from e


def _rows(table: pa.Table, column: str, fields: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Non-null rows of a struct column as dicts (only ``fields`` when given)."""
    if column not in table.column_names:
        return []
    arr = table.column(column).combine_chunks()
    arr = arr.filter(arr.is_valid())
    if len(arr) == 0:
        return []
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    keep = [n for n in names if fields is None or n in fields]
    # Column-wise conversion is several times faster than StructArray.to_pylist().
    values = {n: arr.field(n).to_pylist() for n in keep}
    return [{n: values[n][i] for n in keep} for i in range(len(arr))]


def _parquet_actions(io: FileIO, uri: str, table_root: str) -> Actions:
    table = _read_parquet(io, uri, ("add", "metaData", "protocol", "sidecar", "checkpointMetadata"))
    adds = tuple(parse_add(d, table_root, uri) for d in _rows(table, "add", _ADD_FIELDS))
    meta = _rows(table, "metaData")
    proto = _rows(table, "protocol")
    sidecars = _rows(table, "sidecar")
    extra = parse_action_objects([{"sidecar": s} for s in sidecars], table_root, uri)
    metadata: Metadata | None = parse_metadata(meta[-1], uri) if meta else None
    protocol: Protocol | None = parse_protocol(proto[-1], uri) if proto else None
    return Actions(
        adds=adds,
        metadata=metadata,
        protocol=protocol,
        sidecars=extra.sidecars,
        has_checkpoint_metadata=bool(_rows(table, "checkpointMetadata")),
    )


def _sidecar_uri(log_uri: str, table_root: str, path: str) -> str:
    if "/" in path or ":" in path:
        return resolve_path(table_root, path)
    return f"{log_uri}/_sidecars/{path}"


def read_checkpoint(
    io: FileIO, cp: Checkpoint, log_uri: str, table_root: str
) -> tuple[Protocol, Metadata, list[AddFile]]:
    """Protocol, metadata and every live file of a complete checkpoint."""
    adds: list[AddFile] = []
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    for st in cp.files:
        if st.path.endswith(".json"):
            try:
                data = io.read_bytes(st.path)
            except FileNotFoundError as e:
                raise TableFormatError(f"checkpoint file {st.path} is missing") from e
            part = parse_json_lines(data, table_root, st.path)
        else:
            part = _parquet_actions(io, st.path, table_root)
        adds.extend(part.adds)
        protocol = part.protocol or protocol
        metadata = part.metadata or metadata
        for sc in part.sidecars:
            uri = _sidecar_uri(log_uri, table_root, sc.path)
            side = _read_parquet(io, uri, ("add",))
            adds.extend(parse_add(d, table_root, uri) for d in _rows(side, "add", _ADD_FIELDS))
    names = ", ".join(s.path for s in cp.files)
    if protocol is None or metadata is None:
        raise TableFormatError(f"checkpoint {names} has no protocol or metaData action")
    return protocol, metadata, adds
