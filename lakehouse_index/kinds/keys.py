"""Key values: normalising user keys, JSON bounds in the root index, matching.

The root index (``IndexFile.min_key`` / ``max_key`` in the log) stores *per-column*
bounds of the key columns of each index file: a key can only be in a file if every
non-null component lies within that column's bounds. Per-column bounds are correct
whatever order the file is sorted in, and tight for the leading column.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.errors import InvalidIndexSpecError, QueryError
from lakehouse_index.log.entry import JsonScalar

KeyTuple = tuple[Any, ...]

_UNSUPPORTED = (
    pa.types.is_map,
    pa.types.is_struct,
    pa.types.is_list,
    pa.types.is_large_list,
    pa.types.is_fixed_size_list,
    pa.types.is_union,
    pa.types.is_dictionary,
)


def check_key_type(column: str, typ: pa.DataType) -> None:
    """Index keys must be scalars: refuse maps, structs, lists, unions."""
    if any(test(typ) for test in _UNSUPPORTED):
        raise InvalidIndexSpecError(
            f"column {column!r} has type {typ}, which cannot be an index key (use a scalar column)"
        )


def to_json(value: Any) -> JsonScalar:
    """A JSON-safe form of a Python key value (decoded with :func:`from_json`)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    return str(value)


def from_json(value: JsonScalar, typ: pa.DataType) -> Any:
    """The Python value of ``typ`` that :func:`to_json` encoded."""
    if value is None:
        return None
    if pa.types.is_timestamp(typ):
        return dt.datetime.fromisoformat(str(value))
    if pa.types.is_date(typ):
        return dt.date.fromisoformat(str(value))
    if pa.types.is_time(typ):
        return dt.time.fromisoformat(str(value))
    if pa.types.is_decimal(typ):
        return decimal.Decimal(str(value))
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        return base64.b64decode(str(value))
    return value


def normalize_keys(keys: Sequence[Any], key_columns: Sequence[str]) -> list[KeyTuple]:
    """User keys (scalars, or tuples for composite keys) as tuples of the key's arity."""
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence | set | frozenset):
        raise QueryError(f"keys must be a list of key values, got {type(keys).__name__}")
    arity = len(key_columns)
    out: list[KeyTuple] = []
    for k in keys:
        t = tuple(k) if isinstance(k, (tuple, list)) else (k,)
        if len(t) != arity:
            raise QueryError(f"key {k!r} has {len(t)} values; the index key {tuple(key_columns)} has {arity}")
        out.append(t)
    return list(dict.fromkeys(out))


def keys_table(keys: Sequence[KeyTuple], schema: pa.Schema, key_columns: Sequence[str]) -> pa.Table:
    """The keys as an Arrow table typed like the key columns (QueryError if a value does not fit)."""
    arrays = []
    for i, name in enumerate(key_columns):
        typ = schema.field(name).type
        try:
            arrays.append(pa.array([k[i] for k in keys], type=typ))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
            raise QueryError(f"a key value for column {name!r} does not fit its type {typ}: {e}") from e
    return pa.table(arrays, names=list(key_columns))


def match_mask(table: pa.Table, keys: pa.Table) -> pa.ChunkedArray:
    """Rows of ``table`` whose key columns equal one of ``keys`` (null equals null, NaN
    equals NaN, -0.0 equals 0.0: SQL's equality on floats, which hashing alone misses)."""
    names = keys.column_names
    if len(names) == 1:
        column = _signless_zero(table[names[0]])
        value_set = _signless_zero(keys[names[0]]).combine_chunks()
        return pc.is_in(column, value_set=value_set, skip_nulls=False)
    # Composite: compare a null-aware encoding of every component, joined into one binary key.
    return pc.is_in(_composite(table, names), value_set=_composite(keys, names).combine_chunks())


def _signless_zero(col: pa.ChunkedArray) -> pa.ChunkedArray:
    """Floating-point ``col`` with -0.0 made +0.0 (x + 0.0 does exactly that); others as they are."""
    if pa.types.is_floating(col.type):
        return pc.add(col, pa.scalar(0.0, col.type))
    return col


def _composite(table: pa.Table, names: Sequence[str]) -> pa.ChunkedArray:
    parts = []
    for n in names:
        col = _signless_zero(table[n])
        text = pc.cast(col, pa.string()) if not pa.types.is_string(col.type) else col
        # "\x00" marks null, "\x01"+value a present value: distinct for null vs empty string.
        parts.append(pc.if_else(pc.is_null(col), "\x00", pc.binary_join_element_wise("\x01", text, "")))
    parts.append("\x02")
    return pc.binary_join_element_wise(*parts)


def file_bounds(
    meta: pq.FileMetaData, key_columns: Sequence[str]
) -> tuple[tuple[JsonScalar, ...], tuple[JsonScalar, ...]]:
    """Per-column (min, max) of the key columns over all row groups of a Parquet file.

    A column without statistics (or only nulls) gets None bounds, which never prune.
    """
    idx = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    mins: list[JsonScalar] = []
    maxs: list[JsonScalar] = []
    for name in key_columns:
        lo: Any = None
        hi: Any = None
        known = True
        for rg in range(meta.num_row_groups):
            st = meta.row_group(rg).column(idx[name]).statistics
            if st is None or not st.has_min_max:
                if st is None or st.null_count != meta.row_group(rg).num_rows:
                    known = False
                continue
            lo = st.min if lo is None or st.min < lo else lo
            hi = st.max if hi is None or st.max > hi else hi
        mins.append(to_json(lo) if known else None)
        maxs.append(to_json(hi) if known else None)
    return tuple(mins), tuple(maxs)


def may_contain(bounds_lo: Sequence[Any] | None, bounds_hi: Sequence[Any] | None, key: KeyTuple) -> bool:
    """Whether a key may lie within per-column bounds (decoded values; None = unbounded)."""
    if bounds_lo is None or bounds_hi is None:
        return True
    for v, lo, hi in zip(key, bounds_lo, bounds_hi, strict=True):
        if v is None or lo is None or hi is None:
            continue
        try:
            if v < lo or v > hi:
                return False
        except TypeError:
            continue
    return True
