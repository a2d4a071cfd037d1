"""Delta schemas as Arrow, column mapping, and typed partition values.

The table schema (``metaData.schemaString``) is converted to contract :class:`Column`s
in schema order. With column mapping (``delta.columnMapping.mode`` = ``name`` or
``id``) every field, top-level or nested in structs, lists and maps, carries
``delta.columnMapping.physicalName`` (its name in data files and, for partition
columns, in ``partitionValues``) and ``delta.columnMapping.id`` (its Parquet field id,
used by readers in ``id`` mode). The elements of lists and the keys and values of maps
have no field of their own: their ids (``icebergCompatV2``) are kept in
``delta.columnMapping.nested.ids`` of the nearest enclosing field, keyed by that field's
physical name followed by ``.element``, ``.key`` or ``.value`` once per level. Both are
handed to readers as the column's :class:`~lakehouse_index.source.Subfield` tree.

Partition values are strings in the log and are typed here from the schema: dates,
timestamps (Spark ``YYYY-MM-DD HH:MM:SS[.ffffff]``, delta-rs and ISO-8601 forms; UTC
for ``timestamp``, naive for ``timestamp_ntz``), decimals, integers, floats, booleans
and binary. A null (or an empty string, which Spark writes for nulls of non-string
partitions) is ``None``.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.source import (
    ELEMENT,
    KEY,
    VALUE,
    Column,
    Subfield,
    TableFormatError,
    UnsupportedFeatureError,
)
from lakehouse_index_delta.actions import Metadata

_DECIMAL = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
# A variant value is stored as a struct of two binaries (the variantType feature).
_VARIANT = pa.struct([pa.field("value", pa.binary(), False), pa.field("metadata", pa.binary(), False)])

PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
FIELD_ID_KEY = "delta.columnMapping.id"
NESTED_IDS_KEY = "delta.columnMapping.nested.ids"


def arrow_type(t: Any, source: str) -> pa.DataType:
    """The Arrow type of a Delta schema type (a string or a nested type object)."""
    if isinstance(t, str):
        if t in _PRIMITIVES:
            return _PRIMITIVES[t]
        m = _DECIMAL.match(t)
        if m:
            return pa.decimal128(int(m.group(1)), int(m.group(2)))
        if t == "variant":
            return _VARIANT
        raise UnsupportedFeatureError(f"{source}: unsupported Delta type {t!r}")
    if isinstance(t, dict):
        kind = t.get("type")
        if kind == "struct":
            return pa.struct(
                [
                    pa.field(f["name"], arrow_type(f["type"], source), bool(f.get("nullable", True)))
                    for f in t.get("fields", [])
                ]
            )
        if kind == "array":
            item = pa.field(
                "element", arrow_type(t["elementType"], source), bool(t.get("containsNull", True))
            )
            return pa.list_(item)
        if kind == "map":
            return pa.map_(
                arrow_type(t["keyType"], source),
                pa.field("value", arrow_type(t["valueType"], source), bool(t.get("valueContainsNull", True))),
            )
    raise TableFormatError(f"{source}: malformed schema type {t!r}")


@dataclass(frozen=True)
class TableSchema:
    """A snapshot's columns plus what is needed to type its partition values."""

    columns: tuple[Column, ...]
    partition_columns: tuple[str, ...]  # logical names, in metaData order
    mapping_mode: str
    #: (logical name, physical name, Delta type string) per partition column.
    partition_fields: tuple[tuple[str, str, str], ...]

    def partition_values(
        self, raw: Sequence[tuple[str, str | None]], source: str
    ) -> tuple[tuple[str, Any], ...]:
        """Typed partition values keyed by logical column name, in partition column order."""
        values = dict(raw)
        out = []
        for logical, physical, dtype in self.partition_fields:
            if physical in values:
                s = values[physical]
            elif logical in values:  # tolerated: some writers key by logical name
                s = values[logical]
            else:
                raise TableFormatError(f"{source}: partition value of column {logical!r} is missing")
            out.append((logical, parse_partition_value(s, dtype, source)))
        return tuple(out)


def table_schema(
    schema_string: str, partition_columns: Sequence[str], config: Mapping[str, str], source: str
) -> TableSchema:
    """Columns of a ``metaData`` action, column mapping applied."""
    try:
        schema = json.loads(schema_string)
        fields = schema["fields"]
    except (ValueError, KeyError, TypeError) as e:
        raise TableFormatError(f"{source}: schemaString is not a Delta struct type: {e!r}") from e
    mode = config.get("delta.columnMapping.mode", "none").lower()
    if mode not in ("none", "name", "id"):
        raise UnsupportedFeatureError(f"{source}: column mapping mode {mode!r} is not supported")
    parts = set(partition_columns)
    columns = []
    partition_fields = {}
    for f in fields:
        name = f["name"]
        top = _subfield(f, mode, source)
        columns.append(
            Column(
                name=name,
                type=arrow_type(f["type"], source),
                nullable=bool(f.get("nullable", True)),
                physical_name=top.physical_name,
                field_id=top.field_id,
                in_data_files=name not in parts,
                subfields=top.children,
            )
        )
        physical = top.physical_name
        if name in parts:
            if not isinstance(f["type"], str):
                raise TableFormatError(f"{source}: partition column {name!r} has a nested type")
            partition_fields[name] = (name, physical or name, f["type"])
    missing = [p for p in partition_columns if p not in partition_fields]
    if missing:
        raise TableFormatError(f"{source}: partition columns {missing} are not in the schema")
    return TableSchema(
        columns=tuple(columns),
        partition_columns=tuple(partition_columns),
        mapping_mode=mode,
        partition_fields=tuple(partition_fields[p] for p in partition_columns),
    )


