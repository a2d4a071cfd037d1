"""Layout of skipping rows: reserved columns, per-column statistics struct, column identity.

One row per source data file, stored as Parquet (one file per build or refresh)::

    _file_id  int64     the file id from the log's file-id map (lineage)
    _rows     int64     rows in the file (row-level deletes ignored, see below)
    <column>  struct    one per indexed column, named after it:
        min, max   <column type>   over the non-null, non-NaN values (null if there are none)
        nulls      int64           null count
        nans       int64           NaN count (floating columns; 0 otherwise)
        values     list<type>      the distinct non-null values, sorted, when there are at most
                                   ``spec.max_values`` of them (else null)
        bloom      binary          a split-block bloom filter of the distinct values when there are
                                   more than ``max_values`` of them (else null)

Full builds write a ``Level.BASE`` file, refreshes a ``Level.DELTA`` file with the rows of
the files they added; :func:`load` merges them (the later row for a file id wins) and
keeps only the ids live in the version being queried. Removed files need no tombstone:
lineage (the live ids) drops them. Row-level deletes (deletion vectors, position and
equality deletes) need nothing either: statistics over a superset of the live rows are
conservative, so files are read with ``apply_deletes=False`` and never re-read when their
deletes change. Files the index does not cover (appended since) are always kept.

Each file's Parquet metadata records the identity of every indexed column (physical
name, field id, type; :func:`column_identity`). Given the queried snapshot, :func:`load`
leaves out the statistics of a column that was since dropped and re-added, renamed
over, or retyped other than by widening: names alone would let an old column's
statistics prune the new column's files.

"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.expressions.types import Family, family
from lakehouse_index.kinds.columns import require_columns
from lakehouse_index.kinds.derived import IndexedColumns, indexed_columns
from lakehouse_index.kinds.skipping.hashing import encoding
from lakehouse_index.source import Snapshot
from lakehouse_index.spec import SkippingIndex

FILE_ID = "_file_id"
ROWS = "_rows"
RESERVED = (FILE_ID, ROWS)
#: Parquet key-value metadata of a skipping file: JSON of :func:`column_identity`.
IDENTITY_KEY = b"lakehouse_index.skipping.columns"


def validate_spec(spec: SkippingIndex, snapshot: Snapshot) -> None:
    """Every column exists (an indexed expression binds to the table's schema), is a type the
    index can summarise, and no name clashes with ours."""
    stored = indexed_columns(spec, snapshot)
    require_columns(spec.name, stored.sources, snapshot, RESERVED)
    for col in spec.columns:
        t = stored.schema.field(col).type
        if encoding(t) is None:
            raise InvalidIndexSpecError(
                f"index {spec.name!r}: column {col!r} has type {t}, which a skipping index cannot "
                "summarise (use numbers, decimals, strings, binaries, booleans, dates or timestamps)"
            )


def column_type(t: pa.DataType) -> pa.StructType:
    return pa.struct(
        [
            pa.field("min", t),
            pa.field("max", t),
            pa.field("nulls", pa.int64(), nullable=False),
            pa.field("nans", pa.int64(), nullable=False),
            pa.field("values", pa.list_(t)),
            pa.field("bloom", pa.binary()),
        ]
    )


def column_identity(snapshot: Snapshot, stored: IndexedColumns) -> dict[str, dict[str, Any]]:
    """What identifies each indexed column beyond its name: physical name, field id, type; for
    an indexed expression its type and the identity of each column it reads (``sources``).

    Recorded in the skipping file's Parquet metadata (key :data:`IDENTITY_KEY`) so that
    :func:`load` can refuse statistics of a column that was dropped and re-added, or
    renamed over another one, since they were computed.
    """

    def of(name: str) -> dict[str, Any]:
        col = snapshot.column(name)
        return {"storedName": col.stored_name, "fieldId": col.field_id, "type": str(col.type)}

    out: dict[str, dict[str, Any]] = {}
    for name in stored.names:
        tree = stored.tree(name)
        if tree is None:
            out[name] = of(name)
        else:
            sources = {c: of(c) for c in stored.sources_of([name])}
            out[name] = {"type": str(tree.type), "sources": sources}
    return out


def identity_metadata(identity: Mapping[str, Any]) -> dict[bytes, str]:
    """Parquet key-value metadata recording column ``identity`` (see :func:`column_identity`)."""
    return {IDENTITY_KEY: json.dumps(identity)}


def recorded_identity(schema: pa.Schema) -> dict[str, dict[str, Any]]:
    """The column identity recorded in a skipping file's ``schema`` (empty if none)."""
    raw = (schema.metadata or {}).get(IDENTITY_KEY)
    return json.loads(raw) if raw else {}


def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether statistics recorded as ``old`` values stay valid when read as ``new`` (type widening).

    The widenings Delta and Iceberg allow within integers, floats, decimals (the cast is
    exact), and integers to floats or decimals. Dates widened to timestamps are not
    taken (a column so widened prunes nothing until the index is rebuilt).
    """
    if old.equals(new):
        return True
    eo, en = encoding(old), encoding(new)
    if eo is None or en is None:
        return False
    if eo == en:
        return True
    fo, fn = family(old), family(new)
    if fo is Family.INTEGER and fn in (Family.FLOAT, Family.DECIMAL):
        return True
    return fo is Family.DECIMAL and fn is Family.DECIMAL


def rows_schema(columns: Mapping[str, pa.DataType]) -> pa.Schema:
    """Arrow schema of skipping rows for indexed ``columns`` (name → type)."""
    fields = [pa.field(FILE_ID, pa.int64(), nullable=False), pa.field(ROWS, pa.int64(), nullable=False)]
    fields += [pa.field(name, column_type(t), nullable=False) for name, t in columns.items()]
    return pa.schema(fields)
