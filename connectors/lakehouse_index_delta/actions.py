"""Typed Delta log actions, their parsing from commit JSON and checkpoint rows, and the
``add`` record a new commit repeats.

Only what the connector needs is kept: file actions (``add`` / ``remove``), table
``metaData`` and ``protocol``, the in-commit timestamp of ``commitInfo``, and the
V2-checkpoint actions (``checkpointMetadata``, ``sidecar``). Unknown action types are
ignored, as the protocol requires of readers.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from lakehouse_index.source import TableFormatError, relative_log_path
from lakehouse_index_delta.deletion_vectors import DeletionVectorDescriptor, descriptor_json
from lakehouse_index_delta.paths import resolve_path

_NUM_RECORDS = re.compile(r'"numRecords"\s*:\s*(\d+)')


class AddFile(NamedTuple):
    """An ``add`` action: a logical file (path + deletion vector) becomes live.

    A NamedTuple rather than a frozen dataclass: checkpoints hold 10^5+ of them and
    tuple construction is several times cheaper; it is just as immutable.
    """

    path: str  # canonical absolute URI, percent-decoded once
    size: int
    modification_time: int
    data_change: bool
    partition_values: tuple[tuple[str, str | None], ...]  # physical column name -> raw string
    num_records: int | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        """The logical file's identity: (path, deletion vector unique id)."""
        return (self.path, self.deletion_vector.id if self.deletion_vector else None)


class RemoveFile(NamedTuple):
    """A ``remove`` action: the logical file (path + deletion vector) stops being live."""

    path: str
    data_change: bool
    deletion_vector: DeletionVectorDescriptor | None = None
    deletion_timestamp: int | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        """The logical file's identity: (path, deletion vector unique id)."""
        return (self.path, self.deletion_vector.id if self.deletion_vector else None)


@dataclass(frozen=True)
class Protocol:
    """The ``protocol`` action: reader/writer versions and table features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Metadata:
    """The ``metaData`` action: schema, partition columns and table configuration."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...]
    configuration: tuple[tuple[str, str], ...] = ()
    created_time: int | None = None

    @property
    def config(self) -> dict[str, str]:
        """The table configuration as a dict."""
        return dict(self.configuration)


@dataclass(frozen=True)
class SidecarRef:
    """A V2 checkpoint's ``sidecar`` action: a Parquet file of file actions."""

    path: str  # as written: relative to _delta_log/_sidecars/ or absolute
    size_in_bytes: int | None = None


@dataclass(frozen=True)
class Actions:
    """The parsed content of one log file (commit, compaction or checkpoint part)."""

    adds: tuple[AddFile, ...] = ()
    removes: tuple[RemoveFile, ...] = ()
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    commit_info: Mapping[str, Any] | None = None
    sidecars: tuple[SidecarRef, ...] = ()
    has_checkpoint_metadata: bool = False
    #: Type of the file's first action (``commitInfo`` must come first with in-commit timestamps).
    first_action: str | None = None

    @property
    def in_commit_timestamp(self) -> int | None:
        """``commitInfo.inCommitTimestamp`` when present."""
        if self.commit_info is None:
            return None
        ts = self.commit_info.get("inCommitTimestamp")
        return int(ts) if ts is not None else None

    @property
    def operation(self) -> str | None:
        """``commitInfo.operation`` when present."""
        if self.commit_info is None:
            return None
        op = self.commit_info.get("operation")
        return str(op) if op is not None else None

    @property
    def blind_append(self) -> bool:
        """``commitInfo.isBlindAppend``: the commit only added rows, without reading the table
        (Spark writes it; deltalake does not, and an absent flag means False, as in Delta)."""
        return self.commit_info is not None and self.commit_info.get("isBlindAppend") is True