class Schemas:
    """The :class:`TableSchema` of each ``metaData`` action met, built once (a table has few)."""

    def __init__(self, log_uri: str) -> None:
        self._log_uri = log_uri
        self._by_metadata: dict[Metadata, TableSchema] = {}

    def of(self, metadata: Metadata) -> TableSchema:
        """The schema of ``metadata``."""
        s = self._by_metadata.get(metadata)
        if s is None:
            s = table_schema(
                metadata.schema_string,
                metadata.partition_columns,
                metadata.config,
                f"{self._log_uri} (table {metadata.id})",
            )
            self._by_metadata[metadata] = s
        return s


def _subfield(f: Any, mode: str, source: str) -> Subfield:
    """Where one struct field (and everything nested in it) is stored, under mapping ``mode``."""
    if not isinstance(f, dict) or not isinstance(f.get("name"), str):
        raise TableFormatError(f"{source}: malformed struct field {f!r}")
    name = f["name"]
    if mode == "none":  # stored under the logical names: the defaults
        return Subfield(name)
    meta = f.get("metadata") or {}
    physical = meta.get(PHYSICAL_NAME_KEY)
    if not isinstance(physical, str) or not physical:
        raise TableFormatError(f"{source}: column {name!r} has no physical name under column mapping")
    nested_ids = meta.get(NESTED_IDS_KEY) or {}
    if not isinstance(nested_ids, dict):
        raise TableFormatError(f"{source}: {NESTED_IDS_KEY} of column {name!r} is not an object")
    return Subfield(
        name,
        physical_name=physical,
        field_id=_field_id(meta.get(FIELD_ID_KEY), mode, name, source),
        children=_children(f["type"], nested_ids, physical, mode, source),
    )


def _children(
    t: Any, nested_ids: Mapping[str, Any], path: str, mode: str, source: str
) -> tuple[Subfield, ...]:
    """Subfields of Delta type ``t``; ``path`` keys the ids of list and map slots in ``nested_ids``."""
    if not isinstance(t, dict):
        return ()
    kind = t.get("type")
    if kind == "struct":
        return tuple(_subfield(f, mode, source) for f in t.get("fields", []))

    def slot(name: str, slot_type: Any) -> Subfield:
        key = f"{path}.{name}"
        return Subfield(
            name,
            field_id=_field_id(nested_ids.get(key), mode, key, source),
            children=_children(slot_type, nested_ids, key, mode, source),
        )

    if kind == "array":
        return (slot(ELEMENT, t.get("elementType")),)
    if kind == "map":
        return (slot(KEY, t.get("keyType")), slot(VALUE, t.get("valueType")))
    return ()


def _field_id(raw: Any, mode: str, name: str, source: str) -> int | None:
    """A Parquet field id from the schema (used only in ``id`` mode, as the protocol says)."""
    if mode != "id" or raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise TableFormatError(f"{source}: field id {raw!r} of {name!r} is not an integer")
    try:
        return int(raw)
    except ValueError as e:
        raise TableFormatError(f"{source}: field id {raw!r} of {name!r} is not an integer") from e


def _parse_timestamp(s: str, with_tz: bool) -> dt.datetime:
    text = s.strip()
    # Python < 3.11 fromisoformat cannot parse 'Z' or fractions that are not 3 or 6 digits;
    # normalise both. Nanosecond fractions are truncated to microseconds.
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    m = re.match(r"^(.*?[T ]\d{2}:\d{2}:\d{2})(\.\d+)?(.*)$", text)
    if m:
        frac = m.group(2) or ""
        if frac:
            frac = "." + (frac[1:] + "000000")[:6]
        text = m.group(1) + frac + m.group(3)
    value = dt.datetime.fromisoformat(text)
    if with_tz:
        # Spark's form has no zone and is UTC; ISO forms carry an offset.
        return (
            value.replace(tzinfo=dt.timezone.utc)
            if value.tzinfo is None
            else value.astimezone(dt.timezone.utc)
        )
    return (
        value.replace(tzinfo=None)
        if value.tzinfo is None
        else value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    )


def parse_partition_value(s: str | None, dtype: str, source: str) -> Any:
    """A typed Python value from a serialized Delta partition value."""
    if s is None:
        return None
    if s == "" and dtype != "string":
        return None
    try:
        if dtype == "string":
            # Spark never writes an empty-string partition value (it becomes null).
            return s if s != "" else None
        if dtype in ("long", "integer", "short", "byte"):
            return int(s)
        if dtype in ("float", "double"):
            return float(s)
        if dtype == "boolean":
            low = s.lower()
            if low not in ("true", "false"):
                raise ValueError(f"not a boolean: {s!r}")
            return low == "true"
        if dtype == "date":
            return dt.date.fromisoformat(s.strip()[:10])
        if dtype == "timestamp":
            return _parse_timestamp(s, with_tz=True)
        if dtype == "timestamp_ntz":
            return _parse_timestamp(s, with_tz=False)
        if _DECIMAL.match(dtype):
            return decimal.Decimal(s)
        if dtype == "binary":
            # Serialized as a string of escaped bytes: each character is one byte.
            try:
                return s.encode("latin-1")
            except UnicodeEncodeError:
                return s.encode("utf-8")
    except (ValueError, decimal.InvalidOperation) as e:
        raise TableFormatError(f"{source}: partition value {s!r} is not a valid {dtype}: {e}") from e
    raise UnsupportedFeatureError(f"{source}: partition column type {dtype!r} is not supported")
