"""How ``upsert`` matches keys, which is as ``lookup`` does: -0.0 as 0.0, and every NaN as one NaN."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.expressions.arrow import signless_zero


def matchable(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A key column as ``upsert`` matches it, which is as ``lookup`` does: -0.0 as 0.0 and every
    NaN (whatever its sign and payload) as one NaN."""
    t = column.type
    if not (pa.types.is_float32(t) or pa.types.is_float64(t)):
        return column
    zeroless = signless_zero(column, t)
    return pc.if_else(pc.is_nan(zeroless), pa.scalar(math.nan, t), zeroless)


#: Stands for NaN in :func:`match_keys` (NaN is not equal to itself, so no dict would find it).
_NAN = object()


def match_keys(rows: pa.Table, on: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each row's ``on`` values as a hashable key that equals another row's exactly when
    ``upsert`` matches the two rows (see :func:`matchable`)."""
    columns = [
        [_NAN if isinstance(v, float) and math.isnan(v) else v for v in values]
        for values in (matchable(rows.column(c)).to_pylist() for c in on)
    ]
    return list(zip(*columns, strict=True)) if columns else []


def matched_rows(data: pa.Table, rows: pa.Table, on: Sequence[str]) -> np.ndarray:
    """For each row of ``rows``, the position of the row of ``data`` it matches on ``on`` (as
    :func:`match_keys` matches; ``data``'s keys unique, every row of ``rows`` matched by one).

    A hash join of the two key tables; float keys (NaN and -0.0 rules) and key types the join
    cannot take go through :func:`match_keys`.
    """
    types = [rows.schema.field(c).type for c in on]
    if any(pa.types.is_floating(t) for t in types):
        return _matched_by_value(data, rows, on)
    try:
        left = pa.table([data.column(c).cast(t) for c, t in zip(on, types, strict=True)], names=list(on))
        right = pa.table([rows.column(c) for c in on], names=list(on))
        left = left.append_column("__data", pa.array(np.arange(data.num_rows, dtype=np.int64)))
        right = right.append_column("__rows", pa.array(np.arange(rows.num_rows, dtype=np.int64)))
        joined = right.join(left, list(on), join_type="inner", use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return _matched_by_value(data, rows, on)
    at = joined["__rows"].to_numpy()
    seen = np.zeros(rows.num_rows, dtype=bool)
    seen[at] = True
    if joined.num_rows != rows.num_rows or not seen.all():  # not one data row per row
        return _matched_by_value(data, rows, on)  # (raises as the match by value does)
    out = np.empty(rows.num_rows, dtype=np.int64)
    out[at] = joined["__data"].to_numpy()  # ``at`` is a permutation of the rows
    return out


def _matched_by_value(data: pa.Table, rows: pa.Table, on: Sequence[str]) -> np.ndarray:
    position = {key: i for i, key in enumerate(match_keys(data, on))}
    return np.array([position[k] for k in match_keys(rows, on)], dtype=np.int64)
