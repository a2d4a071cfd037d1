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
import math
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.errors import InvalidIndexSpecError, QueryError
from lakehouse_index.expressions.arrow import signless_zero
from lakehouse_index.expressions.ast import Lit
from lakehouse_index.expressions.literals import exact
from lakehouse_index.expressions.types import Family, comparison_class, family
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
    """Index keys must be scalars: refuse maps, structs, lists, unions, and extension types
    (pyiceberg reads Iceberg ``uuid`` as ``arrow.uuid``), which Arrow cannot compare or sort."""
    if any(test(typ) for test in _UNSUPPORTED):
        raise InvalidIndexSpecError(
            f"column {column!r} has type {typ}, which cannot be an index key (use a scalar column)"
        )
    if isinstance(typ, pa.BaseExtensionType):
        raise InvalidIndexSpecError(
            f"column {column!r} has the extension type {typ}, which cannot be an index key: Arrow "
            "cannot compare or sort it (index a column of its storage type instead)"
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


def keys_of(keys: Sequence[Any] | ArrowKeys, schema: pa.Schema, key_columns: Sequence[str]) -> pa.Table:
    """Lookup keys as a table typed like the key columns: Arrow data (:func:`arrow_keys`), or
    Python values (scalars, or tuples for composite keys: :func:`normalize_keys`).

    A one-column key of scalars is typed in one conversion, without a tuple per key.
    """
    if isinstance(keys, ARROW_KEYS):
        return arrow_keys(keys, schema, key_columns)
    _check_sequence(keys)
    if len(key_columns) == 1 and not any(isinstance(k, (tuple, list)) for k in keys):
        values = list(keys)
        array, fits = _typed_column(values, key_columns[0], schema.field(key_columns[0]).type)
        table = pa.table([array], names=list(key_columns))
        return table if fits.all() else table.filter(pa.array(fits))
    return keys_table(normalize_keys(keys, key_columns), schema, key_columns)


def _check_sequence(keys: Any) -> None:
    if isinstance(keys, (str, bytes)) or not isinstance(keys, Sequence | set | frozenset):
        raise QueryError(f"keys must be a list of key values, got {type(keys).__name__}")


def normalize_keys(keys: Sequence[Any], key_columns: Sequence[str]) -> list[KeyTuple]:
    """User keys (scalars, or tuples for composite keys) as tuples of the key's arity."""
    _check_sequence(keys)
    arity = len(key_columns)
    out: list[KeyTuple] = []
    for k in keys:
        t = tuple(k) if isinstance(k, (tuple, list)) else (k,)
        if len(t) != arity:
            raise QueryError(f"key {k!r} has {len(t)} values; the index key {tuple(key_columns)} has {arity}")
        out.append(t)
    return list(dict.fromkeys(out))


#: Keys given as Arrow data: an array or chunked array (a one-column key), or a table or
#: record batch holding the key columns by name.
ArrowKeys: TypeAlias = pa.Array | pa.ChunkedArray | pa.Table | pa.RecordBatch
ARROW_KEYS = (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch)


def arrow_keys(keys: ArrowKeys, schema: pa.Schema, key_columns: Sequence[str]) -> pa.Table:
    """Keys given as Arrow data as a table typed like the key columns, without a Python loop
    per key when each column casts safely to its column's type (the common case); otherwise
    the values go through :func:`keys_table`, so a key means what it means as a Python value
    (one its column cannot hold exactly equals no row)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        if len(key_columns) != 1:
            raise QueryError(
                f"an array of keys needs a one-column index key; {tuple(key_columns)} needs a table "
                "with those columns"
            )
        table = pa.table({key_columns[0]: keys})
    else:
        table = pa.Table.from_batches([keys]) if isinstance(keys, pa.RecordBatch) else keys
        missing = [c for c in key_columns if c not in table.column_names]
        if missing:
            raise QueryError(
                f"the table of keys lacks the key column(s) {missing}; it has {table.column_names}"
            )
    arrays = []
    try:
        for name in key_columns:
            column, typ = table[name], schema.field(name).type
            arrays.append(column if column.type.equals(typ) else column.cast(typ, safe=True))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        values = zip(*(table[c].to_pylist() for c in key_columns), strict=True)
        return keys_table(list(dict.fromkeys(values)), schema, key_columns)
    return pa.table(arrays, names=list(key_columns))


def keys_table(keys: Sequence[KeyTuple], schema: pa.Schema, key_columns: Sequence[str]) -> pa.Table:
    """The keys as an Arrow table typed like the key columns.

    A key with a value its column cannot hold exactly (1.5 for an int column, a datetime
    past midnight for a date column, nanoseconds for a microsecond timestamp) equals no row,
    as in a scan: it is left out, rather than converted to another value that would match.
    QueryError for a value of a kind that cannot be compared with the column at all.
    """
    keep = np.ones(len(keys), dtype=bool)
    arrays = []
    for i, name in enumerate(key_columns):
        typ = schema.field(name).type
        array, fits = _typed_column([k[i] for k in keys], name, typ)
        arrays.append(array)
        keep &= fits
    table = pa.table(arrays, names=list(key_columns))
    return table if keep.all() else table.filter(pa.array(keep))


def _typed_column(values: list[Any], name: str, typ: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """``values`` as an array of ``typ``, and which of them it holds exactly.

    A value the column can be compared with but cannot hold exactly (``exact``, the
    binder's test, decides) is None in the array and False in the mask.
    """
    fits = np.ones(len(values), dtype=bool)
    natural: pa.Array | None = None
    # All values at once when they are of one Python type (pyarrow infers a mix lossily:
    # a date and a datetime become two dates, a large int and a float two floats).
    if len({type(v) for v in values if v is not None}) <= 1:
        try:
            natural = pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            natural = None
    if natural is not None and not _lossy_timestamps(natural, values):
        if natural.type.equals(typ):
            return natural, fits
        if pa.types.is_null(natural.type):
            return pa.nulls(len(values), typ), fits
        if _comparable(natural.type, typ):
            # Every value at once: the round trip through the column type changes none.
            try:
                cast = natural.cast(typ, safe=True)
                if cast.cast(natural.type, safe=True).equals(natural):
                    return cast, fits
            except (pa.ArrowException, OverflowError):
                pass
    typed: list[Any] = []
    for j, v in enumerate(values):
        own = _own_type(v)
        if own is None or not _comparable(own, typ) or (_is_nan(v) and pa.types.is_floating(typ)):
            # null, NaN on a float column (NaN equals NaN here), or a value of another kind:
            # the column type's own conversion decides (and refuses what it cannot convert).
            typed.append(v)
            continue
        lit = exact(Lit(v, own), typ)
        if lit.type.equals(typ):
            typed.append(lit.value)
        else:
            typed.append(None)
            fits[j] = False
    try:
        return pa.array(typed, type=typ), fits
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
        raise QueryError(f"a key value for column {name!r} does not fit its type {typ}: {e}") from e


def _own_type(v: Any) -> pa.DataType | None:
    """The Arrow type that holds the Python value ``v`` exactly (None: null, or not known)."""
    if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
        return pa.decimal128(38, 0) if abs(v) < 10**38 else pa.float64()
    try:
        typ = pa.array([v]).type
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    if pa.types.is_timestamp(typ) and getattr(v, "nanosecond", 0):
        return pa.timestamp("ns", typ.tz)  # pyarrow infers microseconds for a pandas Timestamp
    return None if pa.types.is_null(typ) else typ


def _lossy_timestamps(natural: pa.Array, values: list[Any]) -> bool:
    """Whether pyarrow's inferred microsecond timestamps dropped some value's nanoseconds."""
    return pa.types.is_timestamp(natural.type) and any(getattr(v, "nanosecond", 0) for v in values)


def _is_nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _comparable(own: pa.DataType, typ: pa.DataType) -> bool:
    """Whether a value of type ``own`` compares with a column of type ``typ`` (as in a scan:
    numbers with numbers, dates with timestamps...)."""
    if comparison_class(own) == comparison_class(typ):
        return True
    return {family(own), family(typ)} <= {Family.DATE, Family.TIMESTAMP}


def _other_column_type(stored: pa.DataType, current: pa.DataType) -> bool:
    """Whether index entries stored as ``stored`` values were written for a column of another
    kind than the keys' ``current`` type (not one widened: int32 -> int64 compares)."""
    return not stored.equals(current) and not _comparable(stored, current)


def match_mask(table: pa.Table, keys: pa.Table) -> pa.ChunkedArray:
    """Rows of ``table`` whose key columns equal one of ``keys`` (null equals null, NaN
    equals NaN, -0.0 equals 0.0: SQL's equality on floats, which hashing alone misses)."""
    names = keys.column_names
    if any(_other_column_type(table[n].type, keys[n].type) for n in names):
        # Entries written while the column had a type of another kind (an overwrite that
        # replaced the schema: string -> int...) hold values of another column: none
        # equals a key of the current type, and pyarrow refuses to compare them.
        return pa.chunked_array([pa.array(np.zeros(table.num_rows, dtype=bool))], pa.bool_())
    if len(names) == 1:
        column = signless_zero(table[names[0]], table[names[0]].type)
        value_set = signless_zero(keys[names[0]], keys[names[0]].type).combine_chunks()
        return pc.is_in(column, value_set=value_set, skip_nulls=False)
    # Composite: each component becomes its position among the keys' values of that column
    # (null: none of them), and the positions are folded pairwise into the position of the
    # combination among the keys' combinations: exact whatever the values hold, no encoding.
    n = keys.num_rows
    row_code: pa.ChunkedArray | None = None
    key_code: pa.Array | None = None
    for i, name in enumerate(names):
        value_set = signless_zero(keys[name], keys[name].type).combine_chunks()
        column = signless_zero(table[name], table[name].type)
        rows = pc.index_in(column, value_set=value_set, skip_nulls=False)
        own = pc.index_in(value_set, value_set=value_set, skip_nulls=False)
        if row_code is None or key_code is None:
            row_code, key_code = rows, own
            continue
        # Both codes are below n (at most 2**31), so code * n + code fits in an int64.
        rows_pair = pc.add(pc.multiply(row_code.cast(pa.int64()), n), rows.cast(pa.int64()))
        keys_pair = pc.add(pc.multiply(key_code.cast(pa.int64()), n), own.cast(pa.int64()))
        if i == len(names) - 1:
            return pc.is_in(rows_pair, value_set=keys_pair, skip_nulls=False)
        row_code = pc.index_in(rows_pair, value_set=keys_pair, skip_nulls=False)
        key_code = pc.index_in(keys_pair, value_set=keys_pair, skip_nulls=False)
    raise AssertionError("unreachable: a composite key has two columns or more")


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
