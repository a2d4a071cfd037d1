"""How ``upsert`` matches keys, which is as ``lookup`` does: -0.0 as 0.0, and every NaN as one NaN."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

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
