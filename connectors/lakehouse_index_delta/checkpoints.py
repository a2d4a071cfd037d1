"""Reading Delta checkpoints: classic, multi-part and V2 (JSON or Parquet, with sidecars).

A checkpoint holds the reconciled state of its version: every live ``add``, the
``protocol`` and ``metaData``; ``remove`` tombstones are for VACUUM and are not read.
A V2 checkpoint may keep its file actions in sidecar Parquet files named by ``sidecar``
actions (paths relative to ``_delta_log/_sidecars/``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
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
from lakehouse_index_delta.deletion_vectors import DeletionVectorDescriptor
from lakehouse_index_delta.log_files import Checkpoint
from lakehouse_index_delta.paths import resolve_path

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


def _adds(table: pa.Table, table_root: str, source: str) -> list[AddFile]:
    """The ``add`` rows of a checkpoint table, converted column-wise.

    Checkpoints of large tables hold 10^5..10^6 adds: converting whole columns with
    pyarrow and special-casing the common forms (relative paths without escapes, no
    deletion vector) is several times faster than parsing row by row.
    """
    if "add" not in table.column_names:
        return []
    arr = table.column("add").combine_chunks()
    arr = arr.filter(arr.is_valid())
    n = len(arr)
    if n == 0:
        return []
    names = {arr.type.field(i).name for i in range(arr.type.num_fields)}
    if not {"path", "size"} <= names:
        raise TableFormatError(f"{source}: add column lacks path or size")
    raw_paths = arr.field("path")
    if raw_paths.null_count:
        raise TableFormatError(f"{source}: an add action has no path")
    plain = pc.invert(pc.match_substring_regex(raw_paths, r"[%:]")).to_pylist()
    paths = [
        f"{table_root}/{p}" if simple else resolve_path(table_root, p)
        for p, simple in zip(raw_paths.to_pylist(), plain, strict=True)
    ]
    sizes = arr.field("size").to_pylist()
    if any(x is None for x in sizes):
        raise TableFormatError(f"{source}: an add action has no size")
    mtimes = (
        arr.field("modificationTime").fill_null(0).to_pylist() if "modificationTime" in names else [0] * n
    )
    data_change = arr.field("dataChange").fill_null(True).to_pylist() if "dataChange" in names else [True] * n
    num_records: list[int | None] = [None] * n
    if "stats_parsed" in names and "numRecords" in {f.name for f in arr.type.field("stats_parsed").type}:
        num_records = arr.field("stats_parsed").field("numRecords").to_pylist()
    if "stats" in names:
        extracted = pc.extract_regex(arr.field("stats"), r'"numRecords"\s*:\s*(?P<n>\d+)')
        from_json = pc.struct_field(extracted, "n").cast(pa.int64()).to_pylist()
        num_records = [a if a is not None else b for a, b in zip(num_records, from_json, strict=True)]
    parts: list[tuple[tuple[str, str | None], ...]] = [()] * n
    if "partitionValues" in names:
        interned: dict[tuple[tuple[str, str | None], ...], tuple[tuple[str, str | None], ...]] = {}
        for i, pv in enumerate(arr.field("partitionValues").to_pylist()):
            if pv:
                key = tuple(sorted(pv))
                parts[i] = interned.setdefault(key, key)
    dvs: list[DeletionVectorDescriptor | None] = [None] * n
    if "deletionVector" in names:
        dv_col = arr.field("deletionVector")
        if dv_col.null_count < n:
            for i, dv in enumerate(dv_col.to_pylist()):
                if dv is not None and dv.get("storageType") is not None:
                    try:
                        dvs[i] = DeletionVectorDescriptor.from_json(dv, table_root)
                    except (KeyError, TypeError, ValueError) as e:
                        raise TableFormatError(f"{source}: malformed deletionVector {dv!r}: {e!r}") from e
    base_row_ids = arr.field("baseRowId").to_pylist() if "baseRowId" in names else [None] * n
    default_versions = (
        arr.field("defaultRowCommitVersion").to_pylist() if "defaultRowCommitVersion" in names else [None] * n
    )
    return [
        AddFile(
            paths[i],
            sizes[i],
            mtimes[i],
            data_change[i],
            parts[i],
            num_records[i],
            dvs[i],
            base_row_ids[i],
            default_versions[i],
        )
        for i in range(n)
    ]


def _parquet_actions(io: FileIO, uri: str, table_root: str) -> Actions:
    table = _read_parquet(io, uri, ("add", "metaData", "protocol", "sidecar", "checkpointMetadata"))
    adds = tuple(_adds(table, table_root, uri))
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
            adds.extend(_adds(_read_parquet(io, uri, ("add",)), table_root, uri))
    names = ", ".join(s.path for s in cp.files)
    if protocol is None or metadata is None:
        raise TableFormatError(f"checkpoint {names} has no protocol or metaData action")
    return protocol, metadata, adds
