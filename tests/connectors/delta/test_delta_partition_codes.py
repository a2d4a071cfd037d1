"""Partition value maps of checkpoint rows grouped into codes, against grouping in Python.

Writers put the same partition columns in the same order in every row: codes then come from
each column's values alone. Rows whose keys differ (order, set) or that have no map are
grouped by an unambiguous string instead (one map may then have two codes). Both must give
every row its own map back.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from lakehouse_index_delta.live_files import _partition_codes, _uniform_partition_codes

Row = list[tuple[str, str | None]] | None


def _maps(rows: list[Row]) -> pa.MapArray:
    return pa.array(rows, pa.map_(pa.string(), pa.string()))


def _decoded(maps: pa.MapArray) -> list[tuple[tuple[str, str | None], ...]]:
    """Each row's map through its code (a null code: no map)."""
    codes, values = _partition_codes(maps)
    return [values[c] if c is not None else () for c in codes.to_pylist()]


def _expected(rows: list[Row]) -> list[tuple[tuple[str, str | None], ...]]:
    return [tuple(sorted(r or ())) for r in rows]


def _uniform_rows(rng: random.Random, n: int, columns: list[str]) -> list[Row]:
    def value() -> str | None:
        return rng.choice([None, "", "a", "b", "a:b", "1", "11", "x;y"])

    return [[(c, value()) for c in columns] for _ in range(n)]


@pytest.mark.parametrize("columns", [[], ["day"], ["day", "hour"], ["c", "a", "b"]])
def test_uniform_rows_use_the_values_alone(columns: list[str]) -> None:
    rows = _uniform_rows(random.Random(len(columns)), 300, columns)
    uniform = _uniform_partition_codes(_maps(rows))
    assert uniform is not None and len(set(uniform[1])) == len(uniform[1])  # one code per distinct map
    assert _decoded(_maps(rows)) == _expected(rows)
    # A batch's rows are a slice of the column.
    assert _decoded(_maps(rows).slice(17, 100)) == _expected(rows[17:117])


@pytest.mark.parametrize(
    "rows",
    [
        [[("a", "1"), ("b", "2")], [("b", "2"), ("a", "1")], [("a", "1"), ("b", "3")]],  # key order differs
        [[("a", "1")], [("a", "1"), ("b", "2")], []],  # key sets differ
        [[("a", "1")], None, [("a", "1")], [("b", "1")]],  # a row without a map, other key
        [[("a", "1:1")], [("a1", ":1")], [("a", None)], [("a", "")]],  # ambiguous if joined naively
    ],
)
def test_rows_with_other_keys_are_grouped_by_string(rows: list[Row]) -> None:
    assert _uniform_partition_codes(_maps(rows)) is None
    assert _decoded(_maps(rows)) == _expected(rows)
