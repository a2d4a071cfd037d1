"""Numbers the column type does not hold, and signed zeros: pyarrow, Python and DuckDB agree.

An integer column compared with a fractional or out-of-range literal (``id > 2.5``,
``id = 1.5``, ``id BETWEEN 0.5 AND 1.5``) is compared exactly, whatever the column's
values (pyarrow on its own casts the column to float32 / float64 and refuses values
beyond 2**24 / 2**53). ``IN`` on a float column treats -0.0 and 0.0 as equal, as ``=``
does (pyarrow's ``is_in`` hashes bit patterns).

The oracle is DuckDB, which reads ``2.5`` as a decimal and compares it exactly with a
``BIGINT``. Literals in scientific notation are doubles there, and a ``BIGINT`` meets them
as a double too (inexact beyond 2**53); those used here sit far from every value.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.expressions import Predicate, ast
from lakehouse_index.expressions.arrow import to_pyarrow
from lakehouse_index.expressions.constants import ConstantsOracle
from lakehouse_index.expressions.evaluator import evaluate
from lakehouse_index.expressions.pushed_filters import bind_filter
from lakehouse_index.expressions.spark import to_spark_sql
from tests.support.predicates import combinations

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int64()),
        ("x", pa.float64()),
        ("f", pa.float32()),
        ("s", pa.int8()),
    ]
)
BIG = [2**24, 2**24 + 1, 20_000_000, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1]
I_VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.sampled_from(BIG + [-v for v in BIG] + [-(2**63)]),
)
ZEROS = [0.0, -0.0]
X_VALUES = st.one_of(st.none(), st.sampled_from([*ZEROS, 0.5, -1.5, 2.0]))
F_VALUES = st.one_of(st.none(), st.sampled_from([*ZEROS, 0.5, -1.5]))
S_VALUES = st.one_of(st.none(), st.sampled_from([-128, -3, 0, 2, 3, 127]))

# Exact in DuckDB (decimals, integers, HUGEINTs) and exactly doubles in Python.
FRACTIONAL = ["2.5", "-0.5", "0.5", "1.5", "-2.5", "16777216.5", "-16777216.5", "4503599627370495.5"]
INTEGRAL = [
    "0",
    "2",
    "-3",
    "127",
    "128",
    "-129",
    "16777217",
    "9007199254740993",
    "-9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
]
# Doubles in DuckDB, far from every value. Not in IN lists: one double there makes DuckDB
# compare the whole list as doubles (-9223372036854775807 IN (-9223372036854775808, 1e30)).
SCIENTIFIC = ["1e30", "-1e30", "9.5e18", "-9.5e18", "2e0"]
INT_LITERALS = st.sampled_from(FRACTIONAL + INTEGRAL + SCIENTIFIC)
INT_LIST_LITERALS = st.sampled_from(FRACTIONAL + INTEGRAL)
FLOAT_LITERALS = st.sampled_from(["0", "0.0", "-0.0", "-0", "0.5", "-1.5", "2", "7.25"])
OPS = ["=", "!=", "<>", "<", "<=", ">", ">="]
NOT = st.sampled_from(["", "NOT "])


def _atoms(col: str, lit: st.SearchStrategy[str], listed: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    values = st.lists(listed, min_size=1, max_size=4).map(", ".join)
    return st.one_of(
        st.builds(f"{col} {{}} {{}}".format, st.sampled_from(OPS), lit),
        st.builds(f"{{}} {{}} {col}".format, lit, st.sampled_from(OPS)),
        st.builds(f"{col} {{}}IN ({{}})".format, NOT, values),
        st.builds(f"{col} {{}}BETWEEN {{}} AND {{}}".format, NOT, lit, lit),
    )


ATOMS = st.one_of(
    _atoms("i", INT_LITERALS, INT_LIST_LITERALS),
    _atoms("s", INT_LITERALS, INT_LIST_LITERALS),
    _atoms("x", FLOAT_LITERALS, FLOAT_LITERALS),
    _atoms("f", FLOAT_LITERALS, FLOAT_LITERALS),
)
PREDICATES = combinations(ATOMS, max_leaves=4)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(1, 12))
    columns = {"i": I_VALUES, "x": X_VALUES, "f": F_VALUES, "s": S_VALUES}
    data = {"id": list(range(n)), **{c: [draw(v) for _ in range(n)] for c, v in columns.items()}}
    return pa.Table.from_pydict(data, schema=SCHEMA)


def _duckdb_ids(table: pa.Table, where: str) -> list[int]:
    import duckdb

    con = duckdb.connect()
    try:
        con.register("t", table)
        return sorted(r[0] for r in con.sql(f"SELECT id FROM t WHERE {where}").fetchall())
    finally:
        con.close()


def _python_ids(table: pa.Table, pred: Predicate) -> list[int]:
    """Rows the Python evaluator (partition values: every column known) finds true."""
    assert pred.node is not None
    ids = []
    for row in table.to_pylist():
        out = evaluate(pred.node, ConstantsOracle(row))
        assert (out.true, out.false, out.null).count(True) == 1, (row, out)
        if out.true:
            ids.append(row["id"])
    return ids


@settings(max_examples=400, deadline=None)
@given(table=tables(), where=PREDICATES)
def test_pyarrow_and_python_agree_with_duckdb(table: pa.Table, where: str) -> None:
    pred = Predicate.parse(where, SCHEMA)
    want = _duckdb_ids(table, where)
    assert sorted(table.filter(pred.to_pyarrow())["id"].to_pylist()) == want, where
    assert _python_ids(table, pred) == want, where


ROWS = {
    "i": [1, 20_000_000, 2**53 + 1, 2**63 - 1, -(2**63), None],
    "x": [0.0, -0.0, 1.5, None, 0.0, -0.0],
}


@pytest.mark.parametrize(
    ("where", "ids"),
    [
        ("i > 2.5", [1, 2, 3]),
        ("i < 2.5", [0, 4]),
        ("i = 1.5", []),
        ("NOT (i = 1.5)", [0, 1, 2, 3, 4]),
        ("i != 1.5", [0, 1, 2, 3, 4]),
        ("i BETWEEN 0.5 AND 1.5", [0]),
        ("i NOT BETWEEN 0.5 AND 1.5", [1, 2, 3, 4]),
        ("i BETWEEN 1.5 AND 1.75", []),
        ("i >= 9007199254740992.5", [2, 3]),
        ("i > 9007199254740992", [2, 3]),
        ("i < 1e30", [0, 1, 2, 3, 4]),
        ("i > -9223372036854775809", [0, 1, 2, 3, 4]),
        ("i = -9223372036854775809", []),
        ("i IN (-9223372036854775809)", []),
        ("i <= -9223372036854775808", [4]),
        ("i IN (1.5, 20000000)", [1]),
        ("x IN (0.0)", [0, 1, 4, 5]),
        ("x IN (-0.0, 7)", [0, 1, 4, 5]),
        ("x NOT IN (0)", [2]),
        ("x = -0.0", [0, 1, 4, 5]),
    ],
)
def test_examples(where: str, ids: list[int]) -> None:
    table = pa.Table.from_pydict({"id": list(range(6)), **ROWS}, schema=SCHEMA.remove(4).remove(3))
    pred = Predicate.parse(where, table.schema)
    assert table.filter(pred.to_pyarrow())["id"].to_pylist() == ids
    assert _python_ids(table, pred) == ids


def test_integer_comparisons_are_rewritten_into_the_column_type() -> None:
    def spark(where: str) -> str:
        pred = Predicate.parse(where, SCHEMA)
        assert pred.node is not None
        return to_spark_sql(pred.node)

    assert spark("i > 2.5") == "(`i` >= CAST(3 AS BIGINT))"
    assert spark("2.5 < i") == "(`i` >= CAST(3 AS BIGINT))"
    assert spark("i <= -0.5") == "(`i` <= CAST(-1 AS BIGINT))"
    assert spark("i = 1.5") == "(`i` > CAST(9223372036854775807 AS BIGINT))"
    assert spark("i != 1.5") == "(`i` >= CAST(-9223372036854775808 AS BIGINT))"
    assert spark("s < 1000") == "(`s` >= CAST(-128 AS BIGINT))"
    assert spark("s BETWEEN -1000 AND 2.5") == "(`s` BETWEEN CAST(-128 AS BIGINT) AND CAST(2 AS BIGINT))"
    assert spark("i BETWEEN 1.25 AND 1.75") == (
        "(`i` BETWEEN CAST(9223372036854775807 AS BIGINT) AND CAST(-9223372036854775808 AS BIGINT))"
    )
    # What the column type holds stays as written.
    assert spark("i > 2") == "(`i` > CAST(2 AS BIGINT))"
    assert spark("x > 2.5") == "(`x` > CAST('2.5' AS DOUBLE))"
    # A decimal literal stays an exact decimal (Spark reads an unsuffixed 1.5 as DECIMAL(2, 1)).
    assert spark("i IN (1.5, 2)") == "(`i` IN (CAST('1.5' AS DECIMAL(2, 1)), CAST(2 AS BIGINT)))"


@dataclass(frozen=True)
class GreaterThan:  # Spark's pushed filters are recognised by class name and fields
    attribute: tuple[str, ...]
    value: object


@dataclass(frozen=True)
class EqualTo:
    attribute: tuple[str, ...]
    value: object


@dataclass(frozen=True)
class EqualNullSafe:
    attribute: tuple[str, ...]
    value: object


def test_pushed_filters_compare_integer_columns_exactly() -> None:
    table = pa.Table.from_pydict(
        {"id": [0, 1, 2], "i": [1, 2**53 + 1, None]}, schema=SCHEMA.remove(4).remove(3).remove(2)
    )

    def ids(f: object) -> list[int]:
        node = bind_filter(f, table.schema)
        assert node is not None
        return table.filter(to_pyarrow(node))["id"].to_pylist()

    assert ids(GreaterThan(("i",), 2.5)) == [1]
    assert ids(GreaterThan(("i",), decimal.Decimal("0.5"))) == [0, 1]
    assert ids(EqualTo(("i",), 1.5)) == []
    assert ids(EqualNullSafe(("i",), 1.5)) == []
    assert bind_filter(GreaterThan(("i",), 2.5), table.schema) == ast.Compare(
        ">=", ast.Col("i"), ast.Lit(3, pa.int64())
    )
