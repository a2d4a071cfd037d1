"""Iceberg schemas as contract columns, and typed identity-partition values.

Columns carry the Iceberg field id of every field at every depth (struct fields, list
``element-id``, map ``key-id`` / ``value-id``) and the names the table's name mapping
(``schema.name-mapping.default``) gives fields in data files written without ids.
Arrow types are pyiceberg's, with the plain (not ``large_``) string, binary and list
types. Partition values come from the identity fields of a file's partition spec, keyed
by the source column's name in the given schema and typed as that column's values.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from pyiceberg.io.pyarrow import schema_to_pyarrow
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.name_mapping import parse_mapping_from_json
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    DateType,
    IcebergType,
    ListType,
    MapType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
)

from lakehouse_index.source import ELEMENT, KEY, VALUE, Column, Subfield, TableFormatError
from lakehouse_index_iceberg.manifests import ContentFile

#: Name under which v3 row lineage is exposed (Iceberg's reserved ``_row_id`` column).
ROW_ID_COLUMN = "_row_id"
#: Field id of the materialized ``_row_id`` column in v3 data files.
ROW_ID_FIELD_ID = 2147483540
#: The table property holding the names of fields in data files without field ids.
NAME_MAPPING = "schema.name-mapping.default"

_EPOCH = dt.datetime(1970, 1, 1)


def name_mapping(properties: Mapping[str, str]) -> dict[int, tuple[str, ...]]:
    """Field id → the names the table's name mapping gives it (empty without a mapping)."""
    text = properties.get(NAME_MAPPING)
    if not text:
        return {}
    try:
        mapping = parse_mapping_from_json(text)
    except ValueError as e:
        raise TableFormatError(f"table property {NAME_MAPPING} is not a valid name mapping: {e}") from e
    out: dict[int, tuple[str, ...]] = {}
    pending = list(mapping)
    while pending:
        f = pending.pop()
        if f.field_id is not None:
            out[f.field_id] = tuple(f.names)
        pending.extend(f.fields)
    return out


def columns(schema: Schema, mapped: Mapping[int, tuple[str, ...]]) -> tuple[Column, ...]:
    """The schema's top-level columns, with the field ids of every nested field and the names
    ``mapped`` (the name mapping) gives fields in data files without ids."""
    arrow = schema_to_pyarrow(schema, include_field_ids=False)
    return tuple(
        Column(
            name=f.name,
            type=_plain(arrow.field(f.name).type),
            nullable=not f.required,
            field_id=f.field_id,
            subfields=_subfields(f.field_type, mapped),
            file_names=mapped.get(f.field_id, ()),
        )
        for f in schema.fields
    )


def _subfields(t: IcebergType, mapped: Mapping[int, tuple[str, ...]]) -> tuple[Subfield, ...]:
    """Struct fields, list elements, map keys and values of ``t`` with their field ids (and
    mapped names: :func:`columns`)."""

    def sub(name: str, field_id: int, inner: IcebergType) -> Subfield:
        return Subfield(
            name, field_id=field_id, children=_subfields(inner, mapped), file_names=mapped.get(field_id, ())
        )

    if isinstance(t, StructType):
        return tuple(sub(f.name, f.field_id, f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return (sub(ELEMENT, t.element_id, t.element_type),)
    if isinstance(t, MapType):
        return (sub(KEY, t.key_id, t.key_type), sub(VALUE, t.value_id, t.value_type))
    return ()


def _plain(t: pa.DataType) -> pa.DataType:
    """pyiceberg maps strings/binaries/lists to Arrow's large variants; use the plain ones."""
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_plain(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_plain(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_plain(t.key_type)), t.item_field.with_type(_plain(t.item_type)))
    return t


def partition_columns(spec: PartitionSpec, schema: Schema) -> tuple[str, ...]:
    """Names of the columns ``spec`` partitions by identity (those ``schema`` still has)."""
    out = []
    for pf in spec.fields:
        if isinstance(pf.transform, IdentityTransform):
            f = schema.find_field(pf.source_id) if pf.source_id in schema.field_ids else None
            if f is not None:
                out.append(f.name)
    return tuple(out)


def partition_values(
    spec: PartitionSpec | None, f: ContentFile, schema: Schema
) -> tuple[tuple[str, Any], ...]:
    """Identity-partition values of ``f`` (written under ``spec``) keyed by the source column's
    name in ``schema``, typed."""
    if spec is None:
        return ()
    out = []
    for i, pf in enumerate(spec.fields):
        if not isinstance(pf.transform, IdentityTransform) or i >= len(f.partition):
            continue
        if pf.source_id not in schema.field_ids:
            continue
        col = schema.find_field(pf.source_id)
        out.append((col.name, _typed(f.partition[i], col.field_type)))
    return tuple(out)


def _typed(value: Any, t: IcebergType) -> Any:
    """A partition value as decoded from Avro, as the Python value of the column type."""
    if value is None:
        return None
    if isinstance(t, DateType):
        return (_EPOCH + dt.timedelta(days=value)).date()
    if isinstance(t, TimeType):
        return (_EPOCH + dt.timedelta(microseconds=value)).time()
    if isinstance(t, TimestampType):
        return _EPOCH + dt.timedelta(microseconds=value)
    if isinstance(t, TimestamptzType):
        return (_EPOCH + dt.timedelta(microseconds=value)).replace(tzinfo=dt.timezone.utc)
    if isinstance(t, (TimestampNanoType, TimestamptzNanoType)):
        # Python datetimes stop at microseconds: keep nanoseconds exactly as an int.
        return int(value)
    if isinstance(value, bytes) and str(t) == "uuid":
        return uuid.UUID(bytes=value)
    return value