def _as_map(value: Any) -> dict[str, Any]:
    """A JSON object, or a pyarrow map (list of key/value tuples), as a dict."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    return dict(value)


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def parse_add(d: Mapping[str, Any], table_root: str, source: str) -> AddFile:
    """An ``add`` action from its JSON object (or an equivalent checkpoint row)."""
    try:
        stats = d.get("stats")
        num_records = None
        if stats:
            m = _NUM_RECORDS.search(stats)
            num_records = int(m.group(1)) if m else None
        dv = d.get("deletionVector")
        return AddFile(
            path=resolve_path(table_root, d["path"]),
            size=int(d["size"]),
            modification_time=int(d.get("modificationTime") or 0),
            data_change=bool(d.get("dataChange", True)),
            partition_values=tuple(sorted(_as_map(d.get("partitionValues")).items())),
            num_records=num_records,
            deletion_vector=DeletionVectorDescriptor.from_json(dv, table_root) if dv else None,
            base_row_id=_int_or_none(d.get("baseRowId")),
            default_row_commit_version=_int_or_none(d.get("defaultRowCommitVersion")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{source}: malformed add action {dict(d)!r}: {e!r}") from e


def add_record(a: AddFile, table_root: str) -> dict[str, Any]:
    """The ``add`` action of a live file as a new commit repeats it (JSON-able)."""
    rec: dict[str, Any] = {
        "path": relative_log_path(table_root, a.path),
        "partitionValues": dict(a.partition_values),
        "size": a.size,
        "modificationTime": a.modification_time,
        "dataChange": a.data_change,
    }
    if a.deletion_vector is not None:
        rec["deletionVector"] = descriptor_json(a.deletion_vector)
    if a.base_row_id is not None:
        rec["baseRowId"] = a.base_row_id
    if a.default_row_commit_version is not None:
        rec["defaultRowCommitVersion"] = a.default_row_commit_version
    if a.num_records is not None:
        rec["numRecords"] = a.num_records
    return rec


def parse_remove(d: Mapping[str, Any], table_root: str, source: str) -> RemoveFile:
    """A ``remove`` action from its JSON object (or an equivalent checkpoint row)."""
    try:
        dv = d.get("deletionVector")
        return RemoveFile(
            path=resolve_path(table_root, d["path"]),
            data_change=bool(d.get("dataChange", True)),
            deletion_vector=DeletionVectorDescriptor.from_json(dv, table_root) if dv else None,
            deletion_timestamp=_int_or_none(d.get("deletionTimestamp")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{source}: malformed remove action {dict(d)!r}: {e!r}") from e


def parse_protocol(d: Mapping[str, Any], source: str) -> Protocol:
    """A ``protocol`` action."""
    try:
        rf = d.get("readerFeatures")
        wf = d.get("writerFeatures")
        return Protocol(
            min_reader_version=int(d["minReaderVersion"]),
            min_writer_version=int(d.get("minWriterVersion") or 0),
            reader_features=tuple(rf) if rf is not None else None,
            writer_features=tuple(wf) if wf is not None else None,
        )
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{source}: malformed protocol action {dict(d)!r}: {e!r}") from e


def parse_metadata(d: Mapping[str, Any], source: str) -> Metadata:
    """A ``metaData`` action."""
    try:
        config = _as_map(d.get("configuration"))
        return Metadata(
            id=str(d.get("id") or ""),
            # Delta Live Tables may create a table before its schema is known.
            schema_string=str(d.get("schemaString") or '{"type":"struct","fields":[]}'),
            partition_columns=tuple(d.get("partitionColumns") or ()),
            configuration=tuple(sorted((str(k), str(v)) for k, v in config.items() if v is not None)),
            created_time=_int_or_none(d.get("createdTime")),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{source}: malformed metaData action: {e!r}") from e


#: Actions read into :class:`Actions` (their bodies must be JSON objects).
_PARSED = frozenset({"add", "remove", "metaData", "protocol", "commitInfo", "sidecar"})


def _parse_sidecar(d: Mapping[str, Any], source: str) -> SidecarRef:
    try:
        return SidecarRef(str(d["path"]), _int_or_none(d.get("sizeInBytes")))
    except (KeyError, TypeError, ValueError) as e:
        raise TableFormatError(f"{source}: malformed sidecar action {dict(d)!r}: {e!r}") from e


def parse_action_objects(objs: Iterable[Mapping[str, Any]], table_root: str, source: str) -> Actions:
    """Group action objects (one single-key object per action) into :class:`Actions`."""
    adds: list[AddFile] = []
    removes: list[RemoveFile] = []
    sidecars: list[SidecarRef] = []
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    commit_info: Mapping[str, Any] | None = None
    has_cp_meta = False
    first: str | None = None
    for obj in objs:
        if not isinstance(obj, dict):
            raise TableFormatError(f"{source}: an action is not a JSON object: {obj!r}")
        for kind, body in obj.items():
            if first is None:
                first = kind
            if body is None:
                continue
            if kind in _PARSED and not isinstance(body, dict):
                raise TableFormatError(f"{source}: a {kind} action is not a JSON object: {body!r}")
            if kind == "add":
                adds.append(parse_add(body, table_root, source))
            elif kind == "remove":
                removes.append(parse_remove(body, table_root, source))
            elif kind == "metaData":
                metadata = parse_metadata(body, source)
            elif kind == "protocol":
                protocol = parse_protocol(body, source)
            elif kind == "commitInfo":
                commit_info = body
            elif kind == "sidecar":
                sidecars.append(_parse_sidecar(body, source))
            elif kind == "checkpointMetadata":
                has_cp_meta = True
            # txn, cdc, domainMetadata, rowIdHighWaterMark, unknown: not needed to find live files.
    return Actions(
        adds=tuple(adds),
        removes=tuple(removes),
        protocol=protocol,
        metadata=metadata,
        commit_info=commit_info,
        sidecars=tuple(sidecars),
        has_checkpoint_metadata=has_cp_meta,
        first_action=first,
    )


def parse_json_lines(data: bytes, table_root: str, source: str) -> Actions:
    """Parse a newline-delimited JSON log file (commit, compaction, V2 checkpoint)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TableFormatError(f"{source}: not UTF-8 text: {e}") from e
    objs = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            objs.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise TableFormatError(f"{source}: line {lineno} is not valid JSON ({e.msg})") from e
    return parse_action_objects(objs, table_root, source)
