"""``matched_rows``: the hash join an upsert matches its located rows by gives, for every key type
and shape, the positions matching by value gives (NaN as one NaN, -0.0 as 0.0)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.expressions.matching import matched_rows

TYPES: dict[str, tuple[pa.DataType, Any]] = {
    "int64": (pa.int64(), st.integers(-5, 5)),
    "int32 data, int64 rows": (pa.int32(), st.integers(-5, 5)),
    "string": (pa.string(), st.sampled_from(["a", "b", "", "é", "a b"])),
    "float64": (pa.float64(), st.sampled_from([0.0, -0.0, 1.5, math.nan, -math.inf])),
    "date": (pa.date32(), st.integers(0, 4)),
    "bool": (pa.bool_(), st.booleans()),
}


def _same(a: Any, b: Any) -> bool:
    """Two key values match as ``lookup`` matches them: NaN with NaN, -0.0 with 0.0 (Python's ==)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def by_value(data: pa.Table, rows: pa.Table, on: list[str]) -> list[int]:
    """The matching the join must give, by comparing every pair of rows value by value."""
    left = list(zip(*(data[c].to_pylist() for c in on), strict=True))
    right = list(zip(*(rows[c].to_pylist() for c in on), strict=True))
    return [
        next(i for i, d in enumerate(left) if all(_same(x, y) for x, y in zip(d, r, strict=True)))
        for r in right
    ]


@settings(max_examples=120, deadline=None)
@given(
    kind=st.sampled_from(sorted(TYPES)),
    second=st.booleans(),
    data=st.data(),
)
def test_join_matches_as_values_do(kind: str, second: bool, data: st.DataObject) -> None:
    dtype, values = TYPES[kind]
    strategy = st.tuples(values, st.integers(0, 2)) if second else values
    keys = data.draw(st.lists(strategy, min_size=0, max_size=12, unique_by=lambda k: repr(k)))
    on = ["k", "j"] if second else ["k"]

    def column(vals: list[Any], t: pa.DataType) -> pa.Array:
        if pa.types.is_date(t):
            return pa.array(np.array(vals, dtype="datetime64[D]") if vals else [], t)
        return pa.array(vals, t)

    firsts = [k[0] for k in keys] if second else keys
    # NaN and -0.0 each match one way only: keep one key per matching class in the data.
    seen: set[Any] = set()
    unique = []
    for i, k in enumerate(firsts):
        cls = (
            "nan" if isinstance(k, float) and math.isnan(k) else (0.0 if k == 0 else k),
            keys[i][1] if second else 0,
        )
        if cls not in seen:
            seen.add(cls)
            unique.append(i)
    cols = {"k": column([firsts[i] for i in unique], dtype)}
    if second:
        cols["j"] = pa.array([keys[i][1] for i in unique], pa.int64())
    table = pa.table({**cols, "v": pa.array(range(len(unique)), pa.int64())})
    picks = data.draw(st.lists(st.integers(0, max(0, len(unique) - 1)), max_size=20)) if unique else []
    rows = table.take(pa.array(picks, pa.int64())).select(on)
    if kind == "int32 data, int64 rows":
        rows = rows.set_column(0, "k", rows["k"].cast(pa.int64()))
    got = matched_rows(table, rows, on)
    assert got.tolist() == by_value(table, rows, on)
    assert got.dtype == np.int64


def test_an_unmatched_row_raises_as_by_value() -> None:
    data = pa.table({"k": pa.array([1, 2], pa.int64())})
    rows = pa.table({"k": pa.array([3], pa.int64())})
    with pytest.raises(KeyError):
        matched_rows(data, rows, ["k"])
